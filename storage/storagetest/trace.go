package storagetest

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/heraldwf/herald/heraldtype"
	"github.com/heraldwf/herald/history"
	"github.com/heraldwf/herald/storage"
)

// Trace contexts (W3C traceparents) as the engine makes them; the store
// keeps them opaque.
const (
	traceA = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
	traceB = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00"
	traceC = "00-11111111111111111111111111111111-2222222222222222-01"
	traceD = "00-33333333333333333333333333333333-4444444444444444-01"
)

// testTraceParent: the trace context of what carries work into an inbox
// round-trips: InstanceCreate's onto the kick, EventRaise's onto the event
// message (for a running instance, one that does not exist yet, and one
// StartIfAbsent creates, whose kick gets StartIfAbsent's), an activity
// task's from TurnCommit to ActivityClaim and onto its result message;
// and where none is given none is stored.
func testTraceParent(b *bundle) {
	t := b.t
	msgTrace := func(turn *storage.Turn) map[string]string {
		got := map[string]string{}
		for _, m := range turn.Messages {
			k := string(m.Kind)
			switch {
			case m.EventID != "":
				k += ":" + m.EventID
			case m.TaskSeq != 0:
				k += "/" + strconv.Itoa(m.TaskSeq)
			}
			got[k] = m.TraceParent
		}
		return got
	}
	want := func(what string, got map[string]string, want map[string]string) {
		t.Helper()
		if len(got) != len(want) {
			t.Fatalf("%s: messages %v, want %v", what, got, want)
		}
		for k, v := range want {
			if g, ok := got[k]; !ok || g != v {
				t.Fatalf("%s: message %s has trace %q (present %v), want %q", what, k, g, ok, v)
			}
		}
	}

	// A start with a trace; an event raised to the running instance with
	// one (PostgreSQL's one-statement raise) and one without.
	if _, err := b.s.InstanceCreate(b.ctx, &storage.InstanceCreateParams{Tenant: b.tenant, ID: "i", Workflow: "wf",
		Now: t0, TraceParent: traceA}); err != nil {
		t.Fatal(err)
	}
	turn := b.claimOne("i", t0)
	want("first turn", msgTrace(turn), map[string]string{"kick": traceA})
	p := b.commitParams(turn, t0)
	e := ev(2, history.ActivityScheduled, t0)
	e.Name = "act"
	p.NewEvents = append(p.NewEvents, e)
	e3 := ev(3, history.ActivityScheduled, t0)
	e3.Name = "plain"
	p.NewEvents = append(p.NewEvents, e3)
	p.Activities = []storage.ActivityTask{
		{TaskSeq: 2, Name: "act", Retry: heraldtype.RetryPolicy{MaxAttempts: 3}, TraceParent: traceB},
		{TaskSeq: 3, Name: "plain", Retry: heraldtype.RetryPolicy{MaxAttempts: 3}},
	}
	b.commit(p)
	rp := b.raiseParams("i", "e-traced", "go", at(time.Second))
	rp.TraceParent = traceC
	if _, err := b.s.EventRaise(b.ctx, rp); err != nil {
		t.Fatal(err)
	}
	b.raise("i", "e-plain", "go", at(time.Second))

	// The tasks carry the scheduling turn's trace (or none), and so do
	// their results.
	tasks := b.claimActivities(at(time.Second), 10)
	if len(tasks) != 2 {
		t.Fatalf("ActivityClaim: %d tasks, want 2", len(tasks))
	}
	for _, task := range tasks {
		wantTrace := map[int]string{2: traceB, 3: ""}[task.TaskSeq]
		wantEqual(t, "task "+task.Name+" TraceParent", task.TraceParent, wantTrace)
		if err := b.complete(task, `1`, nil, at(2*time.Second)); err != nil {
			t.Fatal(err)
		}
	}
	turn = b.claimOne("i", at(2*time.Second))
	want("second turn", msgTrace(turn), map[string]string{
		"event:e-traced": traceC, "event:e-plain": "",
		"activity_completed/2": traceB, "activity_completed/3": "",
	})
	b.commit(b.commitParams(turn, at(2*time.Second)))

	// An event kept for an instance that does not exist yet (the general
	// path of a raise), then the start that creates it.
	rp = b.raiseParams("j", "e-early", "go", at(3*time.Second))
	rp.TraceParent = traceD
	if _, err := b.s.EventRaise(b.ctx, rp); err != nil {
		t.Fatal(err)
	}
	b.create("j", at(3*time.Second))
	want("turn of j", msgTrace(b.claimOne("j", at(3*time.Second))), map[string]string{"event:e-early": traceD, "kick": ""})

	// A raise that starts its instance: the event's trace on the event,
	// StartIfAbsent's on the kick.
	rp = b.raiseParams("k", "e-start", "go", at(4*time.Second))
	rp.TraceParent = traceA
	rp.StartIfAbsent = &storage.InstanceCreateParams{Tenant: b.tenant, ID: "k", Workflow: "wf",
		Input: json.RawMessage(`{}`), Now: at(4 * time.Second), TraceParent: traceB}
	if res, err := b.s.EventRaise(b.ctx, rp); err != nil || !res.Started {
		t.Fatalf("EventRaise with StartIfAbsent: %+v, %v", res, err)
	}
	want("turn of k", msgTrace(b.claimOne("k", at(4*time.Second))), map[string]string{"event:e-start": traceA, "kick": traceB})
}

