package herald_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/heraldwf/herald"
	"github.com/heraldwf/herald/clock"
	"github.com/heraldwf/herald/history"
)

// registerFamily registers the workflows of the child-workflow tests.
func registerFamily(rt *herald.Runtime) {
	herald.RegisterActivity(rt, "cleanup", func(_ context.Context, who string) (string, error) {
		return "cleaned up " + who, nil
	})
	herald.RegisterWorkflow(rt, "double", func(ctx *herald.Context, n int) (int, error) {
		return 2 * n, nil
	})
	herald.RegisterWorkflow(rt, "fail", func(ctx *herald.Context, msg string) (int, error) {
		return 0, errors.New(msg)
	})
	// count continues as new until it reaches 3.
	herald.RegisterWorkflow(rt, "count", func(ctx *herald.Context, n int) (string, error) {
		if n < 3 {
			return "", ctx.ContinueAsNew(n + 1)
		}
		return fmt.Sprintf("counted to %d in execution %d", n, ctx.Execution()), nil
	})
	// wait waits for an event "go", or for cancellation, then cleans up.
	herald.RegisterWorkflow(rt, "wait", func(ctx *herald.Context, _ struct{}) (string, error) {
		if ctx.Select(ctx.WaitEvent("go"), ctx.Done()) == 1 {
			var s string
			if err := ctx.CallActivity("cleanup", ctx.InstanceID()).Get(&s); err != nil {
				return "", err
			}
			return s, ctx.Err()
		}
		return "went", nil
	})
	// parent calls the child workflow named in its input and reports what
	// it got.
	herald.RegisterWorkflow(rt, "parent", func(ctx *herald.Context, in childCall) (string, error) {
		var opts []herald.ChildOption
		if in.ID != "" {
			opts = append(opts, herald.WithChildID(in.ID))
		}
		var out any
		err := ctx.CallWorkflow(in.Workflow, in.Input, opts...).Get(&out)
		var ce *herald.ChildWorkflowError
		switch {
		case errors.As(err, &ce):
			return fmt.Sprintf("child %s failed: %s (exists=%v canceled=%v)", ce.InstanceID, ce.Failure.Message,
				errors.Is(err, herald.ErrInstanceExists), errors.Is(err, herald.ErrCanceled)), nil
		case err != nil:
			return "", err
		}
		return fmt.Sprintf("child gave %v", out), nil
	})
}

type childCall struct {
	Workflow string `json:"workflow"`
	Input    any    `json:"input,omitempty"`
	ID       string `json:"id,omitempty"`
}

func TestChild_Result(t *testing.T) {
	t.Parallel()
	b := setupEnv(t, nil, registerFamily)
	b.start("parent", "p1", childCall{Workflow: "double", Input: 21})
	if got := resultOf[string](b, "p1"); got != "child gave 42" {
		t.Fatalf("parent: %q", got)
	}
	// The derived id, the parent shown on the child, and both histories.
	evs := b.history("p1", 0)
	sched := ofKind(evs, history.ChildWorkflowScheduled, "", "double")
	done := ofKind(evs, history.ChildWorkflowCompleted, "", "double")
	if len(sched) != 1 || len(done) != 1 {
		t.Fatalf("parent history:%s", dumpHistory(evs))
	}
	child := sched[0].ChildID
	if want := fmt.Sprintf("p1/1/%d", sched[0].Seq); child != want || done[0].ChildID != child || done[0].TaskSeq != sched[0].Seq {
		t.Fatalf("child id %q (want %q), completion %+v", child, want, done[0])
	}
	info := b.waitDone(child)
	if info.ParentID != "p1" || info.Status != herald.StatusCompleted || info.Workflow != "double" {
		t.Fatalf("child: %+v", info)
	}
	if parent, _ := b.client.Status(b.ctx, "p1"); parent.ParentID != "" {
		t.Fatalf("the parent has a parent: %q", parent.ParentID)
	}
	page, err := b.client.ListInstances(b.ctx, herald.InstanceFilter{Workflow: "double"})
	if err != nil || len(page.Instances) != 1 || page.Instances[0].ParentID != "p1" {
		t.Fatalf("list: %+v %v", page, err)
	}
	b.replayAll("p1")
	b.replayAll(child)
}

func TestChild_FailureIsTyped(t *testing.T) {
	t.Parallel()
	b := setupEnv(t, nil, registerFamily)
	b.start("parent", "p2", childCall{Workflow: "fail", Input: "no luck", ID: "kid-2"})
	if got, want := resultOf[string](b, "p2"), "child kid-2 failed: no luck (exists=false canceled=false)"; got != want {
		t.Fatalf("parent: %q, want %q", got, want)
	}
	if n := len(ofKind(b.history("p2", 0), history.ChildWorkflowFailed, "", "fail")); n != 1 {
		t.Fatalf("%d ChildWorkflowFailed", n)
	}
	b.replayAll("p2")

	// A child the operator terminates fails its parent's future too.
	b.start("parent", "p3", childCall{Workflow: "wait", ID: "kid-3"})
	b.waitHistory("kid-3", history.EventSubscribed, "go", 1)
	if err := b.client.Terminate(b.ctx, "kid-3", "operator"); err != nil {
		t.Fatal(err)
	}
	if got := resultOf[string](b, "p3"); !strings.Contains(got, "child kid-3 failed: operator") {
		t.Fatalf("parent of a terminated child: %q", got)
	}
}

