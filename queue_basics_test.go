package herald_test

// End-to-end tests of the queue lane's basics (docs/queue.md), following
// seed 002's test plan, part 2 (tests 5–10): the seed's
// "persistent events" (schedule_wait_persistent / raise_event_persistent)
// are Herald's queue lane (ctx.Dequeue / client.Enqueue).

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/heraldwf/herald"
	"github.com/heraldwf/herald/history"
)

// From seed 002's test plan, test 5.
func TestQueue_BasicDelivery(t *testing.T) {
	t.Parallel()
	b := setupEnv(t, nil, func(rt *herald.Runtime) {
		herald.RegisterWorkflow(rt, "w", func(ctx *herald.Context, _ struct{}) (string, error) {
			var s string
			err := ctx.Dequeue("X").Get(&s)
			return s, err
		})
	})
	b.start("w", "i", nil)
	b.waitExec("i", 1, history.EventSubscribed, history.LaneQueue, "X", 1)
	b.enqueue("i", "X", "data", "ev-1")
	var got string
	b.result("i", &got)
	if got != "data" {
		t.Fatalf("result %q, want data", got)
	}
	evs := b.history("i", 0)
	subs := ofKind(evs, history.EventSubscribed, "", "")
	raised := ofKind(evs, history.EventRaised, "", "")
	if len(subs) != 1 || len(raised) != 1 || subs[0].Lane != history.LaneQueue || subs[0].EventID != "" || subs[0].NoWait {
		t.Fatalf("history:%s", dumpHistory(evs))
	}
	if r := raised[0]; r.Lane != history.LaneQueue || r.Name != "X" || r.EventID != "ev-1" || r.TaskSeq != subs[0].Seq ||
		r.WaitNumber != 1 || r.OriginExecution != 1 || r.AtStart || string(r.Payload) != `"data"` {
		t.Fatalf("delivery %+v; history:%s", r, dumpHistory(evs))
	}
	b.checkFate("ev-1", wantFate{Lane: history.LaneQueue, Name: "X", Fate: history.FateDelivered, Execution: 1, Origin: 1, WaitNumber: 1})
	b.replayAll("i")
}

// From seed 002's test plan, test 6.
func TestQueue_MessageBeforeDequeue(t *testing.T) {
	t.Parallel()
	type out struct {
		Got    string
		AtOnce bool
	}
	b := setupEnv(t, nil, func(rt *herald.Runtime) {
		herald.RegisterWorkflow(rt, "w", func(ctx *herald.Context, _ struct{}) (out, error) {
			var o out
			if err := ctx.WaitEvent("go").Get(nil); err != nil {
				return o, err
			}
			f := ctx.Dequeue("X")
			o.AtOnce = f.Ready()
			err := f.Get(&o.Got)
			return o, err
		})
	})
	b.start("w", "i", nil)
	b.waitExec("i", 1, history.EventSubscribed, history.LanePositional, "go", 1)
	// The message comes first: kept in the mailbox.
	b.enqueue("i", "X", "data", "ev-1")
	b.waitFate("ev-1", history.FateBuffered)
	b.checkFate("ev-1", wantFate{Lane: history.LaneQueue, Name: "X", Fate: history.FateBuffered, Execution: 1, Origin: 1})
	b.raise("i", "go", nil, "ev-go")
	var o out
	b.result("i", &o)
	if o != (out{Got: "data", AtOnce: true}) {
		t.Fatalf("result %+v, want data received at once", o)
	}
	evs := b.history("i", 0)
	raised := ofKind(evs, history.EventRaised, history.LaneQueue, "")
	subs := ofKind(evs, history.EventSubscribed, history.LaneQueue, "X")
	if len(raised) != 1 || raised[0].EventID != "ev-1" || raised[0].TaskSeq != 0 || len(withID(evs, "ev-1")) != 2 ||
		len(subs) != 1 || subs[0].EventID != "ev-1" || subs[0].WaitNumber != 1 || subs[0].Seq < raised[0].Seq {
		t.Fatalf("history:%s", dumpHistory(evs))
	}
	b.checkFate("ev-1", wantFate{Lane: history.LaneQueue, Name: "X", Fate: history.FateDelivered, Execution: 1, Origin: 1, WaitNumber: 1})
	b.replayAll("i")
}

