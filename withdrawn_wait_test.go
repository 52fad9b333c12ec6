package herald_test

// End-to-end tests of the positional lane's causality rule
// (docs/positional.md, rule 3: withdrawn waits), following seed 002's test
// plan, part 1 (tests 1–4) and test 7b. Herald's decision against the seed
// applies (docs/decisions.md): events raised before any wait are buffered, not dropped; only the
// late answer to a withdrawn wait is dropped.

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/heraldwf/herald"
	"github.com/heraldwf/herald/history"
)

// selectOut is what the select workflows return: which branch won the
// select, and the payload the later wait received.
type selectOut struct {
	Winner int
	Got    string
}

// plSelectThenWait races WaitEvent("X") against a short timer (which wins,
// as no X is raised), then waits for X again.
func plSelectThenWait(ctx *herald.Context, _ struct{}) (selectOut, error) {
	w := ctx.WaitEvent("X")
	timer := ctx.Timer(50 * time.Millisecond)
	out := selectOut{Winner: ctx.Select(w, timer)}
	if err := w.Get(nil); !errors.Is(err, herald.ErrCanceled) {
		return out, errors.New("the losing wait was not cancelled")
	}
	err := ctx.WaitEvent("X").Get(&out.Got)
	return out, err
}

// plCheckWithdrawn checks the shape of a history in which wait 1 of X lost
// a select to a timer and wait 2 of X received dataEventID; droppedEventID,
// if not "", was dropped as the late answer to wait 1 in between.
func plCheckWithdrawn(b *bundle, evs []history.Event, droppedEventID, dataEventID string) {
	b.t.Helper()
	subs := ofKind(evs, history.EventSubscribed, "", "X")
	cancels := ofKind(evs, history.EventSubscribedCancelled, "", "X")
	raised := ofKind(evs, history.EventRaised, "", "X")
	drops := ofKind(evs, history.EventDropped, "", "X")
	fired := ofKind(evs, history.TimerFired, "", "")
	wantDrops := 0
	if droppedEventID != "" {
		wantDrops = 1
	}
	if len(subs) != 2 || len(cancels) != 1 || len(raised) != 1 || len(drops) != wantDrops || len(fired) != 1 {
		b.t.Fatalf("history:%s", dumpHistory(evs))
	}
	// Wait 1 withdrawn after the timer fired, naming its subscription.
	if c := cancels[0]; c.TaskSeq != subs[0].Seq || c.Seq < fired[0].Seq || c.Lane != history.LanePositional {
		b.t.Fatalf("cancellation breadcrumb %+v, history:%s", c, dumpHistory(evs))
	}
	// The late answer dropped between the withdrawal and the new wait.
	if wantDrops == 1 {
		d := drops[0]
		if d.EventID != droppedEventID || d.Reason != history.DropWithdrawnWait || d.Seq < cancels[0].Seq || d.Seq > subs[1].Seq {
			b.t.Fatalf("drop breadcrumb %+v, history:%s", d, dumpHistory(evs))
		}
	}
	// Wait 2 got the fresh event; wait 1 got nothing.
	if r := raised[0]; r.EventID != dataEventID || r.TaskSeq != subs[1].Seq || r.WaitNumber != 2 {
		b.t.Fatalf("delivery %+v, history:%s", r, dumpHistory(evs))
	}
	if subs[0].EventID != "" || subs[1].EventID != "" {
		b.t.Fatalf("no wait took a buffered event, history:%s", dumpHistory(evs))
	}
}

// From seed 002's test plan, test 1.
func TestWithdrawnWait_DoesNotStealFutureEvent(t *testing.T) {
	t.Parallel()
	b := setupEnv(t, nil, func(rt *herald.Runtime) { herald.RegisterWorkflow(rt, "w", plSelectThenWait) })
	b.start("w", "i", nil)
	// The timer wins and the workflow waits for X again in the same turn.
	b.waitHistory("i", history.EventSubscribed, "X", 2)
	b.raise("i", "X", "data", "ev-data")

	var out selectOut
	b.result("i", &out)
	if out != (selectOut{Winner: 1, Got: "data"}) {
		t.Fatalf("result %+v, want timer won and the second wait got data", out)
	}
	plCheckWithdrawn(b, b.history("i", 0), "", "ev-data")
	b.checkFate("ev-data", wantFate{Lane: history.LanePositional, Fate: history.FateDelivered, Execution: 1, Origin: 1, WaitNumber: 2})
}

