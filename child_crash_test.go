package herald_test

import (
	"context"
	"fmt"
	"os"
	"testing"

	"github.com/heraldwf/herald"
	"github.com/heraldwf/herald/history"
	"github.com/heraldwf/herald/internal/testdb"
)

// The child-workflow crash test: parents start children and wait for their
// results; the worker process running them is SIGKILLed while the
// children wait (and while some of them finish), and a new worker takes
// over. No child is started twice, and every result reaches its parent.

const (
	childCrashParents  = 6
	childCrashChildren = 3
)

func registerChildCrash(rt *herald.Runtime) {
	herald.RegisterActivity(rt, "cc.work", func(_ context.Context, n int) (int, error) {
		return n * 10, nil
	})
	herald.RegisterWorkflow(rt, "cc.child", func(ctx *herald.Context, n int) (int, error) {
		if err := ctx.WaitEvent("go").Get(nil); err != nil {
			return 0, err
		}
		var out int
		err := ctx.CallActivity("cc.work", n).Get(&out)
		return out, err
	})
	herald.RegisterWorkflow(rt, "cc.parent", func(ctx *herald.Context, base int) (int, error) {
		var fs []herald.Future
		for i := range childCrashChildren {
			fs = append(fs, ctx.CallWorkflow("cc.child", base+i))
		}
		sum := 0
		for _, f := range fs {
			var n int
			if err := f.Get(&n); err != nil {
				return 0, err
			}
			sum += n
		}
		return sum, nil
	})
}

// TestChildCrashWorkerProcess is the worker subprocess of
// TestChild_CrashBetweenStartAndResult; it does nothing unless
// HERALD_CHILDCRASH_WORKER=1.
func TestChildCrashWorkerProcess(t *testing.T) {
	if os.Getenv("HERALD_CHILDCRASH_WORKER") != "1" {
		return
	}
	serveWorkerProcess(t, crashRuntimeConfig, registerChildCrash)
}

func TestChild_CrashBetweenStartAndResult(t *testing.T) {
	if testing.Short() {
		t.Skip("spawns worker processes")
	}
	backend := testdb.Backend()
	if backend == "postgres" {
		testdb.PostgresURL(t)
	}
	ctx := crashContext(t)
	loc := newLocation(t, backend)
	st, err := openStore(ctx, loc)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	b := on(t, mustClient(st, herald.DefaultTenant, nil))
	start := func() *workerProcess {
		return startWorkerProcess(t, "TestChildCrashWorkerProcess", nil, "HERALD_CHILDCRASH_WORKER=1", "HERALD_CRASH_DB="+loc)
	}
	parent := func(p int) string { return fmt.Sprintf("cc-%d", p) }
	children := func() []*herald.InstanceInfo {
		page, err := b.client.ListInstances(b.ctx, herald.InstanceFilter{Workflow: "cc.child", Limit: 1000})
		if err != nil {
			t.Fatal(err)
		}
		return page.Instances
	}

	w1 := start()
	for p := range childCrashParents {
		b.start("cc.parent", parent(p), 100*p)
	}
	// Every child started and waiting: the parents are between starting
	// their children and receiving their results.
	b.waitFor("every child waiting", func() bool {
		kids := children()
		if len(kids) != childCrashParents*childCrashChildren {
			return false
		}
		for _, k := range kids {
			evs, err := b.client.History(b.ctx, k.ID, 0)
			if err != nil || countKind(evs, history.EventSubscribed, "go") == 0 {
				return false
			}
		}
		return true
	})
	// Let the children of half the parents go, and kill the worker while
	// their results are on their way.
	for p := range childCrashParents / 2 {
		for i := range childCrashChildren {
			b.raise(fmt.Sprintf("%s/1/%d", parent(p), i+2), "go", nil, "")
		}
	}
	b.waitFor("a child completed", func() bool {
		for _, k := range children() {
			if k.Status == herald.StatusCompleted {
				return true
			}
		}
		return false
	})
	w1.kill(t)
	for p := childCrashParents / 2; p < childCrashParents; p++ {
		for i := range childCrashChildren {
			b.raise(fmt.Sprintf("%s/1/%d", parent(p), i+2), "go", nil, "")
		}
	}
	w2 := start()
	for p := range childCrashParents {
		info := b.waitDone(parent(p))
		var sum int
		if err := info.Result(&sum); err != nil {
			t.Fatalf("%s: %v\nhistory:%s", parent(p), err, dumpHistory(b.history(parent(p), 0)))
		}
		want := 0
		for i := range childCrashChildren {
			want += (100*p + i) * 10
		}
		if sum != want {
			t.Errorf("%s: %d, want %d", parent(p), sum, want)
		}
		evs := b.history(parent(p), 0)
		if s, c := countKind(evs, history.ChildWorkflowScheduled, ""), countKind(evs, history.ChildWorkflowCompleted, ""); s != childCrashChildren || c != childCrashChildren {
			t.Errorf("%s: %d scheduled, %d completed:%s", parent(p), s, c, dumpHistory(evs))
		}
	}
	kids := children()
	if len(kids) != childCrashParents*childCrashChildren {
		t.Fatalf("%d children, want %d", len(kids), childCrashParents*childCrashChildren)
	}
	for _, k := range kids {
		if k.Status != herald.StatusCompleted || k.ParentID == "" {
			t.Errorf("child %s: %s, parent %q", k.ID, k.Status, k.ParentID)
		}
	}
	w2.stop(t)
	if ps := w2.problems(); len(ps) > 0 {
		t.Errorf("the second worker logged:\n%s", ps)
	}
}