func TestChild_ContinueAsNewIsTransparent(t *testing.T) {
	t.Parallel()
	b := setupEnv(t, nil, registerFamily)
	b.start("parent", "p4", childCall{Workflow: "count", Input: 0, ID: "counter"})
	if got, want := resultOf[string](b, "p4"), "child gave counted to 3 in execution 4"; got != want {
		t.Fatalf("parent: %q, want %q", got, want)
	}
	if info := b.waitDone("counter"); info.Execution != 4 || info.ParentID != "p4" {
		t.Fatalf("child: execution %d, parent %q", info.Execution, info.ParentID)
	}
	b.replayAll("p4")
}

// A child id taken by an existing instance never attaches the parent to
// it: the parent gets a typed failure and the stranger is untouched.
func TestChild_IDCollision(t *testing.T) {
	t.Parallel()
	b := setupEnv(t, nil, registerFamily)
	b.start("wait", "stranger", struct{}{})
	b.start("parent", "p5", childCall{Workflow: "double", Input: 1, ID: "stranger"})
	got := resultOf[string](b, "p5")
	if !strings.HasPrefix(got, "child stranger failed:") || !strings.Contains(got, "exists=true") {
		t.Fatalf("parent: %q", got)
	}
	info, err := b.client.Status(b.ctx, "stranger")
	if err != nil || info.ParentID != "" || info.Status.Terminal() || info.Workflow != "wait" {
		t.Fatalf("stranger: %+v %v", info, err)
	}
	// Its own parent: the same.
	b.start("parent", "p6", childCall{Workflow: "double", Input: 1, ID: "p6"})
	if got := resultOf[string](b, "p6"); !strings.Contains(got, "exists=true") {
		t.Fatalf("child with the parent's id: %q", got)
	}
	b.replayAll("p5")
}

// Bad arguments fail the future at once and start nothing.
func TestChild_InvalidArguments(t *testing.T) {
	t.Parallel()
	b := setupEnv(t, nil, func(rt *herald.Runtime) {
		registerFamily(rt)
		herald.RegisterWorkflow(rt, "bad", func(ctx *herald.Context, _ struct{}) (string, error) {
			var all []string
			for _, f := range []herald.Future{
				ctx.CallWorkflow("", 1),
				ctx.CallWorkflow("double", 1, herald.WithChildID("a\x00b")),
				ctx.CallWorkflow("double", 1, herald.WithChildID(strings.Repeat("x", 300))),
				ctx.CallWorkflow("double", func() {}),
				ctx.CallWorkflow("double", 1, herald.WithParentClosePolicy(herald.ParentClosePolicy(9))),
			} {
				err := f.Get(nil)
				all = append(all, fmt.Sprint(errors.Is(err, herald.ErrInvalidArgument)))
			}
			return strings.Join(all, ","), nil
		})
	})
	b.start("bad", "bad", struct{}{})
	if got := resultOf[string](b, "bad"); got != "true,true,true,true,true" {
		t.Fatalf("invalid calls: %s", got)
	}
	if n := len(ofKind(b.history("bad", 0), history.ChildWorkflowScheduled, "", "")); n != 0 {
		t.Fatalf("%d children scheduled", n)
	}
}

// The parent-close policies, applied when the parent completes.
func TestChild_ParentClosePolicies(t *testing.T) {
	t.Parallel()
	b := setupEnv(t, nil, func(rt *herald.Runtime) {
		registerFamily(rt)
		herald.RegisterWorkflow(rt, "leaver", func(ctx *herald.Context, _ struct{}) (string, error) {
			ctx.CallWorkflow("wait", nil, herald.WithChildID("k-terminate"))
			ctx.CallWorkflow("wait", nil, herald.WithChildID("k-abandon"), herald.WithParentClosePolicy(herald.ParentCloseAbandon))
			ctx.CallWorkflow("wait", nil, herald.WithChildID("k-cancel"), herald.WithParentClosePolicy(herald.ParentCloseRequestCancel))
			return "bye", ctx.Sleep(time.Millisecond)
		})
	})
	b.start("leaver", "leaver", struct{}{})
	if got := resultOf[string](b, "leaver"); got != "bye" {
		t.Fatalf("leaver: %q", got)
	}
	if info := b.waitDone("k-terminate"); info.Status != herald.StatusTerminated ||
		!strings.Contains(info.Err().Error(), "parent leaver ended completed") {
		t.Fatalf("k-terminate: %s %v", info.Status, info.Err())
	}
	info := b.waitDone("k-cancel")
	var ce *herald.CanceledError
	if err := info.Result(nil); info.Status != herald.StatusCanceled || !errors.As(err, &ce) || !errors.Is(err, herald.ErrCanceled) {
		t.Fatalf("k-cancel: %s %v", info.Status, err)
	}
	if n := len(ofKind(b.history("k-cancel", 0), history.ActivityCompleted, "", "cleanup")); n != 1 {
		t.Fatalf("k-cancel ran %d cleanups", n)
	}
	if info, _ := b.client.Status(b.ctx, "k-abandon"); info.Status.Terminal() {
		t.Fatalf("k-abandon: %s", info.Status)
	}
	b.raise("k-abandon", "go", nil, "")
	if got := resultOf[string](b, "k-abandon"); got != "went" {
		t.Fatalf("k-abandon: %q", got)
	}
	b.replayAll("leaver")
	b.replayAll("k-cancel")
}

