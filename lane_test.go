package herald_test

// End-to-end tests of the positional lane's client-side contract
// (docs/events.md; docs/positional.md, rules 6 and 7): signal-with-start, event-id dedup and
// conflicts, termination, wait timeouts, and the fate of events left
// buffered when an instance ends.

import (
	"errors"
	"fmt"
	"reflect"
	"testing"
	"time"

	"github.com/heraldwf/herald"
	"github.com/heraldwf/herald/history"
)

func TestLane_StartIfAbsent(t *testing.T) {
	t.Parallel()
	type out struct {
		Input  string
		Events []string
	}
	b := setupEnv(t, nil, func(rt *herald.Runtime) {
		herald.RegisterWorkflow(rt, "w", func(ctx *herald.Context, in string) (out, error) {
			o := out{Input: in}
			for range 2 {
				var s string
				if err := ctx.WaitEvent("signal").Get(&s); err != nil {
					return o, err
				}
				o.Events = append(o.Events, s)
			}
			return o, nil
		})
	})
	// The instance does not exist: the raise creates it and the event is
	// there when it starts.
	r := b.raise("sw", "signal", "hello", "ev-1", herald.StartIfAbsent("w", "first input"))
	if !r.Started || r.Duplicate {
		t.Fatalf("receipt %+v, want Started", r)
	}
	info, err := b.client.Status(b.ctx, "sw")
	if err != nil || info.Workflow != "w" || string(info.Input) != `"first input"` {
		t.Fatalf("status %+v, %v", info, err)
	}
	b.waitHistory("sw", history.EventSubscribed, "signal", 2)
	evs := b.history("sw", 0)
	if len(evs) < 2 || evs[1].Kind != history.EventRaised || evs[1].EventID != "ev-1" || !evs[1].AtStart {
		t.Fatalf("the event should be buffered at the start of execution 1, history:%s", dumpHistory(evs))
	}
	b.checkFate("ev-1", wantFate{Lane: history.LanePositional, Fate: history.FateDelivered, Execution: 1, Origin: 1, WaitNumber: 1})

	// The instance exists: the same call just raises (its start input is
	// ignored).
	r = b.raise("sw", "signal", "again", "ev-2", herald.StartIfAbsent("w", "second input"))
	if r.Started || r.Duplicate {
		t.Fatalf("receipt %+v, want a plain raise", r)
	}
	var o out
	b.result("sw", &o)
	if !reflect.DeepEqual(o, out{Input: "first input", Events: []string{"hello", "again"}}) {
		t.Fatalf("result %+v", o)
	}
	b.checkFate("ev-2", wantFate{Lane: history.LanePositional, Fate: history.FateDelivered, Execution: 1, Origin: 1, WaitNumber: 2})

	// It does not restart an instance that has ended.
	_, err = b.client.RaiseEvent(b.ctx, "sw", "signal", "late", herald.WithEventID("ev-3"), herald.StartIfAbsent("w", "third"))
	if !errors.Is(err, herald.ErrInstanceNotRunning) {
		t.Fatalf("signal-with-start on a completed instance: %v, want ErrInstanceNotRunning", err)
	}
	if _, err := b.client.EventFate(b.ctx, "ev-3"); !errors.Is(err, herald.ErrNotFound) {
		t.Fatalf("fate of the refused event: %v", err)
	}
	if info, _ := b.client.Status(b.ctx, "sw"); info.Status != herald.StatusCompleted || string(info.Input) != `"first input"` {
		t.Fatalf("status %+v", info)
	}
}