// From seed 002's test plan, test 7.
func TestQueue_SurvivesSelectCancellation(t *testing.T) {
	t.Parallel()
	type out struct {
		Winner         int
		LoserCancelled bool
		Got            string
		AtOnce         bool
	}
	release := make(chan struct{})
	b := setup(t, nil, func(rt *herald.Runtime) {
		herald.RegisterWorkflow(rt, "w", func(ctx *herald.Context, _ struct{}) (out, error) {
			var o out
			d := ctx.Dequeue("X")
			o.Winner = ctx.Select(d, ctx.Timer(50*time.Millisecond))
			o.LoserCancelled = errors.Is(d.Get(nil), herald.ErrCanceled)
			// Busy with something else while the message arrives.
			if err := ctx.CallActivity("busy", nil).Get(nil); err != nil {
				return o, err
			}
			f := ctx.Dequeue("X")
			o.AtOnce = f.Ready()
			err := f.Get(&o.Got)
			return o, err
		})
		herald.RegisterActivity(rt, "busy", func(ctx context.Context, _ struct{}) (struct{}, error) {
			select {
			case <-release:
				return struct{}{}, nil
			case <-ctx.Done():
				return struct{}{}, ctx.Err()
			}
		})
	})
	b.start("w", "i", nil)
	b.waitExec("i", 1, history.ActivityScheduled, "", "busy", 1)
	evs := b.history("i", 0)
	sub := ofKind(evs, history.EventSubscribed, history.LaneQueue, "X")
	cancel := ofKind(evs, history.EventSubscribedCancelled, "", "")
	if len(sub) != 1 || len(cancel) != 1 || cancel[0].Lane != history.LaneQueue || cancel[0].Name != "X" ||
		cancel[0].TaskSeq != sub[0].Seq || len(ofKind(evs, history.TimerFired, "", "")) != 1 {
		t.Fatalf("the timer should have won and the Dequeue been cancelled; history:%s", dumpHistory(evs))
	}
	// Between the cancelled receive and the next one: the message is kept,
	// not dropped (the queue lane has no causality).
	b.enqueue("i", "X", "data", "ev-1")
	b.waitFate("ev-1", history.FateBuffered)
	evs = b.history("i", 0)
	if r := b.one(evs, "ev-1"); r.Kind != history.EventRaised || r.TaskSeq != 0 || r.Seq < cancel[0].Seq {
		t.Fatalf("the message should be buffered after the cancellation; history:%s", dumpHistory(evs))
	}
	close(release)
	var o out
	b.result("i", &o)
	if o != (out{Winner: 1, LoserCancelled: true, Got: "data", AtOnce: true}) {
		t.Fatalf("result %+v, want the timer to win and the next Dequeue to get data at once", o)
	}
	evs = b.history("i", 0)
	sub = ofKind(evs, history.EventSubscribed, history.LaneQueue, "X")
	if len(sub) != 2 || sub[1].EventID != "ev-1" || sub[1].WaitNumber != 2 || len(ofKind(evs, history.EventDropped, "", "")) != 0 {
		t.Fatalf("history:%s", dumpHistory(evs))
	}
	b.checkFate("ev-1", wantFate{Lane: history.LaneQueue, Name: "X", Fate: history.FateDelivered, Execution: 1, Origin: 1, WaitNumber: 2})
	b.replayAll("i")
}

// From seed 002's test plan, test 8.
func TestQueue_FIFO(t *testing.T) {
	t.Parallel()
	b := setupEnv(t, nil, func(rt *herald.Runtime) {
		// Buffered first, then received one by one.
		herald.RegisterWorkflow(rt, "sequential", func(ctx *herald.Context, _ struct{}) ([]string, error) {
			if err := ctx.WaitEvent("go").Get(nil); err != nil {
				return nil, err
			}
			var got []string
			for range 3 {
				var s string
				if err := ctx.Dequeue("X").Get(&s); err != nil {
					return got, err
				}
				got = append(got, s)
			}
			return got, nil
		})
		// Two receives outstanding at once, messages arriving after them.
		herald.RegisterWorkflow(rt, "outstanding", func(ctx *herald.Context, _ struct{}) ([2]string, error) {
			var got [2]string
			d1, d2 := ctx.Dequeue("X"), ctx.Dequeue("X")
			if err := ctx.All(d1, d2); err != nil {
				return got, err
			}
			if err := d1.Get(&got[0]); err != nil {
				return got, err
			}
			err := d2.Get(&got[1])
			return got, err
		})
	})

	b.start("sequential", "seq", nil)
	b.waitExec("seq", 1, history.EventSubscribed, history.LanePositional, "go", 1)
	want := []string{"first", "second", "third"}
	for _, p := range want {
		b.enqueue("seq", "X", p, "seq-"+p)
	}
	for _, p := range want {
		b.waitFate("seq-"+p, history.FateBuffered)
	}
	b.raise("seq", "go", nil, "ev-go")
	var got []string
	b.result("seq", &got)
	if !slices.Equal(got, want) {
		t.Fatalf("received %q, want %q", got, want)
	}
	for i, p := range want {
		b.checkFate("seq-"+p, wantFate{Lane: history.LaneQueue, Name: "X", Fate: history.FateDelivered, Execution: 1, Origin: 1, WaitNumber: i + 1})
	}
	b.replayAll("seq")

	b.start("outstanding", "out", nil)
	b.waitExec("out", 1, history.EventSubscribed, history.LaneQueue, "X", 2)
	b.enqueue("out", "X", "first", "out-first")
	b.enqueue("out", "X", "second", "out-second")
	var got2 [2]string
	b.result("out", &got2)
	if got2 != [2]string{"first", "second"} {
		t.Fatalf("received %q, want first, second", got2)
	}
	evs := b.history("out", 0)
	subs := ofKind(evs, history.EventSubscribed, history.LaneQueue, "X")
	first, second := b.one(evs, "out-first"), b.one(evs, "out-second")
	if len(subs) != 2 || first.TaskSeq != subs[0].Seq || second.TaskSeq != subs[1].Seq || first.Seq > second.Seq {
		t.Fatalf("history:%s", dumpHistory(evs))
	}
	b.checkFate("out-second", wantFate{Lane: history.LaneQueue, Name: "X", Fate: history.FateDelivered, Execution: 1, Origin: 1, WaitNumber: 2})
	b.replayAll("out")
}

