package herald_test

// End-to-end tests of the positional event lane (docs/positional.md),
// following the test plan of seed 000 (tests 1.1–6.2; each test names its
// number), with Herald's decisions against that seed applied
// (docs/decisions.md: a raise to a completed instance is refused and nothing
// is stored; counting is 1:1).

import (
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/heraldwf/herald"
	"github.com/heraldwf/herald/history"
)

// plWaitOne is a workflow that waits for one event "signal" and returns its
// string payload.
func plWaitOne(ctx *herald.Context, _ struct{}) (string, error) {
	var s string
	err := ctx.WaitEvent("signal").Get(&s)
	return s, err
}

// ---- 1. Pairing in order (docs/positional.md, rules 1 and 2) ----

// From seed 000's test plan, test 1.1.
func TestPositional_RaiseBeforeWait(t *testing.T) {
	t.Parallel()
	b := setupEnv(t, nil, func(rt *herald.Runtime) {
		// The workflow runs but does not wait for "approval" until "go".
		herald.RegisterWorkflow(rt, "w", func(ctx *herald.Context, _ struct{}) (string, error) {
			if err := ctx.WaitEvent("go").Get(nil); err != nil {
				return "", err
			}
			var s string
			err := ctx.WaitEvent("approval").Get(&s)
			return s, err
		})
	})
	b.start("w", "i", nil)
	b.waitHistory("i", history.EventSubscribed, "go", 1)
	b.raise("i", "approval", "yes", "ev-approval")
	b.waitHistory("i", history.EventRaised, "approval", 1)
	b.checkFate("ev-approval", wantFate{Lane: history.LanePositional, Fate: history.FateBuffered, Execution: 1, Origin: 1})
	if evs := b.history("i", 0); countKind(evs, history.EventSubscribed, "approval") != 0 {
		t.Fatalf("no wait for approval yet, history:%s", dumpHistory(evs))
	}
	b.raise("i", "go", nil, "ev-go")

	var out string
	b.result("i", &out)
	if out != "yes" {
		t.Fatalf("result %q, want yes", out)
	}
	evs := b.history("i", 0)
	raised := ofKind(evs, history.EventRaised, "", "approval")
	subs := ofKind(evs, history.EventSubscribed, "", "approval")
	if len(raised) != 1 || len(subs) != 1 {
		t.Fatalf("want one EventRaised and one EventSubscribed for approval, history:%s", dumpHistory(evs))
	}
	// Buffered: raised with no wait (TaskSeq 0), before the wait; the wait
	// took it at once and names it.
	if r, s := raised[0], subs[0]; r.TaskSeq != 0 || r.AtStart || r.EventID != "ev-approval" || string(r.Payload) != `"yes"` ||
		s.Seq <= r.Seq || s.EventID != "ev-approval" || s.WaitNumber != 1 {
		t.Fatalf("raise-before-wait recorded wrongly, history:%s", dumpHistory(evs))
	}
	// Received in the same turn it asked: the completion immediately follows
	// the subscription, no other input in between.
	if last := evs[len(evs)-1]; last.Kind != history.ExecutionCompleted || last.Seq != subs[0].Seq+1 {
		t.Fatalf("wait did not return at once, history:%s", dumpHistory(evs))
	}
	b.checkFate("ev-approval", wantFate{Lane: history.LanePositional, Fate: history.FateDelivered, Execution: 1, Origin: 1, WaitNumber: 1})
}

// From seed 000's test plan, test 1.2.
func TestPositional_RaiseAfterWait(t *testing.T) {
	t.Parallel()
	b := setupEnv(t, nil, func(rt *herald.Runtime) {
		herald.RegisterWorkflow(rt, "w", func(ctx *herald.Context, _ struct{}) (string, error) {
			var s string
			err := ctx.WaitEvent("approval").Get(&s)
			return s, err
		})
	})
	b.start("w", "i", nil)
	b.waitHistory("i", history.EventSubscribed, "approval", 1)
	b.raise("i", "approval", "yes", "ev-approval")

	var out string
	b.result("i", &out)
	if out != "yes" {
		t.Fatalf("result %q, want yes", out)
	}
	evs := b.history("i", 0)
	subs := ofKind(evs, history.EventSubscribed, "", "approval")
	raised := ofKind(evs, history.EventRaised, "", "approval")
	if len(subs) != 1 || len(raised) != 1 {
		t.Fatalf("history:%s", dumpHistory(evs))
	}
	// Delivered to the waiting subscription: the arrival names it.
	if s, r := subs[0], raised[0]; s.EventID != "" || r.TaskSeq != s.Seq || r.WaitNumber != 1 || r.EventID != "ev-approval" ||
		r.AtStart || r.Seq <= s.Seq {
		t.Fatalf("raise-after-wait recorded wrongly, history:%s", dumpHistory(evs))
	}
	b.checkFate("ev-approval", wantFate{Lane: history.LanePositional, Fate: history.FateDelivered, Execution: 1, Origin: 1, WaitNumber: 1})
}

// From seed 000's test plan, test 1.3.
func TestPositional_MultipleEventsSameName(t *testing.T) {
	t.Parallel()
	b := setupEnv(t, nil, func(rt *herald.Runtime) {
		herald.RegisterWorkflow(rt, "w", func(ctx *herald.Context, _ struct{}) ([]string, error) {
			var first, second string
			if err := ctx.WaitEvent("data").Get(&first); err != nil {
				return nil, err
			}
			if err := ctx.WaitEvent("data").Get(&second); err != nil {
				return nil, err
			}
			return []string{first, second}, nil
		})
	})
	// Given: the orchestration is not started.
	b.raise("i", "data", "first", "ev-1")
	b.raise("i", "data", "second", "ev-2")
	b.checkFate("ev-1", wantFate{Lane: history.LanePositional, Fate: history.FatePending})
	b.start("w", "i", nil)

	var out []string
	b.result("i", &out)
	if !reflect.DeepEqual(out, []string{"first", "second"}) {
		t.Fatalf("result %q, want [first second]", out)
	}
	evs := b.history("i", 0)
	raised := ofKind(evs, history.EventRaised, "", "data")
	subs := ofKind(evs, history.EventSubscribed, "", "data")
	if len(raised) != 2 || len(subs) != 2 {
		t.Fatalf("history:%s", dumpHistory(evs))
	}
	for i, want := range []string{"ev-1", "ev-2"} {
		if raised[i].EventID != want || !raised[i].AtStart || raised[i].TaskSeq != 0 {
			t.Errorf("arrival %d: %+v, want %s buffered at start", i, raised[i], want)
		}
		if subs[i].EventID != want || subs[i].WaitNumber != i+1 {
			t.Errorf("wait %d took %q (wait number %d), want %s", i+1, subs[i].EventID, subs[i].WaitNumber, want)
		}
	}
	b.checkFate("ev-1", wantFate{Lane: history.LanePositional, Fate: history.FateDelivered, Execution: 1, Origin: 1, WaitNumber: 1})
	b.checkFate("ev-2", wantFate{Lane: history.LanePositional, Fate: history.FateDelivered, Execution: 1, Origin: 1, WaitNumber: 2})
}

