package backend

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/heraldwf/herald/heraldtype"
	"github.com/heraldwf/herald/storage"
)

// fakeCorrTx is an in-memory WaitTx and PutTx that logs the primitives it
// is driven through, so the rules' cases read as the calls they make.
type fakeCorrTx struct {
	stored  map[string]string // def/key → payload of a live event
	markers []Marker          // on def/k, oldest first
	log     []string
}

func (f *fakeCorrTx) logf(format string, args ...any) {
	f.log = append(f.log, fmt.Sprintf(format, args...))
}

func (f *fakeCorrTx) Produce(m Marker, def, key string, payload json.RawMessage, trace string, listed bool) error {
	if trace != "" {
		f.logf("produce %s:%d %s/%s %s trace=%s listed=%t", m.InstanceID, m.TaskSeq, def, key, payload, trace, listed)
		return nil
	}
	f.logf("produce %s:%d %s/%s %s listed=%t", m.InstanceID, m.TaskSeq, def, key, payload, listed)
	return nil
}

func (f *fakeCorrTx) DeleteMarker(id int64) error {
	f.logf("delete marker %d", id)
	return nil
}

func (f *fakeCorrTx) DeleteCorrelated(def, key string) error {
	f.logf("delete %s/%s", def, key)
	delete(f.stored, def+"/"+key)
	return nil
}

func (f *fakeCorrTx) LiveCorrelated(def, key string) (json.RawMessage, string, bool, error) {
	p, ok := f.stored[def+"/"+key]
	payload, trace, _ := strings.Cut(p, " trace=")
	return json.RawMessage(payload), trace, ok, nil
}

func (f *fakeCorrTx) StoreMarker(execution int, w storage.CorrelatedWait) error {
	f.logf("marker %d:%d %s/%s", execution, w.TaskSeq, w.Def, w.Key)
	return nil
}

func (f *fakeCorrTx) UpsertCorrelated(p *storage.CorrelatedPutParams) error {
	f.logf("upsert %s/%s %s", p.Def, p.Key, p.Payload)
	return nil
}

func (f *fakeCorrTx) Markers(def, key string, limit int) ([]Marker, error) {
	ms := f.markers
	if limit > 0 && len(ms) > limit {
		ms = ms[:limit]
	}
	return ms, nil
}

func (f *fakeCorrTx) LoadCorrelated(def, key string) (*heraldtype.CorrelatedEvent, error) {
	f.logf("load %s/%s", def, key)
	return &heraldtype.CorrelatedEvent{Def: def, Key: key}, nil
}

// TestRegisterWaits is the reference of a turn commit's correlated waits
// (storage.TurnCommitParams.CorrelatedWaits); the conformance suite holds
// each backend to the same cases.
func TestRegisterWaits(t *testing.T) {
	for _, c := range []struct {
		name   string
		stored map[string]string
		waits  []storage.CorrelatedWait
		cancel []int
		want   []string
	}{
		{"nothing stored: markers", nil,
			[]storage.CorrelatedWait{{TaskSeq: 2, Def: "d", Key: "k"}, {TaskSeq: 3, Def: "d", Key: "k", DeleteAfterFirst: true}}, nil,
			[]string{"marker 1:2 d/k", "marker 1:3 d/k"}},
		{"fan-out: every wait gets it, listed", map[string]string{"d/k": "1"},
			[]storage.CorrelatedWait{{TaskSeq: 2, Def: "d", Key: "k"}, {TaskSeq: 3, Def: "d", Key: "k"}}, nil,
			[]string{"produce i:2 d/k 1 listed=true", "produce i:3 d/k 1 listed=true"}},
		{"delete-after-first: the first takes it, the second waits", map[string]string{"d/k": "1"},
			[]storage.CorrelatedWait{{TaskSeq: 2, Def: "d", Key: "k", DeleteAfterFirst: true}, {TaskSeq: 3, Def: "d", Key: "k", DeleteAfterFirst: true}}, nil,
			[]string{"produce i:2 d/k 1 listed=false", "delete d/k", "marker 1:3 d/k"}},
		{"the delivery carries the stored event's trace", map[string]string{"d/k": "1 trace=T"},
			[]storage.CorrelatedWait{{TaskSeq: 2, Def: "d", Key: "k", DeleteAfterFirst: true}}, nil,
			[]string{"produce i:2 d/k 1 trace=T listed=false", "delete d/k"}},
		{"a wait withdrawn in the same turn is skipped", map[string]string{"d/k": "1"},
			[]storage.CorrelatedWait{{TaskSeq: 2, Def: "d", Key: "k"}, {TaskSeq: 3, Def: "d", Key: "other"}}, []int{2},
			[]string{"marker 1:3 d/other"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			f := &fakeCorrTx{stored: map[string]string{}}
			for k, v := range c.stored {
				f.stored[k] = v
			}
			p := &storage.TurnCommitParams{InstanceID: "i", Execution: 1, CorrelatedWaits: c.waits, CancelCorrelatedWaits: c.cancel}
			if err := RegisterWaits(f, p); err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(f.log, c.want) {
				t.Errorf("calls:\n  %s\nwant:\n  %s", strings.Join(f.log, "\n  "), strings.Join(c.want, "\n  "))
			}
		})
	}
}

// TestCorrelatedPut is the reference of a put's delivery
// (storage.CorrelatedPutParams).
func TestCorrelatedPut(t *testing.T) {
	two := []Marker{{ID: 10, InstanceID: "a", Execution: 1, TaskSeq: 2}, {ID: 11, InstanceID: "b", Execution: 3, TaskSeq: 4}}
	for _, c := range []struct {
		name      string
		markers   []Marker
		daf       bool
		delivered int
		want      []string
	}{
		{"no marker", nil, false, 0, []string{"upsert d/k 1", "load d/k"}},
		{"delete-after-first, no marker: kept", nil, true, 0, []string{"upsert d/k 1", "load d/k"}},
		{"fan-out: every marker, oldest first", two, false, 2, []string{"upsert d/k 1",
			"produce a:2 d/k 1 listed=true", "delete marker 10", "produce b:4 d/k 1 listed=true", "delete marker 11", "load d/k"}},
		{"delete-after-first: the oldest, then the event goes", two, true, 1, []string{"upsert d/k 1",
			"produce a:2 d/k 1 listed=true", "delete marker 10", "load d/k", "delete d/k"}},
		{"every delivery carries the put's trace", two, false, 2, []string{"upsert d/k 1",
			"produce a:2 d/k 1 trace=T listed=true", "delete marker 10", "produce b:4 d/k 1 trace=T listed=true", "delete marker 11", "load d/k"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			f := &fakeCorrTx{markers: c.markers}
			var trace string
			if strings.Contains(c.name, "trace") {
				trace = "T"
			}
			out, n, err := CorrelatedPut(f, &storage.CorrelatedPutParams{Def: "d", Key: "k", Payload: json.RawMessage(`1`),
				DeleteAfterFirst: c.daf, TraceParent: trace})
			if err != nil {
				t.Fatal(err)
			}
			if out == nil || n != c.delivered {
				t.Errorf("returned %v, %d deliveries; want an event, %d", out, n, c.delivered)
			}
			if !slices.Equal(f.log, c.want) {
				t.Errorf("calls:\n  %s\nwant:\n  %s", strings.Join(f.log, "\n  "), strings.Join(c.want, "\n  "))
			}
		})
	}
}