func TestLane_DedupSameEventID(t *testing.T) {
	t.Parallel()
	type out struct {
		First  string
		Winner int
	}
	b := setupEnv(t, nil, func(rt *herald.Runtime) {
		herald.RegisterWorkflow(rt, "w", func(ctx *herald.Context, _ struct{}) (out, error) {
			var o out
			if err := ctx.WaitEvent("signal").Get(&o.First); err != nil {
				return o, err
			}
			// A second signal would win here if the duplicate were delivered.
			o.Winner = ctx.Select(ctx.WaitEvent("signal"), ctx.WaitEvent("done"))
			return o, nil
		})
	})
	b.start("w", "i", nil)
	b.waitHistory("i", history.EventSubscribed, "signal", 1)
	first := b.raise("i", "signal", "first", "dup")
	again := b.resend(history.LanePositional, "i", "signal", "second", "dup") // at once, racing the delivery
	if first.Duplicate || !again.Duplicate || !again.ReceivedAt.Equal(first.ReceivedAt) {
		t.Fatalf("receipts %+v then %+v; want the first receipt back, marked duplicate", first, again)
	}
	b.waitHistory("i", history.EventSubscribed, "signal", 2)
	// Still a duplicate after delivery.
	if r := b.resend(history.LanePositional, "i", "signal", "third", "dup"); !r.Duplicate || !r.ReceivedAt.Equal(first.ReceivedAt) {
		t.Fatalf("receipt after delivery %+v", r)
	}
	b.waitHistory("i", history.EventSubscribed, "done", 1)
	b.raise("i", "done", nil, "ev-done")

	var o out
	b.result("i", &o)
	if o != (out{First: "first", Winner: 1}) {
		t.Fatalf("result %+v: the duplicate was delivered", o)
	}
	evs := b.history("i", 0)
	if got := withID(evs, "dup"); len(got) != 1 || got[0].Kind != history.EventRaised || string(got[0].Payload) != `"first"` {
		t.Fatalf("want one arrival of dup, history:%s", dumpHistory(evs))
	}
	recs, err := b.client.Events(b.ctx, "i")
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, r := range recs {
		if r.EventID == "dup" {
			n++
		}
	}
	if n != 1 || len(recs) != 2 {
		t.Fatalf("ledger %+v: want one record for dup", recs)
	}
	b.checkFate("dup", wantFate{Lane: history.LanePositional, Fate: history.FateDelivered, Execution: 1, Origin: 1, WaitNumber: 1})
}

func TestLane_EventIDConflict(t *testing.T) {
	t.Parallel()
	b := setupEnv(t, nil, func(rt *herald.Runtime) { herald.RegisterWorkflow(rt, "w", plWaitOne) })
	b.start("w", "a", nil)
	b.start("w", "b", nil)
	b.waitHistory("a", history.EventSubscribed, "signal", 1)
	b.waitHistory("b", history.EventSubscribed, "signal", 1)
	b.raise("a", "signal", "for a", "shared")

	for _, tc := range []struct{ instance, name string }{
		{"b", "signal"},     // another instance
		{"a", "other"},      // another name
		{"never", "signal"}, // an instance that does not exist
	} {
		r, err := b.client.RaiseEvent(b.ctx, tc.instance, tc.name, "x", herald.WithEventID("shared"))
		if !errors.Is(err, herald.ErrEventIDConflict) || r != nil {
			t.Fatalf("reuse of the id for %s/%s: %+v, %v; want ErrEventIDConflict", tc.instance, tc.name, r, err)
		}
	}
	for _, id := range []string{"b", "never"} {
		if recs, err := b.client.Events(b.ctx, id); err != nil || len(recs) != 0 {
			t.Fatalf("events of %s: %+v, %v; want none", id, recs, err)
		}
	}
	var out string
	b.result("a", &out)
	if out != "for a" {
		t.Fatalf("a got %q", out)
	}
	rec := b.checkFate("shared", wantFate{Lane: history.LanePositional, Fate: history.FateDelivered, Execution: 1, Origin: 1, WaitNumber: 1})
	if rec.InstanceID != "a" || rec.Name != "signal" {
		t.Fatalf("record %+v", rec)
	}
	if info, _ := b.client.Status(b.ctx, "b"); info.Status != herald.StatusRunning {
		t.Fatalf("b: %+v", info)
	}
	if evs := b.history("b", 0); countKind(evs, history.EventRaised, "") != 0 {
		t.Fatalf("b history:%s", dumpHistory(evs))
	}
}

