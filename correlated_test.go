package herald_test

// End-to-end tests of the correlated lane (docs/correlated.md):
// ctx.WaitCorrelated(def, key) ⟷ Client.PutCorrelatedEvent(def, key,
// payload). Each test checks the workflow's result, its history (the
// EventSubscribed / EventRaised pair on lane "correlated" with the key and the
// wait's seq), the fate of every produced event (delivered, lane correlated,
// Name = definition, Key = key: the link back) and the correlated event's
// Produced list.

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/heraldwf/herald"
	"github.com/heraldwf/herald/history"
	"github.com/heraldwf/herald/internal/testdb"
	"github.com/heraldwf/herald/storage/postgres"
)

// coIn tells the correlated test workflows what to wait for.
type coIn struct {
	Def string `json:"def"`
	Key string `json:"key"`
	// Timeout is the wait's WithTimeout (0: none).
	Timeout time.Duration `json:"timeout,omitempty"`
	// Race makes the wait race a timer of this length in a Select.
	Race time.Duration `json:"race,omitempty"`
	// Hold: after a timeout or a lost race the instance stays running until
	// a positional "finish" event, so a later put finds it alive.
	Hold bool `json:"hold,omitempty"`
}

// Three workflow types wait on the same (def, key) with different histories:
// co.wait waits at once (EventSubscribed is seq 2), co.sleepy sleeps first
// (seq 4), co.patient waits with a one-hour timeout (its timer is cancelled
// on delivery).
const (
	coWaitWF    = "co.wait"
	coSleepyWF  = "co.sleepy"
	coPatientWF = "co.patient"
)

func coWait(ctx *herald.Context, in coIn) (string, error) {
	var opts []herald.WaitOption
	if in.Timeout > 0 {
		opts = append(opts, herald.WithTimeout(in.Timeout))
	}
	w := ctx.WaitCorrelated(in.Def, in.Key, opts...)
	hold := func() error {
		if in.Hold {
			return ctx.WaitEvent("finish").Get(nil)
		}
		return nil
	}
	if in.Race > 0 {
		if ctx.Select(w, ctx.Timer(in.Race)) == 1 {
			return "timer", hold()
		}
	}
	var s string
	err := w.Get(&s)
	if errors.Is(err, herald.ErrEventTimeout) {
		return "timeout", hold()
	}
	if err != nil {
		return "", fmt.Errorf("wait correlated: %w", err)
	}
	return "got:" + s, nil
}

func coRegister(rt *herald.Runtime) {
	herald.RegisterWorkflow(rt, coWaitWF, coWait)
	herald.RegisterWorkflow(rt, coSleepyWF, func(ctx *herald.Context, in coIn) (string, error) {
		if err := ctx.Sleep(time.Millisecond); err != nil {
			return "", err
		}
		return coWait(ctx, in)
	})
	herald.RegisterWorkflow(rt, coPatientWF, func(ctx *herald.Context, in coIn) (string, error) {
		in.Timeout = time.Hour
		return coWait(ctx, in)
	})
}

func coSetup(t *testing.T, cfg *herald.Config) *bundle {
	return setupEnv(t, cfg, coRegister)
}

// coSubscribed returns the seq of the instance's correlated wait on (def,
// key); it fails if there is not exactly one.
func coSubscribed(b *bundle, id string, evs []history.Event, def, key string) int {
	b.t.Helper()
	seq := 0
	for _, ev := range evs {
		if ev.Kind == history.EventSubscribed && ev.Lane == history.LaneCorrelated {
			if ev.Name != def || ev.Key != key || seq != 0 {
				b.t.Fatalf("%s: unexpected correlated wait, want one on %s/%s; history:%s", id, def, key, dumpHistory(evs))
			}
			seq = ev.Seq
		}
	}
	if seq == 0 {
		b.t.Fatalf("%s: no correlated wait on %s/%s; history:%s", id, def, key, dumpHistory(evs))
	}
	return seq
}

// coWaitSubscribed waits until every instance has made its correlated wait
// (its marker is committed with the EventSubscribed). Each round reads the
// histories of the instances not seen waiting yet; rounds back off (like
// WaitForCompletion) so that polling many instances does not starve the
// runtime under the race detector.
func coWaitSubscribed(b *bundle, ids ...string) {
	b.t.Helper()
	pending := slices.Clone(ids)
	if b.env != nil {
		b.waitFor(fmt.Sprintf("the correlated waits of %d instances", len(ids)), func() bool {
			pending = slices.DeleteFunc(pending, func(id string) bool { return coSubscribedNow(b, id) })
			return len(pending) == 0
		})
		return
	}
	delay := 2 * time.Millisecond
	for {
		pending = slices.DeleteFunc(pending, func(id string) bool { return coSubscribedNow(b, id) })
		if len(pending) == 0 {
			return
		}
		select {
		case <-b.ctx.Done():
			b.t.Fatalf("timed out waiting for the correlated waits of %d instances, e.g. %s", len(pending), pending[0])
		case <-time.After(delay):
		}
		delay = min(2*delay, 50*time.Millisecond)
	}
}

// coSubscribedNow reports whether the instance has made its correlated wait.
func coSubscribedNow(b *bundle, id string) bool {
	evs, err := b.client.History(b.ctx, id, 0)
	return err == nil && slices.ContainsFunc(evs, func(ev history.Event) bool {
		return ev.Kind == history.EventSubscribed && ev.Lane == history.LaneCorrelated
	})
}

// coCorrelatedRaised returns the instance's correlated EventRaised events.
func coCorrelatedRaised(evs []history.Event) []history.Event {
	var out []history.Event
	for _, ev := range evs {
		if (ev.Kind == history.EventRaised || ev.Kind == history.EventDropped) && ev.Lane == history.LaneCorrelated {
			out = append(out, ev)
		}
	}
	return out
}

// coCheckDelivered checks that the instance's correlated wait on (def, key)
// received payload: the EventRaised names the wait's seq, the definition and
// the key; the produced event's fate is delivered with the link back
// (lane, Name, Key, instance). It returns the produced event's id and the
// wait's seq.
func coCheckDelivered(b *bundle, id, def, key string, payload string) (string, int) {
	b.t.Helper()
	evs := b.history(id, 0)
	seq := coSubscribed(b, id, evs, def, key)
	raised := coCorrelatedRaised(evs)
	if len(raised) != 1 {
		b.t.Fatalf("%s: %d correlated events in history, want 1:%s", id, len(raised), dumpHistory(evs))
	}
	ev := raised[0]
	want, _ := json.Marshal(payload)
	if ev.Kind != history.EventRaised || ev.TaskSeq != seq || ev.Name != def || ev.Key != key ||
		string(ev.Payload) != string(want) || ev.EventID == "" || ev.Seq <= seq {
		b.t.Fatalf("%s: correlated EventRaised %+v, want task_seq %d, %s/%s, payload %s; history:%s",
			id, ev, seq, def, key, want, dumpHistory(evs))
	}
	rec := b.fate(ev.EventID)
	if rec.Fate != history.FateDelivered || rec.Lane != history.LaneCorrelated || rec.Name != def || rec.Key != key ||
		rec.InstanceID != id || rec.Execution != 1 {
		b.t.Fatalf("%s: fate of %s = %+v, want delivered on lane correlated, name %s, key %s, execution 1",
			id, ev.EventID, rec, def, key)
	}
	return ev.EventID, seq
}

// coCheckProduced checks that the correlated event lists exactly the given
// (instance → event id, seq) deliveries, in any order.
func coCheckProduced(b *bundle, ce *herald.CorrelatedEvent, want map[string]coProduced) {
	b.t.Helper()
	if len(ce.Produced) != len(want) {
		b.t.Fatalf("%s/%s produced %d events, want %d: %+v", ce.Def, ce.Key, len(ce.Produced), len(want), ce.Produced)
	}
	seen := map[string]bool{}
	for _, p := range ce.Produced {
		w, ok := want[p.InstanceID]
		if !ok || seen[p.InstanceID] || p.EventID != w.eventID || p.TaskSeq != w.seq || p.Execution != 1 {
			b.t.Fatalf("%s/%s produced entry %+v, want %+v (once) for %s", ce.Def, ce.Key, p, w, p.InstanceID)
		}
		seen[p.InstanceID] = true
	}
}

type coProduced struct {
	eventID string
	seq     int
}

