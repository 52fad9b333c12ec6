package herald_test

// The end-to-end harness: what every end-to-end test does through the
// public API — start instances, send events on each lane, put correlated
// events and definitions, find events in a history, check fates, wait for
// conditions, replay histories — written once, as methods of the bundle that
// setup returns. Each helper fails the test with the call and its arguments,
// so a test states only what it expects. Stores are opened in setup_test.go.

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/heraldwf/herald"
	"github.com/heraldwf/herald/history"
)

// on returns a bundle around client c for tests that need no runtime (or
// several clients): its context ends at the test's deadline, like setup's,
// and it has no runtime, store or log recorder.
func on(t *testing.T, c *herald.Client) *bundle {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), testTimeout(t))
	t.Cleanup(cancel)
	return &bundle{t: t, ctx: ctx, client: c}
}

// as returns a copy of b that acts through client c (another tenant, a
// client with its own config), keeping b's runtime, context and logs.
func (b *bundle) as(c *herald.Client) *bundle {
	cp := *b
	cp.client = c
	return &cp
}

// ---- instances ----

// start starts workflow as instance id and fails the test unless the
// instance was created with that id.
func (b *bundle) start(workflow, id string, input any) {
	b.t.Helper()
	got, err := b.client.StartWorkflow(b.ctx, workflow, input, herald.WithInstanceID(id))
	if err != nil || got != id {
		b.t.Fatalf("start %s as %s: %q, %v", workflow, id, got, err)
	}
}

// resultOf waits for the instance to complete and returns its result; an
// instance that failed or was terminated fails the test with its history.
func resultOf[T any](b *bundle, id string) T {
	b.t.Helper()
	var out T
	b.result(id, &out)
	return out
}

// replayAll replays every execution of the instance with ReplayHistory on
// b's runtime.
func (b *bundle) replayAll(id string) {
	b.t.Helper()
	info, err := b.client.Status(b.ctx, id)
	if err != nil {
		b.t.Fatal(err)
	}
	for e := 1; e <= info.Execution; e++ {
		evs := b.history(id, e)
		if err := b.rt.ReplayHistory(evs); err != nil {
			b.t.Fatalf("replay of execution %d of %s: %v\nhistory:%s", e, id, err, dumpHistory(evs))
		}
	}
}

// waitExec waits until execution exec of the instance has at least n events
// of kind on lane with name ("" matches any lane or name).
func (b *bundle) waitExec(id string, exec int, kind history.Kind, lane history.Lane, name string, n int) {
	b.t.Helper()
	b.waitFor(fmt.Sprintf("%d× %s %s %s in %s execution %d", n, kind, lane, name, id, exec), func() bool {
		info, err := b.client.Status(b.ctx, id)
		if err != nil || info.Execution < exec {
			return false
		}
		evs, err := b.client.History(b.ctx, id, exec)
		return err == nil && len(ofKind(evs, kind, lane, name)) >= n
	})
}

// ---- sending events ----

// raise sends a positional event with eventID ("" to have one generated) and
// fails the test on an error, a receipt for another id, or a duplicate.
func (b *bundle) raise(instance, name string, payload any, eventID string, opts ...herald.RaiseOption) *herald.EventReceipt {
	b.t.Helper()
	return b.sendEvent(history.LanePositional, instance, name, payload, eventID, false, opts)
}

// enqueue puts a message into a queue, with the checks of raise.
func (b *bundle) enqueue(instance, queue string, payload any, eventID string, opts ...herald.RaiseOption) *herald.EventReceipt {
	b.t.Helper()
	return b.sendEvent(history.LaneQueue, instance, queue, payload, eventID, false, opts)
}

// send raises (positional lane) or enqueues (queue lane), with the checks of
// raise.
func (b *bundle) send(lane history.Lane, instance, name string, payload any, eventID string) *herald.EventReceipt {
	b.t.Helper()
	return b.sendEvent(lane, instance, name, payload, eventID, false, nil)
}