func TestLane_TerminateDropsBufferedEvents(t *testing.T) {
	t.Parallel()
	b := setupEnv(t, nil, func(rt *herald.Runtime) {
		herald.RegisterWorkflow(rt, "w", func(ctx *herald.Context, _ struct{}) (string, error) {
			return "", ctx.WaitEvent("gate").Get(nil)
		})
	})
	b.start("w", "i", nil)
	b.waitHistory("i", history.EventSubscribed, "gate", 1)
	b.raise("i", "a", 1, "ev-a")
	b.raise("i", "b", 2, "ev-b")
	b.waitHistory("i", history.EventRaised, "b", 1)
	b.checkFate("ev-a", wantFate{Lane: history.LanePositional, Fate: history.FateBuffered, Execution: 1, Origin: 1})

	if err := b.client.Terminate(b.ctx, "i", "operator says stop"); err != nil {
		t.Fatal(err)
	}
	info := b.waitDone("i")
	var we *herald.WorkflowError
	if info.Status != herald.StatusTerminated || !errors.As(info.Err(), &we) || we.Kind != "terminated" || we.Message != "operator says stop" {
		t.Fatalf("info %+v, err %v", info, info.Err())
	}
	evs := b.history("i", 0)
	term := ofKind(evs, history.ExecutionTerminated, "", "")
	if len(term) != 1 {
		t.Fatalf("history:%s", dumpHistory(evs))
	}
	for _, id := range []string{"ev-a", "ev-b"} {
		b.checkFate(id, wantFate{Lane: history.LanePositional, Fate: history.FateDropped, Reason: history.DropInstanceTerminal, Execution: 1, Origin: 1})
		var crumb *history.Event
		for _, ev := range withID(evs, id) {
			if ev.Kind == history.EventDropped {
				crumb = &ev
			}
		}
		if crumb == nil || crumb.Reason != history.DropInstanceTerminal || crumb.Seq < term[0].Seq || crumb.Lane != history.LanePositional {
			t.Fatalf("no instance_terminal breadcrumb for %s after ExecutionTerminated, history:%s", id, dumpHistory(evs))
		}
	}

	// Afterwards: raising is refused and stores nothing; terminating again too.
	if _, err := b.client.RaiseEvent(b.ctx, "i", "gate", nil, herald.WithEventID("ev-late")); !errors.Is(err, herald.ErrInstanceNotRunning) {
		t.Fatalf("raise after terminate: %v, want ErrInstanceNotRunning", err)
	}
	if _, err := b.client.EventFate(b.ctx, "ev-late"); !errors.Is(err, herald.ErrNotFound) {
		t.Fatalf("fate of the refused event: %v", err)
	}
	if err := b.client.Terminate(b.ctx, "i", "again"); !errors.Is(err, herald.ErrInstanceNotRunning) {
		t.Fatalf("terminate twice: %v, want ErrInstanceNotRunning", err)
	}
	if after := b.history("i", 0); !reflect.DeepEqual(after, evs) {
		t.Fatalf("history changed after the end:%s", dumpHistory(after))
	}
	if err := b.rt.ReplayHistory(evs); err != nil {
		t.Fatalf("replay: %v", err)
	}
}

func TestLane_WaitTimeoutThenLateEventDropped(t *testing.T) {
	t.Parallel()
	type out struct {
		TimedOut bool
		Got      string
	}
	b := setupEnv(t, nil, func(rt *herald.Runtime) {
		herald.RegisterWorkflow(rt, "w", func(ctx *herald.Context, _ struct{}) (out, error) {
			var o out
			err := ctx.WaitEvent("approval", herald.WithTimeout(50*time.Millisecond)).Get(&o.Got)
			o.TimedOut = errors.Is(err, herald.ErrEventTimeout)
			if !o.TimedOut {
				return o, fmt.Errorf("want ErrEventTimeout, got %v", err)
			}
			if err := ctx.WaitEvent("go-on").Get(nil); err != nil {
				return o, err
			}
			err = ctx.WaitEvent("approval").Get(&o.Got)
			return o, err
		})
		herald.RegisterWorkflow(rt, "in-time", func(ctx *herald.Context, _ struct{}) (string, error) {
			var s string
			err := ctx.WaitEvent("approval", herald.WithTimeout(time.Hour)).Get(&s)
			return s, err
		})
	})
	b.start("w", "i", nil)
	b.waitHistory("i", history.EventSubscribedCancelled, "approval", 1)
	b.waitHistory("i", history.EventSubscribed, "go-on", 1)
	b.raise("i", "approval", "late", "ev-late")
	b.waitHistory("i", history.EventDropped, "approval", 1)
	b.checkFate("ev-late", wantFate{Lane: history.LanePositional, Fate: history.FateDropped, Reason: history.DropWithdrawnWait, Execution: 1, Origin: 1})
	b.wantWarn("herald: event dropped", "ev-late", "reason=withdrawn_wait")
	b.raise("i", "go-on", nil, "ev-go-on")
	b.waitHistory("i", history.EventSubscribed, "approval", 2)
	b.raise("i", "approval", "fresh", "ev-fresh")

	var o out
	b.result("i", &o)
	if o != (out{TimedOut: true, Got: "fresh"}) {
		t.Fatalf("result %+v", o)
	}
	evs := b.history("i", 0)
	subs := ofKind(evs, history.EventSubscribed, "", "approval")
	cancel := ofKind(evs, history.EventSubscribedCancelled, "", "approval")
	if len(subs) != 2 || len(cancel) != 1 || cancel[0].TaskSeq != subs[0].Seq ||
		countKind(evs, history.TimerCreated, "") != 1 || countKind(evs, history.TimerFired, "") != 1 {
		t.Fatalf("history:%s", dumpHistory(evs))
	}
	b.checkFate("ev-fresh", wantFate{Lane: history.LanePositional, Fate: history.FateDelivered, Execution: 1, Origin: 1, WaitNumber: 2})
	if err := b.rt.ReplayHistory(evs); err != nil {
		t.Fatalf("replay: %v", err)
	}

	// An event before the timeout is delivered and the timer cancelled.
	b.start("in-time", "j", nil)
	b.waitHistory("j", history.EventSubscribed, "approval", 1)
	b.raise("j", "approval", "on time", "ev-on-time")
	var s string
	b.result("j", &s)
	if s != "on time" {
		t.Fatalf("result %q", s)
	}
	evs = b.history("j", 0)
	if countKind(evs, history.TimerCancelled, "") != 1 || countKind(evs, history.EventSubscribedCancelled, "") != 0 {
		t.Fatalf("history:%s", dumpHistory(evs))
	}
}