// A terminated parent applies the policy too (its children terminated in
// the same way), and a failed one.
func TestChild_ParentTerminatedOrFailed(t *testing.T) {
	t.Parallel()
	b := setupEnv(t, nil, func(rt *herald.Runtime) {
		registerFamily(rt)
		herald.RegisterWorkflow(rt, "hold", func(ctx *herald.Context, fail bool) (string, error) {
			f := ctx.CallWorkflow("wait", nil, herald.WithChildID(ctx.InstanceID()+"-kid"),
				herald.WithParentClosePolicy(herald.ParentCloseRequestCancel))
			if fail {
				return "", errors.New("boom")
			}
			return "", f.Get(nil)
		})
	})
	b.start("hold", "held", false)
	b.waitHistory("held-kid", history.EventSubscribed, "go", 1)
	if err := b.client.Terminate(b.ctx, "held", "stop"); err != nil {
		t.Fatal(err)
	}
	if info := b.waitDone("held-kid"); info.Status != herald.StatusCanceled {
		t.Fatalf("child of a terminated parent: %s", info.Status)
	}
	b.start("hold", "failing", true)
	if info := b.waitDone("failing"); info.Status != herald.StatusFailed {
		t.Fatalf("failing: %s", info.Status)
	}
	if info := b.waitDone("failing-kid"); info.Status != herald.StatusCanceled ||
		!strings.Contains(info.Err().Error(), "parent failing ended failed") {
		t.Fatalf("child of a failed parent: %s %v", info.Status, info.Err())
	}
}

// A child in a Select with a timer, on the virtual clock: the timer wins
// and the child is asked to cancel; or the child wins.
func TestChild_SelectWithTimer(t *testing.T) {
	t.Parallel()
	vc := clock.NewVirtual(time.Date(2030, 1, 1, 9, 0, 0, 0, time.UTC))
	b := setupEnv(t, &herald.Config{ClientConfig: herald.ClientConfig{Clock: vc}}, func(rt *herald.Runtime) {
		registerFamily(rt)
		herald.RegisterWorkflow(rt, "race", func(ctx *herald.Context, id string) (string, error) {
			// Abandoned when the parent ends, so that the cancellation
			// the lost Select asked for is what ends it.
			child := ctx.CallWorkflow("wait", nil, herald.WithChildID(id), herald.WithParentClosePolicy(herald.ParentCloseAbandon))
			if ctx.Select(child, ctx.Timer(time.Hour)) == 1 {
				return "timer won at " + ctx.Now().Format("15:04"), nil
			}
			var s string
			err := child.Get(&s)
			return "child won: " + s, err
		})
	})
	b.start("race", "race-timer", "slow")
	b.waitHistory("slow", history.EventSubscribed, "go", 1)
	b.waitHistory("race-timer", history.TimerCreated, "", 1)
	vc.Advance(time.Hour)
	if got := resultOf[string](b, "race-timer"); got != "timer won at 10:00" {
		t.Fatalf("race-timer: %q", got)
	}
	evs := b.history("race-timer", 0)
	if n := len(ofKind(evs, history.ChildWorkflowCancelRequested, "", "wait")); n != 1 {
		t.Fatalf("race-timer history:%s", dumpHistory(evs))
	}
	if info := b.waitDone("slow"); info.Status != herald.StatusCanceled {
		t.Fatalf("the losing child: %s", info.Status)
	}

	b.start("race", "race-child", "fast")
	b.waitHistory("race-child", history.TimerCreated, "", 1)
	b.raise("fast", "go", nil, "")
	if got := resultOf[string](b, "race-child"); got != "child won: went" {
		t.Fatalf("race-child: %q", got)
	}
	if n := len(ofKind(b.history("race-child", 0), history.TimerCancelled, "", "")); n != 1 {
		t.Fatalf("the timer was not cancelled")
	}
	b.replayAll("race-timer")
	b.replayAll("race-child")
}