// coNoCorrelated checks that the instance received no correlated event: none
// in its history and none in its ledger.
func coNoCorrelated(b *bundle, id string) {
	b.t.Helper()
	evs := b.history(id, 0)
	if raised := coCorrelatedRaised(evs); len(raised) != 0 {
		b.t.Fatalf("%s: received a correlated event it must not:%s", id, dumpHistory(evs))
	}
	recs, err := b.client.Events(b.ctx, id, herald.EventFilter{Lane: history.LaneCorrelated})
	if err != nil {
		b.t.Fatalf("events of %s: %v", id, err)
	}
	if len(recs) != 0 {
		b.t.Fatalf("%s: %d correlated events in its ledger, want none: %+v", id, len(recs), recs[0])
	}
}

// 1. Put then wait: the wait completes at once, in the instance's first
// turns, and the correlated event is kept for the next waiter (fan-out).
func TestCorrelated_PutThenWait(t *testing.T) {
	t.Parallel()
	b := coSetup(t, nil)
	b.defineCorrelated("doc.signed", nil)
	ce := b.put("doc.signed", "doc-1", "signed by ann")
	if len(ce.Produced) != 0 || string(ce.Payload) != `"signed by ann"` || ce.CreatedAt.IsZero() {
		t.Fatalf("put with no waiter returned %+v", ce)
	}

	b.start(coWaitWF, "i1", coIn{Def: "doc.signed", Key: "doc-1"})
	if got := resultOf[string](b, "i1"); got != "got:signed by ann" {
		t.Fatalf("i1 result %q", got)
	}
	evs := b.history("i1", 0)
	kinds := make([]history.Kind, len(evs))
	for i, ev := range evs {
		kinds[i] = ev.Kind
	}
	if !slices.Equal(kinds, []history.Kind{history.ExecutionStarted, history.EventSubscribed, history.EventRaised,
		history.ExecutionCompleted}) {
		t.Fatalf("i1 should wait and receive at once; history:%s", dumpHistory(evs))
	}
	ev1, seq1 := coCheckDelivered(b, "i1", "doc.signed", "doc-1", "signed by ann")
	if seq1 != 2 {
		t.Fatalf("i1 wait seq %d, want 2", seq1)
	}

	// Fan-out: the correlated event stays, so a second instance receives it
	// too, as its own event.
	b.start(coSleepyWF, "i2", coIn{Def: "doc.signed", Key: "doc-1"})
	if got := resultOf[string](b, "i2"); got != "got:signed by ann" {
		t.Fatalf("i2 result %q", got)
	}
	ev2, seq2 := coCheckDelivered(b, "i2", "doc.signed", "doc-1", "signed by ann")
	if ev2 == ev1 {
		t.Fatalf("both instances got event id %s; each delivery is its own event", ev1)
	}
	coCheckProduced(b, b.correlated("doc.signed", "doc-1"), map[string]coProduced{
		"i1": {ev1, seq1}, "i2": {ev2, seq2}})

	// Another key of the same definition, and the same key of another
	// definition, are other correlated events: these waits time out.
	b.defineCorrelated("doc.rejected", nil)
	b.start(coWaitWF, "i3", coIn{Def: "doc.signed", Key: "doc-2", Timeout: 50 * time.Millisecond})
	b.start(coWaitWF, "i4", coIn{Def: "doc.rejected", Key: "doc-1", Timeout: 50 * time.Millisecond})
	for _, id := range []string{"i3", "i4"} {
		if got := resultOf[string](b, id); got != "timeout" {
			t.Fatalf("%s result %q, want timeout", id, got)
		}
		coNoCorrelated(b, id)
	}
}

// 2. Wait then put: the put delivers to the waiting instance in its own
// transaction and lists the produced event.
func TestCorrelated_WaitThenPut(t *testing.T) {
	t.Parallel()
	b := coSetup(t, nil)
	b.defineCorrelated("order.paid", nil)
	b.start(coPatientWF, "w1", coIn{Def: "order.paid", Key: "order-42"})
	coWaitSubscribed(b, "w1")
	if _, err := b.client.GetCorrelatedEvent(b.ctx, "order.paid", "order-42"); !errors.Is(err, herald.ErrNotFound) {
		t.Fatalf("a wait must not create a correlated event: %v", err)
	}

	ce := b.put("order.paid", "order-42", "42 EUR")
	if len(ce.Produced) != 1 || ce.Produced[0].InstanceID != "w1" {
		t.Fatalf("put reached %+v, want w1", ce.Produced)
	}
	if got := resultOf[string](b, "w1"); got != "got:42 EUR" {
		t.Fatalf("w1 result %q", got)
	}
	ev, seq := coCheckDelivered(b, "w1", "order.paid", "order-42", "42 EUR")
	coCheckProduced(b, ce, map[string]coProduced{"w1": {ev, seq}})
	coCheckProduced(b, b.correlated("order.paid", "order-42"), map[string]coProduced{"w1": {ev, seq}})
	// The wait's one-hour timer was cancelled on delivery.
	evs := b.history("w1", 0)
	if countKind(evs, history.TimerCancelled, "") != 1 || countKind(evs, history.TimerFired, "") != 0 {
		t.Fatalf("w1: the timeout timer should be cancelled; history:%s", dumpHistory(evs))
	}
}

// 3. Fan-out: one put reaches 100 instances of three workflow types waiting
// on the same (def, key).
func TestCorrelated_FanOut100(t *testing.T) {
	t.Parallel()
	b := coSetup(t, &herald.Config{TurnWorkers: 8})
	b.defineCorrelated("doc.signed", nil)
	b.defineCorrelated("doc.other", nil)
	wfs := []string{coWaitWF, coSleepyWF, coPatientWF}
	var ids []string
	for i := range 100 {
		id := fmt.Sprintf("fan-%03d", i)
		ids = append(ids, id)
		b.start(wfs[i%3], id, coIn{Def: "doc.signed", Key: "contract-7"})
	}
	// A bystander on another definition with the same key.
	b.start(coWaitWF, "bystander", coIn{Def: "doc.other", Key: "contract-7", Hold: true, Timeout: time.Hour})
	coWaitSubscribed(b, append(ids, "bystander")...)

	ce := b.put("doc.signed", "contract-7", "all signed")
	if len(ce.Produced) != 100 {
		t.Fatalf("one put reached %d instances, want 100", len(ce.Produced))
	}
	want := map[string]coProduced{}
	for _, id := range ids {
		if got := resultOf[string](b, id); got != "got:all signed" {
			t.Fatalf("%s result %q", id, got)
		}
		ev, seq := coCheckDelivered(b, id, "doc.signed", "contract-7", "all signed")
		want[id] = coProduced{ev, seq}
	}
	coCheckProduced(b, ce, want)
	coCheckProduced(b, b.correlated("doc.signed", "contract-7"), want)
	// Waits had different seqs per workflow type: 2, 4 (after the sleep's
	// timer), 2 (then its timeout timer).
	if want["fan-000"].seq != 2 || want["fan-001"].seq != 4 || want["fan-002"].seq != 2 {
		t.Fatalf("wait seqs %+v %+v %+v", want["fan-000"], want["fan-001"], want["fan-002"])
	}
	coNoCorrelated(b, "bystander")
	if err := b.client.Terminate(b.ctx, "bystander", "test over"); err != nil {
		t.Fatal(err)
	}
}

// 4. DeleteAfterFirstCorrelation, three in-process runtimes on the store
// testStore gives (one shared store object).
func TestCorrelated_DeleteAfterFirst(t *testing.T) {
	t.Parallel()
	st := testStore(t)
	var nodes []*bundle
	for range 3 {
		nodes = append(nodes, setupOn(t, st, nil, coRegister))
	}
	coDeleteAfterFirst(t, nodes)
}

// 4. DeleteAfterFirstCorrelation across three nodes on PostgreSQL: three
// in-process runtimes, each on its own postgres.Store (its own connection
// pool) over one schema, so the nodes only meet in the database.
func TestCorrelated_DeleteAfterFirstPostgresNodes(t *testing.T) {
	t.Parallel()
	url := testdb.PostgresURL(t)
	schema := testdb.NewSchema(t)
	var nodes []*bundle
	for i := range 3 {
		st, err := postgres.Open(t.Context(), url, postgres.WithSchema(schema), postgres.WithMaxConns(4))
		if err != nil {
			t.Fatalf("open node %d: %v", i, err)
		}
		t.Cleanup(func() { st.Close() })
		nodes = append(nodes, setupOn(t, st, nil, coRegister))
	}
	coDeleteAfterFirst(t, nodes)
}

