package replay

import (
	crand "crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strconv"

	"github.com/heraldwf/herald/history"
)

// skipMarkers moves the cursor past the VersionMarkers of changes the code
// no longer asks about at this point (a Version call removed once its old
// branch was gone): a decision ev other than that marker passes over
// them. A marker is never a reason for non-determinism.
func (s *State) skipMarkers(ev history.Event) {
	for s.cursor < len(s.hist) {
		h := s.hist[s.cursor]
		if h.Kind != history.VersionMarker || (ev.Kind == history.VersionMarker && ev.Name == h.Name) {
			return
		}
		s.cursor++
	}
}

// Version returns the version of the code to run for the change changeID
// (docs/engine.md#versioning), in [minV, maxV]:
//
//   - the version recorded in history (a VersionMarker at this point of
//     the history being replayed);
//   - minV when the history being replayed has no marker here: it was made
//     by code older than the change, which must be minV's branch;
//   - maxV, recorded as a VersionMarker, when the code runs here for the
//     first time (not replaying).
//
// The answer is kept for the execution: a later call with the same id
// returns it without a decision. A recorded version outside [minV, maxV]
// (the branch it needs was removed) fails the execution with a
// *NondeterminismError; minV > maxV panics (a bug in the code).
func (s *State) Version(changeID string, minV, maxV int) int {
	if s.aborting {
		panic(abort{})
	}
	if minV > maxV {
		panic(fmt.Sprintf("herald: Version(%q, %d, %d): min is greater than max", changeID, minV, maxV))
	}
	if v, ok := s.versions[changeID]; ok {
		s.checkVersion(changeID, v, minV, maxV, 0)
		return v
	}
	marker := history.Event{Kind: history.VersionMarker, Name: changeID}
	var v, seq int
	switch h, ok := s.recorded(marker); {
	case ok:
		n, err := strconv.Atoi(string(h.Result))
		if err != nil {
			panic(nondeterminism{s.nondeterminism(h, fmt.Sprintf("Version(%q): the recorded version %.32q is not an integer", changeID, h.Result))})
		}
		seq, _ = s.decide(marker)
		v = n
	case s.cursor < len(s.hist) || s.replaying:
		v = minV // history from before the change: no marker here
	default:
		v = maxV
		marker.Result = json.RawMessage(strconv.Itoa(maxV))
		seq, _ = s.decide(marker)
	}
	s.versions[changeID] = v
	s.checkVersion(changeID, v, minV, maxV, seq)
	return v
}

func (s *State) checkVersion(changeID string, v, minV, maxV, seq int) {
	if v >= minV && v <= maxV {
		return
	}
	if seq == 0 {
		seq = s.nextSeq
	}
	panic(nondeterminism{&NondeterminismError{InstanceID: s.in.InstanceID, Execution: s.execution, Seq: seq,
		Expected: fmt.Sprintf("%s %q version %d", history.VersionMarker, changeID, v),
		Actual:   fmt.Sprintf("Version(%q, %d, %d): the code no longer supports version %d", changeID, minV, maxV, v)}})
}

// recorded returns the history event at the cursor, past markers of other
// changes, if it is the decision ev (same kind and name).
func (s *State) recorded(ev history.Event) (history.Event, bool) {
	s.skipMarkers(ev)
	if s.cursor < len(s.hist) {
		if h := s.hist[s.cursor]; h.Kind == ev.Kind && h.Name == ev.Name {
			return h, true
		}
	}
	return history.Event{}, false
}

// SideEffect returns fn's value, recorded in history (SideEffectRecorded,
// named name) the first time the code runs here; a replay returns the
// recorded value and does not call fn. fn returns JSON; the caller checks
// it.
func (s *State) SideEffect(name string, fn func() json.RawMessage) json.RawMessage {
	if s.aborting {
		panic(abort{})
	}
	ev := history.Event{Kind: history.SideEffectRecorded, Name: name}
	if h, ok := s.recorded(ev); ok {
		s.decide(ev)
		return h.Result
	}
	if s.cursor < len(s.hist) || s.replaying {
		s.decide(ev) // not what history has here: non-determinism
	}
	ev.Result = fn()
	s.decide(ev)
	return ev.Result
}

// randomSeed names the side effect that records Random's seed.
const randomSeed = "herald.random"

// Random returns the execution's source of random numbers, seeded on its
// first use in the execution with 128 bits from crypto/rand that are
// recorded in history (a SideEffect named "herald.random"), so a replay —
// ReplayHistory's included — draws the same numbers as long as the code
// draws in the same order.
func (s *State) Random() *rand.Rand {
	if s.random == nil {
		raw := s.SideEffect(randomSeed, func() json.RawMessage {
			var b [16]byte
			crand.Read(b[:])
			return json.RawMessage(strconv.Quote(hex.EncodeToString(b[:])))
		})
		var (
			seed string
			b    []byte
		)
		err := json.Unmarshal(raw, &seed)
		if err == nil {
			b, err = hex.DecodeString(seed)
		}
		if err != nil || len(b) != 16 {
			panic(nondeterminism{&NondeterminismError{InstanceID: s.in.InstanceID, Execution: s.execution, Seq: s.nextSeq,
				Expected: fmt.Sprintf("%s %q: a seed of 32 hex digits", history.SideEffectRecorded, randomSeed),
				Actual:   fmt.Sprintf("%.64s", raw)}})
		}
		s.random = rand.New(rand.NewPCG(binary.LittleEndian.Uint64(b[:8]), binary.LittleEndian.Uint64(b[8:])))
	}
	return s.random
}
