package herald_test

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/heraldwf/herald"
	"github.com/heraldwf/herald/history"
)

// ---- non-determinism after a code change ----

// orderVersion is a version of the "order" workflow: the activities it runs,
// in order, before it waits for "pay".
type orderVersion []string

func registerOrder(rt *herald.Runtime, steps orderVersion, ran *atomic.Int64) {
	herald.RegisterWorkflow(rt, "order", func(ctx *herald.Context, _ struct{}) (string, error) {
		for _, name := range steps {
			if err := ctx.CallActivity(name, nil).Get(nil); err != nil {
				return "", err
			}
		}
		var paid string
		if err := ctx.WaitEvent("pay").Get(&paid); err != nil {
			return "", err
		}
		return "paid " + paid, nil
	})
	for _, name := range []string{"reserve", "charge", "audit"} {
		herald.RegisterActivity(rt, name, func(context.Context, struct{}) (string, error) {
			ran.Add(1)
			return name + " done", nil
		})
	}
}

// TestNondeterminismAfterCodeChange runs an "order" instance with v1 until it
// waits for "pay", stops the runtime, starts a runtime with v2 registered
// under the same name, and raises "pay": the replay under v2 must fail the
// instance with a NondeterminismError naming the diverging position and both
// decisions, and v2 must not act on the stale history.
func TestNondeterminismAfterCodeChange(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name     string
		v1, v2   orderVersion
		seq      int
		expected string
		actual   string
	}{
		{
			// History: 1 started, 2 reserve scheduled, 3 completed, 4 wait.
			name: "changed decision", v1: orderVersion{"reserve"}, v2: orderVersion{"charge"},
			seq: 2, expected: `ActivityScheduled "reserve"`, actual: `ActivityScheduled "charge"`,
		},
		{
			// v2 adds an activity before the wait: at seq 4 history has
			// the wait, the code schedules "audit".
			name: "added decision", v1: orderVersion{"reserve"}, v2: orderVersion{"reserve", "audit"},
			seq: 4, expected: `EventSubscribed "pay"`, actual: `ActivityScheduled "audit"`,
		},
		{
			// v2 removes "audit": at seq 4 history has it scheduled, the
			// code waits instead.
			name: "removed decision", v1: orderVersion{"reserve", "audit"}, v2: orderVersion{"reserve"},
			seq: 4, expected: `ActivityScheduled "audit"`, actual: `EventSubscribed "pay"`,
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			st := testStore(t)
			var ran1, ran2 atomic.Int64
			b1 := setupOn(t, st, nil, func(rt *herald.Runtime) { registerOrder(rt, tc.v1, &ran1) })
			id, err := b1.client.StartWorkflow(b1.ctx, "order", nil, herald.WithInstanceID("order-1"))
			if err != nil {
				t.Fatal(err)
			}
			b1.waitHistory(id, history.EventSubscribed, "pay", 1)
			if err := b1.rt.Stop(b1.ctx); err != nil {
				t.Fatal(err)
			}
			before, err := b1.client.History(b1.ctx, id, 0)
			if err != nil {
				t.Fatal(err)
			}
			if got, want := int(ran1.Load()), len(tc.v1); got != want {
				t.Fatalf("v1 ran %d activities, want %d", got, want)
			}

			b2 := setupOn(t, st, nil, func(rt *herald.Runtime) { registerOrder(rt, tc.v2, &ran2) })
			if _, err := b2.client.RaiseEvent(b2.ctx, id, "pay", "42 EUR", herald.WithEventID("order-1/pay")); err != nil {
				t.Fatal(err)
			}
			info := b2.waitDone(id)
			if info.Status != herald.StatusFailed {
				t.Fatalf("status %s (output %s), want failed", info.Status, info.Output)
			}
			var nd *herald.NondeterminismError
			if !errors.As(info.Err(), &nd) {
				t.Fatalf("error %v (%T), want a *NondeterminismError", info.Err(), info.Err())
			}
			if nd.Seq != tc.seq || nd.Expected != tc.expected || nd.Actual != tc.actual {
				t.Errorf("got seq %d, expected %s, actual %s\nwant seq %d, expected %s, actual %s",
					nd.Seq, nd.Expected, nd.Actual, tc.seq, tc.expected, tc.actual)
			}
			if nd.InstanceID != id || nd.Execution != 1 {
				t.Errorf("error names instance %q execution %d, want %q 1", nd.InstanceID, nd.Execution, id)
			}

			// v2 wrote nothing but the failure: the stale history is kept
			// as it was, and no v2 activity was scheduled or run.
			after, err := b2.client.History(b2.ctx, id, 0)
			if err != nil {
				t.Fatal(err)
			}
			// After the failure comes only the breadcrumb of "pay", dropped
			// because the instance ended (docs/positional.md, rule 7).
			if len(after) != len(before)+2 || after[len(before)].Kind != history.ExecutionFailed ||
				after[len(before)+1].Kind != history.EventDropped || after[len(before)+1].EventID != "order-1/pay" ||
				after[len(before)+1].Reason != history.DropInstanceTerminal {
				t.Fatalf("history after the failure:\n%s", formatHistory(after))
			}
			for k := range before {
				if after[k].Kind != before[k].Kind || after[k].Name != before[k].Name || after[k].Seq != before[k].Seq {
					t.Errorf("history event %d changed: %+v → %+v", k, before[k], after[k])
				}
			}
			if n := ran2.Load(); n != 0 {
				t.Errorf("v2 ran %d activities on a history it does not match", n)
			}
			if f := b2.fate("order-1/pay"); f.Fate != history.FateDropped || f.Reason != history.DropInstanceTerminal {
				t.Errorf("fate of pay after the failure: %s/%s, want dropped/instance_terminal", f.Fate, f.Reason)
			}
			// The runtime logs the failure once its commit has returned.
			b2.waitFor("the failure to be logged", func() bool { return b2.logged("non-deterministic") })
		})
	}
}