func coDeleteAfterFirst(t *testing.T, nodes []*bundle) {
	const n = 50
	b := nodes[0]
	b.defineCorrelated("otp.entered", &herald.CorrelationConfig{DeleteAfterFirstCorrelation: true})

	// startAll starts n waiters on key, each through the client of node
	// i%3, concurrently; mid-way, if put is set, it runs too.
	startAll := func(prefix, key string, put func()) []string {
		ids := make([]string, n)
		var wg sync.WaitGroup
		errs := make(chan error, n)
		for i := range n {
			ids[i] = fmt.Sprintf("%s-%02d", prefix, i)
			wg.Go(func() {
				c := nodes[i%len(nodes)].client
				if _, err := c.StartWorkflow(b.ctx, coWaitWF, coIn{Def: "otp.entered", Key: key},
					herald.WithInstanceID(ids[i])); err != nil {
					errs <- err
				}
			})
			if i == n/2 && put != nil {
				wg.Go(put)
			}
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Fatalf("start: %v", err)
		}
		return ids
	}
	// receivers returns the instances whose ledger holds a correlated event.
	receivers := func(ids []string) []string {
		var out []string
		for _, id := range ids {
			recs, err := b.client.Events(b.ctx, id, herald.EventFilter{Lane: history.LaneCorrelated})
			if err != nil {
				t.Fatalf("events of %s: %v", id, err)
			}
			for range recs {
				out = append(out, id)
			}
		}
		return out
	}
	finish := func(ids []string, winner string) {
		if got := resultOf[string](b, winner); got != "got:123456" {
			t.Fatalf("%s result %q", winner, got)
		}
		coCheckDelivered(b, winner, "otp.entered", nodeKey(winner), "123456")
		// The other 49 still wait (Terminate refuses an instance that has
		// ended) and nothing reached them, in their ledgers or histories.
		for _, id := range ids {
			if id == winner {
				continue
			}
			if err := nodes[1].client.Terminate(b.ctx, id, "test over"); err != nil {
				t.Fatalf("%s should still be waiting: terminate: %v", id, err)
			}
			if evs := b.history(id, 0); len(coCorrelatedRaised(evs)) != 0 {
				t.Fatalf("%s received a correlated event:%s", id, dumpHistory(evs))
			}
		}
		if got := receivers(ids); len(got) != 1 || got[0] != winner {
			t.Fatalf("after terminating the others: receivers %v, want only %s", got, winner)
		}
	}

	// Waiters first, on all three nodes; then one put: the oldest waiter
	// receives it and the correlated event is deleted at once.
	ids := startAll("first", "after", nil)
	coWaitSubscribed(b, ids...)
	ce := nodes[2].put("otp.entered", "after", "123456")
	if len(ce.Produced) != 1 {
		t.Fatalf("delete-after-first put reached %d waiters, want 1: %+v", len(ce.Produced), ce.Produced)
	}
	b.wantNoCorrelated("otp.entered", "after")
	if got := receivers(ids); len(got) != 1 || got[0] != ce.Produced[0].InstanceID {
		t.Fatalf("receivers %v, produced %+v", got, ce.Produced)
	}
	if evs, _, err := b.client.SearchCorrelatedEvents(b.ctx, "otp.entered", herald.CorrelatedSearch{}); err != nil || len(evs) != 0 {
		t.Fatalf("search after delete-after-first: %d events, %v", len(evs), err)
	}
	finish(ids, ce.Produced[0].InstanceID)

	// The put races 50 waits being made on three nodes: whether it comes
	// before some of them or after all, exactly one instance receives it.
	var putErr error
	var raced *herald.CorrelatedEvent
	ids = startAll("race", "race", func() {
		raced, putErr = nodes[1].client.PutCorrelatedEvent(b.ctx, "otp.entered", "race", "123456")
	})
	if putErr != nil {
		t.Fatalf("racing put: %v", putErr)
	}
	if len(raced.Produced) > 1 {
		t.Fatalf("racing put reached %d waiters", len(raced.Produced))
	}
	coWaitSubscribed(b, ids...)
	// Every wait is committed, and the put too: it was consumed by one.
	b.wantNoCorrelated("otp.entered", "race")
	got := receivers(ids)
	if len(got) != 1 {
		t.Fatalf("racing put: receivers %v, want exactly one", got)
	}
	if len(raced.Produced) == 1 && raced.Produced[0].InstanceID != got[0] {
		t.Fatalf("racing put produced %+v but %s received", raced.Produced, got[0])
	}
	finish(ids, got[0])
}

// nodeKey is the key the instances of coDeleteAfterFirst wait on.
func nodeKey(id string) string {
	if len(id) > 5 && id[:5] == "first" {
		return "after"
	}
	return "race"
}

// 5. Putting a key twice before any wait updates its payload; the wait gets
// the second payload. Delete removes it.
func TestCorrelated_UpdateBeforeWait(t *testing.T) {
	t.Parallel()
	var clock atomic.Int64
	clock.Store(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).UnixNano())
	b := coSetup(t, nil)
	// The puts go through a client with a clock that moves only when told,
	// so creation and update times are exact.
	c := mustClient(b.store, herald.DefaultTenant, &herald.ClientConfig{Clock: funcClock(func() time.Time { return time.Unix(0, clock.Load()).UTC() })})
	b.defineCorrelated("doc.signed", nil)
	first, err := c.PutCorrelatedEvent(b.ctx, "doc.signed", "doc-9", "draft")
	if err != nil {
		t.Fatal(err)
	}
	t0 := time.Unix(0, clock.Load())
	clock.Add(int64(time.Minute))
	second, err := c.PutCorrelatedEvent(b.ctx, "doc.signed", "doc-9", "final")
	if err != nil {
		t.Fatal(err)
	}
	t1 := time.Unix(0, clock.Load())
	if !first.CreatedAt.Equal(t0) || !second.CreatedAt.Equal(t0) || !second.UpdatedAt.Equal(t1) ||
		string(second.Payload) != `"final"` || len(second.Produced) != 0 {
		t.Fatalf("update: first %+v second %+v; want created %v, updated %v, payload final", first, second, t0, t1)
	}
	got := b.correlated("doc.signed", "doc-9")
	if string(got.Payload) != `"final"` || !got.CreatedAt.Equal(t0) || !got.UpdatedAt.Equal(t1) {
		t.Fatalf("get after update: %+v", got)
	}
	if evs, _, err := b.client.SearchCorrelatedEvents(b.ctx, "doc.signed", herald.CorrelatedSearch{}); err != nil || len(evs) != 1 {
		t.Fatalf("an update must not add a correlated event: %d, %v", len(evs), err)
	}

	b.start(coWaitWF, "u1", coIn{Def: "doc.signed", Key: "doc-9"})
	if r := resultOf[string](b, "u1"); r != "got:final" {
		t.Fatalf("u1 result %q, want the second payload", r)
	}
	ev, seq := coCheckDelivered(b, "u1", "doc.signed", "doc-9", "final")
	coCheckProduced(b, b.correlated("doc.signed", "doc-9"), map[string]coProduced{"u1": {ev, seq}})

	// Delete: gone, a second delete is ErrNotFound, a later wait does not
	// receive it, and the delivered event keeps its fate.
	if err := b.client.DeleteCorrelatedEvent(b.ctx, "doc.signed", "doc-9"); err != nil {
		t.Fatal(err)
	}
	b.wantNoCorrelated("doc.signed", "doc-9")
	if err := b.client.DeleteCorrelatedEvent(b.ctx, "doc.signed", "doc-9"); !errors.Is(err, herald.ErrNotFound) {
		t.Fatalf("second delete: %v, want ErrNotFound", err)
	}
	if rec := b.fate(ev); rec.Fate != history.FateDelivered || rec.Key != "doc-9" {
		t.Fatalf("fate after delete: %+v", rec)
	}
	b.start(coWaitWF, "u2", coIn{Def: "doc.signed", Key: "doc-9", Timeout: 50 * time.Millisecond})
	if r := resultOf[string](b, "u2"); r != "timeout" {
		t.Fatalf("u2 result %q, want timeout", r)
	}
	coNoCorrelated(b, "u2")
}