// From seed 000's test plan, test 1.4.
func TestPositional_DifferentNames(t *testing.T) {
	t.Parallel()
	b := setupEnv(t, nil, func(rt *herald.Runtime) {
		herald.RegisterWorkflow(rt, "w", func(ctx *herald.Context, _ struct{}) ([]string, error) {
			var bv, av string
			if err := ctx.WaitEvent("event_b").Get(&bv); err != nil {
				return nil, err
			}
			// event_a was not disturbed by the wait for event_b.
			if err := ctx.WaitEvent("event_a").Get(&av); err != nil {
				return nil, err
			}
			return []string{bv, av}, nil
		})
	})
	b.raise("i", "event_a", "data_a", "ev-a")
	b.raise("i", "event_b", "data_b", "ev-b")
	b.start("w", "i", nil)

	var out []string
	b.result("i", &out)
	if !reflect.DeepEqual(out, []string{"data_b", "data_a"}) {
		t.Fatalf("result %q, want [data_b data_a]", out)
	}
	evs := b.history("i", 0)
	if s := ofKind(evs, history.EventSubscribed, "", "event_b"); len(s) != 1 || s[0].EventID != "ev-b" || s[0].WaitNumber != 1 {
		t.Fatalf("wait for event_b took the wrong event, history:%s", dumpHistory(evs))
	}
	if s := ofKind(evs, history.EventSubscribed, "", "event_a"); len(s) != 1 || s[0].EventID != "ev-a" || s[0].WaitNumber != 1 {
		t.Fatalf("wait for event_a took the wrong event, history:%s", dumpHistory(evs))
	}
	b.checkFate("ev-a", wantFate{Lane: history.LanePositional, Fate: history.FateDelivered, Execution: 1, Origin: 1, WaitNumber: 1})
	b.checkFate("ev-b", wantFate{Lane: history.LanePositional, Fate: history.FateDelivered, Execution: 1, Origin: 1, WaitNumber: 1})

	// Case-sensitive names: "Event_B" is another name and does not reach a
	// wait for "event_b".
	b2 := setupEnv(t, nil, func(rt *herald.Runtime) {
		herald.RegisterWorkflow(rt, "w", func(ctx *herald.Context, _ struct{}) (string, error) {
			var s string
			err := ctx.WaitEvent("event_b").Get(&s)
			return s, err
		})
	})
	b2.raise("j", "Event_B", "wrong case", "ev-B")
	b2.raise("j", "event_b", "right case", "ev-b")
	b2.start("w", "j", nil)
	var s string
	b2.result("j", &s)
	if s != "right case" {
		t.Fatalf("case-sensitive names: got %q", s)
	}
	b2.checkFate("ev-B", wantFate{Lane: history.LanePositional, Fate: history.FateDropped, Reason: history.DropInstanceTerminal, Execution: 1, Origin: 1})
}

// ---- 2. Continue-as-new carry forward (rule 5) ----

// carryIn drives plCarry: execution 1 waits for "go" (events raised then are
// buffered) and continues as new; executions 2 … WaitAt-1 continue as new at
// once; execution WaitAt waits for "signal" and returns its payload.
type carryIn struct{ WaitAt int }

func plCarry(ctx *herald.Context, in carryIn) (string, error) {
	switch {
	case ctx.Execution() == 1:
		if err := ctx.WaitEvent("go").Get(nil); err != nil {
			return "", err
		}
		return "", ctx.ContinueAsNew(in)
	case ctx.Execution() < in.WaitAt:
		return "", ctx.ContinueAsNew(in)
	}
	var s string
	err := ctx.WaitEvent("signal").Get(&s)
	return s, err
}

// plCarryStart starts plCarry, raises "signal" while execution 1 waits for
// "go", then releases it.
func plCarryStart(t *testing.T, waitAt int) *bundle {
	t.Helper()
	b := setupEnv(t, nil, func(rt *herald.Runtime) { herald.RegisterWorkflow(rt, "carry", plCarry) })
	b.start("carry", "i", carryIn{WaitAt: waitAt})
	b.waitHistory("i", history.EventSubscribed, "go", 1)
	b.raise("i", "signal", "payload", "ev-signal")
	b.waitHistory("i", history.EventRaised, "signal", 1)
	b.checkFate("ev-signal", wantFate{Lane: history.LanePositional, Fate: history.FateBuffered, Execution: 1, Origin: 1})
	b.raise("i", "go", nil, "ev-go")
	return b
}

// plCheckCarried checks that execution exec starts with the carried signal,
// right after ExecutionStarted, keeping execution 1 as its origin.
func plCheckCarried(b *bundle, exec int) {
	b.t.Helper()
	evs := b.history("i", exec)
	if len(evs) < 2 || evs[0].Kind != history.ExecutionStarted || evs[0].Execution != exec {
		b.t.Fatalf("execution %d history:%s", exec, dumpHistory(evs))
	}
	c := evs[1]
	if c.Kind != history.EventRaised || c.Name != "signal" || c.EventID != "ev-signal" || !c.AtStart ||
		c.OriginExecution != 1 || c.TaskSeq != 0 || string(c.Payload) != `"payload"` {
		b.t.Fatalf("execution %d does not start with the carried signal, history:%s", exec, dumpHistory(evs))
	}
}