// resend sends an event whose id was sent before and fails the test unless
// the receipt is the duplicate of the first one (same id, Duplicate set).
func (b *bundle) resend(lane history.Lane, instance, name string, payload any, eventID string, opts ...herald.RaiseOption) *herald.EventReceipt {
	b.t.Helper()
	return b.sendEvent(lane, instance, name, payload, eventID, true, opts)
}

func (b *bundle) sendEvent(lane history.Lane, instance, name string, payload any, eventID string, dup bool, opts []herald.RaiseOption) *herald.EventReceipt {
	b.t.Helper()
	if eventID != "" {
		opts = append([]herald.RaiseOption{herald.WithEventID(eventID)}, opts...)
	}
	r, err := b.sendOnce(lane, instance, name, payload, opts)
	if err != nil {
		b.t.Fatalf("send %s %s (%s) to %s: %v", lane, name, eventID, instance, err)
	}
	if (eventID != "" && r.EventID != eventID) || r.EventID == "" || r.Duplicate != dup {
		b.t.Fatalf("send %s %s (%s) to %s: receipt %+v, want duplicate=%v", lane, name, eventID, instance, r, dup)
	}
	return r
}

func (b *bundle) sendOnce(lane history.Lane, instance, name string, payload any, opts []herald.RaiseOption) (*herald.EventReceipt, error) {
	switch lane {
	case history.LanePositional:
		return b.client.RaiseEvent(b.ctx, instance, name, payload, opts...)
	case history.LaneQueue:
		return b.client.Enqueue(b.ctx, instance, name, payload, opts...)
	}
	b.t.Fatalf("send on lane %q: the harness sends on the positional and queue lanes", lane)
	return nil, nil
}

// sentEvent is one event for raiseMany.
type sentEvent struct {
	Name    string
	Payload any
	ID      string
}

// raiseMany raises the events concurrently (so the store can commit them in
// groups) and fails the test if any raise fails or is a duplicate. Their
// arrival order is not defined.
func (b *bundle) raiseMany(instance string, evs []sentEvent) {
	b.t.Helper()
	ch := make(chan sentEvent)
	errs := make(chan error, len(evs))
	var wg sync.WaitGroup
	for range 10 {
		wg.Go(func() {
			for ev := range ch {
				r, err := b.client.RaiseEvent(b.ctx, instance, ev.Name, ev.Payload, herald.WithEventID(ev.ID))
				if err == nil && (r.EventID != ev.ID || r.Duplicate) {
					err = fmt.Errorf("receipt %+v", r)
				}
				if err != nil {
					errs <- fmt.Errorf("raise %s (%s): %w", ev.Name, ev.ID, err)
				}
			}
		})
	}
	for _, ev := range evs {
		ch <- ev
	}
	close(ch)
	wg.Wait()
	close(errs)
	for err := range errs {
		b.t.Fatal(err)
	}
}

// refused sends on lane, wants an *EventInvalidError for name with a reason
// containing want, and checks that nothing was stored for eventID.
func (b *bundle) refused(lane history.Lane, instance, name string, payload any, eventID, want string) {
	b.t.Helper()
	_, err := b.sendOnce(lane, instance, name, payload, []herald.RaiseOption{herald.WithEventID(eventID)})
	var inv *herald.EventInvalidError
	if !errors.Is(err, herald.ErrEventInvalid) || !errors.As(err, &inv) || inv.Name != name {
		b.t.Fatalf("send %s %s %s: %v, want an *EventInvalidError for %s", lane, name, eventID, err, name)
	}
	found := false
	for _, r := range inv.Reasons {
		found = found || strings.Contains(r, want)
	}
	if !found {
		b.t.Fatalf("send %s %s %s: reasons %q, want one containing %q", lane, name, eventID, inv.Reasons, want)
	}
	b.wantNoFate(eventID)
}