// 6. A wait that times out removes its marker: a later put reaches nobody
// and is an orphan for search.
func TestCorrelated_TimeoutRemovesMarker(t *testing.T) {
	t.Parallel()
	b := coSetup(t, nil)
	b.defineCorrelated("doc.signed", nil)
	b.start(coWaitWF, "t1", coIn{Def: "doc.signed", Key: "late", Timeout: 50 * time.Millisecond, Hold: true})
	b.waitHistory("t1", history.EventSubscribedCancelled, "doc.signed", 1)
	b.waitHistory("t1", history.EventSubscribed, "finish", 1) // the workflow saw ErrEventTimeout and went on
	evs := b.history("t1", 0)
	seq := coSubscribed(b, "t1", evs, "doc.signed", "late")
	coCheckCancelled(b, "t1", evs, seq)

	ce := b.put("doc.signed", "late", "too late")
	if len(ce.Produced) != 0 {
		t.Fatalf("a put after the timeout reached %+v", ce.Produced)
	}
	b.raise("t1", "finish", nil, "")
	if r := resultOf[string](b, "t1"); r != "timeout" {
		t.Fatalf("t1 result %q, want timeout (ErrEventTimeout in the workflow)", r)
	}
	coNoCorrelated(b, "t1")
	if got := b.correlated("doc.signed", "late"); len(got.Produced) != 0 {
		t.Fatalf("produced %+v", got.Produced)
	}
	no, yes := false, true
	orphans, _, err := b.client.SearchCorrelatedEvents(b.ctx, "doc.signed", herald.CorrelatedSearch{HasCorrelatedEvents: &no})
	if err != nil || len(orphans) != 1 || orphans[0].Key != "late" {
		t.Fatalf("orphans %v, %v", orphans, err)
	}
	if with, _, err := b.client.SearchCorrelatedEvents(b.ctx, "doc.signed", herald.CorrelatedSearch{HasCorrelatedEvents: &yes}); err != nil || len(with) != 0 {
		t.Fatalf("with produced events: %d, %v", len(with), err)
	}
}

// coCheckCancelled checks the withdrawal breadcrumb of the wait at seq.
func coCheckCancelled(b *bundle, id string, evs []history.Event, seq int) {
	b.t.Helper()
	n := 0
	for _, ev := range evs {
		if ev.Kind == history.EventSubscribedCancelled {
			n++
			if ev.TaskSeq != seq || ev.Lane != history.LaneCorrelated || ev.Name == "" {
				b.t.Fatalf("%s: cancellation %+v, want lane correlated, task_seq %d; history:%s", id, ev, seq, dumpHistory(evs))
			}
		}
	}
	if n != 1 {
		b.t.Fatalf("%s: %d cancellations, want 1; history:%s", id, n, dumpHistory(evs))
	}
}

// 7. TTL: the elected leader's maintenance deletes correlated events past
// their definition's TTL; a later wait does not receive them.
func TestCorrelated_TTLExpiry(t *testing.T) {
	t.Parallel()
	b := coSetup(t, &herald.Config{ExpiryInterval: 20 * time.Millisecond})
	b.defineCorrelated("code.sent", &herald.CorrelationConfig{TTL: 200 * time.Millisecond})
	b.defineCorrelated("code.kept", nil)
	ce := b.put("code.sent", "user-1", "8842")
	if ce.ExpiresAt.IsZero() || ce.ExpiresAt.Sub(ce.CreatedAt) != 200*time.Millisecond {
		t.Fatalf("expires at %v, created %v; want created + ttl", ce.ExpiresAt, ce.CreatedAt)
	}
	kept := b.put("code.kept", "user-1", "forever")
	if !kept.ExpiresAt.IsZero() {
		t.Fatalf("no ttl, but expires at %v", kept.ExpiresAt)
	}
	b.waitFor("ttl expiry of code.sent/user-1", func() bool {
		_, err := b.client.GetCorrelatedEvent(b.ctx, "code.sent", "user-1")
		return errors.Is(err, herald.ErrNotFound)
	})
	if d := b.now().Sub(ce.CreatedAt); d < 200*time.Millisecond {
		t.Fatalf("expired after %v, before its ttl", d)
	}
	b.correlated("code.kept", "user-1") // no ttl: still there

	b.start(coWaitWF, "x1", coIn{Def: "code.sent", Key: "user-1", Timeout: 50 * time.Millisecond})
	if r := resultOf[string](b, "x1"); r != "timeout" {
		t.Fatalf("x1 result %q: a wait received an expired correlated event", r)
	}
	coNoCorrelated(b, "x1")
}

