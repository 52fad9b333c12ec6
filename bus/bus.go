// Package bus holds the pure parts of Herald's event bus (docs/bus.md):
// the router that matches a published event against a tenant's
// subscriptions (a pattern index and compiled filter rules, never a scan of
// every subscription), the envelope a target sees, and the templates that
// derive instance ids and keys from an event. It does no I/O; the engine
// (package herald) stores, claims and runs.
//
// Its subpackages: pattern (event types, patterns and the segment trie),
// rule (filter rules) and jstarget (the JavaScript sandbox).
package bus

import (
	"bytes"
	"encoding/json"
	"fmt"
	"time"

	"github.com/heraldwf/herald/bus/pattern"
	"github.com/heraldwf/herald/bus/rule"
	"github.com/heraldwf/herald/heraldtype"
	"github.com/heraldwf/herald/storage"
)

// Envelope is a published event as targets and filter rules see it:
// {"id", "type", "data", "timestamp", "source"}. A filter's field paths and
// a template's placeholders start from it ("data.role", "id").
type Envelope struct {
	ID        string          `json:"id"`
	Type      string          `json:"type"`
	Data      json.RawMessage `json:"data"`
	Timestamp time.Time       `json:"timestamp"`
	Source    string          `json:"source,omitempty"`
}

// EnvelopeOf returns the envelope of a stored event.
func EnvelopeOf(ev *storage.BusEvent) Envelope {
	return Envelope{ID: ev.ID, Type: ev.Type, Data: ev.Data, Timestamp: ev.PublishedAt.UTC(), Source: ev.Source}
}

// Doc decodes the envelope as a JSON document (numbers as json.Number),
// the form rule.Eval and Template.Expand read.
func (e Envelope) Doc() (map[string]any, error) {
	var data any
	if len(e.Data) > 0 {
		dec := json.NewDecoder(bytes.NewReader(e.Data))
		dec.UseNumber()
		if err := dec.Decode(&data); err != nil {
			return nil, fmt.Errorf("event %s: data does not decode: %w", e.ID, err)
		}
	}
	doc := map[string]any{
		"id":        e.ID,
		"type":      e.Type,
		"data":      data,
		"timestamp": e.Timestamp.Format(time.RFC3339Nano),
	}
	if e.Source != "" {
		doc["source"] = e.Source
	}
	return doc, nil
}

// Router matches events against one tenant's subscriptions as they were
// at one generation: each event against the versions in force when it was
// published (storage.BusSubscriptionVersion). It is immutable and safe for
// concurrent use.
type Router struct {
	// Generation is the tenant's subscription generation the router was
	// built from (storage.BusStore.BusSubscriptionGeneration).
	Generation int64
	idx        pattern.Index[*entry]
	subs       map[string]*heraldtype.Subscription
}

type entry struct {
	// since, until: the version routes the events with since < Seq <=
	// until (0: no bound).
	since, until int64
	sub          *heraldtype.Subscription
	rule         *rule.Rule
	bad          string // the stored filter does not compile: every event is filtered out, visibly
}

// NewRouter builds the router of the enabled subscriptions among subs, each
// in force for every event. A subscription whose stored pattern is invalid
// matches nothing (the store only holds validated ones; a row written
// otherwise cannot break the others); one whose stored filter does not
// compile filters every event out, with the compile error as the reason.
func NewRouter(generation int64, subs []*heraldtype.Subscription) *Router {
	vs := make([]*storage.BusSubscriptionVersion, len(subs))
	for i, s := range subs {
		vs[i] = &storage.BusSubscriptionVersion{Subscription: s}
	}
	return NewVersionedRouter(generation, vs)
}

// NewVersionedRouter builds the router of the enabled versions among vs
// (storage.BusStore.BusSubscriptionVersions): an event is matched against
// the version of each subscription in force at its Seq, if any.
// Subscription returns the current versions (Until 0).
func NewVersionedRouter(generation int64, vs []*storage.BusSubscriptionVersion) *Router {
	r := &Router{Generation: generation, subs: make(map[string]*heraldtype.Subscription, len(vs))}
	for _, v := range vs {
		s := v.Subscription
		if v.Until == 0 {
			r.subs[s.ID] = s
		}
		if !s.Enabled {
			continue
		}
		e := &entry{since: v.Since, until: v.Until, sub: s}
		if rl, err := rule.Compile(s.Filter); err != nil {
			e.bad = "invalid filter: " + err.Error()
		} else {
			e.rule = rl
		}
		_, _ = r.idx.Add(s.Pattern, e) // an invalid pattern is simply not indexed
	}
	return r
}

// Subscription returns the subscription with this id as the router knows
// it (enabled or not), or nil.
func (r *Router) Subscription(id string) *heraldtype.Subscription { return r.subs[id] }

// Len returns the number of enabled, indexed subscription versions.
func (r *Router) Len() int { return r.idx.Len() }

// Route returns the decisions for one event: one per enabled subscription
// whose pattern matches its type, matched or filtered out (and by what).
// nil means no subscription matched (fate no_match). Data that does not
// decode (the store only holds valid JSON) filters out every subscription
// that has a filter.
func (r *Router) Route(ev *storage.BusEvent) []storage.BusRouteDecision {
	hits, err := r.idx.Match(ev.Type)
	if err != nil || len(hits) == 0 {
		return nil
	}
	out := make([]storage.BusRouteDecision, 0, len(hits))
	var doc map[string]any
	var docErr error
	decoded := false
	// Each version of a subscription is indexed once, under its one
	// pattern, and the versions' ranges of events do not overlap, so a
	// subscription is among the hits in force at most once.
	for _, e := range hits {
		if (e.since != 0 && ev.Seq <= e.since) || (e.until != 0 && ev.Seq > e.until) {
			continue
		}
		d := storage.BusRouteDecision{Subscription: e.sub.ID, Matched: true}
		switch {
		case e.bad != "":
			d.Matched, d.FilteredBy = false, e.bad
		case e.rule != nil:
			if !decoded {
				doc, docErr = EnvelopeOf(ev).Doc()
				decoded = true
			}
			if docErr != nil {
				d.Matched, d.FilteredBy = false, docErr.Error()
				break
			}
			if ok, miss := e.rule.Eval(doc); !ok {
				d.Matched, d.FilteredBy = false, miss.String()
			}
		}
		out = append(out, d)
	}
	if len(out) == 0 {
		return nil // no version in force at the event matched
	}
	return out
}