// From seed 000's test plan, test 2.1.
func TestPositional_CarryForward(t *testing.T) {
	t.Parallel()
	b := plCarryStart(t, 2)
	var out string
	info := b.result("i", &out)
	if out != "payload" || info.Execution != 2 {
		t.Fatalf("result %q in execution %d, want payload in 2", out, info.Execution)
	}
	plCheckCarried(b, 2)
	ex1 := b.history("i", 1)
	if last := ex1[len(ex1)-1]; last.Kind != history.ExecutionContinuedAsNew {
		t.Fatalf("execution 1 history:%s", dumpHistory(ex1))
	}
	if s := ofKind(ex1, history.EventSubscribed, "", "signal"); len(s) != 0 {
		t.Fatalf("execution 1 never waited for signal, history:%s", dumpHistory(ex1))
	}
	ex2 := b.history("i", 2)
	if s := ofKind(ex2, history.EventSubscribed, "", "signal"); len(s) != 1 || s[0].EventID != "ev-signal" || s[0].WaitNumber != 1 {
		t.Fatalf("execution 2 history:%s", dumpHistory(ex2))
	}
	b.checkFate("ev-signal", wantFate{Lane: history.LanePositional, Fate: history.FateDelivered, Execution: 2, Origin: 1, WaitNumber: 1})
}

// From seed 000's test plan, test 2.2.
func TestPositional_ConsumedEventNotCarriedForward(t *testing.T) {
	t.Parallel()
	b := setupEnv(t, nil, func(rt *herald.Runtime) {
		herald.RegisterWorkflow(rt, "w", func(ctx *herald.Context, _ struct{}) (string, error) {
			var s string
			if err := ctx.WaitEvent("signal").Get(&s); err != nil {
				return "", err
			}
			if ctx.Execution() == 1 {
				return "", ctx.ContinueAsNew(nil)
			}
			return s, nil
		})
	})
	b.start("w", "i", nil)
	b.waitHistory("i", history.EventSubscribed, "signal", 1)
	b.raise("i", "signal", "data", "ev-data")
	b.waitExec("i", 2, history.EventSubscribed, "", "signal", 1)

	// Execution 2 waits: nothing was carried.
	ex2 := b.history("i", 2)
	if len(ex2) != 2 || ex2[1].Kind != history.EventSubscribed || ex2[1].EventID != "" {
		t.Fatalf("execution 2 should be waiting with nothing carried, history:%s", dumpHistory(ex2))
	}
	if info, err := b.client.Status(b.ctx, "i"); err != nil || info.Status != herald.StatusRunning || info.Execution != 2 {
		t.Fatalf("status %+v, %v; want running in execution 2", info, err)
	}
	b.checkFate("ev-data", wantFate{Lane: history.LanePositional, Fate: history.FateDelivered, Execution: 1, Origin: 1, WaitNumber: 1})

	b.raise("i", "signal", "fresh", "ev-fresh")
	var out string
	b.result("i", &out)
	if out != "fresh" {
		t.Fatalf("execution 2 got %q, want fresh (a consumed event must not be carried)", out)
	}
	b.checkFate("ev-fresh", wantFate{Lane: history.LanePositional, Fate: history.FateDelivered, Execution: 2, Origin: 2, WaitNumber: 1})
}

// From seed 000's test plan, test 2.3.
func TestPositional_CarryForwardAcrossExecutions(t *testing.T) {
	t.Parallel()
	b := plCarryStart(t, 4)
	var out string
	info := b.result("i", &out)
	if out != "payload" || info.Execution != 4 {
		t.Fatalf("result %q in execution %d, want payload in 4", out, info.Execution)
	}
	for exec := 2; exec <= 4; exec++ {
		plCheckCarried(b, exec)
	}
	b.checkFate("ev-signal", wantFate{Lane: history.LanePositional, Fate: history.FateDelivered, Execution: 4, Origin: 1, WaitNumber: 1})
}

// From seed 000's test plan, test 2.4.
func TestPositional_CarryForwardLimitReached(t *testing.T) {
	t.Parallel()
	b := plCarryStart(t, 7)
	b.waitExec("i", 7, history.EventSubscribed, "", "signal", 1)

	// Carried to executions 2 … 6 (age 1 … 5), dropped on the way to 7 (age 6).
	for exec := 2; exec <= 6; exec++ {
		plCheckCarried(b, exec)
	}
	ex7 := b.history("i", 7)
	drops := ofKind(ex7, history.EventDropped, "", "signal")
	if len(drops) != 1 || ex7[1].Kind != history.EventDropped {
		t.Fatalf("execution 7 should start with the drop breadcrumb, history:%s", dumpHistory(ex7))
	}
	if d := drops[0]; d.EventID != "ev-signal" || d.Reason != history.DropCarryForwardLimit || d.OriginExecution != 1 || !d.AtStart {
		t.Fatalf("breadcrumb %+v", d)
	}
	if n := countKind(ex7, history.EventRaised, "signal"); n != 0 {
		t.Fatalf("the dropped event reached execution 7, history:%s", dumpHistory(ex7))
	}
	b.checkFate("ev-signal", wantFate{Lane: history.LanePositional, Fate: history.FateDropped, Reason: history.DropCarryForwardLimit, Execution: 7, Origin: 1})
	b.wantWarn("herald: event dropped", "ev-signal", "carry_forward_limit")

	// "Waits forever": still running, its wait unanswered.
	info, err := b.client.Status(b.ctx, "i")
	if err != nil || info.Status != herald.StatusRunning || info.Execution != 7 {
		t.Fatalf("status %+v, %v; want running in execution 7", info, err)
	}
	if s := ofKind(ex7, history.EventSubscribed, "", "signal"); len(s) != 1 || s[0].EventID != "" {
		t.Fatalf("execution 7's wait should be unanswered, history:%s", dumpHistory(ex7))
	}
	// A fresh event lets it finish.
	b.raise("i", "signal", "fresh", "ev-fresh")
	var out string
	b.result("i", &out)
	if out != "fresh" {
		t.Fatalf("result %q, want fresh", out)
	}
	b.checkFate("ev-fresh", wantFate{Lane: history.LanePositional, Fate: history.FateDelivered, Execution: 7, Origin: 7, WaitNumber: 1})
	for exec := 1; exec <= 7; exec++ {
		if err := b.rt.ReplayHistory(b.history("i", exec)); err != nil {
			t.Errorf("replay of execution %d: %v", exec, err)
		}
	}
}

// From seed 000's test plan, test 2.5.
func TestPositional_CarryForwardLimitBoundary(t *testing.T) {
	t.Parallel()
	b := plCarryStart(t, 6)
	var out string
	info := b.result("i", &out)
	if out != "payload" || info.Execution != 6 {
		t.Fatalf("result %q in execution %d, want payload in 6 (age 5 is within the limit)", out, info.Execution)
	}
	for exec := 2; exec <= 6; exec++ {
		plCheckCarried(b, exec)
	}
	b.checkFate("ev-signal", wantFate{Lane: history.LanePositional, Fate: history.FateDelivered, Execution: 6, Origin: 1, WaitNumber: 1})
	if w := b.logs.warnings(); len(w) != 0 {
		t.Errorf("unexpected warnings: %q", w)
	}
}