// From seed 002's test plan, test 9.
func TestQueue_SurvivesContinueAsNew(t *testing.T) {
	t.Parallel()
	type out struct {
		Execution int
		Got       string
	}
	b := setupEnv(t, nil, func(rt *herald.Runtime) {
		herald.RegisterWorkflow(rt, "w", func(ctx *herald.Context, _ struct{}) (out, error) {
			if ctx.Execution() == 1 {
				if err := ctx.WaitEvent("go").Get(nil); err != nil {
					return out{}, err
				}
				return out{}, ctx.ContinueAsNew(nil)
			}
			o := out{Execution: ctx.Execution()}
			err := ctx.Dequeue("X").Get(&o.Got)
			return o, err
		})
	})
	b.start("w", "i", nil)
	b.waitExec("i", 1, history.EventSubscribed, history.LanePositional, "go", 1)
	b.enqueue("i", "X", "data", "ev-1")
	b.waitFate("ev-1", history.FateBuffered)
	b.raise("i", "go", nil, "ev-go")
	var o out
	info := b.result("i", &o)
	if o != (out{Execution: 2, Got: "data"}) || info.Execution != 2 {
		t.Fatalf("result %+v (execution %d), want data received by execution 2", o, info.Execution)
	}
	ex1 := b.history("i", 1)
	if r := b.one(ex1, "ev-1"); r.Kind != history.EventRaised || r.TaskSeq != 0 || r.Lane != history.LaneQueue ||
		ex1[len(ex1)-1].Kind != history.ExecutionContinuedAsNew {
		t.Fatalf("execution 1:%s", dumpHistory(ex1))
	}
	ex2 := b.history("i", 2)
	quCheckStart(b, ex2, 2, quCarried{"ev-1", 1, ""})
	if sub := ofKind(ex2, history.EventSubscribed, history.LaneQueue, "X"); len(sub) != 1 || sub[0].EventID != "ev-1" || sub[0].WaitNumber != 1 {
		t.Fatalf("execution 2:%s", dumpHistory(ex2))
	}
	b.checkFate("ev-1", wantFate{Lane: history.LaneQueue, Name: "X", Fate: history.FateDelivered, Execution: 2, Origin: 1, WaitNumber: 1})
	b.replayAll("i")
}