func TestLane_BufferedEventsDroppedWhenWorkflowCompletes(t *testing.T) {
	t.Parallel()
	b := setupEnv(t, nil, func(rt *herald.Runtime) {
		herald.RegisterWorkflow(rt, "w", func(ctx *herald.Context, _ struct{}) (string, error) {
			return "done", ctx.WaitEvent("gate").Get(nil)
		})
	})
	b.start("w", "i", nil)
	b.waitHistory("i", history.EventSubscribed, "gate", 1)
	b.raise("i", "extra", 1, "ev-extra-1")
	b.raise("i", "extra", 2, "ev-extra-2")
	b.waitHistory("i", history.EventRaised, "extra", 2)
	b.raise("i", "gate", nil, "ev-gate")
	var s string
	b.result("i", &s)

	evs := b.history("i", 0)
	done := ofKind(evs, history.ExecutionCompleted, "", "")
	if len(done) != 1 {
		t.Fatalf("history:%s", dumpHistory(evs))
	}
	for _, id := range []string{"ev-extra-1", "ev-extra-2"} {
		b.checkFate(id, wantFate{Lane: history.LanePositional, Fate: history.FateDropped, Reason: history.DropInstanceTerminal, Execution: 1, Origin: 1})
		var found bool
		for _, ev := range withID(evs, id) {
			found = found || (ev.Kind == history.EventDropped && ev.Reason == history.DropInstanceTerminal && ev.Seq > done[0].Seq)
		}
		if !found {
			t.Fatalf("no instance_terminal breadcrumb for %s, history:%s", id, dumpHistory(evs))
		}
	}
	if err := b.rt.ReplayHistory(evs); err != nil {
		t.Fatalf("replay: %v", err)
	}

	// An event racing the last turn: either refused, or accepted and then
	// dropped; never left pending or buffered.
	for k := range 5 {
		id := fmt.Sprintf("race-%d", k)
		b.start("w", id, nil)
		b.waitHistory(id, history.EventSubscribed, "gate", 1)
		b.raise(id, "gate", nil, id+"-gate")
		_, err := b.client.RaiseEvent(b.ctx, id, "extra", "x", herald.WithEventID(id+"-extra"))
		b.waitDone(id)
		switch {
		case errors.Is(err, herald.ErrInstanceNotRunning):
			if _, err := b.client.EventFate(b.ctx, id+"-extra"); !errors.Is(err, herald.ErrNotFound) {
				t.Fatalf("%s: refused event has a fate: %v", id, err)
			}
		case err != nil:
			t.Fatal(err)
		default:
			rec := b.fate(id + "-extra")
			if rec.Fate != history.FateDropped || rec.Reason != history.DropInstanceTerminal {
				t.Fatalf("%s: accepted event racing the end: %+v, want dropped/instance_terminal", id, rec)
			}
			if got := withID(b.history(id, 0), id+"-extra"); len(got) == 0 || got[len(got)-1].Kind != history.EventDropped {
				t.Fatalf("%s: no breadcrumb for the raced event: %+v", id, got)
			}
		}
	}
}