// ---- 3. Per-instance limit (rule 4; default MaxUnconsumedEvents: 100) ----

// pileIn drives plPile: wait for "consume", then one event of each name in
// Consume (in order), then "finish"; return the payloads taken.
type pileIn struct{ Consume []string }

func plPile(ctx *herald.Context, in pileIn) ([]string, error) {
	if err := ctx.WaitEvent("consume").Get(nil); err != nil {
		return nil, err
	}
	got := []string{}
	for _, name := range in.Consume {
		var s string
		if err := ctx.WaitEvent(name).Get(&s); err != nil {
			return nil, err
		}
		got = append(got, s)
	}
	if err := ctx.WaitEvent("finish").Get(nil); err != nil {
		return nil, err
	}
	return got, nil
}

func plNames(prefix string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("%s%03d", prefix, i)
	}
	return out
}

// plPileUp starts plPile and buffers one event per name while it waits for
// "consume" (name "e007": event id "ev-e007", payload "d-e007").
func plPileUp(t *testing.T, consume []string, names []string) *bundle {
	t.Helper()
	b := setupEnv(t, nil, func(rt *herald.Runtime) { herald.RegisterWorkflow(rt, "pile", plPile) })
	b.start("pile", "i", pileIn{Consume: consume})
	b.waitHistory("i", history.EventSubscribed, "consume", 1)
	evs := make([]sentEvent, len(names))
	for i, n := range names {
		evs[i] = sentEvent{Name: n, Payload: "d-" + n, ID: "ev-" + n}
	}
	b.raiseMany("i", evs)
	b.waitFor(fmt.Sprintf("%d buffered events", len(names)), func() bool {
		evs, err := b.client.History(b.ctx, "i", 0)
		return err == nil && countPrefix(evs, history.EventRaised, "e") >= len(names)
	})
	return b
}

// From seed 000's test plan, test 3.1.
func TestPositional_UnderLimit(t *testing.T) {
	t.Parallel()
	names := plNames("e", 50)
	b := plPileUp(t, names, names)

	evs := b.history("i", 0)
	raised := ofKind(evs, history.EventRaised, "", "")
	if len(raised) != 50 || countKind(evs, history.EventDropped, "") != 0 {
		t.Fatalf("want all 50 events persisted and none dropped, history:%s", dumpHistory(evs))
	}
	seen := map[string]bool{}
	for _, ev := range raised {
		if !strings.HasPrefix(ev.Name, "e") || ev.EventID != "ev-"+ev.Name || string(ev.Payload) != `"d-`+ev.Name+`"` || ev.TaskSeq != 0 || seen[ev.Name] {
			t.Fatalf("arrival %+v", ev)
		}
		seen[ev.Name] = true
		b.checkFate(ev.EventID, wantFate{Lane: history.LanePositional, Fate: history.FateBuffered, Execution: 1, Origin: 1})
	}

	b.raise("i", "consume", nil, "ev-consume")
	b.waitHistory("i", history.EventSubscribed, "finish", 1)
	b.raise("i", "finish", nil, "ev-finish")
	var out []string
	b.result("i", &out)
	if len(out) != 50 || out[0] != "d-e000" || out[49] != "d-e049" {
		t.Fatalf("result %q", out)
	}
	for _, n := range names {
		b.checkFate("ev-"+n, wantFate{Lane: history.LanePositional, Fate: history.FateDelivered, Execution: 1, Origin: 1, WaitNumber: 1})
	}
	if w := b.logs.warnings(); len(w) != 0 {
		t.Errorf("unexpected warnings: %q", w)
	}
}

// From seed 000's test plan, test 3.2.
func TestPositional_AtLimitNewEventDropped(t *testing.T) {
	t.Parallel()
	b := plPileUp(t, nil, plNames("e", 100))

	b.raise("i", "new_event", "data", "ev-new")
	b.waitHistory("i", history.EventDropped, "new_event", 1)
	evs := b.history("i", 0)
	if n := countKind(evs, history.EventRaised, "new_event"); n != 0 {
		t.Fatalf("the event over the limit is in history as raised, history:%s", dumpHistory(evs))
	}
	d := ofKind(evs, history.EventDropped, "", "new_event")[0]
	if d.EventID != "ev-new" || d.Reason != history.DropLimit || d.Lane != history.LanePositional || d.OriginExecution != 1 {
		t.Fatalf("breadcrumb %+v", d)
	}
	b.checkFate("ev-new", wantFate{Lane: history.LanePositional, Fate: history.FateDropped, Reason: history.DropLimit, Execution: 1, Origin: 1})
	b.wantWarn("herald: event dropped", "ev-new", "reason=limit")
	if got := b.obs.droppedBy("limit"); got != 1 {
		t.Errorf("limit drops counted %d, want 1", got)
	}
	// The 100 buffered ones are untouched.
	b.checkFate("ev-e000", wantFate{Lane: history.LanePositional, Fate: history.FateBuffered, Execution: 1, Origin: 1})
	b.checkFate("ev-e099", wantFate{Lane: history.LanePositional, Fate: history.FateBuffered, Execution: 1, Origin: 1})

	// The limit caps buffered events only: an event that meets an active
	// wait is delivered even at the limit.
	b.raise("i", "consume", nil, "ev-consume")
	b.waitHistory("i", history.EventSubscribed, "finish", 1)
	b.checkFate("ev-consume", wantFate{Lane: history.LanePositional, Fate: history.FateDelivered, Execution: 1, Origin: 1, WaitNumber: 1})
	b.raise("i", "finish", nil, "ev-finish")
	var out []string
	b.result("i", &out)
	if err := b.rt.ReplayHistory(b.history("i", 0)); err != nil {
		t.Fatalf("replay: %v", err)
	}
}