// From seed 002's test plan, test 10.
func TestQueue_IndependentOfPositional(t *testing.T) {
	t.Parallel()
	type both struct{ Positional, Queue string }
	// cross records what each lane received after a cancelled receive on the
	// other lane.
	type cross struct {
		Queue, Positional string
		StrayQueue        bool // TryDequeue("X") found something after both were consumed
	}
	bothLanes := func(ctx *herald.Context, _ struct{}) (both, error) {
		var o both
		p, q := ctx.WaitEvent("X"), ctx.Dequeue("X")
		if err := ctx.All(p, q); err != nil {
			return o, err
		}
		if err := p.Get(&o.Positional); err != nil {
			return o, err
		}
		err := q.Get(&o.Queue)
		return o, err
	}
	b := setupEnv(t, nil, func(rt *herald.Runtime) {
		herald.RegisterWorkflow(rt, "both", bothLanes)
		herald.RegisterWorkflow(rt, "cross", func(ctx *herald.Context, _ struct{}) (cross, error) {
			var o cross
			// A withdrawn positional question on X, a cancelled queue receive on Y.
			ctx.Select(ctx.WaitEvent("X"), ctx.Timer(20*time.Millisecond))
			ctx.Select(ctx.Dequeue("Y"), ctx.Timer(20*time.Millisecond))
			if err := ctx.WaitEvent("go").Get(nil); err != nil {
				return o, err
			}
			if err := ctx.Dequeue("X").Get(&o.Queue); err != nil {
				return o, err
			}
			if err := ctx.WaitEvent("Y").Get(&o.Positional); err != nil {
				return o, err
			}
			var s string
			ok, err := ctx.TryDequeue("Y", &s)
			o.StrayQueue = ok
			return o, err
		})
	})

	// Positional first: it resolves the WaitEvent only.
	b.start("both", "pq", nil)
	b.waitExec("pq", 1, history.EventSubscribed, history.LaneQueue, "X", 1)
	b.raise("pq", "X", "positional", "pq-p")
	b.waitFate("pq-p", history.FateDelivered)
	evs := b.history("pq", 0)
	if len(ofKind(evs, history.EventRaised, history.LaneQueue, "")) != 0 {
		t.Fatalf("the positional event reached the queue lane; history:%s", dumpHistory(evs))
	}
	b.enqueue("pq", "X", "queue", "pq-q")
	var o both
	b.result("pq", &o)
	if o != (both{Positional: "positional", Queue: "queue"}) {
		t.Fatalf("result %+v", o)
	}
	checkBoth := func(id, positionalID, queueID string) {
		t.Helper()
		evs := b.history(id, 0)
		pSub := ofKind(evs, history.EventSubscribed, history.LanePositional, "X")
		qSub := ofKind(evs, history.EventSubscribed, history.LaneQueue, "X")
		p, q := b.one(evs, positionalID), b.one(evs, queueID)
		if len(pSub) != 1 || len(qSub) != 1 || p.Lane != history.LanePositional || p.TaskSeq != pSub[0].Seq ||
			q.Lane != history.LaneQueue || q.TaskSeq != qSub[0].Seq || p.Kind != history.EventRaised || q.Kind != history.EventRaised {
			t.Fatalf("%s history:%s", id, dumpHistory(evs))
		}
		b.checkFate(positionalID, wantFate{Lane: history.LanePositional, Name: "X", Fate: history.FateDelivered, Execution: 1, Origin: 1, WaitNumber: 1})
		b.checkFate(queueID, wantFate{Lane: history.LaneQueue, Name: "X", Fate: history.FateDelivered, Execution: 1, Origin: 1, WaitNumber: 1})
		b.replayAll(id)
	}
	checkBoth("pq", "pq-p", "pq-q")

	// Queue first: it resolves the Dequeue only.
	b.start("both", "qp", nil)
	b.waitExec("qp", 1, history.EventSubscribed, history.LaneQueue, "X", 1)
	b.enqueue("qp", "X", "queue", "qp-q")
	b.waitFate("qp-q", history.FateDelivered)
	evs = b.history("qp", 0)
	if len(ofKind(evs, history.EventRaised, history.LanePositional, "")) != 0 {
		t.Fatalf("the queue message reached the positional lane; history:%s", dumpHistory(evs))
	}
	b.raise("qp", "X", "positional", "qp-p")
	b.result("qp", &o)
	if o != (both{Positional: "positional", Queue: "queue"}) {
		t.Fatalf("result %+v", o)
	}
	checkBoth("qp", "qp-p", "qp-q")

	// Cancelled receives on one lane leave nothing on the other: the
	// withdrawn positional question on X does not drop a queue message X,
	// and the cancelled Dequeue on Y does not drop a positional event Y.
	b.start("cross", "cross", nil)
	b.waitExec("cross", 1, history.EventSubscribed, history.LanePositional, "go", 1)
	b.enqueue("cross", "X", "queue", "cross-q")
	b.raise("cross", "Y", "positional", "cross-p")
	b.waitFate("cross-q", history.FateBuffered)
	b.waitFate("cross-p", history.FateBuffered)
	b.raise("cross", "go", nil, "cross-go")
	var c cross
	b.result("cross", &c)
	if c != (cross{Queue: "queue", Positional: "positional"}) {
		t.Fatalf("result %+v", c)
	}
	evs = b.history("cross", 0)
	cancels := ofKind(evs, history.EventSubscribedCancelled, "", "")
	if len(cancels) != 2 || cancels[0].Lane != history.LanePositional || cancels[0].Name != "X" ||
		cancels[1].Lane != history.LaneQueue || cancels[1].Name != "Y" || len(ofKind(evs, history.EventDropped, "", "")) != 0 {
		t.Fatalf("history:%s", dumpHistory(evs))
	}
	b.checkFate("cross-q", wantFate{Lane: history.LaneQueue, Name: "X", Fate: history.FateDelivered, Execution: 1, Origin: 1, WaitNumber: 1})
	b.checkFate("cross-p", wantFate{Lane: history.LanePositional, Name: "Y", Fate: history.FateDelivered, Execution: 1, Origin: 1, WaitNumber: 1})
	b.replayAll("cross")
}
