package herald_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/heraldwf/herald"
	"github.com/heraldwf/herald/history"
)

// CancelWorkflow: the workflow sees it in a Select, runs a cleanup
// activity, and the instance ends canceled with its reason.
func TestCancel_SeenCleansUpEndsCanceled(t *testing.T) {
	t.Parallel()
	b := setupEnv(t, nil, registerFamily)
	b.start("wait", "w1", struct{}{})
	b.waitHistory("w1", history.EventSubscribed, "go", 1)
	if err := b.client.CancelWorkflow(b.ctx, "w1", "no longer needed"); err != nil {
		t.Fatal(err)
	}
	// Twice: a no-op.
	if err := b.client.CancelWorkflow(b.ctx, "w1", "again"); err != nil {
		t.Fatalf("second cancel: %v", err)
	}
	info := b.waitDone("w1")
	if info.Status != herald.StatusCanceled {
		t.Fatalf("w1: %s %v", info.Status, info.Err())
	}
	err := info.Result(nil)
	var ce *herald.CanceledError
	if !errors.As(err, &ce) || ce.Reason != "no longer needed" || !errors.Is(err, herald.ErrCanceled) {
		t.Fatalf("Result: %v", err)
	}
	evs := b.history("w1", 0)
	if n := len(ofKind(evs, history.ExecutionCancelRequested, "", "")); n != 1 {
		t.Fatalf("%d ExecutionCancelRequested:%s", n, dumpHistory(evs))
	}
	if n := len(ofKind(evs, history.ActivityCompleted, "", "cleanup")); n != 1 {
		t.Fatalf("cleanup ran %d times", n)
	}
	// It returned ctx.Err(): no result is kept.
	if last := evs[len(evs)-1]; last.Kind != history.ExecutionCanceled || last.Result != nil ||
		last.Failure.Message != "no longer needed" {
		t.Fatalf("last event: %+v", last)
	}
	b.replayAll("w1")

	// Canceled instances are listed under their status.
	page, err := b.client.ListInstances(b.ctx, herald.InstanceFilter{Status: herald.StatusCanceled})
	if err != nil || len(page.Instances) != 1 || page.Instances[0].ID != "w1" {
		t.Fatalf("list canceled: %+v %v", page, err)
	}
}

func TestCancel_Errors(t *testing.T) {
	t.Parallel()
	b := setupEnv(t, nil, registerFamily)
	b.start("double", "done", 1)
	b.waitDone("done")
	if err := b.client.CancelWorkflow(b.ctx, "done", ""); !errors.Is(err, herald.ErrInstanceNotRunning) {
		t.Fatalf("cancel of a completed instance: %v", err)
	}
	for _, id := range []string{"nobody", "", strings.Repeat("x", 300), "a\x00b"} {
		if err := b.client.CancelWorkflow(b.ctx, id, ""); !errors.Is(err, herald.ErrNotFound) {
			t.Fatalf("cancel of %q: %v", id, err)
		}
	}
	b.start("wait", "w2", struct{}{})
	for _, reason := range []string{"bad\x00reason", "\xff", strings.Repeat("r", 2000)} {
		if err := b.client.CancelWorkflow(b.ctx, "w2", reason); !errors.Is(err, herald.ErrInvalidArgument) {
			t.Fatalf("reason %.20q: %v", reason, err)
		}
	}
	// Nothing was asked: the instance still runs to its own end.
	b.raise("w2", "go", nil, "")
	if got := resultOf[string](b, "w2"); got != "went" {
		t.Fatalf("w2: %q", got)
	}
}

// A workflow that ignores ctx.Done runs to its end, which is then
// canceled; Terminate ends an instance at once, running nothing.
func TestCancel_IgnoredAndTerminateImmediate(t *testing.T) {
	t.Parallel()
	b := setupEnv(t, nil, func(rt *herald.Runtime) {
		registerFamily(rt)
		herald.RegisterWorkflow(rt, "stubborn", func(ctx *herald.Context, _ struct{}) (string, error) {
			if err := ctx.WaitEvent("go").Get(nil); err != nil {
				return "", err
			}
			return "finished anyway", nil
		})
	})
	b.start("stubborn", "s1", struct{}{})
	b.waitHistory("s1", history.EventSubscribed, "go", 1)
	if err := b.client.CancelWorkflow(b.ctx, "s1", "please"); err != nil {
		t.Fatal(err)
	}
	b.waitHistory("s1", history.ExecutionCancelRequested, "", 1)
	if info, _ := b.client.Status(b.ctx, "s1"); info.Status.Terminal() {
		t.Fatalf("s1 ended at the request: %s", info.Status)
	}
	b.raise("s1", "go", nil, "")
	info := b.waitDone("s1")
	if info.Status != herald.StatusCanceled || string(info.Output) != `"finished anyway"` {
		t.Fatalf("s1: %s %s", info.Status, info.Output)
	}

	b.start("wait", "t1", struct{}{})
	b.waitHistory("t1", history.EventSubscribed, "go", 1)
	if err := b.client.Terminate(b.ctx, "t1", "now"); err != nil {
		t.Fatal(err)
	}
	info, err := b.client.Status(b.ctx, "t1")
	if err != nil || info.Status != herald.StatusTerminated {
		t.Fatalf("t1 right after Terminate: %+v %v", info, err)
	}
	if err := b.client.CancelWorkflow(b.ctx, "t1", ""); !errors.Is(err, herald.ErrInstanceNotRunning) {
		t.Fatalf("cancel of a terminated instance: %v", err)
	}
	if n := len(ofKind(b.history("t1", 0), history.ActivityScheduled, "", "")); n != 0 {
		t.Fatalf("the terminated workflow ran %d activities", n)
	}
}

// A cancel request is carried across continue-as-new: the next execution
// sees ctx.Done at once.
func TestCancel_CarriedAcrossContinueAsNew(t *testing.T) {
	t.Parallel()
	b := setupEnv(t, nil, func(rt *herald.Runtime) {
		herald.RegisterWorkflow(rt, "loop", func(ctx *herald.Context, n int) (int, error) {
			if ctx.Err() != nil {
				return n, nil
			}
			if ctx.Select(ctx.WaitEvent("tick"), ctx.Done()) == 1 {
				return 0, ctx.ContinueAsNew(n + 100)
			}
			return 0, ctx.ContinueAsNew(n + 1)
		})
	})
	b.start("loop", "l1", 0)
	b.waitHistory("l1", history.EventSubscribed, "tick", 1)
	b.raise("l1", "tick", nil, "")
	b.waitExec("l1", 2, history.EventSubscribed, "", "tick", 1)
	if err := b.client.CancelWorkflow(b.ctx, "l1", "stop looping"); err != nil {
		t.Fatal(err)
	}
	info := b.waitDone("l1")
	if info.Status != herald.StatusCanceled || info.Execution != 3 || string(info.Output) != "101" {
		t.Fatalf("l1: %s execution %d output %s", info.Status, info.Execution, info.Output)
	}
	start := b.history("l1", 3)
	if len(start) < 2 || start[1].Kind != history.ExecutionCancelRequested || !start[1].AtStart {
		t.Fatalf("execution 3:%s", dumpHistory(start))
	}
	b.replayAll("l1")
}