// From seed 000's test plan, test 3.3.
func TestPositional_ConsumedEventsFreeRoom(t *testing.T) {
	t.Parallel()
	names := plNames("e", 100)
	b := plPileUp(t, names[:10], names)

	// At the limit: the next event is dropped.
	b.raise("i", "n-over", "x", "ev-over-1")
	b.waitHistory("i", history.EventDropped, "n-over", 1)
	b.checkFate("ev-over-1", wantFate{Lane: history.LanePositional, Fate: history.FateDropped, Reason: history.DropLimit, Execution: 1, Origin: 1})

	// Consume 10 of them: room for exactly 10 more.
	b.raise("i", "consume", nil, "ev-consume")
	b.waitHistory("i", history.EventSubscribed, "finish", 1)
	for _, n := range names[:10] {
		b.checkFate("ev-"+n, wantFate{Lane: history.LanePositional, Fate: history.FateDelivered, Execution: 1, Origin: 1, WaitNumber: 1})
	}
	fresh := plNames("n", 10)
	freshEvs := make([]sentEvent, len(fresh))
	for i, n := range fresh {
		freshEvs[i] = sentEvent{Name: n, Payload: "x", ID: "ev-" + n}
	}
	b.raiseMany("i", freshEvs)
	b.waitFor("10 fresh events buffered", func() bool {
		evs, err := b.client.History(b.ctx, "i", 0)
		return err == nil && countPrefix(evs, history.EventRaised, "n") >= 10
	})
	for _, n := range fresh {
		b.checkFate("ev-"+n, wantFate{Lane: history.LanePositional, Fate: history.FateBuffered, Execution: 1, Origin: 1})
	}
	b.raise("i", "n-over", "x", "ev-over-2")
	b.waitHistory("i", history.EventDropped, "n-over", 2)
	b.checkFate("ev-over-2", wantFate{Lane: history.LanePositional, Fate: history.FateDropped, Reason: history.DropLimit, Execution: 1, Origin: 1})
	if evs := b.history("i", 0); countKind(evs, history.EventDropped, "") != 2 {
		t.Fatalf("want exactly two drops, history:%s", dumpHistory(evs))
	}

	b.raise("i", "finish", nil, "ev-finish")
	var out []string
	b.result("i", &out)
	want := make([]string, 10)
	for i, n := range names[:10] {
		want[i] = "d-" + n
	}
	if !reflect.DeepEqual(out, want) {
		t.Fatalf("result %q, want %q", out, want)
	}
}

// From seed 000's test plan, test 3.4.
func TestPositional_MixedConsumedUnconsumed(t *testing.T) {
	t.Parallel()
	b := setupEnv(t, nil, func(rt *herald.Runtime) {
		herald.RegisterWorkflow(rt, "w", func(ctx *herald.Context, _ struct{}) ([]int, error) {
			got := []int{}
			for range 50 {
				var v int
				if err := ctx.WaitEvent("c").Get(&v); err != nil {
					return nil, err
				}
				got = append(got, v)
			}
			return got, ctx.WaitEvent("finish").Get(nil)
		})
	})
	b.start("w", "i", nil)
	// 50 consumed events (raised concurrently while the workflow takes them:
	// some meet a wait, some are buffered for a moment and taken by the next
	// wait).
	consumed := make([]sentEvent, 50)
	for i := range consumed {
		consumed[i] = sentEvent{Name: "c", Payload: i, ID: fmt.Sprintf("ev-c%02d", i)}
	}
	b.raiseMany("i", consumed)
	b.waitHistory("i", history.EventSubscribed, "finish", 1)
	// 50 unconsumed events.
	unconsumed := make([]sentEvent, 50)
	for i := range unconsumed {
		unconsumed[i] = sentEvent{Name: "u", Payload: i, ID: fmt.Sprintf("ev-u%02d", i)}
	}
	b.raiseMany("i", unconsumed)
	b.waitHistory("i", history.EventRaised, "u", 50)
	// 100 events so far, 50 unconsumed: the next one is kept.
	b.raise("i", "new", "data", "ev-new")
	b.waitHistory("i", history.EventRaised, "new", 1)
	b.checkFate("ev-new", wantFate{Lane: history.LanePositional, Fate: history.FateBuffered, Execution: 1, Origin: 1})
	evs := b.history("i", 0)
	if n := countKind(evs, history.EventDropped, ""); n != 0 {
		t.Fatalf("%d events dropped, want none; history:%s", n, dumpHistory(evs))
	}
	for i := range 50 {
		b.checkFate(fmt.Sprintf("ev-u%02d", i), wantFate{Lane: history.LanePositional, Fate: history.FateBuffered, Execution: 1, Origin: 1})
	}

	b.raise("i", "finish", nil, "ev-finish")
	var out []int
	b.result("i", &out)
	if len(out) != 50 {
		t.Fatalf("result %v", out)
	}
	// Every c event was consumed exactly once, by the wait its fate names.
	seen := map[int]bool{}
	for i, v := range out {
		if seen[v] || v < 0 || v >= 50 {
			t.Fatalf("result %v", out)
		}
		seen[v] = true
		b.checkFate(fmt.Sprintf("ev-c%02d", v), wantFate{Lane: history.LanePositional, Fate: history.FateDelivered, Execution: 1, Origin: 1, WaitNumber: i + 1})
	}
}

// ---- 4. Edge cases (rules 6 and 7; docs/events.md, Payloads) ----

// From seed 000's test plan, test 4.1.
func TestPositional_RaiseBeforeInstanceExists(t *testing.T) {
	t.Parallel()
	b := setupEnv(t, nil, func(rt *herald.Runtime) { herald.RegisterWorkflow(rt, "ProcessOrder", plWaitOne) })
	r := b.raise("order-123", "signal", "data", "ev-early")
	if r.Started || r.Duplicate {
		t.Fatalf("receipt %+v", r)
	}
	b.checkFate("ev-early", wantFate{Lane: history.LanePositional, Fate: history.FatePending})
	if _, err := b.client.Status(b.ctx, "order-123"); !errors.Is(err, herald.ErrNotFound) {
		t.Fatalf("a raise must not create the instance: %v", err)
	}
	recs, err := b.client.Events(b.ctx, "order-123")
	if err != nil || len(recs) != 1 || recs[0].EventID != "ev-early" || recs[0].Name != "signal" {
		t.Fatalf("events of order-123: %+v, %v", recs, err)
	}

	b.start("ProcessOrder", "order-123", struct{}{})
	var out string
	b.result("order-123", &out)
	if out != "data" {
		t.Fatalf("result %q, want data", out)
	}
	evs := b.history("order-123", 0)
	if len(evs) < 2 || evs[1].Kind != history.EventRaised || !evs[1].AtStart || evs[1].EventID != "ev-early" || evs[1].OriginExecution != 1 {
		t.Fatalf("the early event should be buffered at the start of execution 1, history:%s", dumpHistory(evs))
	}
	b.checkFate("ev-early", wantFate{Lane: history.LanePositional, Fate: history.FateDelivered, Execution: 1, Origin: 1, WaitNumber: 1})
}