// 8. Search: every filter, and paging through 1,000 correlated events.
func TestCorrelated_Search(t *testing.T) {
	t.Parallel()
	b := coSetup(t, nil)
	base := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	var clock atomic.Int64
	clock.Store(base.UnixNano())
	c := mustClient(b.store, herald.DefaultTenant, &herald.ClientConfig{Clock: funcClock(func() time.Time { return time.Unix(0, clock.Load()).UTC() })})
	b.defineCorrelated("s.filter", nil)
	b.defineCorrelated("s.page", nil)
	b.defineCorrelated("s.other", nil)

	// Ten events k01..k10 created at base+1s..base+10s; k03 and k07 reached
	// a waiting instance.
	for _, k := range []string{"k03", "k07"} {
		b.start(coWaitWF, "w-"+k, coIn{Def: "s.filter", Key: k})
	}
	coWaitSubscribed(b, "w-k03", "w-k07")
	at := func(i int) time.Time { return base.Add(time.Duration(i) * time.Second) }
	for i := 1; i <= 10; i++ {
		clock.Store(at(i).UnixNano())
		if _, err := c.PutCorrelatedEvent(b.ctx, "s.filter", fmt.Sprintf("k%02d", i), fmt.Sprintf("v%d", i)); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := c.PutCorrelatedEvent(b.ctx, "s.other", "k01", 0); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"k03", "k07"} {
		if r := resultOf[string](b, "w-"+k); r != "got:v"+k[2:] {
			t.Fatalf("w-%s result %q", k, r)
		}
	}
	yes, no := true, false
	keys := func(evs []*herald.CorrelatedEvent) []string {
		var out []string
		for _, e := range evs {
			out = append(out, e.Key)
		}
		return out
	}
	ks := func(is ...int) []string {
		var out []string
		for _, i := range is {
			out = append(out, fmt.Sprintf("k%02d", i))
		}
		return out
	}
	for _, tc := range []struct {
		name string
		q    herald.CorrelatedSearch
		want []string
	}{
		{"all", herald.CorrelatedSearch{}, ks(1, 2, 3, 4, 5, 6, 7, 8, 9, 10)},
		{"earliest inclusive", herald.CorrelatedSearch{Earliest: at(8)}, ks(8, 9, 10)},
		{"latest inclusive", herald.CorrelatedSearch{Latest: at(2)}, ks(1, 2)},
		{"earliest and latest", herald.CorrelatedSearch{Earliest: at(3), Latest: at(6)}, ks(3, 4, 5, 6)},
		{"between events", herald.CorrelatedSearch{Earliest: at(3).Add(time.Millisecond), Latest: at(4).Add(-time.Millisecond)}, nil},
		{"has produced", herald.CorrelatedSearch{HasCorrelatedEvents: &yes}, ks(3, 7)},
		{"orphans", herald.CorrelatedSearch{HasCorrelatedEvents: &no}, ks(1, 2, 4, 5, 6, 8, 9, 10)},
		{"has produced in range", herald.CorrelatedSearch{Earliest: at(4), Latest: at(10), HasCorrelatedEvents: &yes}, ks(7)},
		{"orphans in range", herald.CorrelatedSearch{Earliest: at(2), Latest: at(5), HasCorrelatedEvents: &no}, ks(2, 4, 5)},
		{"limit", herald.CorrelatedSearch{Limit: 4}, ks(1, 2, 3, 4)},
	} {
		evs, _, err := b.client.SearchCorrelatedEvents(b.ctx, "s.filter", tc.q)
		if err != nil || !slices.Equal(keys(evs), tc.want) {
			t.Fatalf("%s: got %v, %v; want %v", tc.name, keys(evs), err, tc.want)
		}
		for _, e := range evs {
			wantProduced := 0
			if e.Key == "k03" || e.Key == "k07" {
				wantProduced = 1
			}
			if e.Def != "s.filter" || len(e.Produced) != wantProduced {
				t.Fatalf("%s: %s/%s with %d produced, want %d", tc.name, e.Def, e.Key, len(e.Produced), wantProduced)
			}
		}
	}
	// Paging with filters: orphans three at a time.
	var paged []string
	bm := ""
	for page := 0; ; page++ {
		evs, next, err := b.client.SearchCorrelatedEvents(b.ctx, "s.filter", herald.CorrelatedSearch{
			HasCorrelatedEvents: &no, Latest: at(9), Limit: 3, Bookmark: bm})
		if err != nil || page > 3 || len(evs) > 3 {
			t.Fatalf("orphan page %d: %d events, %v", page, len(evs), err)
		}
		paged = append(paged, keys(evs)...)
		if next == "" {
			break
		}
		bm = next
	}
	if !slices.Equal(paged, ks(1, 2, 4, 5, 6, 8, 9)) {
		t.Fatalf("orphans paged: %v", paged)
	}

	// 1,000 events, put concurrently through a clock that ticks 1 ms every
	// third read, so up to three events share a creation time and are
	// ordered by key, bytewise (keys differ in case, punctuation and
	// non-ASCII letters, and hold the bookmark's ':' separator); paging in
	// creation order sees each exactly once.
	var reads atomic.Int64
	pc := mustClient(b.store, herald.DefaultTenant, &herald.ClientConfig{Clock: funcClock(func() time.Time {
		return base.Add(time.Duration(reads.Add(1)/3) * time.Millisecond).UTC()
	})})
	prefixes := []string{"a", "B", "ä", "a:b", "a-b", "Z"}
	const total = 1000
	created := make([]*herald.CorrelatedEvent, total)
	var wg sync.WaitGroup
	errs := make(chan error, total)
	work := make(chan int)
	for range 8 {
		wg.Go(func() {
			for i := range work {
				ce, err := pc.PutCorrelatedEvent(b.ctx, "s.page", fmt.Sprintf("%s%04d", prefixes[i%len(prefixes)], (i*7919)%total), i)
				if err != nil {
					errs <- err
					continue
				}
				created[i] = ce
			}
		})
	}
	for i := range total {
		work <- i
	}
	close(work)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatalf("put: %v", err)
	}
	slices.SortFunc(created, func(x, y *herald.CorrelatedEvent) int {
		return cmp.Or(x.CreatedAt.Compare(y.CreatedAt), cmp.Compare(x.Key, y.Key))
	})
	ties := 0
	for i := 1; i < total; i++ {
		if created[i].CreatedAt.Equal(created[i-1].CreatedAt) {
			ties++
		}
	}
	if ties < 100 {
		t.Fatalf("only %d events share a creation time; the test wants ties", ties)
	}
	var seen []*herald.CorrelatedEvent
	bm = ""
	pages := 0
	for {
		evs, next, err := b.client.SearchCorrelatedEvents(b.ctx, "s.page", herald.CorrelatedSearch{Limit: 128, Bookmark: bm})
		if err != nil {
			t.Fatalf("page %d: %v", pages, err)
		}
		pages++
		if pages > 9 || len(evs) > 128 || (next != "" && len(evs) != 128) {
			t.Fatalf("page %d: %d events, next %q", pages, len(evs), next)
		}
		seen = append(seen, evs...)
		if next == "" {
			break
		}
		bm = next
	}
	if len(seen) != total || pages != 8 {
		t.Fatalf("paged %d events in %d pages, want %d in 8", len(seen), pages, total)
	}
	for i, e := range seen {
		if e.Key != created[i].Key || !e.CreatedAt.Equal(created[i].CreatedAt) {
			t.Fatalf("position %d: %s at %v, want %s at %v", i, e.Key, e.CreatedAt, created[i].Key, created[i].CreatedAt)
		}
	}
	// Limit: default 100, capped at 1,000.
	if evs, next, err := b.client.SearchCorrelatedEvents(b.ctx, "s.page", herald.CorrelatedSearch{}); err != nil || len(evs) != 100 || next == "" {
		t.Fatalf("default limit: %d events, next %q, %v", len(evs), next, err)
	}
	if evs, _, err := b.client.SearchCorrelatedEvents(b.ctx, "s.page", herald.CorrelatedSearch{Limit: 5000}); err != nil || len(evs) != total {
		t.Fatalf("limit 5000: %d events, %v; want all %d (cap 1000)", len(evs), err, total)
	}
	// A bookmark stays valid across a new insert, even one that sorts
	// before it: the next page continues after the last event seen.
	first, next, err := b.client.SearchCorrelatedEvents(b.ctx, "s.page", herald.CorrelatedSearch{Limit: 10})
	if err != nil || len(first) != 10 {
		t.Fatalf("first page: %d, %v", len(first), err)
	}
	early := mustClient(b.store, herald.DefaultTenant, &herald.ClientConfig{Clock: funcClock(func() time.Time { return base.Add(-time.Hour) })})
	if _, err := early.PutCorrelatedEvent(b.ctx, "s.page", "early", "late"); err != nil {
		t.Fatal(err)
	}
	second, _, err := b.client.SearchCorrelatedEvents(b.ctx, "s.page", herald.CorrelatedSearch{Limit: 10, Bookmark: next})
	if err != nil || len(second) != 10 || second[0].Key != created[10].Key {
		t.Fatalf("second page after an insert: %v, %v; want to start at %s", keys(second), err, created[10].Key)
	}
	if _, _, err := b.client.SearchCorrelatedEvents(b.ctx, "s.page", herald.CorrelatedSearch{Bookmark: "not a bookmark"}); err == nil {
		t.Fatalf("a garbage bookmark was accepted")
	}
}

// 9. Tenants: a put in tenant a never reaches a waiter in tenant b, and b's
// search does not see a's events.
func TestCorrelated_TenantIsolation(t *testing.T) {
	t.Parallel()
	st := testStore(t)
	a := setupOn(t, st, &herald.Config{Tenants: []string{"a"}}, coRegister)
	b := setupOn(t, st, &herald.Config{Tenants: []string{"b"}}, coRegister)
	a.defineCorrelated("doc.signed", nil)
	b.defineCorrelated("doc.signed", nil)

	b.start(coWaitWF, "same-id", coIn{Def: "doc.signed", Key: "doc-1"})
	coWaitSubscribed(b, "same-id")
	ce := a.put("doc.signed", "doc-1", "for a")
	if len(ce.Produced) != 0 {
		t.Fatalf("a's put reached %+v", ce.Produced)
	}
	b.wantNoCorrelated("doc.signed", "doc-1")
	if evs, _, err := b.client.SearchCorrelatedEvents(b.ctx, "doc.signed", herald.CorrelatedSearch{}); err != nil || len(evs) != 0 {
		t.Fatalf("b's search sees %d events, %v", len(evs), err)
	}
	if err := b.client.DeleteCorrelatedEvent(b.ctx, "doc.signed", "doc-1"); !errors.Is(err, herald.ErrNotFound) {
		t.Fatalf("b deleting a's event: %v, want ErrNotFound", err)
	}
	coNoCorrelated(b, "same-id")

	// a's own instance with the same id receives a's event.
	a.start(coWaitWF, "same-id", coIn{Def: "doc.signed", Key: "doc-1"})
	if r := resultOf[string](a, "same-id"); r != "got:for a" {
		t.Fatalf("a's instance: %q", r)
	}
	aev, aseq := coCheckDelivered(a, "same-id", "doc.signed", "doc-1", "for a")
	if _, err := b.client.EventFate(b.ctx, aev); !errors.Is(err, herald.ErrNotFound) {
		t.Fatalf("b sees the fate of a's produced event: %v", err)
	}
	// b's instance is still waiting, untouched; b's own put reaches it.
	coNoCorrelated(b, "same-id")
	bce := b.put("doc.signed", "doc-1", "for b")
	if r := resultOf[string](b, "same-id"); r != "got:for b" {
		t.Fatalf("b's instance: %q", r)
	}
	bev, bseq := coCheckDelivered(b, "same-id", "doc.signed", "doc-1", "for b")
	coCheckProduced(b, bce, map[string]coProduced{"same-id": {bev, bseq}})
	coCheckProduced(a, a.correlated("doc.signed", "doc-1"), map[string]coProduced{"same-id": {aev, aseq}})
	if got := a.correlated("doc.signed", "doc-1"); string(got.Payload) != `"for a"` {
		t.Fatalf("b's put changed a's event: %s", got.Payload)
	}
	if evs, _, err := a.client.SearchCorrelatedEvents(a.ctx, "doc.signed", herald.CorrelatedSearch{}); err != nil ||
		len(evs) != 1 || string(evs[0].Payload) != `"for a"` {
		t.Fatalf("a's search: %d events, %v", len(evs), err)
	}
}

