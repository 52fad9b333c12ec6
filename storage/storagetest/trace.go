package storagetest

import (
	"encoding/json"
	"strconv"
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