// wantNoFate checks that eventID left no fate record (it was refused).
func (b *bundle) wantNoFate(eventID string) {
	b.t.Helper()
	if rec, err := b.client.EventFate(b.ctx, eventID); !errors.Is(err, herald.ErrNotFound) {
		b.t.Fatalf("fate of refused %s: %+v, %v; want ErrNotFound", eventID, rec, err)
	}
}

// ---- fates ----

// wantFate is the expected fate record of an event.
type wantFate struct {
	Lane history.Lane
	// Name is compared only when not "".
	Name       string
	Fate       history.Fate
	Reason     history.DropReason
	Execution  int
	Origin     int
	WaitNumber int
}

// checkFate compares the event's fate record with want (reported with
// Errorf, so a test sees every wrong fate) and returns the record.
func (b *bundle) checkFate(eventID string, want wantFate) *herald.EventRecord {
	b.t.Helper()
	rec := b.fate(eventID)
	got := wantFate{Lane: rec.Lane, Name: rec.Name, Fate: rec.Fate, Reason: rec.Reason, Execution: rec.Execution,
		Origin: rec.OriginExecution, WaitNumber: rec.WaitNumber}
	if want.Name == "" {
		got.Name = ""
	}
	if got != want || rec.EventID != eventID {
		b.t.Errorf("fate of %s (record id %q) = %+v, want %+v", eventID, rec.EventID, got, want)
	}
	return rec
}

// events lists the events sent to an instance.
func (b *bundle) events(id string, f ...herald.EventFilter) []*herald.EventRecord {
	b.t.Helper()
	recs, err := b.client.Events(b.ctx, id, f...)
	if err != nil {
		b.t.Fatalf("events of %s: %v", id, err)
	}
	return recs
}

// eventIDs lists the ids of the events sent to an instance.
func (b *bundle) eventIDs(id string, f ...herald.EventFilter) []string {
	b.t.Helper()
	var out []string
	for _, r := range b.events(id, f...) {
		out = append(out, r.EventID)
	}
	return out
}

// ---- histories ----

// ofKind returns the events of kind on lane with name, in order ("" matches
// any lane or name).
func ofKind(evs []history.Event, kind history.Kind, lane history.Lane, name string) []history.Event {
	var out []history.Event
	for _, ev := range evs {
		if ev.Kind == kind && (lane == "" || ev.Lane == lane) && (name == "" || ev.Name == name) {
			out = append(out, ev)
		}
	}
	return out
}

// withID returns the events carrying eventID.
func withID(evs []history.Event, eventID string) []history.Event {
	var out []history.Event
	for _, ev := range evs {
		if ev.EventID == eventID {
			out = append(out, ev)
		}
	}
	return out
}

// one returns the single event of evs carrying eventID, failing otherwise.
func (b *bundle) one(evs []history.Event, eventID string) history.Event {
	b.t.Helper()
	got := withID(evs, eventID)
	if len(got) != 1 {
		b.t.Fatalf("%d events with id %s, want 1; history:%s", len(got), eventID, dumpHistory(evs))
	}
	return got[0]
}

// countPrefix counts events of kind whose name starts with prefix.
func countPrefix(evs []history.Event, kind history.Kind, prefix string) int {
	n := 0
	for _, ev := range evs {
		if ev.Kind == kind && strings.HasPrefix(ev.Name, prefix) {
			n++
		}
	}
	return n
}

// ---- definitions and correlated events ----

// define stores an event definition and returns what was stored.
func (b *bundle) define(def herald.EventDefinition) *herald.EventDefinition {
	b.t.Helper()
	out, err := b.client.PutEventDefinition(b.ctx, def)
	if err != nil {
		b.t.Fatalf("put definition %s: %v", def.Name, err)
	}
	return out
}