// 10. Validation: refused puts store nothing.
func TestCorrelated_Validation(t *testing.T) {
	t.Parallel()
	b := coSetup(t, nil)
	if _, err := b.client.PutEventDefinition(b.ctx, herald.EventDefinition{Name: "plain"}); err != nil {
		t.Fatal(err)
	}
	if _, err := b.client.PutEventDefinition(b.ctx, herald.EventDefinition{Name: "typed",
		Schema:      json.RawMessage(`{"type":"object","required":["doc"],"properties":{"doc":{"type":"string"}}}`),
		Correlation: &herald.CorrelationConfig{}, MaxPayloadBytes: 64}); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, def, key string
		payload        any
		reason         string // a substring of one of the reasons
	}{
		{"no correlation config", "plain", "k", "x", "no correlation config"},
		{"no definition", "missing", "k", "x", "no event definition"},
		{"schema-invalid payload", "typed", "k", map[string]any{"doc": 7}, "/doc"},
		{"missing required property", "typed", "k", map[string]any{}, "doc"},
		{"over the definition's cap", "typed", "k", map[string]any{"doc": string(make([]byte, 100))}, "cap"},
		{"empty key", "typed", "", map[string]any{"doc": "d"}, ""},
	} {
		ce, err := b.client.PutCorrelatedEvent(b.ctx, tc.def, tc.key, tc.payload)
		var inv *herald.EventInvalidError
		if !errors.Is(err, herald.ErrEventInvalid) || !errors.As(err, &inv) || len(inv.Reasons) == 0 || ce != nil {
			t.Fatalf("%s: %+v, %v; want ErrEventInvalid with reasons", tc.name, ce, err)
		}
		found := false
		for _, r := range inv.Reasons {
			found = found || strings.Contains(r, tc.reason)
		}
		if !found {
			t.Fatalf("%s: reasons %q do not mention %q", tc.name, inv.Reasons, tc.reason)
		}
		if _, err := b.client.GetCorrelatedEvent(b.ctx, tc.def, tc.key); !errors.Is(err, herald.ErrNotFound) {
			t.Fatalf("%s: something was stored: %v", tc.name, err)
		}
		if evs, _, err := b.client.SearchCorrelatedEvents(b.ctx, tc.def, herald.CorrelatedSearch{}); err != nil || len(evs) != 0 {
			t.Fatalf("%s: search finds %d, %v", tc.name, len(evs), err)
		}
	}
	// A valid payload for the typed definition is accepted.
	ce := b.put("typed", "k", map[string]any{"doc": "d-1"})
	if string(ce.Payload) != `{"doc":"d-1"}` {
		t.Fatalf("payload %s", ce.Payload)
	}
}

// 11. Select: a correlated wait that loses to a timer is withdrawn (its
// marker removed); a later put reaches nobody. One that wins cancels the
// timer.
func TestCorrelated_SelectTimerWins(t *testing.T) {
	t.Parallel()
	b := coSetup(t, nil)
	b.defineCorrelated("doc.signed", nil)
	b.start(coWaitWF, "sel", coIn{Def: "doc.signed", Key: "doc-s", Race: 30 * time.Millisecond, Hold: true})
	b.waitHistory("sel", history.EventSubscribed, "finish", 1) // the timer won, the workflow went on
	evs := b.history("sel", 0)
	seq := coSubscribed(b, "sel", evs, "doc.signed", "doc-s")
	coCheckCancelled(b, "sel", evs, seq)
	if countKind(evs, history.TimerFired, "") != 1 {
		t.Fatalf("the timer should have fired; history:%s", dumpHistory(evs))
	}

	ce := b.put("doc.signed", "doc-s", "after the race")
	if len(ce.Produced) != 0 {
		t.Fatalf("a put after the lost select reached %+v", ce.Produced)
	}
	b.raise("sel", "finish", nil, "")
	if r := resultOf[string](b, "sel"); r != "timer" {
		t.Fatalf("sel result %q", r)
	}
	coNoCorrelated(b, "sel")
	no := false
	if orphans, _, err := b.client.SearchCorrelatedEvents(b.ctx, "doc.signed", herald.CorrelatedSearch{HasCorrelatedEvents: &no}); err != nil ||
		len(orphans) != 1 || orphans[0].Key != "doc-s" {
		t.Fatalf("orphans %d, %v", len(orphans), err)
	}

	// The event exists now: a wait racing a long timer wins at once and the
	// timer is cancelled.
	b.start(coWaitWF, "sel2", coIn{Def: "doc.signed", Key: "doc-s", Race: time.Hour})
	if r := resultOf[string](b, "sel2"); r != "got:after the race" {
		t.Fatalf("sel2 result %q", r)
	}
	ev, seq2 := coCheckDelivered(b, "sel2", "doc.signed", "doc-s", "after the race")
	evs = b.history("sel2", 0)
	if countKind(evs, history.TimerCancelled, "") != 1 || countKind(evs, history.EventSubscribedCancelled, "") != 0 {
		t.Fatalf("sel2: the timer should be cancelled, the wait not; history:%s", dumpHistory(evs))
	}
	coCheckProduced(b, b.correlated("doc.signed", "doc-s"), map[string]coProduced{"sel2": {ev, seq2}})
}

// co.multi: the same key twice in a row (the correlated event stays, so the
// second wait completes at once with a new produced event), then two waits
// on one key at once (one put reaches both), then a timer so the deliveries
// are replayed in a later turn.
func coMulti(ctx *herald.Context, in coIn) ([]string, error) {
	var out []string
	for range 2 {
		var s string
		if err := ctx.WaitCorrelated(in.Def, in.Key).Get(&s); err != nil {
			return nil, err
		}
		out = append(out, s)
	}
	a, b := ctx.WaitCorrelated(in.Def, in.Key+"-pair"), ctx.WaitCorrelated(in.Def, in.Key+"-pair")
	if err := ctx.All(a, b); err != nil {
		return nil, err
	}
	for _, f := range []herald.Future{a, b} {
		var v any
		if err := f.Get(&v); err != nil {
			return nil, err
		}
		out = append(out, fmt.Sprint(v))
	}
	if err := ctx.Sleep(time.Millisecond); err != nil {
		return nil, err
	}
	return out, nil
}

// co.can: execution 1 makes a correlated wait it never awaits, waits for
// "go" and continues as new; execution 2 waits on the same key.
func coCan(ctx *herald.Context, in coIn) (string, error) {
	if ctx.Execution() == 1 {
		ctx.WaitCorrelated(in.Def, in.Key)
		if err := ctx.WaitEvent("go").Get(nil); err != nil {
			return "", err
		}
		return "", ctx.ContinueAsNew(in)
	}
	var s string
	if err := ctx.WaitCorrelated(in.Def, in.Key).Get(&s); err != nil {
		return "", err
	}
	return fmt.Sprintf("execution %d got %s", ctx.Execution(), s), nil
}

// co.abandon: makes a correlated wait it never awaits and ends on "go".
func coAbandon(ctx *herald.Context, in coIn) (string, error) {
	ctx.WaitCorrelated(in.Def, in.Key)
	return "abandoned", ctx.WaitEvent("go").Get(nil)
}