// corrPutTraced puts payload on (d, key) (delete-after-first: daf) with
// trace.
func (b *bundle) corrPutTraced(d, key, payload string, daf bool, trace string, now time.Time) *heraldtype.CorrelatedEvent {
	b.t.Helper()
	p := b.corrPutParams(d, key, payload, daf, now)
	p.TraceParent = trace
	c, err := b.s.CorrelatedPut(b.ctx, p)
	if err != nil {
		b.t.Fatalf("CorrelatedPut(%s/%s): %v", d, key, err)
	}
	return c
}

// wantTraces requires the correlated messages msgs to carry traces, in
// order.
func wantTraces(t *testing.T, what string, msgs []storage.Message, traces ...string) {
	t.Helper()
	if len(msgs) != len(traces) {
		t.Fatalf("%s: %d correlated messages, want %d", what, len(msgs), len(traces))
	}
	for i, m := range msgs {
		if m.TraceParent != traces[i] {
			t.Fatalf("%s: message %s (event %s) has trace %q, want %q", what, corrMsg(m), m.EventID, m.TraceParent, traces[i])
		}
	}
}

// testCorrelatedTraceParent: a put's trace context is stored with the
// correlated event and carried by every delivery of it — the put's own
// (fan-out and delete-after-first), a later wait's (the latest put's
// trace, or none), and a delete-after-first hand-on's, of a withdrawn
// wait's delivery and of a returned event (delivered on, or stored again
// and delivered to the next wait). A trace context that cannot be stored
// is refused and changes nothing.
func testCorrelatedTraceParent(b *bundle) {
	t := b.t
	b.putDef(heraldtype.EventDefinition{Name: def, Correlation: &heraldtype.CorrelationConfig{}}, at(0))
	const dafDef = "doc-once"
	b.putDef(heraldtype.EventDefinition{Name: dafDef, Correlation: &heraldtype.CorrelationConfig{DeleteAfterFirstCorrelation: true}}, at(0))

	// Waits, then the put: each delivery carries the put's trace.
	b.startWaiting("a", at(1*time.Second), cw(2, "k", false))
	b.startWaiting("b", at(1*time.Second), cw(2, "k", false))
	b.corrPutTraced(def, "k", `1`, false, traceA, at(2*time.Second))
	wantTraces(t, "fan-out put, a", b.wantDelivered("a", at(2*time.Second), "2:k:1"), traceA)
	wantTraces(t, "fan-out put, b", b.wantDelivered("b", at(2*time.Second), "2:k:1"), traceA)

	// The put first, then waits: the stored event's trace, that of the
	// latest put (none if it had none).
	b.corrPutTraced(def, "k", `2`, false, traceB, at(3*time.Second))
	b.startWaiting("c", at(4*time.Second), cw(2, "k", false))
	wantTraces(t, "wait after a traced put", b.wantDelivered("c", at(4*time.Second), "2:k:2"), traceB)
	b.corrPutTraced(def, "k", `3`, false, "", at(5*time.Second))
	b.startWaiting("d", at(6*time.Second), cw(2, "k", false))
	wantTraces(t, "wait after an untraced put", b.wantDelivered("d", at(6*time.Second), "2:k:3"), "")

	// Delete-after-first, put first (PostgreSQL: the one-statement wait).
	b.corrPutTraced(dafDef, "once", `4`, true, traceC, at(7*time.Second))
	b.startWaiting("e", at(8*time.Second), storage.CorrelatedWait{TaskSeq: 2, Def: dafDef, Key: "once", DeleteAfterFirst: true})
	msgs := b.claimCorr("e", at(8*time.Second))
	wantTraces(t, "delete-after-first wait after a traced put", msgs, traceC)

	// A withdrawn wait's delivery is handed on with its trace: to the next
	// waiter, or stored again and delivered to the next wait.
	dafWait := storage.CorrelatedWait{TaskSeq: 2, Def: dafDef, Key: "w", DeleteAfterFirst: true}
	b.startWaiting("f", at(9*time.Second), dafWait)
	b.startWaiting("g", at(9*time.Second), dafWait)
	turn := b.poke("f", at(10*time.Second))
	b.corrPutTraced(dafDef, "w", `5`, true, traceD, at(10*time.Second))
	p := b.commitParams(turn, at(11*time.Second))
	p.CancelCorrelatedWaits = []int{2}
	b.commit(p)
	wantTraces(t, "withdrawn delivery handed on", b.claimCorr("g", at(12*time.Second)), traceD)
	b.startWaiting("h", at(13*time.Second), dafWait)
	turn = b.poke("h", at(14*time.Second))
	b.corrPutTraced(dafDef, "w", `6`, true, traceA, at(14*time.Second))
	p = b.commitParams(turn, at(15*time.Second))
	p.CancelCorrelatedWaits = []int{2}
	b.commit(p)
	b.startWaiting("i", at(16*time.Second), dafWait)
	wantTraces(t, "withdrawn delivery stored again, then waited for", b.claimCorr("i", at(16*time.Second)), traceA)

	// A returned event is handed on with the trace the commit gives.
	b.startWaiting("j", at(17*time.Second), storage.CorrelatedWait{TaskSeq: 2, Def: dafDef, Key: "r", DeleteAfterFirst: true})
	b.startWaiting("l", at(17*time.Second), storage.CorrelatedWait{TaskSeq: 2, Def: dafDef, Key: "r", DeleteAfterFirst: true})
	b.corrPutTraced(dafDef, "r", `7`, true, traceB, at(18*time.Second))
	got := b.claimCorr("j", at(18*time.Second))
	wantTraces(t, "delivery to j", got, traceB)
	m := got[0]
	p = b.commitParams(b.poke("j", at(19*time.Second)), at(19*time.Second))
	p.ReturnedCorrelated = []storage.ReturnedCorrelated{{EventID: m.EventID, Def: dafDef, Key: "r", Payload: m.Payload, TraceParent: m.TraceParent}}
	p.Fates = []storage.FateUpdate{{EventID: m.EventID, Fate: history.FateDropped, Reason: history.DropWithdrawnWait,
		Execution: 1, OriginExecution: 1}}
	b.commit(p)
	wantTraces(t, "returned event handed on", b.claimCorr("l", at(20*time.Second)), traceB)

	// A trace context that cannot be stored: refused, nothing stored.
	for _, bad := range []string{strings.Repeat("0", storage.MaxTraceParentBytes+1), "00-\x00", "00-é"} {
		p := b.corrPutParams(def, "bad", `1`, false, at(21*time.Second))
		p.TraceParent = bad
		_, err := b.s.CorrelatedPut(b.ctx, p)
		wantErr(t, fmt.Sprintf("CorrelatedPut with trace %q", bad), err, heraldtype.ErrInvalidArgument)
		b.wantCorrGone(def, "bad")
	}
}

