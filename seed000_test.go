package herald_test

// End-to-end tests of the positional event lane (SPEC §3.1) following the
// test plan of seed 000 (seeds/000_f6a7eed5f1fd4534.txt, tests 1.1–6.2),
// with SPEC's decisions against that seed applied (4.2: a raise to a
// completed instance is refused and nothing is stored; counting is 1:1).

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

// ---- helpers shared by seed000_test.go, seed002_test.go and lane_test.go ----

// plRaise raises a positional event with an explicit event id and fails the
// test on error.
func plRaise(b *bundle, instance, name string, payload any, eventID string, opts ...herald.RaiseOption) *herald.EventReceipt {
	b.t.Helper()
	r, err := b.client.RaiseEvent(b.ctx, instance, name, payload, append([]herald.RaiseOption{herald.WithEventID(eventID)}, opts...)...)
	if err != nil {
		b.t.Fatalf("raise %s (%s) to %s: %v", name, eventID, instance, err)
	}
	if r.EventID != eventID {
		b.t.Fatalf("raise %s: receipt event id %q, want %q", name, r.EventID, eventID)
	}
	return r
}

// plEvent is one event for plRaiseMany.
type plEvent struct {
	Name    string
	Payload any
	ID      string
}

// plRaiseMany raises the events concurrently (so the store can commit them
// in groups) and fails the test if any raise fails. Their arrival order is
// not defined.
func plRaiseMany(b *bundle, instance string, evs []plEvent) {
	b.t.Helper()
	ch := make(chan plEvent)
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

// plStart starts workflow as instance id.
func plStart(b *bundle, workflow, id string, input any) {
	b.t.Helper()
	got, err := b.client.StartWorkflow(b.ctx, workflow, input, herald.WithInstanceID(id))
	if err != nil {
		b.t.Fatalf("start %s as %s: %v", workflow, id, err)
	}
	if got != id {
		b.t.Fatalf("start: id %q, want %q", got, id)
	}
}

// plWaitExec waits until execution exec of the instance has at least n
// events of kind (name "" matches any name).
func plWaitExec(b *bundle, id string, exec int, kind history.Kind, name string, n int) {
	b.t.Helper()
	b.waitFor(fmt.Sprintf("%d× %s %s in %s execution %d", n, kind, name, id, exec), func() bool {
		info, err := b.client.Status(b.ctx, id)
		if err != nil || info.Execution < exec {
			return false
		}
		evs, err := b.client.History(b.ctx, id, exec)
		return err == nil && countKind(evs, kind, name) >= n
	})
}

// plFind returns the events of kind (and name, unless "") in order.
func plFind(evs []history.Event, kind history.Kind, name string) []history.Event {
	var out []history.Event
	for _, ev := range evs {
		if ev.Kind == kind && (name == "" || ev.Name == name) {
			out = append(out, ev)
		}
	}
	return out
}

// plByID returns the events carrying eventID.
func plByID(evs []history.Event, eventID string) []history.Event {
	var out []history.Event
	for _, ev := range evs {
		if ev.EventID == eventID {
			out = append(out, ev)
		}
	}
	return out
}

// plCountPrefix counts events of kind whose name starts with prefix.
func plCountPrefix(evs []history.Event, kind history.Kind, prefix string) int {
	n := 0
	for _, ev := range evs {
		if ev.Kind == kind && strings.HasPrefix(ev.Name, prefix) {
			n++
		}
	}
	return n
}

// plFate is the expected ledger entry of an event.
type plFate struct {
	Fate       history.Fate
	Reason     history.DropReason
	Execution  int
	Origin     int
	WaitNumber int
}

// plCheckFate compares the event's fate record with want.
func plCheckFate(b *bundle, eventID string, want plFate) *herald.EventRecord {
	b.t.Helper()
	rec := b.fate(eventID)
	got := plFate{Fate: rec.Fate, Reason: rec.Reason, Execution: rec.Execution, Origin: rec.OriginExecution, WaitNumber: rec.WaitNumber}
	if got != want {
		b.t.Errorf("fate of %s = %+v, want %+v", eventID, got, want)
	}
	if rec.EventID != eventID || rec.Lane != history.LanePositional {
		b.t.Errorf("fate record of %s: id %q lane %q", eventID, rec.EventID, rec.Lane)
	}
	return rec
}

// plWaitOne is a workflow that waits for one event "signal" and returns its
// string payload.
func plWaitOne(ctx *herald.Context, _ struct{}) (string, error) {
	var s string
	err := ctx.WaitEvent("signal").Get(&s)
	return s, err
}

// ---- 1. Basic queue semantics ----

func TestSeed000_1_1_RaiseBeforeWait(t *testing.T) {
	t.Parallel()
	b := setup(t, nil, func(rt *herald.Runtime) {
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
	plStart(b, "w", "i", nil)
	b.waitHistory("i", history.EventSubscribed, "go", 1)
	plRaise(b, "i", "approval", "yes", "ev-approval")
	b.waitHistory("i", history.EventRaised, "approval", 1)
	plCheckFate(b, "ev-approval", plFate{Fate: history.FateBuffered, Execution: 1, Origin: 1})
	if evs := b.history("i", 0); countKind(evs, history.EventSubscribed, "approval") != 0 {
		t.Fatalf("no wait for approval yet, history:%s", dumpHistory(evs))
	}
	plRaise(b, "i", "go", nil, "ev-go")

	var out string
	b.result("i", &out)
	if out != "yes" {
		t.Fatalf("result %q, want yes", out)
	}
	evs := b.history("i", 0)
	raised := plFind(evs, history.EventRaised, "approval")
	subs := plFind(evs, history.EventSubscribed, "approval")
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
	plCheckFate(b, "ev-approval", plFate{Fate: history.FateDelivered, Execution: 1, Origin: 1, WaitNumber: 1})
}

func TestSeed000_1_2_RaiseAfterWait(t *testing.T) {
	t.Parallel()
	b := setup(t, nil, func(rt *herald.Runtime) {
		herald.RegisterWorkflow(rt, "w", func(ctx *herald.Context, _ struct{}) (string, error) {
			var s string
			err := ctx.WaitEvent("approval").Get(&s)
			return s, err
		})
	})
	plStart(b, "w", "i", nil)
	b.waitHistory("i", history.EventSubscribed, "approval", 1)
	plRaise(b, "i", "approval", "yes", "ev-approval")

	var out string
	b.result("i", &out)
	if out != "yes" {
		t.Fatalf("result %q, want yes", out)
	}
	evs := b.history("i", 0)
	subs := plFind(evs, history.EventSubscribed, "approval")
	raised := plFind(evs, history.EventRaised, "approval")
	if len(subs) != 1 || len(raised) != 1 {
		t.Fatalf("history:%s", dumpHistory(evs))
	}
	// Delivered to the waiting subscription: the arrival names it.
	if s, r := subs[0], raised[0]; s.EventID != "" || r.TaskSeq != s.Seq || r.WaitNumber != 1 || r.EventID != "ev-approval" ||
		r.AtStart || r.Seq <= s.Seq {
		t.Fatalf("raise-after-wait recorded wrongly, history:%s", dumpHistory(evs))
	}
	plCheckFate(b, "ev-approval", plFate{Fate: history.FateDelivered, Execution: 1, Origin: 1, WaitNumber: 1})
}

func TestSeed000_1_3_MultipleEventsSameName(t *testing.T) {
	t.Parallel()
	b := setup(t, nil, func(rt *herald.Runtime) {
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
	plRaise(b, "i", "data", "first", "ev-1")
	plRaise(b, "i", "data", "second", "ev-2")
	plCheckFate(b, "ev-1", plFate{Fate: history.FatePending})
	plStart(b, "w", "i", nil)

	var out []string
	b.result("i", &out)
	if !reflect.DeepEqual(out, []string{"first", "second"}) {
		t.Fatalf("result %q, want [first second]", out)
	}
	evs := b.history("i", 0)
	raised := plFind(evs, history.EventRaised, "data")
	subs := plFind(evs, history.EventSubscribed, "data")
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
	plCheckFate(b, "ev-1", plFate{Fate: history.FateDelivered, Execution: 1, Origin: 1, WaitNumber: 1})
	plCheckFate(b, "ev-2", plFate{Fate: history.FateDelivered, Execution: 1, Origin: 1, WaitNumber: 2})
}

func TestSeed000_1_4_DifferentNames(t *testing.T) {
	t.Parallel()
	b := setup(t, nil, func(rt *herald.Runtime) {
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
	plRaise(b, "i", "event_a", "data_a", "ev-a")
	plRaise(b, "i", "event_b", "data_b", "ev-b")
	plStart(b, "w", "i", nil)

	var out []string
	b.result("i", &out)
	if !reflect.DeepEqual(out, []string{"data_b", "data_a"}) {
		t.Fatalf("result %q, want [data_b data_a]", out)
	}
	evs := b.history("i", 0)
	if s := plFind(evs, history.EventSubscribed, "event_b"); len(s) != 1 || s[0].EventID != "ev-b" || s[0].WaitNumber != 1 {
		t.Fatalf("wait for event_b took the wrong event, history:%s", dumpHistory(evs))
	}
	if s := plFind(evs, history.EventSubscribed, "event_a"); len(s) != 1 || s[0].EventID != "ev-a" || s[0].WaitNumber != 1 {
		t.Fatalf("wait for event_a took the wrong event, history:%s", dumpHistory(evs))
	}
	plCheckFate(b, "ev-a", plFate{Fate: history.FateDelivered, Execution: 1, Origin: 1, WaitNumber: 1})
	plCheckFate(b, "ev-b", plFate{Fate: history.FateDelivered, Execution: 1, Origin: 1, WaitNumber: 1})

	// Case-sensitive names: "Event_B" is another name and does not reach a
	// wait for "event_b".
	b2 := setup(t, nil, func(rt *herald.Runtime) {
		herald.RegisterWorkflow(rt, "w", func(ctx *herald.Context, _ struct{}) (string, error) {
			var s string
			err := ctx.WaitEvent("event_b").Get(&s)
			return s, err
		})
	})
	plRaise(b2, "j", "Event_B", "wrong case", "ev-B")
	plRaise(b2, "j", "event_b", "right case", "ev-b")
	plStart(b2, "w", "j", nil)
	var s string
	b2.result("j", &s)
	if s != "right case" {
		t.Fatalf("case-sensitive names: got %q", s)
	}
	plCheckFate(b2, "ev-B", plFate{Fate: history.FateDropped, Reason: history.DropInstanceTerminal, Execution: 1, Origin: 1})
}

// ---- 2. Continue-as-new carry forward ----

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
	b := setup(t, nil, func(rt *herald.Runtime) { herald.RegisterWorkflow(rt, "carry", plCarry) })
	plStart(b, "carry", "i", carryIn{WaitAt: waitAt})
	b.waitHistory("i", history.EventSubscribed, "go", 1)
	plRaise(b, "i", "signal", "payload", "ev-signal")
	b.waitHistory("i", history.EventRaised, "signal", 1)
	plCheckFate(b, "ev-signal", plFate{Fate: history.FateBuffered, Execution: 1, Origin: 1})
	plRaise(b, "i", "go", nil, "ev-go")
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

func TestSeed000_2_1_BasicCarryForward(t *testing.T) {
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
	if s := plFind(ex1, history.EventSubscribed, "signal"); len(s) != 0 {
		t.Fatalf("execution 1 never waited for signal, history:%s", dumpHistory(ex1))
	}
	ex2 := b.history("i", 2)
	if s := plFind(ex2, history.EventSubscribed, "signal"); len(s) != 1 || s[0].EventID != "ev-signal" || s[0].WaitNumber != 1 {
		t.Fatalf("execution 2 history:%s", dumpHistory(ex2))
	}
	plCheckFate(b, "ev-signal", plFate{Fate: history.FateDelivered, Execution: 2, Origin: 1, WaitNumber: 1})
}

func TestSeed000_2_2_ConsumedEventNotCarriedForward(t *testing.T) {
	t.Parallel()
	b := setup(t, nil, func(rt *herald.Runtime) {
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
	plStart(b, "w", "i", nil)
	b.waitHistory("i", history.EventSubscribed, "signal", 1)
	plRaise(b, "i", "signal", "data", "ev-data")
	plWaitExec(b, "i", 2, history.EventSubscribed, "signal", 1)

	// Execution 2 waits: nothing was carried.
	ex2 := b.history("i", 2)
	if len(ex2) != 2 || ex2[1].Kind != history.EventSubscribed || ex2[1].EventID != "" {
		t.Fatalf("execution 2 should be waiting with nothing carried, history:%s", dumpHistory(ex2))
	}
	if info, err := b.client.Status(b.ctx, "i"); err != nil || info.Status != herald.StatusRunning || info.Execution != 2 {
		t.Fatalf("status %+v, %v; want running in execution 2", info, err)
	}
	plCheckFate(b, "ev-data", plFate{Fate: history.FateDelivered, Execution: 1, Origin: 1, WaitNumber: 1})

	plRaise(b, "i", "signal", "fresh", "ev-fresh")
	var out string
	b.result("i", &out)
	if out != "fresh" {
		t.Fatalf("execution 2 got %q, want fresh (a consumed event must not be carried)", out)
	}
	plCheckFate(b, "ev-fresh", plFate{Fate: history.FateDelivered, Execution: 2, Origin: 2, WaitNumber: 1})
}

func TestSeed000_2_3_MultipleExecutionsCarryForward(t *testing.T) {
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
	plCheckFate(b, "ev-signal", plFate{Fate: history.FateDelivered, Execution: 4, Origin: 1, WaitNumber: 1})
}

func TestSeed000_2_4_CarryForwardLimitReached(t *testing.T) {
	t.Parallel()
	b := plCarryStart(t, 7)
	plWaitExec(b, "i", 7, history.EventSubscribed, "signal", 1)

	// Carried to executions 2 … 6 (age 1 … 5), dropped on the way to 7 (age 6).
	for exec := 2; exec <= 6; exec++ {
		plCheckCarried(b, exec)
	}
	ex7 := b.history("i", 7)
	drops := plFind(ex7, history.EventDropped, "signal")
	if len(drops) != 1 || ex7[1].Kind != history.EventDropped {
		t.Fatalf("execution 7 should start with the drop breadcrumb, history:%s", dumpHistory(ex7))
	}
	if d := drops[0]; d.EventID != "ev-signal" || d.Reason != history.DropCarryForwardLimit || d.OriginExecution != 1 || !d.AtStart {
		t.Fatalf("breadcrumb %+v", d)
	}
	if n := countKind(ex7, history.EventRaised, "signal"); n != 0 {
		t.Fatalf("the dropped event reached execution 7, history:%s", dumpHistory(ex7))
	}
	plCheckFate(b, "ev-signal", plFate{Fate: history.FateDropped, Reason: history.DropCarryForwardLimit, Execution: 7, Origin: 1})
	b.wantWarn("herald: event dropped", "ev-signal", "carry_forward_limit")

	// "Waits forever": still running, its wait unanswered.
	info, err := b.client.Status(b.ctx, "i")
	if err != nil || info.Status != herald.StatusRunning || info.Execution != 7 {
		t.Fatalf("status %+v, %v; want running in execution 7", info, err)
	}
	if s := plFind(ex7, history.EventSubscribed, "signal"); len(s) != 1 || s[0].EventID != "" {
		t.Fatalf("execution 7's wait should be unanswered, history:%s", dumpHistory(ex7))
	}
	// A fresh event lets it finish.
	plRaise(b, "i", "signal", "fresh", "ev-fresh")
	var out string
	b.result("i", &out)
	if out != "fresh" {
		t.Fatalf("result %q, want fresh", out)
	}
	plCheckFate(b, "ev-fresh", plFate{Fate: history.FateDelivered, Execution: 7, Origin: 7, WaitNumber: 1})
	for exec := 1; exec <= 7; exec++ {
		if err := b.rt.ReplayHistory(b.history("i", exec)); err != nil {
			t.Errorf("replay of execution %d: %v", exec, err)
		}
	}
}

func TestSeed000_2_5_CarryForwardLimitBoundary(t *testing.T) {
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
	plCheckFate(b, "ev-signal", plFate{Fate: history.FateDelivered, Execution: 6, Origin: 1, WaitNumber: 1})
	if w := b.logs.warnings(); len(w) != 0 {
		t.Errorf("unexpected warnings: %q", w)
	}
}

// ---- 3. Per-instance limit (default MaxUnconsumedEvents: 100) ----

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
	b := setup(t, nil, func(rt *herald.Runtime) { herald.RegisterWorkflow(rt, "pile", plPile) })
	plStart(b, "pile", "i", pileIn{Consume: consume})
	b.waitHistory("i", history.EventSubscribed, "consume", 1)
	evs := make([]plEvent, len(names))
	for i, n := range names {
		evs[i] = plEvent{Name: n, Payload: "d-" + n, ID: "ev-" + n}
	}
	plRaiseMany(b, "i", evs)
	b.waitFor(fmt.Sprintf("%d buffered events", len(names)), func() bool {
		evs, err := b.client.History(b.ctx, "i", 0)
		return err == nil && plCountPrefix(evs, history.EventRaised, "e") >= len(names)
	})
	return b
}

func TestSeed000_3_1_UnderLimit(t *testing.T) {
	t.Parallel()
	names := plNames("e", 50)
	b := plPileUp(t, names, names)

	evs := b.history("i", 0)
	raised := plFind(evs, history.EventRaised, "")
	if len(raised) != 50 || countKind(evs, history.EventDropped, "") != 0 {
		t.Fatalf("want all 50 events persisted and none dropped, history:%s", dumpHistory(evs))
	}
	seen := map[string]bool{}
	for _, ev := range raised {
		if !strings.HasPrefix(ev.Name, "e") || ev.EventID != "ev-"+ev.Name || string(ev.Payload) != `"d-`+ev.Name+`"` || ev.TaskSeq != 0 || seen[ev.Name] {
			t.Fatalf("arrival %+v", ev)
		}
		seen[ev.Name] = true
		plCheckFate(b, ev.EventID, plFate{Fate: history.FateBuffered, Execution: 1, Origin: 1})
	}

	plRaise(b, "i", "consume", nil, "ev-consume")
	b.waitHistory("i", history.EventSubscribed, "finish", 1)
	plRaise(b, "i", "finish", nil, "ev-finish")
	var out []string
	b.result("i", &out)
	if len(out) != 50 || out[0] != "d-e000" || out[49] != "d-e049" {
		t.Fatalf("result %q", out)
	}
	for _, n := range names {
		plCheckFate(b, "ev-"+n, plFate{Fate: history.FateDelivered, Execution: 1, Origin: 1, WaitNumber: 1})
	}
	if w := b.logs.warnings(); len(w) != 0 {
		t.Errorf("unexpected warnings: %q", w)
	}
}

func TestSeed000_3_2_AtLimitNewEventDropped(t *testing.T) {
	t.Parallel()
	b := plPileUp(t, nil, plNames("e", 100))

	plRaise(b, "i", "new_event", "data", "ev-new")
	b.waitHistory("i", history.EventDropped, "new_event", 1)
	evs := b.history("i", 0)
	if n := countKind(evs, history.EventRaised, "new_event"); n != 0 {
		t.Fatalf("the event over the limit is in history as raised, history:%s", dumpHistory(evs))
	}
	d := plFind(evs, history.EventDropped, "new_event")[0]
	if d.EventID != "ev-new" || d.Reason != history.DropLimit || d.Lane != history.LanePositional || d.OriginExecution != 1 {
		t.Fatalf("breadcrumb %+v", d)
	}
	plCheckFate(b, "ev-new", plFate{Fate: history.FateDropped, Reason: history.DropLimit, Execution: 1, Origin: 1})
	b.wantWarn("herald: event dropped", "ev-new", "reason=limit")
	if got := b.rt.Stats().DroppedByReason()["limit"]; got != 1 {
		t.Errorf("limit drops counted %d, want 1", got)
	}
	// The 100 buffered ones are untouched.
	plCheckFate(b, "ev-e000", plFate{Fate: history.FateBuffered, Execution: 1, Origin: 1})
	plCheckFate(b, "ev-e099", plFate{Fate: history.FateBuffered, Execution: 1, Origin: 1})

	// The limit caps buffered events only: an event that meets an active
	// wait is delivered even at the limit.
	plRaise(b, "i", "consume", nil, "ev-consume")
	b.waitHistory("i", history.EventSubscribed, "finish", 1)
	plCheckFate(b, "ev-consume", plFate{Fate: history.FateDelivered, Execution: 1, Origin: 1, WaitNumber: 1})
	plRaise(b, "i", "finish", nil, "ev-finish")
	var out []string
	b.result("i", &out)
	if err := b.rt.ReplayHistory(b.history("i", 0)); err != nil {
		t.Fatalf("replay: %v", err)
	}
}

func TestSeed000_3_3_ConsumedEventsFreeUpSpace(t *testing.T) {
	t.Parallel()
	names := plNames("e", 100)
	b := plPileUp(t, names[:10], names)

	// At the limit: the next event is dropped.
	plRaise(b, "i", "n-over", "x", "ev-over-1")
	b.waitHistory("i", history.EventDropped, "n-over", 1)
	plCheckFate(b, "ev-over-1", plFate{Fate: history.FateDropped, Reason: history.DropLimit, Execution: 1, Origin: 1})

	// Consume 10 of them: room for exactly 10 more.
	plRaise(b, "i", "consume", nil, "ev-consume")
	b.waitHistory("i", history.EventSubscribed, "finish", 1)
	for _, n := range names[:10] {
		plCheckFate(b, "ev-"+n, plFate{Fate: history.FateDelivered, Execution: 1, Origin: 1, WaitNumber: 1})
	}
	fresh := plNames("n", 10)
	freshEvs := make([]plEvent, len(fresh))
	for i, n := range fresh {
		freshEvs[i] = plEvent{Name: n, Payload: "x", ID: "ev-" + n}
	}
	plRaiseMany(b, "i", freshEvs)
	b.waitFor("10 fresh events buffered", func() bool {
		evs, err := b.client.History(b.ctx, "i", 0)
		return err == nil && plCountPrefix(evs, history.EventRaised, "n") >= 10
	})
	for _, n := range fresh {
		plCheckFate(b, "ev-"+n, plFate{Fate: history.FateBuffered, Execution: 1, Origin: 1})
	}
	plRaise(b, "i", "n-over", "x", "ev-over-2")
	b.waitHistory("i", history.EventDropped, "n-over", 2)
	plCheckFate(b, "ev-over-2", plFate{Fate: history.FateDropped, Reason: history.DropLimit, Execution: 1, Origin: 1})
	if evs := b.history("i", 0); countKind(evs, history.EventDropped, "") != 2 {
		t.Fatalf("want exactly two drops, history:%s", dumpHistory(evs))
	}

	plRaise(b, "i", "finish", nil, "ev-finish")
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

func TestSeed000_3_4_MixedConsumedUnconsumed(t *testing.T) {
	t.Parallel()
	b := setup(t, nil, func(rt *herald.Runtime) {
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
	plStart(b, "w", "i", nil)
	// 50 consumed events (raised concurrently while the workflow takes them:
	// some meet a wait, some are buffered for a moment and taken by the next
	// wait).
	consumed := make([]plEvent, 50)
	for i := range consumed {
		consumed[i] = plEvent{Name: "c", Payload: i, ID: fmt.Sprintf("ev-c%02d", i)}
	}
	plRaiseMany(b, "i", consumed)
	b.waitHistory("i", history.EventSubscribed, "finish", 1)
	// 50 unconsumed events.
	unconsumed := make([]plEvent, 50)
	for i := range unconsumed {
		unconsumed[i] = plEvent{Name: "u", Payload: i, ID: fmt.Sprintf("ev-u%02d", i)}
	}
	plRaiseMany(b, "i", unconsumed)
	b.waitHistory("i", history.EventRaised, "u", 50)
	// 100 events so far, 50 unconsumed: the next one is kept.
	plRaise(b, "i", "new", "data", "ev-new")
	b.waitHistory("i", history.EventRaised, "new", 1)
	plCheckFate(b, "ev-new", plFate{Fate: history.FateBuffered, Execution: 1, Origin: 1})
	evs := b.history("i", 0)
	if n := countKind(evs, history.EventDropped, ""); n != 0 {
		t.Fatalf("%d events dropped, want none; history:%s", n, dumpHistory(evs))
	}
	for i := range 50 {
		plCheckFate(b, fmt.Sprintf("ev-u%02d", i), plFate{Fate: history.FateBuffered, Execution: 1, Origin: 1})
	}

	plRaise(b, "i", "finish", nil, "ev-finish")
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
		plCheckFate(b, fmt.Sprintf("ev-c%02d", v), plFate{Fate: history.FateDelivered, Execution: 1, Origin: 1, WaitNumber: i + 1})
	}
}

// ---- 4. Edge cases ----

func TestSeed000_4_1_RaiseToNonExistentInstance(t *testing.T) {
	t.Parallel()
	b := setup(t, nil, func(rt *herald.Runtime) { herald.RegisterWorkflow(rt, "ProcessOrder", plWaitOne) })
	r := plRaise(b, "order-123", "signal", "data", "ev-early")
	if r.Started || r.Duplicate {
		t.Fatalf("receipt %+v", r)
	}
	plCheckFate(b, "ev-early", plFate{Fate: history.FatePending})
	if _, err := b.client.Status(b.ctx, "order-123"); !errors.Is(err, herald.ErrNotFound) {
		t.Fatalf("a raise must not create the instance: %v", err)
	}
	recs, err := b.client.Events(b.ctx, "order-123")
	if err != nil || len(recs) != 1 || recs[0].EventID != "ev-early" || recs[0].Name != "signal" {
		t.Fatalf("events of order-123: %+v, %v", recs, err)
	}

	plStart(b, "ProcessOrder", "order-123", struct{}{})
	var out string
	b.result("order-123", &out)
	if out != "data" {
		t.Fatalf("result %q, want data", out)
	}
	evs := b.history("order-123", 0)
	if len(evs) < 2 || evs[1].Kind != history.EventRaised || !evs[1].AtStart || evs[1].EventID != "ev-early" || evs[1].OriginExecution != 1 {
		t.Fatalf("the early event should be buffered at the start of execution 1, history:%s", dumpHistory(evs))
	}
	plCheckFate(b, "ev-early", plFate{Fate: history.FateDelivered, Execution: 1, Origin: 1, WaitNumber: 1})
}

func TestSeed000_4_2_RaiseToCompletedInstance(t *testing.T) {
	t.Parallel()
	b := setup(t, nil, func(rt *herald.Runtime) {
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
		plStart(b, tc.workflow, id, nil)
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
		plRaise(b, "other", "late_signal", "data", "late-"+id)
	}
}

func TestSeed000_4_3_SameNameAcrossExecutions(t *testing.T) {
	t.Parallel()
	b := setup(t, nil, func(rt *herald.Runtime) {
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
	plStart(b, "w", "i", nil)
	b.waitHistory("i", history.EventSubscribed, "signal", 1)
	plRaise(b, "i", "signal", "A", "ev-A")
	plWaitExec(b, "i", 2, history.EventSubscribed, "go", 1)
	plRaise(b, "i", "signal", "new_data", "ev-new")
	b.waitHistory("i", history.EventRaised, "signal", 1)
	plRaise(b, "i", "go", nil, "ev-go")

	var out string
	b.result("i", &out)
	if out != "new_data" {
		t.Fatalf("result %q, want new_data", out)
	}
	plCheckFate(b, "ev-A", plFate{Fate: history.FateDelivered, Execution: 1, Origin: 1, WaitNumber: 1})
	plCheckFate(b, "ev-new", plFate{Fate: history.FateDelivered, Execution: 2, Origin: 2, WaitNumber: 1})
	ex2 := b.history("i", 2)
	for _, ev := range ex2 {
		if ev.AtStart || ev.EventID == "ev-A" {
			t.Fatalf("execution 2 must not see execution 1's consumed event, history:%s", dumpHistory(ex2))
		}
	}
}

func TestSeed000_4_4_EmptyEventData(t *testing.T) {
	t.Parallel()
	type result struct {
		Str    string
		RawStr string
		RawNil string
	}
	b := setup(t, nil, func(rt *herald.Runtime) {
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
	plStart(b, "w", "i", nil)
	b.waitHistory("i", history.EventSubscribed, "signal", 1)
	plRaise(b, "i", "signal", "", "ev-empty")
	plRaise(b, "i", "signal", "", "ev-empty-2")
	plRaise(b, "i", "signal", nil, "ev-null")

	var out result
	b.result("i", &out)
	if want := (result{Str: "", RawStr: `""`, RawNil: "null"}); out != want {
		t.Fatalf("result %+v, want %+v", out, want)
	}
	evs := b.history("i", 0)
	byID := map[string]string{}
	for _, ev := range plFind(evs, history.EventRaised, "signal") {
		byID[ev.EventID] = string(ev.Payload)
	}
	if byID["ev-empty"] != `""` || byID["ev-null"] != "null" {
		t.Fatalf("payloads in history %q", byID)
	}
	plCheckFate(b, "ev-empty", plFate{Fate: history.FateDelivered, Execution: 1, Origin: 1, WaitNumber: 1})
	plCheckFate(b, "ev-null", plFate{Fate: history.FateDelivered, Execution: 1, Origin: 1, WaitNumber: 3})
}

func TestSeed000_4_5_LargeEventData(t *testing.T) {
	t.Parallel()
	const maxPayload = 128 << 10
	b := setup(t, &herald.Config{MaxPayloadBytes: maxPayload}, func(rt *herald.Runtime) {
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

	plStart(b, "w", "i", nil)
	b.waitHistory("i", history.EventSubscribed, "signal", 1)
	plRaise(b, "i", "signal", large, "ev-large")

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
	plRaise(b, "i", "signal", atCap, "ev-at-cap")

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
	if plByID(evs, "ev-over") != nil || countKind(evs, history.EventDropped, "") != 0 {
		t.Fatalf("the refused event left a trace in history:%s", dumpHistory(evs))
	}
	recs, err := b.client.Events(b.ctx, "i")
	if err != nil || len(recs) != 2 {
		t.Fatalf("events %+v, %v; want the two accepted ones", recs, err)
	}
	plCheckFate(b, "ev-large", plFate{Fate: history.FateDelivered, Execution: 1, Origin: 1, WaitNumber: 1})
	plCheckFate(b, "ev-at-cap", plFate{Fate: history.FateDelivered, Execution: 1, Origin: 1, WaitNumber: 2})
}

// ---- 5. Concurrent scenarios ----

func TestSeed000_5_1_MultipleRuntimesRaising(t *testing.T) {
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
	plStart(ra, "w", "inst", nil)
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
		plCheckFate(ra, "ev-"+p, plFate{Fate: history.FateDelivered, Execution: 1, Origin: 1, WaitNumber: i + 1})
	}
}

func TestSeed000_5_2_RaceBetweenRaiseAndWait(t *testing.T) {
	t.Parallel()
	const n = 20
	b := setup(t, nil, func(rt *herald.Runtime) {
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
	plStart(b, "w", "i", nil)
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
		plCheckFate(b, id, plFate{Fate: history.FateDelivered, Execution: 1, Origin: 1, WaitNumber: i + 1})
	}
	evs := b.history("i", 0)
	if countKind(evs, history.EventRaised, "signal") != n || countKind(evs, history.EventDropped, "") != 0 {
		t.Fatalf("history:%s", dumpHistory(evs))
	}
}

// ---- 6. History verification ----

func TestSeed000_6_1_ExternalEventInHistory(t *testing.T) {
	t.Parallel()
	b := setup(t, nil, func(rt *herald.Runtime) {
		herald.RegisterWorkflow(rt, "w", func(ctx *herald.Context, _ struct{}) (string, error) {
			if ctx.Execution() == 1 {
				return "", ctx.ContinueAsNew(nil)
			}
			var s string
			err := ctx.WaitEvent("signal").Get(&s)
			return s, err
		})
	})
	plStart(b, "w", "i", nil)
	plWaitExec(b, "i", 2, history.EventSubscribed, "signal", 1)
	before := time.Now()
	r := plRaise(b, "i", "signal", "data", "ev-6.1")
	var out string
	b.result("i", &out)
	after := time.Now()
	if out != "data" {
		t.Fatalf("result %q", out)
	}

	ex2 := b.history("i", 2)
	raised := plFind(ex2, history.EventRaised, "signal")
	sub := plFind(ex2, history.EventSubscribed, "signal")
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
	if plByID(b.history("i", 1), "ev-6.1") != nil {
		t.Fatal("the event is in execution 1's history")
	}
	rec := plCheckFate(b, "ev-6.1", plFate{Fate: history.FateDelivered, Execution: 2, Origin: 2, WaitNumber: 1})
	if rec.InstanceID != "i" || rec.Name != "signal" || !rec.ReceivedAt.Equal(r.ReceivedAt) {
		t.Fatalf("fate record %+v", rec)
	}
}

func TestSeed000_6_2_CarriedEventKeepsOriginalExecution(t *testing.T) {
	t.Parallel()
	b := setup(t, nil, func(rt *herald.Runtime) {
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
	plStart(b, "w", "i", nil)
	b.waitHistory("i", history.EventSubscribed, "go", 1)
	r := plRaise(b, "i", "signal", "data", "ev-signal")
	b.waitHistory("i", history.EventRaised, "signal", 1)
	plRaise(b, "i", "go", nil, "ev-go-1")
	plWaitExec(b, "i", 2, history.EventSubscribed, "go", 1)

	ex1 := b.history("i", 1)
	orig := plFind(ex1, history.EventRaised, "signal")
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
	plCheckFate(b, "ev-signal", plFate{Fate: history.FateBuffered, Execution: 2, Origin: 1})

	plRaise(b, "i", "go", nil, "ev-go-2")
	var out string
	b.result("i", &out)
	if out != "data" {
		t.Fatalf("result %q", out)
	}
	plCheckFate(b, "ev-signal", plFate{Fate: history.FateDelivered, Execution: 2, Origin: 1, WaitNumber: 1})
}