// logged reports whether a WARN or ERROR line contains s.
func (b *bundle) logged(s string) bool {
	for _, w := range b.logs.warnings() {
		if strings.Contains(w, s) {
			return true
		}
	}
	return false
}

// ---- golden histories ----

var updateGolden = flag.Bool("update", false, "rewrite testdata/golden/*.json from real runs (TestGoldenHistories)")

const goldenDir = "testdata/golden"

// goldenWorkflows registers the workflows whose histories are kept in
// testdata/golden. changed registers, under the same names, variants whose
// decisions differ, which must be refused by every golden history.
func goldenWorkflows(rt *herald.Runtime, changed bool, gate chan struct{}) {
	// approval: notify (an activity), then wait for "approve", which arrives
	// while the activity runs and is buffered.
	herald.RegisterWorkflow(rt, "golden.approval", func(ctx *herald.Context, item string) (string, error) {
		notify := "golden.notify"
		if changed {
			notify = "golden.notify-v2"
		}
		if err := ctx.CallActivity(notify, item).Get(nil); err != nil {
			return "", err
		}
		var by string
		if err := ctx.WaitEvent("approve").Get(&by); err != nil {
			return "", err
		}
		return item + " approved by " + by, nil
	})
	// select: a wait for "answer" loses to a timer (withdrawn); its late
	// answer is dropped while the workflow waits for "done".
	herald.RegisterWorkflow(rt, "golden.select", func(ctx *herald.Context, _ struct{}) (string, error) {
		out := "answered"
		if !changed {
			if ctx.Select(ctx.WaitEvent("answer"), ctx.Timer(20*time.Millisecond)) == 1 {
				out = "timed out"
			}
		}
		var done string
		if err := ctx.WaitEvent("done").Get(&done); err != nil {
			return "", err
		}
		return out + ", then " + done, nil
	})
	// activities: one fails once and succeeds on retry, one fails every
	// attempt, and the workflow handles the failure.
	herald.RegisterWorkflow(rt, "golden.activities", func(ctx *herald.Context, _ struct{}) (string, error) {
		retry := herald.WithRetry(herald.RetryPolicy{MaxAttempts: 2, InitialInterval: 10 * time.Millisecond})
		var flaky string
		if err := ctx.CallActivity("golden.flaky", nil, retry).Get(&flaky); err != nil {
			return "", err
		}
		if changed {
			return flaky, nil
		}
		err := ctx.CallActivity("golden.broken", nil, retry).Get(nil)
		var ae *herald.ActivityError
		if !errors.As(err, &ae) {
			return "", fmt.Errorf("broken activity: %v, want an ActivityError", err)
		}
		return flaky + "; broken: " + ae.Message, nil
	})
	// can: execution 1 waits for "go", while "carry" is buffered, and
	// continues as new; execution 2 receives the carried "carry".
	herald.RegisterWorkflow(rt, "golden.can", func(ctx *herald.Context, round int) (string, error) {
		if round == 0 {
			if err := ctx.WaitEvent("go").Get(nil); err != nil {
				return "", err
			}
			if changed {
				if err := ctx.Sleep(time.Millisecond); err != nil {
					return "", err
				}
			}
			return "", ctx.ContinueAsNew(1)
		}
		name := "carry"
		if changed {
			name = "other"
		}
		var carried string
		if err := ctx.WaitEvent(name).Get(&carried); err != nil {
			return "", err
		}
		return "round 2 got " + carried, nil
	})

	herald.RegisterActivity(rt, "golden.notify", func(ctx context.Context, item string) (string, error) {
		if gate != nil {
			select {
			case <-gate:
			case <-ctx.Done():
				return "", ctx.Err()
			}
		}
		return "notified about " + item, nil
	})
	herald.RegisterActivity(rt, "golden.flaky", func(ctx context.Context, _ struct{}) (string, error) {
		if ai, _ := herald.ActivityInfoFrom(ctx); ai.Attempt == 1 {
			return "", errors.New("flaky: first attempt fails")
		}
		return "flaky ok on attempt 2", nil
	})
	herald.RegisterActivity(rt, "golden.broken", func(ctx context.Context, _ struct{}) (string, error) {
		return "", errors.New("broken: always fails")
	})
}