// Repeated and parallel waits in one instance; replay of correlated
// deliveries.
func TestCorrelated_RepeatedAndParallelWaits(t *testing.T) {
	t.Parallel()
	b := setupEnv(t, nil, func(rt *herald.Runtime) { herald.RegisterWorkflow(rt, "co.multi", coMulti) })
	b.defineCorrelated("doc.signed", nil)
	b.put("doc.signed", "m", "v1")
	b.start("co.multi", "multi", coIn{Def: "doc.signed", Key: "m"})
	b.waitFor("both waits on m-pair", func() bool {
		evs, err := b.client.History(b.ctx, "multi", 0)
		return err == nil && countKind(evs, history.EventSubscribed, "doc.signed") == 4
	})
	ce := b.put("doc.signed", "m-pair", nil) // a null payload is a payload
	if len(ce.Produced) != 2 || ce.Produced[0].InstanceID != "multi" || ce.Produced[1].InstanceID != "multi" ||
		ce.Produced[0].TaskSeq == ce.Produced[1].TaskSeq || string(ce.Payload) != "null" {
		t.Fatalf("one put should reach both waits of the instance: %+v payload %s", ce.Produced, ce.Payload)
	}
	var out []string
	if err := b.waitDone("multi").Result(&out); err != nil || !slices.Equal(out, []string{"v1", "v1", "<nil>", "<nil>"}) {
		t.Fatalf("multi result %v, %v", out, err)
	}
	evs := b.history("multi", 0)
	subs := map[int]string{}
	for _, ev := range evs {
		if ev.Kind == history.EventSubscribed && ev.Lane == history.LaneCorrelated {
			subs[ev.Seq] = ev.Key
		}
	}
	got := map[string][]int{} // key → the wait seqs its produced events name
	for _, ev := range coCorrelatedRaised(evs) {
		if ev.Kind != history.EventRaised || subs[ev.TaskSeq] != ev.Key {
			t.Fatalf("event %+v does not answer a wait on its key; history:%s", ev, dumpHistory(evs))
		}
		if rec := b.fate(ev.EventID); rec.Fate != history.FateDelivered || rec.Key != ev.Key || rec.Name != "doc.signed" {
			t.Fatalf("fate %+v", rec)
		}
		delete(subs, ev.TaskSeq)
		got[ev.Key] = append(got[ev.Key], ev.TaskSeq)
	}
	if len(subs) != 0 || len(got["m"]) != 2 || len(got["m-pair"]) != 2 {
		t.Fatalf("every wait should receive exactly one event: unanswered %v, answered %v; history:%s", subs, got, dumpHistory(evs))
	}
	for key, seqs := range got {
		ce := b.correlated("doc.signed", key)
		var pseqs []int
		for _, p := range ce.Produced {
			pseqs = append(pseqs, p.TaskSeq)
		}
		slices.Sort(pseqs)
		slices.Sort(seqs)
		if !slices.Equal(pseqs, seqs) {
			t.Fatalf("%s produced for seqs %v, history delivered to %v", key, pseqs, seqs)
		}
	}
}

// An instance's markers go with it: continue-as-new, termination and
// completion remove them; delete-after-first keeps an unclaimed event for
// the first wait only.
func TestCorrelated_MarkersEndWithTheInstance(t *testing.T) {
	t.Parallel()
	b := setupEnv(t, nil, func(rt *herald.Runtime) {
		coRegister(rt)
		herald.RegisterWorkflow(rt, "co.can", coCan)
		herald.RegisterWorkflow(rt, "co.abandon", coAbandon)
	})
	b.defineCorrelated("doc.signed", nil)
	b.defineCorrelated("otp", &herald.CorrelationConfig{DeleteAfterFirstCorrelation: true})

	// Continue-as-new: execution 1's marker is gone; the put reaches only
	// execution 2's wait.
	b.start("co.can", "can", coIn{Def: "doc.signed", Key: "c"})
	coWaitSubscribed(b, "can")
	b.raise("can", "go", nil, "")
	b.waitFor("execution 2's wait", func() bool {
		info, err := b.client.Status(b.ctx, "can")
		if err != nil || info.Execution != 2 {
			return false
		}
		evs, err := b.client.History(b.ctx, "can", 2)
		return err == nil && countKind(evs, history.EventSubscribed, "doc.signed") == 1
	})
	ce := b.put("doc.signed", "c", "p")
	if len(ce.Produced) != 1 || ce.Produced[0].Execution != 2 {
		t.Fatalf("put after continue-as-new reached %+v, want execution 2 only", ce.Produced)
	}
	if r := resultOf[string](b, "can"); r != "execution 2 got p" {
		t.Fatalf("can result %q", r)
	}
	if rec := b.fate(ce.Produced[0].EventID); rec.Fate != history.FateDelivered || rec.Execution != 2 || rec.Key != "c" {
		t.Fatalf("fate %+v", rec)
	}
	if evs, err := b.client.History(b.ctx, "can", 1); err != nil || len(coCorrelatedRaised(evs)) != 0 {
		t.Fatalf("execution 1 received a correlated event: %v%s", err, dumpHistory(evs))
	}

	// Terminated while waiting, and completed with a wait never awaited:
	// later puts reach neither.
	b.start(coWaitWF, "term", coIn{Def: "doc.signed", Key: "t"})
	b.start("co.abandon", "abandon", coIn{Def: "doc.signed", Key: "t"})
	coWaitSubscribed(b, "term", "abandon")
	if err := b.client.Terminate(b.ctx, "term", "test"); err != nil {
		t.Fatal(err)
	}
	b.raise("abandon", "go", nil, "")
	if r := resultOf[string](b, "abandon"); r != "abandoned" {
		t.Fatalf("abandon result %q", r)
	}
	if ce := b.put("doc.signed", "t", "nobody"); len(ce.Produced) != 0 {
		t.Fatalf("put reached ended instances: %+v", ce.Produced)
	}
	coNoCorrelated(b, "term")
	coNoCorrelated(b, "abandon")

	// Delete-after-first with no waiter: kept until the first wait, which
	// takes it; the second wait gets nothing.
	if ce := b.put("otp", "o", "4711"); len(ce.Produced) != 0 {
		t.Fatalf("produced %+v", ce.Produced)
	}
	b.correlated("otp", "o")
	b.start(coWaitWF, "o1", coIn{Def: "otp", Key: "o"})
	if r := resultOf[string](b, "o1"); r != "got:4711" {
		t.Fatalf("o1 result %q", r)
	}
	coCheckDelivered(b, "o1", "otp", "o", "4711")
	b.wantNoCorrelated("otp", "o")
	b.start(coWaitWF, "o2", coIn{Def: "otp", Key: "o", Timeout: 50 * time.Millisecond})
	if r := resultOf[string](b, "o2"); r != "timeout" {
		t.Fatalf("o2 result %q", r)
	}
	coNoCorrelated(b, "o2")
}

// TTL on a fake clock: expiry is exact, and putting a key again renews its
// expiry (created time kept).
func TestCorrelated_TTLRenewedByPut(t *testing.T) {
	t.Parallel()
	start := time.Date(2026, 5, 1, 8, 0, 0, 0, time.UTC)
	var clock atomic.Int64
	clock.Store(start.UnixNano())
	at := func(d time.Duration) time.Time { return start.Add(d) }
	b := setup(t, &herald.Config{ExpiryInterval: 10 * time.Millisecond,
		ClientConfig: nowCfg(func() time.Time { return time.Unix(0, clock.Load()).UTC() })}, coRegister)
	b.defineCorrelated("code.sent", &herald.CorrelationConfig{TTL: time.Hour})
	for _, k := range []string{"renewed", "control"} {
		if ce := b.put("code.sent", k, "v1"); !ce.ExpiresAt.Equal(at(time.Hour)) {
			t.Fatalf("%s expires at %v, want %v", k, ce.ExpiresAt, at(time.Hour))
		}
	}
	clock.Store(at(30 * time.Minute).UnixNano())
	ce := b.put("code.sent", "renewed", "v2")
	if !ce.ExpiresAt.Equal(at(90*time.Minute)) || !ce.CreatedAt.Equal(start) || !ce.UpdatedAt.Equal(at(30*time.Minute)) {
		t.Fatalf("re-put: created %v updated %v expires %v; want %v, %v, %v", ce.CreatedAt, ce.UpdatedAt, ce.ExpiresAt,
			start, at(30*time.Minute), at(90*time.Minute))
	}
	// Past the first expiry: the control goes; the renewed key, judged by
	// the same pass, stays.
	clock.Store(at(61 * time.Minute).UnixNano())
	b.waitFor("expiry of control", func() bool {
		_, err := b.client.GetCorrelatedEvent(b.ctx, "code.sent", "control")
		return errors.Is(err, herald.ErrNotFound)
	})
	if got := b.correlated("code.sent", "renewed"); string(got.Payload) != `"v2"` {
		t.Fatalf("renewed: %s", got.Payload)
	}
	evs, _, err := b.client.SearchCorrelatedEvents(b.ctx, "code.sent", herald.CorrelatedSearch{})
	if err != nil || len(evs) != 1 || evs[0].Key != "renewed" {
		t.Fatalf("search after expiry: %d, %v", len(evs), err)
	}
	// Exactly at the renewed expiry it goes too.
	clock.Store(at(90 * time.Minute).UnixNano())
	b.waitFor("expiry of renewed", func() bool {
		_, err := b.client.GetCorrelatedEvent(b.ctx, "code.sent", "renewed")
		return errors.Is(err, herald.ErrNotFound)
	})
}