// From seed 000's test plan, test 4.2.
func TestPositional_RaiseToCompletedInstanceRefused(t *testing.T) {
	t.Parallel()
	b := setupEnv(t, nil, func(rt *herald.Runtime) {
		herald.RegisterWorkflow(rt, "done", func(ctx *herald.Context, _ struct{}) (string, error) { return "ok", nil })
		herald.RegisterWorkflow(rt, "fails", func(ctx *herald.Context, _ struct{}) (string, error) {
			return "", errors.New("boom")
		})
	})
	for _, tc := range []struct {
		workflow string
		status   herald.Status
	}{{"done", herald.StatusCompleted}, {"fails", herald.StatusFailed}} {
		id := "order-" + tc.workflow
		b.start(tc.workflow, id, nil)
		if info := b.waitDone(id); info.Status != tc.status {
			t.Fatalf("%s: status %s, want %s", id, info.Status, tc.status)
		}
		before := b.history(id, 0)
		beforeEvents, err := b.client.Events(b.ctx, id)
		if err != nil {
			t.Fatal(err)
		}

		r, err := b.client.RaiseEvent(b.ctx, id, "late_signal", "data", herald.WithEventID("late-"+id))
		if !errors.Is(err, herald.ErrInstanceNotRunning) || r != nil {
			t.Fatalf("%s: raise to a %s instance: receipt %+v, err %v; want ErrInstanceNotRunning", id, tc.status, r, err)
		}
		// Nothing stored: no fate record, history and event list unchanged.
		if _, err := b.client.EventFate(b.ctx, "late-"+id); !errors.Is(err, herald.ErrNotFound) {
			t.Fatalf("%s: fate of the refused event: %v, want ErrNotFound", id, err)
		}
		if after := b.history(id, 0); !reflect.DeepEqual(before, after) {
			t.Fatalf("%s: history changed:%s\nwas:%s", id, dumpHistory(after), dumpHistory(before))
		}
		if afterEvents, err := b.client.Events(b.ctx, id); err != nil || len(afterEvents) != len(beforeEvents) {
			t.Fatalf("%s: events %+v, %v; want %d", id, afterEvents, err, len(beforeEvents))
		}
		if info, err := b.client.Status(b.ctx, id); err != nil || info.Status != tc.status {
			t.Fatalf("%s: status after refused raise %+v, %v", id, info, err)
		}
		// The refused id was not consumed: it can be used elsewhere.
		b.raise("other", "late_signal", "data", "late-"+id)
	}
}

// From seed 000's test plan, test 4.3.
func TestPositional_SameNameAcrossExecutions(t *testing.T) {
	t.Parallel()
	b := setupEnv(t, nil, func(rt *herald.Runtime) {
		herald.RegisterWorkflow(rt, "w", func(ctx *herald.Context, _ struct{}) (string, error) {
			if ctx.Execution() == 1 {
				if err := ctx.WaitEvent("signal").Get(nil); err != nil {
					return "", err
				}
				return "", ctx.ContinueAsNew(nil)
			}
			if err := ctx.WaitEvent("go").Get(nil); err != nil {
				return "", err
			}
			var s string
			err := ctx.WaitEvent("signal").Get(&s)
			return s, err
		})
	})
	b.start("w", "i", nil)
	b.waitHistory("i", history.EventSubscribed, "signal", 1)
	b.raise("i", "signal", "A", "ev-A")
	b.waitExec("i", 2, history.EventSubscribed, "", "go", 1)
	b.raise("i", "signal", "new_data", "ev-new")
	b.waitHistory("i", history.EventRaised, "signal", 1)
	b.raise("i", "go", nil, "ev-go")

	var out string
	b.result("i", &out)
	if out != "new_data" {
		t.Fatalf("result %q, want new_data", out)
	}
	b.checkFate("ev-A", wantFate{Lane: history.LanePositional, Fate: history.FateDelivered, Execution: 1, Origin: 1, WaitNumber: 1})
	b.checkFate("ev-new", wantFate{Lane: history.LanePositional, Fate: history.FateDelivered, Execution: 2, Origin: 2, WaitNumber: 1})
	ex2 := b.history("i", 2)
	for _, ev := range ex2 {
		if ev.AtStart || ev.EventID == "ev-A" {
			t.Fatalf("execution 2 must not see execution 1's consumed event, history:%s", dumpHistory(ex2))
		}
	}
}

// From seed 000's test plan, test 4.4.
func TestPositional_EmptyEventData(t *testing.T) {
	t.Parallel()
	type result struct {
		Str    string
		RawStr string
		RawNil string
	}
	b := setupEnv(t, nil, func(rt *herald.Runtime) {
		herald.RegisterWorkflow(rt, "w", func(ctx *herald.Context, _ struct{}) (result, error) {
			var r result
			r.Str = "not set"
			if err := ctx.WaitEvent("signal").Get(&r.Str); err != nil {
				return r, err
			}
			var raw1, raw2 json.RawMessage
			if err := ctx.WaitEvent("signal").Get(&raw1); err != nil {
				return r, err
			}
			if err := ctx.WaitEvent("signal").Get(&raw2); err != nil {
				return r, err
			}
			r.RawStr, r.RawNil = string(raw1), string(raw2)
			return r, nil
		})
	})
	b.start("w", "i", nil)
	b.waitHistory("i", history.EventSubscribed, "signal", 1)
	b.raise("i", "signal", "", "ev-empty")
	b.raise("i", "signal", "", "ev-empty-2")
	b.raise("i", "signal", nil, "ev-null")

	var out result
	b.result("i", &out)
	if want := (result{Str: "", RawStr: `""`, RawNil: "null"}); out != want {
		t.Fatalf("result %+v, want %+v", out, want)
	}
	evs := b.history("i", 0)
	byID := map[string]string{}
	for _, ev := range ofKind(evs, history.EventRaised, "", "signal") {
		byID[ev.EventID] = string(ev.Payload)
	}
	if byID["ev-empty"] != `""` || byID["ev-null"] != "null" {
		t.Fatalf("payloads in history %q", byID)
	}
	b.checkFate("ev-empty", wantFate{Lane: history.LanePositional, Fate: history.FateDelivered, Execution: 1, Origin: 1, WaitNumber: 1})
	b.checkFate("ev-null", wantFate{Lane: history.LanePositional, Fate: history.FateDelivered, Execution: 1, Origin: 1, WaitNumber: 3})
}