// From seed 002's test plan, test 2.
func TestWithdrawnWait_DropsInterveningEvent(t *testing.T) {
	t.Parallel()
	b := setupEnv(t, nil, func(rt *herald.Runtime) {
		herald.RegisterWorkflow(rt, "w", func(ctx *herald.Context, _ struct{}) (selectOut, error) {
			out := selectOut{Winner: ctx.Select(ctx.WaitEvent("X"), ctx.Timer(50*time.Millisecond))}
			// Something between the withdrawal and the next wait for X.
			if err := ctx.WaitEvent("go-on").Get(nil); err != nil {
				return out, err
			}
			err := ctx.WaitEvent("X").Get(&out.Got)
			return out, err
		})
	})
	b.start("w", "i", nil)
	b.waitHistory("i", history.EventSubscribedCancelled, "X", 1)
	b.waitHistory("i", history.EventSubscribed, "go-on", 1)
	b.raise("i", "X", "first", "ev-first")
	b.waitHistory("i", history.EventDropped, "X", 1)
	b.checkFate("ev-first", wantFate{Lane: history.LanePositional, Fate: history.FateDropped, Reason: history.DropWithdrawnWait, Execution: 1, Origin: 1})
	b.wantWarn("herald: event dropped", "ev-first", "reason=withdrawn_wait")

	b.raise("i", "go-on", nil, "ev-go-on")
	b.waitHistory("i", history.EventSubscribed, "X", 2)
	b.raise("i", "X", "second", "ev-second")

	var out selectOut
	b.result("i", &out)
	if out != (selectOut{Winner: 1, Got: "second"}) {
		t.Fatalf("result %+v, want the second event only", out)
	}
	evs := b.history("i", 0)
	plCheckWithdrawn(b, evs, "ev-first", "ev-second")
	b.checkFate("ev-second", wantFate{Lane: history.LanePositional, Fate: history.FateDelivered, Execution: 1, Origin: 1, WaitNumber: 2})
	if err := b.rt.ReplayHistory(evs); err != nil {
		t.Fatalf("replay: %v", err)
	}
}

// From seed 002's test plan, test 3.
func TestWithdrawnWait_MatchingWithoutCancellation(t *testing.T) {
	t.Parallel()
	b := setupEnv(t, nil, func(rt *herald.Runtime) {
		// Two sequential waits.
		herald.RegisterWorkflow(rt, "seq", func(ctx *herald.Context, _ struct{}) ([2]string, error) {
			var out [2]string
			if err := ctx.WaitEvent("X").Get(&out[0]); err != nil {
				return out, err
			}
			err := ctx.WaitEvent("X").Get(&out[1])
			return out, err
		})
		// Two waits active at once.
		herald.RegisterWorkflow(rt, "both", func(ctx *herald.Context, _ struct{}) ([2]string, error) {
			var out [2]string
			w1, w2 := ctx.WaitEvent("X"), ctx.WaitEvent("X")
			if err := w2.Get(&out[1]); err != nil {
				return out, err
			}
			err := w1.Get(&out[0])
			return out, err
		})
	})
	b.start("seq", "seq", nil)
	b.waitHistory("seq", history.EventSubscribed, "X", 1)
	b.raise("seq", "X", "first", "seq-1")
	b.waitHistory("seq", history.EventSubscribed, "X", 2)
	b.raise("seq", "X", "second", "seq-2")

	b.start("both", "both", nil)
	b.waitHistory("both", history.EventSubscribed, "X", 2)
	b.raise("both", "X", "first", "both-1")
	b.raise("both", "X", "second", "both-2")

	for _, id := range []string{"seq", "both"} {
		var out [2]string
		b.result(id, &out)
		if out != [2]string{"first", "second"} {
			t.Fatalf("%s: result %q, want [first second]", id, out)
		}
		evs := b.history(id, 0)
		subs := ofKind(evs, history.EventSubscribed, "", "X")
		raised := ofKind(evs, history.EventRaised, "", "X")
		if len(subs) != 2 || len(raised) != 2 || countKind(evs, history.EventSubscribedCancelled, "") != 0 ||
			countKind(evs, history.EventDropped, "") != 0 {
			t.Fatalf("%s: history:%s", id, dumpHistory(evs))
		}
		for i := range 2 {
			if raised[i].TaskSeq != subs[i].Seq || raised[i].WaitNumber != i+1 {
				t.Fatalf("%s: raise %d did not pair with wait %d, history:%s", id, i+1, i+1, dumpHistory(evs))
			}
		}
		b.checkFate(id+"-1", wantFate{Lane: history.LanePositional, Fate: history.FateDelivered, Execution: 1, Origin: 1, WaitNumber: 1})
		b.checkFate(id+"-2", wantFate{Lane: history.LanePositional, Fate: history.FateDelivered, Execution: 1, Origin: 1, WaitNumber: 2})
		if err := b.rt.ReplayHistory(evs); err != nil {
			t.Fatalf("%s: replay: %v", id, err)
		}
	}
}