// claimCorr claims instance id's turn, commits it (consuming its
// messages) and returns its correlated-lane messages, of any definition.
func (b *bundle) claimCorr(id string, now time.Time) []storage.Message {
	b.t.Helper()
	turn := b.turnOf(id, now)
	if turn == nil {
		b.t.Fatalf("instance %s has no turn", id)
	}
	var out []storage.Message
	for _, m := range turn.Messages {
		if m.Lane == history.LaneCorrelated {
			out = append(out, m)
		}
	}
	b.commit(b.commitParams(turn, now))
	return out
}

// testBusTraceParent: a published event's trace context (BusPublish's,
// and a turn's Publish) is returned with the event by BusRoute and
// BusClaim; an event published without one has none. A trace context that
// cannot be stored is refused and changes nothing.
func testBusTraceParent(b *bundle) {
	t := b.t
	p := b.busPublishParams("e-traced", "order.paid", at(0))
	p.Event.TraceParent = traceA
	if _, err := b.s.BusPublish(b.ctx, p); err != nil {
		t.Fatal(err)
	}
	b.busPublish("e-plain", "order.paid", at(0))

	// A turn's published events, one with a trace and one without.
	b.create("i", at(0))
	turn := b.claimOne("i", at(0))
	cp := b.commitParams(turn, at(0))
	cp.Publish = []storage.BusPublishEvent{
		{ID: "e-turn", Type: "order.paid", Data: busData("e-turn"), Source: "workflow:i", TraceParent: traceB},
		{ID: "e-turn-plain", Type: "order.paid", Data: busData("e-turn-plain"), Source: "workflow:i"},
	}
	b.commit(cp)

	want := map[string]string{"e-traced": traceA, "e-plain": "", "e-turn": traceB, "e-turn-plain": ""}
	routed := map[string]string{}
	if n := b.busRoute(at(time.Second), 10, func(ev *storage.BusEvent) []storage.BusRouteDecision {
		routed[ev.ID] = ev.TraceParent
		return matchAll("s")(ev)
	}); n != 4 {
		t.Fatalf("BusRoute routed %d events, want 4", n)
	}
	claimed := map[string]string{}
	for _, c := range b.busClaim(at(time.Second), 10) {
		claimed[c.Event.ID] = c.Event.TraceParent
	}
	for id, tr := range want {
		if got, ok := routed[id]; !ok || got != tr {
			t.Errorf("BusRoute: event %s trace %q (routed %v), want %q", id, got, ok, tr)
		}
		if got, ok := claimed[id]; !ok || got != tr {
			t.Errorf("BusClaim: event %s trace %q (claimed %v), want %q", id, got, ok, tr)
		}
	}

	for _, bad := range []string{strings.Repeat("0", storage.MaxTraceParentBytes+1), "00-\x00", "00-é"} {
		p := b.busPublishParams("e-bad", "order.paid", at(2*time.Second))
		p.Event.TraceParent = bad
		_, err := b.s.BusPublish(b.ctx, p)
		wantErr(t, fmt.Sprintf("BusPublish with trace %q", bad), err, heraldtype.ErrInvalidArgument)
		_, err = b.s.BusEventGet(b.ctx, &storage.BusEventGetParams{Tenant: b.tenant, ID: "e-bad"})
		wantErr(t, "BusEventGet of the refused event", err, heraldtype.ErrNotFound)
	}
}