// A put that reaches a wait before its timeout fires must be received, even
// when the instance's next turn sees the put's event and the fired timer
// together (the timer's inbox row is older: it was written when the wait
// began). With delete-after-first the put deleted the correlated event, so a
// wait that let the event go would lose it.
//
// A turn applies its messages in the order they happened (a timer when it
// fired), so the put, made before the timeout, reaches the wait although
// the timer's inbox row is older.
func TestCorrelated_PutBeforeTimeoutInOneTurn(t *testing.T) {
	t.Parallel()
	start := time.Date(2026, 5, 1, 8, 0, 0, 0, time.UTC)
	var clock atomic.Int64
	clock.Store(start.UnixNano())
	now := func() time.Time { return time.Unix(0, clock.Load()).UTC() }
	st := testStore(t)
	node1 := setupOn(t, st, &herald.Config{ClientConfig: nowCfg(now)}, coRegister)
	node1.defineCorrelated("otp", &herald.CorrelationConfig{DeleteAfterFirstCorrelation: true})
	node1.start(coWaitWF, "slow", coIn{Def: "otp", Key: "k", Timeout: time.Minute, Hold: true})
	coWaitSubscribed(node1, "slow")
	// The node stops before it can run the instance's next turn.
	if err := node1.rt.Stop(node1.ctx); err != nil {
		t.Fatal(err)
	}
	ce := node1.put("otp", "k", "4711") // at start: 59 s before the timeout
	if len(ce.Produced) != 1 || ce.Produced[0].InstanceID != "slow" {
		t.Fatalf("put reached %+v", ce.Produced)
	}
	node1.wantNoCorrelated("otp", "k")
	clock.Store(start.Add(2 * time.Minute).UnixNano()) // the timer is due too
	node2 := setupOn(t, st, &herald.Config{ClientConfig: nowCfg(now)}, coRegister)
	node2.waitFor("the instance's turn", func() bool {
		evs, err := node2.client.History(node2.ctx, "slow", 0)
		return err == nil && len(coCorrelatedRaised(evs)) > 0
	})
	evs := node2.history("slow", 0)
	if rec := node2.fate(ce.Produced[0].EventID); rec.Fate != history.FateDelivered {
		t.Errorf("the event put before the timeout was %s/%s, not delivered; the delete-after-first event is lost; history:%s",
			rec.Fate, rec.Reason, dumpHistory(evs))
	}
	if info, err := node2.client.Status(node2.ctx, "slow"); err == nil && info.Status == herald.StatusRunning {
		node2.raise("slow", "finish", nil, "")
	}
	if r := resultOf[string](node2, "slow"); r != "got:4711" {
		t.Errorf("result %q, want got:4711", r)
	}
}

// Fan-out under concurrency: puts on one key race waits being made on two
// nodes. Every waiter receives exactly one event, the payload of one of the
// puts, and the correlated event lists each of them once.
func TestCorrelated_ConcurrentPutsAndWaits(t *testing.T) {
	t.Parallel()
	st := testStore(t)
	nodes := []*bundle{setupOn(t, st, nil, coRegister), setupOn(t, st, nil, coRegister)}
	b := nodes[0]
	b.defineCorrelated("doc.signed", nil)
	const n, puts = 30, 5
	var wg sync.WaitGroup
	errs := make(chan error, n+puts)
	var ids []string
	for i := range n {
		id := fmt.Sprintf("cw-%02d", i)
		ids = append(ids, id)
		wg.Go(func() {
			if _, err := nodes[i%2].client.StartWorkflow(b.ctx, coWaitWF, coIn{Def: "doc.signed", Key: "hot"},
				herald.WithInstanceID(id)); err != nil {
				errs <- err
			}
		})
		if i%(n/puts) == 0 {
			wg.Go(func() {
				if _, err := nodes[(i+1)%2].client.PutCorrelatedEvent(b.ctx, "doc.signed", "hot", fmt.Sprintf("put-%d", i)); err != nil {
					errs <- err
				}
			})
		}
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	want := map[string]coProduced{}
	for _, id := range ids {
		r := resultOf[string](b, id)
		if len(r) < len("got:put-") || r[:len("got:put-")] != "got:put-" {
			t.Fatalf("%s result %q", id, r)
		}
		ev, seq := coCheckDelivered(b, id, "doc.signed", "hot", r[len("got:"):])
		want[id] = coProduced{ev, seq}
	}
	coCheckProduced(b, b.correlated("doc.signed", "hot"), want)
}

// A wait on a definition without correlation config is registered anyway
// (and logged): once the definition gets a correlation config, a put
// reaches it.
func TestCorrelated_WaitBeforeCorrelationConfig(t *testing.T) {
	t.Parallel()
	b := coSetup(t, nil)
	if _, err := b.client.PutEventDefinition(b.ctx, herald.EventDefinition{Name: "later"}); err != nil {
		t.Fatal(err)
	}
	b.start(coWaitWF, "early", coIn{Def: "later", Key: "k"})
	coWaitSubscribed(b, "early")
	if _, err := b.client.PutCorrelatedEvent(b.ctx, "later", "k", "refused"); !errors.Is(err, herald.ErrEventInvalid) {
		t.Fatalf("put without correlation config: %v", err)
	}
	warned := slices.ContainsFunc(b.logs.warnings(), func(w string) bool {
		return strings.Contains(w, "without correlation config") && strings.Contains(w, "early")
	})
	if !warned {
		t.Fatalf("no warning for a wait that no put can reach: %q", b.logs.warnings())
	}
	b.defineCorrelated("later", nil)
	ce := b.put("later", "k", "now")
	if len(ce.Produced) != 1 {
		t.Fatalf("produced %+v", ce.Produced)
	}
	if r := resultOf[string](b, "early"); r != "got:now" {
		t.Fatalf("result %q", r)
	}
	ev, seq := coCheckDelivered(b, "early", "later", "k", "now")
	coCheckProduced(b, ce, map[string]coProduced{"early": {ev, seq}})
}

// Delete-after-first must not lose the event when the wait it was delivered
// to ends before the instance sees it: here execution 1 continues as new on
// a "go" raised just before the put. Either execution 2's wait receives the
// event or the correlated event is still there for it.
// The engine honours a delivery the store made to a wait that is still
// active before anything else of the turn can end that wait.
func TestCorrelated_DeleteAfterFirstDeliveryToEndedWait(t *testing.T) {
	t.Parallel()
	st := testStore(t)
	reg := func(rt *herald.Runtime) { herald.RegisterWorkflow(rt, "co.can", coCan) }
	node1 := setupOn(t, st, nil, reg)
	node1.defineCorrelated("otp", &herald.CorrelationConfig{DeleteAfterFirstCorrelation: true})
	node1.start("co.can", "can", coIn{Def: "otp", Key: "k"})
	coWaitSubscribed(node1, "can")
	if err := node1.rt.Stop(node1.ctx); err != nil {
		t.Fatal(err)
	}
	node1.raise("can", "go", nil, "")
	ce := node1.put("otp", "k", "4711")
	node2 := setupOn(t, st, nil, reg)
	node2.waitFor("execution 2's wait", func() bool {
		evs, err := node2.client.History(node2.ctx, "can", 2)
		return err == nil && countKind(evs, history.EventSubscribed, "otp") == 1
	})
	if _, err := node2.client.GetCorrelatedEvent(node2.ctx, "otp", "k"); err == nil {
		return // kept for execution 2's wait: nothing lost
	}
	// Deleted: then some delivery of it must be alive (pending or
	// delivered, not dropped) — the ledger row is written with the delivery.
	recs, err := node2.client.Events(node2.ctx, "can", herald.EventFilter{Lane: history.LaneCorrelated})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.ContainsFunc(recs, func(r *herald.EventRecord) bool { return r.Fate != history.FateDropped }) {
		rec := node2.fate(ce.Produced[0].EventID)
		t.Fatalf("the delete-after-first event is lost: deleted, its delivery %s/%s, execution 2 waits on; history:%s",
			rec.Fate, rec.Reason, dumpHistory(node2.history("can", 0)))
	}
}
