package herald_test

// Fairness of the event bus (docs/bus.md, "Execution"): a burst of one
// tenant or subscription does not hold back another's single execution.

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/heraldwf/herald"
)

// orderGate is a handler that blocks until opened and records the order
// executions ran in.
type orderGate struct {
	*gate
	mu    sync.Mutex
	order []string
}

func (o *orderGate) handler(ctx context.Context, ev herald.BusEvent) (any, error) {
	o.mu.Lock()
	o.order = append(o.order, ev.ID)
	o.mu.Unlock()
	if ev.ID == "first" {
		o.run(ev) // hold the only worker until the test has queued everything
	}
	return nil, nil
}

func (o *orderGate) ran() []string {
	o.mu.Lock()
	defer o.mu.Unlock()
	return slices.Clone(o.order)
}

// TestBus_FairAcrossTenants: one worker, a queue of 1000. Tenant A has
// 200 executions claimed and queued when tenant B's single one arrives; B's
// runs right after the execution in progress, not after A's 200.
func TestBus_FairAcrossTenants(t *testing.T) {
	t.Parallel()
	o := &orderGate{gate: newGate()}
	b := setup(t, &herald.Config{Bus: herald.BusConfig{Workers: 1}}, func(rt *herald.Runtime) {
		herald.RegisterBusHandler(rt, "h", o.handler)
	})
	t.Cleanup(o.open)
	a := b.as(mustRuntimeClient(b.rt, "a"))
	bb := b.as(mustRuntimeClient(b.rt, "b"))
	a.handlerSub("s", "job", "h", nil)
	bb.handlerSub("s", "job", "h", nil)
	a.publish("job", nil, "first")
	o.waitStarted(t, 1)
	for i := range 200 {
		a.publish("job", nil, fmt.Sprint("a", i))
	}
	a.waitExecution("a199", "s", "claimed", statusIs(herald.ExecRunning))
	bb.publish("job", nil, "quiet")
	bb.waitExecution("quiet", "s", "claimed", statusIs(herald.ExecRunning))
	o.open()
	bb.waitEnded("quiet")
	order := o.ran()
	if i := slices.Index(order, "quiet"); i < 0 || i > 2 {
		t.Fatalf("tenant b's single execution ran as number %d (of %d) behind tenant a's burst: %v", i, len(order), order[:min(len(order), 10)])
	}
}

// TestBus_FairAcrossSubscriptions: one worker and a queue of one, so the
// order comes from the store's claims: subscription x has 100 executions
// queued in the store when subscription y's single one is routed; y's is
// claimed among the next few, not after x's 100.
func TestBus_FairAcrossSubscriptions(t *testing.T) {
	t.Parallel()
	o := &orderGate{gate: newGate()}
	b := setup(t, &herald.Config{Bus: herald.BusConfig{Workers: 1, QueueSize: 1}}, func(rt *herald.Runtime) {
		herald.RegisterBusHandler(rt, "h", o.handler)
	})
	t.Cleanup(o.open)
	b.handlerSub("x", "x", "h", nil)
	b.handlerSub("y", "y", "h", nil)
	b.publish("x", nil, "first")
	o.waitStarted(t, 1)
	for i := range 100 {
		b.publish("x", nil, fmt.Sprint("x", i))
	}
	b.publish("y", nil, "quiet")
	b.waitExecution("quiet", "y", "queued in the store", statusIs(herald.ExecQueued))
	b.waitExecution("x99", "x", "queued in the store", statusIs(herald.ExecQueued))
	o.open()
	b.waitEnded("quiet")
	order := o.ran()
	if i := slices.Index(order, "quiet"); i < 0 || i > 3 {
		t.Fatalf("subscription y's single execution ran as number %d behind x's burst: %v", i, order[:min(len(order), 10)])
	}
}

// busySpin is how long the spinning script of
// TestBus_HandlerRunsWhileScriptChildrenBusy keeps the only script child
// busy (its timeout).
const busySpin = 5 * time.Second