// From seed 000's test plan, test 4.5.
func TestPositional_LargeEventData(t *testing.T) {
	t.Parallel()
	const maxPayload = 128 << 10
	b := setupEnv(t, &herald.Config{ClientConfig: herald.ClientConfig{MaxPayloadBytes: maxPayload}}, func(rt *herald.Runtime) {
		herald.RegisterWorkflow(rt, "w", func(ctx *herald.Context, _ struct{}) ([]json.RawMessage, error) {
			var out []json.RawMessage
			for range 2 {
				var raw json.RawMessage
				if err := ctx.WaitEvent("signal").Get(&raw); err != nil {
					return nil, err
				}
				out = append(out, raw)
			}
			return out, nil
		})
	})
	type item struct {
		ID    int    `json:"id"`
		Name  string `json:"name"`
		Notes string `json:"notes"`
	}
	type doc struct {
		Kind  string `json:"kind"`
		Items []item `json:"items"`
	}
	large := doc{Kind: "large"}
	for i := range 450 {
		large.Items = append(large.Items, item{ID: i, Name: fmt.Sprintf("item-%d", i), Notes: strings.Repeat("ü\"\\<x>", 10)})
	}
	largeRaw, _ := json.Marshal(large)
	if len(largeRaw) < 100_000 || len(largeRaw) > maxPayload {
		t.Fatalf("large payload is %d bytes", len(largeRaw))
	}

	b.start("w", "i", nil)
	b.waitHistory("i", history.EventSubscribed, "signal", 1)
	b.raise("i", "signal", large, "ev-large")

	// Over the cap: refused synchronously, nothing stored.
	over := strings.Repeat("x", maxPayload) // encodes to maxPayload+2 bytes
	_, err := b.client.RaiseEvent(b.ctx, "i", "signal", over, herald.WithEventID("ev-over"))
	var inv *herald.EventInvalidError
	if !errors.Is(err, herald.ErrEventInvalid) || !errors.As(err, &inv) || inv.Name != "signal" || len(inv.Reasons) == 0 {
		t.Fatalf("over-size raise: %v, want ErrEventInvalid", err)
	}
	if _, err := b.client.EventFate(b.ctx, "ev-over"); !errors.Is(err, herald.ErrNotFound) {
		t.Fatalf("fate of the refused event: %v, want ErrNotFound", err)
	}
	// Exactly at the cap: accepted.
	atCap := strings.Repeat("y", maxPayload-2)
	b.raise("i", "signal", atCap, "ev-at-cap")

	var out []json.RawMessage
	b.result("i", &out)
	if len(out) != 2 {
		t.Fatalf("got %d payloads", len(out))
	}
	var got doc
	if err := json.Unmarshal(out[0], &got); err != nil || !reflect.DeepEqual(got, large) {
		t.Fatalf("large payload did not round-trip (%d bytes sent, %d back): %v", len(largeRaw), len(out[0]), err)
	}
	var s string
	if err := json.Unmarshal(out[1], &s); err != nil || s != atCap {
		t.Fatalf("payload at the cap did not round-trip: %v", err)
	}
	evs := b.history("i", 0)
	if withID(evs, "ev-over") != nil || countKind(evs, history.EventDropped, "") != 0 {
		t.Fatalf("the refused event left a trace in history:%s", dumpHistory(evs))
	}
	recs, err := b.client.Events(b.ctx, "i")
	if err != nil || len(recs) != 2 {
		t.Fatalf("events %+v, %v; want the two accepted ones", recs, err)
	}
	b.checkFate("ev-large", wantFate{Lane: history.LanePositional, Fate: history.FateDelivered, Execution: 1, Origin: 1, WaitNumber: 1})
	b.checkFate("ev-at-cap", wantFate{Lane: history.LanePositional, Fate: history.FateDelivered, Execution: 1, Origin: 1, WaitNumber: 2})
}

// ---- 5. Concurrent scenarios ----