func TestLane_ContinueAsNewDropUnconsumedEvents(t *testing.T) {
	t.Parallel()
	b := setupEnv(t, nil, func(rt *herald.Runtime) {
		herald.RegisterWorkflow(rt, "w", func(ctx *herald.Context, _ struct{}) (string, error) {
			if err := ctx.WaitEvent("go").Get(nil); err != nil {
				return "", err
			}
			if ctx.Execution() == 1 {
				return "", ctx.ContinueAsNew(nil, herald.DropUnconsumedEvents())
			}
			return "done", nil
		})
	})
	b.start("w", "i", nil)
	b.waitHistory("i", history.EventSubscribed, "go", 1)
	b.raise("i", "signal", "data", "ev-signal")
	b.waitHistory("i", history.EventRaised, "signal", 1)
	b.raise("i", "go", nil, "ev-go-1")
	b.waitExec("i", 2, history.EventSubscribed, "", "go", 1)

	ex2 := b.history("i", 2)
	if len(ex2) < 2 || ex2[1].Kind != history.EventDropped || ex2[1].EventID != "ev-signal" ||
		ex2[1].Reason != history.DropNotCarriedForward || ex2[1].OriginExecution != 1 || countKind(ex2, history.EventRaised, "") != 0 {
		t.Fatalf("execution 2 history:%s", dumpHistory(ex2))
	}
	b.checkFate("ev-signal", wantFate{Lane: history.LanePositional, Fate: history.FateDropped, Reason: history.DropNotCarriedForward, Execution: 2, Origin: 1})
	b.wantWarn("herald: event dropped", "ev-signal", "not_carried_forward")
	b.raise("i", "go", nil, "ev-go-2")
	var s string
	b.result("i", &s)
}

func TestLane_NewWaitClearsWithdrawnQuestion(t *testing.T) {
	t.Parallel()
	b := setupEnv(t, nil, func(rt *herald.Runtime) {
		herald.RegisterWorkflow(rt, "w", func(ctx *herald.Context, _ struct{}) ([]string, error) {
			ctx.Select(ctx.WaitEvent("X"), ctx.Timer(50*time.Millisecond)) // the timer wins: wait 1 withdrawn
			var second, third string
			if err := ctx.WaitEvent("X").Get(&second); err != nil { // wait 2 clears the withdrawn question
				return nil, err
			}
			if err := ctx.WaitEvent("gate").Get(nil); err != nil {
				return nil, err
			}
			err := ctx.WaitEvent("X").Get(&third)
			return []string{second, third}, err
		})
	})
	b.start("w", "i", nil)
	b.waitHistory("i", history.EventSubscribed, "X", 2)
	b.raise("i", "X", "two", "ev-two")
	b.waitHistory("i", history.EventSubscribed, "gate", 1)
	// No wait for X is active, but no question is withdrawn either: buffered.
	b.raise("i", "X", "three", "ev-three")
	b.waitHistory("i", history.EventRaised, "X", 2)
	b.checkFate("ev-three", wantFate{Lane: history.LanePositional, Fate: history.FateBuffered, Execution: 1, Origin: 1})
	b.raise("i", "gate", nil, "ev-gate")

	var out []string
	b.result("i", &out)
	if !reflect.DeepEqual(out, []string{"two", "three"}) {
		t.Fatalf("result %q", out)
	}
	b.checkFate("ev-two", wantFate{Lane: history.LanePositional, Fate: history.FateDelivered, Execution: 1, Origin: 1, WaitNumber: 2})
	b.checkFate("ev-three", wantFate{Lane: history.LanePositional, Fate: history.FateDelivered, Execution: 1, Origin: 1, WaitNumber: 3})
	if evs := b.history("i", 0); countKind(evs, history.EventDropped, "") != 0 {
		t.Fatalf("history:%s", dumpHistory(evs))
	}
}