// TestBus_HandlerRunsWhileScriptChildrenBusy: two workers, one script
// process. Two executions of a script that spins until its timeout are
// claimed ahead of a Go handler's: the first takes the only child, the
// second stays queued (it needs a child, and none is free), so the other
// worker runs the handler's execution, which succeeds while the script is
// still running — not after it, as when each worker took a script
// execution and waited for the child.
func TestBus_HandlerRunsWhileScriptChildrenBusy(t *testing.T) {
	t.Parallel()
	b := setup(t, &herald.Config{Bus: herald.BusConfig{Workers: 2, ScriptProcesses: 1}}, func(rt *herald.Runtime) {
		herald.RegisterBusHandler(rt, "h", func(context.Context, herald.BusEvent) (any, error) { return "ran", nil })
	})
	b.script("spin", "for (;;) {}")
	b.subscribe(herald.Subscription{ID: "spin", Pattern: "spin", MaxRetries: intp(0), Timeout: herald.Duration(busySpin),
		Target: herald.Target{Kind: herald.TargetScript, Script: "spin"}})
	b.handlerSub("h", "quick", "h", intp(0))
	b.publish("spin", nil, "spin-1")
	b.publish("spin", nil, "spin-2")
	b.waitExecution("spin-1", "spin", "claimed", statusIs(herald.ExecRunning))
	b.waitExecution("spin-2", "spin", "claimed", statusIs(herald.ExecRunning))
	began := time.Now()
	b.publish("quick", nil, "quick")
	x := b.waitExecution("quick", "h", "succeeded", func(x *herald.Execution) bool { return x.Status.Terminal() })
	took := time.Since(began)
	if x.Status != herald.ExecSucceeded || string(x.Result) != `"ran"` {
		t.Fatalf("the handler's execution: %s, result %s, want succeeded with \"ran\"", x.Status, x.Result)
	}
	// Neither script attempt has ended: the handler ran while the child
	// was busy with the first.
	for _, id := range []string{"spin-1", "spin-2"} {
		if as := b.attempts(id); len(as) != 0 {
			t.Fatalf("%s has %d attempt records when the handler's execution succeeded (after %v), want none: "+
				"the handler waited for the script", id, len(as), took)
		}
	}
}

// TestBus_ScriptSlotFreedAfterFailure: one script process, two workers.
// Scripts that time out give their child's slot back: the executions
// after them, queued for the same child, all run. (A child killed at its
// memory cap and replaced: TestBusSandbox_HugeString and
// TestBusSandbox_UnboundedArray, whose later attacks run in the same
// runtime.)
func TestBus_ScriptSlotFreedAfterFailure(t *testing.T) {
	t.Parallel()
	b := setup(t, &herald.Config{Bus: herald.BusConfig{Workers: 2, ScriptProcesses: 1}}, nil)
	b.script("spin", "for (;;) {}")
	b.script("ok", `return ctx.event.id;`)
	b.subscribe(herald.Subscription{ID: "spin", Pattern: "spin", MaxRetries: intp(0), Timeout: herald.Duration(300 * time.Millisecond),
		Target: herald.Target{Kind: herald.TargetScript, Script: "spin"}})
	b.subscribe(herald.Subscription{ID: "ok", Pattern: "ok", MaxRetries: intp(0),
		Target: herald.Target{Kind: herald.TargetScript, Script: "ok"}})
	for _, id := range []string{"spin-1", "spin-2"} {
		b.publish("spin", nil, id)
	}
	for i := range 4 {
		b.publish("ok", nil, fmt.Sprint("ok-", i))
	}
	for _, id := range []string{"spin-1", "spin-2"} {
		x := b.waitExecution(id, "spin", "ended", func(x *herald.Execution) bool { return x.Status.Terminal() })
		if as := b.attempts(id); x.Status != herald.ExecDeadLettered || len(as) != 1 || as[0].ErrorKind != herald.ErrorTimeout {
			t.Fatalf("%s: %s, attempts %+v, want dead-lettered after a timeout", id, x.Status, as)
		}
	}
	for i := range 4 {
		id := fmt.Sprint("ok-", i)
		x := b.waitExecution(id, "ok", "ended", func(x *herald.Execution) bool { return x.Status.Terminal() })
		if x.Status != herald.ExecSucceeded || string(x.Result) != `"`+id+`"` {
			t.Fatalf("%s: %s, result %s, want succeeded", id, x.Status, x.Result)
		}
	}
}