// From seed 000's test plan, test 5.1.
func TestPositional_ManyRuntimesRaising(t *testing.T) {
	t.Parallel()
	register := func(rt *herald.Runtime) {
		herald.RegisterWorkflow(rt, "w", func(ctx *herald.Context, _ struct{}) ([]string, error) {
			var a, b string
			if err := ctx.WaitEvent("sig").Get(&a); err != nil {
				return nil, err
			}
			if err := ctx.WaitEvent("sig").Get(&b); err != nil {
				return nil, err
			}
			return []string{a, b}, nil
		})
	}
	st := testStore(t)
	ra := setupOn(t, st, nil, register)
	rb := setupOn(t, st, nil, register)
	ra.start("w", "inst", nil)
	ra.waitHistory("inst", history.EventSubscribed, "sig", 1)

	var wg sync.WaitGroup
	errs := make(chan error, 2)
	for _, r := range []struct {
		b       *bundle
		payload string
	}{{ra, "from_a"}, {rb, "from_b"}} {
		wg.Go(func() {
			_, err := r.b.client.RaiseEvent(r.b.ctx, "inst", "sig", r.payload, herald.WithEventID("ev-"+r.payload))
			errs <- err
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}

	var out []string
	rb.result("inst", &out)
	sorted := slices.Clone(out)
	slices.Sort(sorted)
	if !reflect.DeepEqual(sorted, []string{"from_a", "from_b"}) {
		t.Fatalf("result %q, want both events", out)
	}
	// Whatever the order, wait N received the event whose fate says N.
	for i, p := range out {
		ra.checkFate("ev-"+p, wantFate{Lane: history.LanePositional, Fate: history.FateDelivered, Execution: 1, Origin: 1, WaitNumber: i + 1})
	}
}

// From seed 000's test plan, test 5.2.
func TestPositional_RaceBetweenRaiseAndWait(t *testing.T) {
	t.Parallel()
	const n = 20
	b := setupEnv(t, nil, func(rt *herald.Runtime) {
		herald.RegisterWorkflow(rt, "w", func(ctx *herald.Context, _ struct{}) ([]string, error) {
			out := []string{}
			for range n {
				var s string
				if err := ctx.WaitEvent("signal").Get(&s); err != nil {
					return nil, err
				}
				out = append(out, s)
			}
			return out, nil
		})
	})
	b.start("w", "i", nil)
	b.waitHistory("i", history.EventSubscribed, "signal", 1)
	// The workflow is blocked on its first wait; raise concurrently while it
	// takes them one at a time.
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := range n {
		wg.Go(func() {
			_, err := b.client.RaiseEvent(b.ctx, "i", "signal", fmt.Sprintf("data-%02d", i), herald.WithEventID(fmt.Sprintf("ev-%02d", i)))
			errs <- err
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}

	var out []string
	b.result("i", &out)
	if len(out) != n {
		t.Fatalf("result %q", out)
	}
	seen := map[string]bool{}
	for i, p := range out {
		if seen[p] {
			t.Fatalf("payload %s received twice: %q", p, out)
		}
		seen[p] = true
		id := "ev-" + strings.TrimPrefix(p, "data-")
		b.checkFate(id, wantFate{Lane: history.LanePositional, Fate: history.FateDelivered, Execution: 1, Origin: 1, WaitNumber: i + 1})
	}
	evs := b.history("i", 0)
	if countKind(evs, history.EventRaised, "signal") != n || countKind(evs, history.EventDropped, "") != 0 {
		t.Fatalf("history:%s", dumpHistory(evs))
	}
}

// ---- 6. History verification ----

// From seed 000's test plan, test 6.1.
func TestPositional_EventInHistory(t *testing.T) {
	t.Parallel()
	b := setupEnv(t, nil, func(rt *herald.Runtime) {
		herald.RegisterWorkflow(rt, "w", func(ctx *herald.Context, _ struct{}) (string, error) {
			if ctx.Execution() == 1 {
				return "", ctx.ContinueAsNew(nil)
			}
			var s string
			err := ctx.WaitEvent("signal").Get(&s)
			return s, err
		})
	})
	b.start("w", "i", nil)
	b.waitExec("i", 2, history.EventSubscribed, "", "signal", 1)
	before := b.now()
	r := b.raise("i", "signal", "data", "ev-6.1")
	var out string
	b.result("i", &out)
	after := b.now()
	if out != "data" {
		t.Fatalf("result %q", out)
	}

	ex2 := b.history("i", 2)
	raised := ofKind(ex2, history.EventRaised, "", "signal")
	sub := ofKind(ex2, history.EventSubscribed, "", "signal")
	if len(raised) != 1 || len(sub) != 1 || ex2[0].Execution != 2 {
		t.Fatalf("execution 2 history:%s", dumpHistory(ex2))
	}
	ev := raised[0]
	if ev.Name != "signal" || string(ev.Payload) != `"data"` || ev.EventID != "ev-6.1" || ev.Lane != history.LanePositional ||
		ev.OriginExecution != 2 || ev.TaskSeq != sub[0].Seq || ev.WaitNumber != 1 || ev.AtStart {
		t.Fatalf("EventRaised %+v", ev)
	}
	if !ev.ReceivedAt.Equal(r.ReceivedAt) || ev.ReceivedAt.Before(before.Truncate(time.Microsecond)) || ev.ReceivedAt.After(after) {
		t.Fatalf("received at %v, receipt %v, raised between %v and %v", ev.ReceivedAt, r.ReceivedAt, before, after)
	}
	if ev.Time.Before(ev.ReceivedAt) || ev.Time.After(after) {
		t.Fatalf("history time %v, received %v", ev.Time, ev.ReceivedAt)
	}
	if withID(b.history("i", 1), "ev-6.1") != nil {
		t.Fatal("the event is in execution 1's history")
	}
	rec := b.checkFate("ev-6.1", wantFate{Lane: history.LanePositional, Fate: history.FateDelivered, Execution: 2, Origin: 2, WaitNumber: 1})
	if rec.InstanceID != "i" || rec.Name != "signal" || !rec.ReceivedAt.Equal(r.ReceivedAt) {
		t.Fatalf("fate record %+v", rec)
	}
}

// From seed 000's test plan, test 6.2.
func TestPositional_CarriedEventKeepsOriginalExecution(t *testing.T) {
	t.Parallel()
	b := setupEnv(t, nil, func(rt *herald.Runtime) {
		herald.RegisterWorkflow(rt, "w", func(ctx *herald.Context, _ struct{}) (string, error) {
			if err := ctx.WaitEvent("go").Get(nil); err != nil {
				return "", err
			}
			if ctx.Execution() == 1 {
				return "", ctx.ContinueAsNew(nil)
			}
			var s string
			err := ctx.WaitEvent("signal").Get(&s)
			return s, err
		})
	})
	b.start("w", "i", nil)
	b.waitHistory("i", history.EventSubscribed, "go", 1)
	r := b.raise("i", "signal", "data", "ev-signal")
	b.waitHistory("i", history.EventRaised, "signal", 1)
	b.raise("i", "go", nil, "ev-go-1")
	b.waitExec("i", 2, history.EventSubscribed, "", "go", 1)

	ex1 := b.history("i", 1)
	orig := ofKind(ex1, history.EventRaised, "", "signal")
	if len(orig) != 1 || orig[0].OriginExecution != 1 {
		t.Fatalf("execution 1 history:%s", dumpHistory(ex1))
	}
	ex2 := b.history("i", 2)
	if len(ex2) < 2 || ex2[0].Kind != history.ExecutionStarted || ex2[0].Execution != 2 {
		t.Fatalf("execution 2 history:%s", dumpHistory(ex2))
	}
	c := ex2[1] // right after ExecutionStarted
	if c.Kind != history.EventRaised || c.EventID != "ev-signal" || c.Name != "signal" || c.OriginExecution != 1 || !c.AtStart ||
		string(c.Payload) != `"data"` || !c.ReceivedAt.Equal(r.ReceivedAt) || c.TaskSeq != 0 {
		t.Fatalf("carried event %+v", c)
	}
	b.checkFate("ev-signal", wantFate{Lane: history.LanePositional, Fate: history.FateBuffered, Execution: 2, Origin: 1})

	b.raise("i", "go", nil, "ev-go-2")
	var out string
	b.result("i", &out)
	if out != "data" {
		t.Fatalf("result %q", out)
	}
	b.checkFate("ev-signal", wantFate{Lane: history.LanePositional, Fate: history.FateDelivered, Execution: 2, Origin: 1, WaitNumber: 1})
}
