package replay

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/heraldwf/herald/history"
	"github.com/heraldwf/herald/storage"
)

// AttributesError is SetAttributes' refusal: nothing was recorded.
type AttributesError struct{ Reasons []string }

func (e *AttributesError) Error() string {
	return "invalid attributes: " + strings.Join(e.Reasons, "; ")
}

// SetAttributes records, as a decision (AttributesUpserted), upserts of the
// instance's searchable attributes: an attribute with a type sets its key,
// one without removes it. The store applies them with the turn; a replay
// records nothing again. Invalid upserts, or upserts that would leave the
// instance with more than storage.MaxAttributes keys, are refused with an
// *AttributesError and nothing is recorded.
func (s *State) SetAttributes(ups []storage.Attribute) error {
	if len(ups) == 0 {
		return nil
	}
	var reasons []string
	next := maps.Clone(s.attrs)
	if next == nil {
		next = map[string]storage.Attribute{}
	}
	for _, a := range ups {
		if p := storage.AttributeProblem(a, true); p != "" {
			reasons = append(reasons, p)
			continue
		}
		if a.Type == "" {
			delete(next, a.Key)
		} else {
			next[a.Key] = a
		}
	}
	if len(reasons) == 0 && len(next) > storage.MaxAttributes {
		reasons = append(reasons, fmt.Sprintf("the instance would have %d attributes, over the cap of %d", len(next), storage.MaxAttributes))
	}
	if len(reasons) > 0 {
		return &AttributesError{Reasons: reasons}
	}
	payload, err := json.Marshal(ups)
	if err != nil {
		return &AttributesError{Reasons: []string{err.Error()}}
	}
	if _, isNew := s.decide(history.Event{Kind: history.AttributesUpserted, Payload: payload}); !isNew {
		// Replayed: the values recorded (and stored) win over the code's,
		// should a code change have altered them (only the kind is
		// compared, not the payload).
		s.applyAttributes(s.hist[s.cursor-1])
		return nil
	}
	s.out.Attributes = append(s.out.Attributes, ups...)
	s.attrs = next
	return nil
}

// Attributes returns the instance's attributes as the replay has them,
// sorted by key.
func (s *State) Attributes() []storage.Attribute {
	return slices.SortedFunc(maps.Values(s.attrs), func(a, b storage.Attribute) int { return strings.Compare(a.Key, b.Key) })
}

// applyAttributes applies a stored AttributesUpserted (the carried set at
// the start of an execution).
func (s *State) applyAttributes(ev history.Event) {
	var ups []storage.Attribute
	if err := json.Unmarshal(ev.Payload, &ups); err != nil {
		panic(nondeterminism{s.nondeterminism(ev, "attributes that decode: "+err.Error())})
	}
	if s.attrs == nil {
		s.attrs = map[string]storage.Attribute{}
	}
	for _, a := range ups {
		if a.Type == "" {
			delete(s.attrs, a.Key)
		} else {
			s.attrs[a.Key] = a
		}
	}
}

// carryAttributes adds the instance's attributes to the next execution's
// start events, so that its replays know them (the store keeps them on the
// instance row across continue-as-new).
func (s *State) carryAttributes(start []history.Event, now time.Time) []history.Event {
	if len(s.attrs) == 0 {
		return start
	}
	payload, _ := json.Marshal(s.Attributes())
	return append(start, history.Event{Seq: len(start) + 1, Time: now, Kind: history.AttributesUpserted,
		Payload: payload, AtStart: true})
}