// goldenFile describes one golden history and what it must contain.
type goldenFile struct {
	name     string
	workflow string
	// check asserts the history shows what the file is kept for.
	check func(t *testing.T, evs []history.Event)
}

var goldenFiles = []goldenFile{
	{name: "approval-buffered.json", workflow: "golden.approval", check: func(t *testing.T, evs []history.Event) {
		raised := findEvent(evs, history.EventRaised, "approve")
		sub := findEvent(evs, history.EventSubscribed, "approve")
		if raised == nil || raised.TaskSeq != 0 || raised.AtStart || sub == nil || sub.EventID != raised.EventID || sub.Seq < raised.Seq {
			t.Errorf("want approve buffered mid-run, then taken by the wait")
		}
	}},
	{name: "select-withdrawn.json", workflow: "golden.select", check: func(t *testing.T, evs []history.Event) {
		c := findEvent(evs, history.EventSubscribedCancelled, "answer")
		d := findEvent(evs, history.EventDropped, "answer")
		if c == nil || d == nil || d.Reason != history.DropWithdrawnWait || d.Seq < c.Seq {
			t.Errorf("want the answer wait withdrawn, then its late answer dropped (withdrawn_wait)")
		}
	}},
	{name: "activities-retry.json", workflow: "golden.activities", check: func(t *testing.T, evs []history.Event) {
		if findEvent(evs, history.ActivityCompleted, "golden.flaky") == nil || findEvent(evs, history.ActivityFailed, "golden.broken") == nil {
			t.Errorf("want flaky completed (after a retry) and broken failed")
		}
	}},
	{name: "can-execution1.json", workflow: "golden.can", check: func(t *testing.T, evs []history.Event) {
		if findEvent(evs, history.EventRaised, "carry") == nil || evs[len(evs)-1].Kind != history.ExecutionContinuedAsNew {
			t.Errorf("want carry buffered and the execution continued as new")
		}
	}},
	{name: "can-execution2.json", workflow: "golden.can", check: func(t *testing.T, evs []history.Event) {
		carried := findEvent(evs, history.EventRaised, "carry")
		sub := findEvent(evs, history.EventSubscribed, "carry")
		if evs[0].Execution != 2 || carried == nil || !carried.AtStart || carried.OriginExecution != 1 || sub == nil || sub.EventID != carried.EventID {
			t.Errorf("want execution 2 with carry carried from execution 1 and received")
		}
	}},
}

func findEvent(evs []history.Event, kind history.Kind, name string) *history.Event {
	for i := range evs {
		if evs[i].Kind == kind && evs[i].Name == name {
			return &evs[i]
		}
	}
	return nil
}