// defineCorrelated stores a definition with correlation config corr (nil:
// an empty config, fan-out without TTL).
func (b *bundle) defineCorrelated(name string, corr *herald.CorrelationConfig) *herald.EventDefinition {
	b.t.Helper()
	if corr == nil {
		corr = &herald.CorrelationConfig{}
	}
	return b.define(herald.EventDefinition{Name: name, Correlation: corr})
}

// put puts a correlated event and fails the test unless it is stored under
// (def, key).
func (b *bundle) put(def, key string, payload any) *herald.CorrelatedEvent {
	b.t.Helper()
	ce, err := b.client.PutCorrelatedEvent(b.ctx, def, key, payload)
	if err != nil {
		b.t.Fatalf("put %s/%s: %v", def, key, err)
	}
	if ce.Def != def || ce.Key != key {
		b.t.Fatalf("put %s/%s returned %s/%s", def, key, ce.Def, ce.Key)
	}
	return ce
}

// correlated returns the correlated event stored under (def, key).
func (b *bundle) correlated(def, key string) *herald.CorrelatedEvent {
	b.t.Helper()
	ce, err := b.client.GetCorrelatedEvent(b.ctx, def, key)
	if err != nil {
		b.t.Fatalf("get %s/%s: %v", def, key, err)
	}
	return ce
}

// wantNoCorrelated checks that no correlated event is stored under (def,
// key).
func (b *bundle) wantNoCorrelated(def, key string) {
	b.t.Helper()
	if ce, err := b.client.GetCorrelatedEvent(b.ctx, def, key); !errors.Is(err, herald.ErrNotFound) {
		b.t.Fatalf("get %s/%s = %+v, %v; want ErrNotFound", def, key, ce, err)
	}
}

// ---- time ----

// offsetClock runs with real time plus an offset the test moves forward
// (Config.Now), so durable timers and retention fire when the test says so.
type offsetClock struct{ offset atomic.Int64 }

func (c *offsetClock) Now() time.Time { return time.Now().Add(time.Duration(c.offset.Load())) }

// Advance moves the clock forward by d.
func (c *offsetClock) Advance(d time.Duration) { c.offset.Add(int64(d)) }

// openWaits returns the blocking receives (EventSubscribed) in evs that are
// neither answered nor withdrawn, in history order. A TryDequeue (NoWait)
// never waits, so it is never open.
func openWaits(evs []history.Event) []history.Event {
	open := map[int]history.Event{}
	for _, ev := range evs {
		switch {
		case ev.Kind == history.EventSubscribed && ev.EventID == "" && !ev.NoWait:
			open[ev.Seq] = ev
		case ev.Kind == history.EventSubscribedCancelled,
			ev.Kind == history.EventRaised && ev.TaskSeq > 0:
			delete(open, ev.TaskSeq)
		}
	}
	out := slices.Collect(maps.Values(open))
	slices.SortFunc(out, func(a, b history.Event) int { return a.Seq - b.Seq })
	return out
}

// openWaitNames returns the sorted names of the open waits in evs.
func openWaitNames(evs []history.Event) []string {
	var names []string
	for _, ev := range openWaits(evs) {
		names = append(names, ev.Name)
	}
	slices.Sort(names)
	return names
}

// openWaitLabels returns the open waits in evs as "name#seq", for failure
// messages.
func openWaitLabels(evs []history.Event) []string {
	var out []string
	for _, ev := range openWaits(evs) {
		out = append(out, fmt.Sprintf("%s#%d", ev.Name, ev.Seq))
	}
	return out
}

// formatHistory renders a history one event a line, for failure messages of
// the process tests (dumpHistory is the one-line-per-field variant).
func formatHistory(evs []history.Event) string {
	var b strings.Builder
	for _, ev := range evs {
		fmt.Fprintf(&b, "  #%d %s %q id=%q task=%d wait=%d at_start=%v\n", ev.Seq, ev.Kind, ev.Name, ev.EventID, ev.TaskSeq, ev.WaitNumber, ev.AtStart)
	}
	return b.String()
}