// From seed 002's test plan, test 4.
func TestWithdrawnWait_BreadcrumbReplays(t *testing.T) {
	t.Parallel()
	b := setupEnv(t, nil, func(rt *herald.Runtime) { herald.RegisterWorkflow(rt, "w", plSelectThenWait) })
	b.start("w", "i", nil)
	b.waitHistory("i", history.EventSubscribed, "X", 2)
	b.raise("i", "X", "data", "ev-data")
	var out selectOut
	b.result("i", &out)
	if out != (selectOut{Winner: 1, Got: "data"}) {
		t.Fatalf("result %+v", out)
	}

	evs := b.history("i", 0)
	if countKind(evs, history.EventSubscribedCancelled, "X") != 1 {
		t.Fatalf("no cancellation breadcrumb, history:%s", dumpHistory(evs))
	}
	plCheckWithdrawn(b, evs, "", "ev-data")
	if last := evs[len(evs)-1]; last.Kind != history.ExecutionCompleted || string(last.Result) != `{"Winner":1,"Got":"data"}` {
		t.Fatalf("history:%s", dumpHistory(evs))
	}
	// Replaying the recorded history gives the same decisions.
	if err := b.rt.ReplayHistory(evs); err != nil {
		t.Fatalf("replay: %v", err)
	}

	// Replay really checks the breadcrumb: code that never withdraws its
	// wait no longer fits this history.
	other, err := herald.NewRuntime(testStore(t), nil)
	if err != nil {
		t.Fatal(err)
	}
	herald.RegisterWorkflow(other, "w", func(ctx *herald.Context, _ struct{}) (selectOut, error) {
		w := ctx.WaitEvent("X")
		if err := ctx.Sleep(50 * time.Millisecond); err != nil {
			return selectOut{}, err
		}
		var s string
		err := w.Get(&s)
		return selectOut{Winner: 1, Got: s}, err
	})
	var nd *herald.NondeterminismError
	if err := other.ReplayHistory(evs); !errors.As(err, &nd) {
		t.Fatalf("replay with changed code: %v, want a NondeterminismError", err)
	}
}

// From seed 002's test plan, test 7b.
func TestWithdrawnWait_LateEventDroppedAfterSelect(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	b := setup(t, nil, func(rt *herald.Runtime) {
		// An activity the test holds open: the workflow is busy between the
		// withdrawal of wait 1 and the creation of wait 2.
		herald.RegisterActivity(rt, "hold", func(ctx context.Context, _ struct{}) (string, error) {
			select {
			case <-release:
				return "released", nil
			case <-ctx.Done():
				return "", ctx.Err()
			}
		})
		herald.RegisterWorkflow(rt, "w", func(ctx *herald.Context, _ struct{}) (selectOut, error) {
			out := selectOut{Winner: ctx.Select(ctx.WaitEvent("X"), ctx.Timer(50*time.Millisecond))}
			if err := ctx.CallActivity("hold", nil).Get(nil); err != nil {
				return out, err
			}
			err := ctx.WaitEvent("X").Get(&out.Got)
			return out, err
		})
	})
	b.start("w", "i", nil)
	b.waitHistory("i", history.EventSubscribedCancelled, "X", 1)
	b.waitHistory("i", history.ActivityScheduled, "hold", 1)
	b.raise("i", "X", "data", "ev-data")
	b.waitHistory("i", history.EventDropped, "X", 1)
	b.checkFate("ev-data", wantFate{Lane: history.LanePositional, Fate: history.FateDropped, Reason: history.DropWithdrawnWait, Execution: 1, Origin: 1})

	close(release)
	b.waitHistory("i", history.EventSubscribed, "X", 2)
	b.raise("i", "X", "data2", "ev-data2")

	var out selectOut
	b.result("i", &out)
	if out != (selectOut{Winner: 1, Got: "data2"}) {
		t.Fatalf("result %+v, want data2 only", out)
	}
	evs := b.history("i", 0)
	plCheckWithdrawn(b, evs, "ev-data", "ev-data2")
	if d := ofKind(evs, history.EventDropped, "", "X")[0]; d.Seq > ofKind(evs, history.ActivityCompleted, "", "hold")[0].Seq {
		t.Fatalf("the drop should precede the activity's completion, history:%s", dumpHistory(evs))
	}
	b.checkFate("ev-data2", wantFate{Lane: history.LanePositional, Fate: history.FateDelivered, Execution: 1, Origin: 1, WaitNumber: 2})
	b.wantWarn("herald: event dropped", "ev-data", "reason=withdrawn_wait")
	if err := b.rt.ReplayHistory(evs); err != nil {
		t.Fatalf("replay: %v", err)
	}
}