// TestGoldenHistories replays recorded histories against the current
// workflow code: they must replay cleanly, and changed variants of the
// workflows must be refused with a NondeterminismError. With -update it
// first records the histories again by running the workflows on SQLite.
func TestGoldenHistories(t *testing.T) {
	if *updateGolden {
		recordGolden(t)
	}
	rt, err := herald.NewRuntime(testStore(t), nil)
	if err != nil {
		t.Fatal(err)
	}
	goldenWorkflows(rt, false, nil)
	changed, err := herald.NewRuntime(testStore(t), nil)
	if err != nil {
		t.Fatal(err)
	}
	goldenWorkflows(changed, true, nil)

	for _, g := range goldenFiles {
		t.Run(g.name, func(t *testing.T) {
			data, err := os.ReadFile(filepath.Join(goldenDir, g.name))
			if err != nil {
				t.Fatalf("%v (regenerate with go test -run TestGoldenHistories -update)", err)
			}
			var evs []history.Event
			if err := json.Unmarshal(data, &evs); err != nil {
				t.Fatal(err)
			}
			if len(evs) < 3 || evs[0].Kind != history.ExecutionStarted || evs[0].Workflow != g.workflow {
				t.Fatalf("%s is not a history of %s", g.name, g.workflow)
			}
			g.check(t, evs)
			if err := rt.ReplayHistory(evs); err != nil {
				t.Errorf("replay with the current code: %v", err)
			}
			err = changed.ReplayHistory(evs)
			var nd *herald.NondeterminismError
			if !errors.As(err, &nd) {
				t.Fatalf("replay with a changed workflow: %v, want a *NondeterminismError", err)
			}
			if nd.Seq < 2 || nd.Seq > len(evs)+1 || nd.Expected == "" || nd.Actual == "" || nd.Expected == nd.Actual {
				t.Errorf("non-determinism error does not locate the change: %+v", nd)
			}
			// Truncating the history leaves the code with decisions the
			// history lacks, which ReplayHistory reports too.
			if len(evs) > 2 {
				if err := rt.ReplayHistory(evs[:len(evs)-1]); err == nil && evs[len(evs)-1].Kind.IsDecision() {
					t.Errorf("replay of a history missing its last decision (%s) passed", evs[len(evs)-1].Kind)
				}
			}
		})
	}
}

// recordGolden runs the golden workflows on SQLite and writes their
// histories to testdata/golden.
func recordGolden(t *testing.T) {
	t.Helper()
	gate := make(chan struct{})
	b := setup(t, nil, func(rt *herald.Runtime) { goldenWorkflows(rt, false, gate) })
	write := func(name, id string, execution int) {
		t.Helper()
		evs, err := b.client.History(b.ctx, id, execution)
		if err != nil {
			t.Fatal(err)
		}
		data, err := json.MarshalIndent(evs, "", "  ")
		if err != nil {
			t.Fatal(err)
		}
		if err := os.MkdirAll(goldenDir, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(goldenDir, name), append(data, '\n'), 0o644); err != nil {
			t.Fatal(err)
		}
		t.Logf("wrote %s (%d events)", name, len(evs))
	}
	completed := func(id string) {
		t.Helper()
		if info := b.waitDone(id); info.Status != herald.StatusCompleted {
			t.Fatalf("%s: %s: %v", id, info.Status, info.Err())
		}
	}

	// approval: "approve" arrives while notify runs (held by the gate).
	id, err := b.client.StartWorkflow(b.ctx, "golden.approval", "laptop", herald.WithInstanceID("approval-1"))
	if err != nil {
		t.Fatal(err)
	}
	b.waitHistory(id, history.ActivityScheduled, "golden.notify", 1)
	b.raise(id, "approve", "alice", "approval-1/approve")
	b.waitHistory(id, history.EventRaised, "approve", 1)
	close(gate)
	completed(id)
	write("approval-buffered.json", id, 1)

	// select: the timer wins, then the late answer is dropped.
	id, err = b.client.StartWorkflow(b.ctx, "golden.select", nil, herald.WithInstanceID("select-1"))
	if err != nil {
		t.Fatal(err)
	}
	b.waitHistory(id, history.EventSubscribed, "done", 1)
	b.raise(id, "answer", "too late", "select-1/answer")
	b.waitHistory(id, history.EventDropped, "answer", 1)
	b.raise(id, "done", "finished", "select-1/done")
	completed(id)
	write("select-withdrawn.json", id, 1)

	// activities.
	id, err = b.client.StartWorkflow(b.ctx, "golden.activities", nil, herald.WithInstanceID("activities-1"))
	if err != nil {
		t.Fatal(err)
	}
	completed(id)
	write("activities-retry.json", id, 1)

	// continue-as-new: "carry" then "go" while execution 1 waits for "go".
	id, err = b.client.StartWorkflow(b.ctx, "golden.can", 0, herald.WithInstanceID("can-1"))
	if err != nil {
		t.Fatal(err)
	}
	b.waitHistory(id, history.EventSubscribed, "go", 1)
	for _, name := range []string{"carry", "go"} {
		if _, err := b.client.RaiseEvent(b.ctx, id, name, name+" payload", herald.WithEventID("can-1/"+name)); err != nil {
			t.Fatal(err)
		}
	}
	completed(id)
	write("can-execution1.json", id, 1)
	write("can-execution2.json", id, 2)
}
