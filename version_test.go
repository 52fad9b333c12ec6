package herald_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/heraldwf/herald"
	"github.com/heraldwf/herald/history"
)

// versionGolden is a history of golden.version recorded with its version-1
// code (before ctx.Version), kept in testdata/golden.
const versionGolden = "version-v1.json"

// branchLog records which branch each run of golden.version took.
type branchLog struct {
	mu sync.Mutex
	v  []int
}

func (l *branchLog) add(v int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.v = append(l.v, v)
}

func (l *branchLog) take() []int {
	l.mu.Lock()
	defer l.mu.Unlock()
	v := l.v
	l.v = nil
	return v
}

// registerVersioned registers golden.version as the code of release code:
//
//   - 1: ship, then wait for "confirm" (the code before the change);
//   - 2: ctx.Version("receipt", DefaultVersion, 1): 1 asks for a receipt
//     instead of shipping, DefaultVersion ships as release 1 did;
//   - 3: the old branch removed: Version("receipt", 1, 1);
//   - 4: a release that supports only version 2: Version("receipt", 2, 2);
//   - 5: the Version call removed with its old branch: always a receipt.
func registerVersioned(rt *herald.Runtime, code int, branches *branchLog) {
	herald.RegisterWorkflow(rt, "golden.version", func(ctx *herald.Context, item string) (string, error) {
		v := 0
		switch code {
		case 1:
		case 2:
			v = ctx.Version("receipt", herald.DefaultVersion, 1)
			if again := ctx.Version("receipt", herald.DefaultVersion, 1); again != v {
				return "", fmt.Errorf("the second Version call said %d, the first %d", again, v)
			}
		case 3:
			v = ctx.Version("receipt", 1, 1)
		case 4:
			v = ctx.Version("receipt", 2, 2)
		case 5:
			v = 1
		}
		if branches != nil {
			branches.add(v)
		}
		activity := "golden.ship"
		if v >= 1 {
			activity = "golden.receipt"
		}
		var r string
		if err := ctx.CallActivity(activity, item).Get(&r); err != nil {
			return "", err
		}
		if err := ctx.WaitEvent("confirm").Get(nil); err != nil {
			return "", err
		}
		return fmt.Sprintf("v%d: %s", v, r), nil
	})
	herald.RegisterActivity(rt, "golden.ship", func(_ context.Context, item string) (string, error) { return "shipped " + item, nil })
	herald.RegisterActivity(rt, "golden.receipt", func(_ context.Context, item string) (string, error) { return "receipt for " + item, nil })
}

func loadHistory(t *testing.T, name string) []history.Event {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(goldenDir, name))
	if err != nil {
		t.Fatalf("%v (regenerate with go test -run TestVersion_Golden -update)", err)
	}
	var evs []history.Event
	if err := json.Unmarshal(data, &evs); err != nil {
		t.Fatal(err)
	}
	return evs
}

func runtimeWith(t *testing.T, code int, branches *branchLog) *herald.Runtime {
	t.Helper()
	rt, err := herald.NewRuntime(testStore(t), nil)
	if err != nil {
		t.Fatal(err)
	}
	registerVersioned(rt, code, branches)
	return rt
}

// A history recorded with the code of release 1 replays under release 2
// through the old branch (no marker: DefaultVersion), while a new instance
// of release 2 takes the new branch and records it; a release that no
// longer supports a recorded version fails with a *NondeterminismError.
// With -update it first records the golden history with release 1.
func TestVersion_Golden(t *testing.T) {
	if *updateGolden {
		b := setup(t, nil, func(rt *herald.Runtime) { registerVersioned(rt, 1, nil) })
		b.start("golden.version", "version-1", "book")
		b.waitHistory("version-1", history.EventSubscribed, "confirm", 1)
		b.raise("version-1", "confirm", true, "version-1/confirm")
		if got := resultOf[string](b, "version-1"); got != "v0: shipped book" {
			t.Fatalf("release 1: %q", got)
		}
		data, err := json.MarshalIndent(b.history("version-1", 1), "", "  ")
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(goldenDir, versionGolden), append(data, '\n'), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	old := loadHistory(t, versionGolden)
	if old[0].Workflow != "golden.version" || findEvent(old, history.ActivityScheduled, "golden.ship") == nil ||
		countKind(old, history.VersionMarker, "") != 0 || old[len(old)-1].Kind != history.ExecutionCompleted {
		t.Fatalf("%s is not release 1's history:%s", versionGolden, dumpHistory(old))
	}
	var branches branchLog
	if err := runtimeWith(t, 1, nil).ReplayHistory(old); err != nil {
		t.Fatalf("release 1: %v", err)
	}
	if err := runtimeWith(t, 2, &branches).ReplayHistory(old); err != nil {
		t.Fatalf("release 2 over release 1's history: %v", err)
	}
	if got := branches.take(); !slices.Equal(got, []int{0}) {
		t.Fatalf("release 2 over release 1's history took branches %v, want [0] (the old one)", got)
	}
	// Release 3 removed the old branch: the old history no longer replays
	// (its min, 1, takes the receipt branch).
	var nd *herald.NondeterminismError
	if err := runtimeWith(t, 3, nil).ReplayHistory(old); !errors.As(err, &nd) {
		t.Fatalf("release 3 over release 1's history: %v, want a *NondeterminismError", err)
	}

	// A new instance of release 2 takes the new branch.
	b := setup(t, nil, func(rt *herald.Runtime) { registerVersioned(rt, 2, &branches) })
	b.start("golden.version", "version-2", "book")
	b.waitHistory("version-2", history.EventSubscribed, "confirm", 1)
	b.raise("version-2", "confirm", true, "")
	if got := resultOf[string](b, "version-2"); got != "v1: receipt for book" {
		t.Fatalf("release 2, new instance: %q", got)
	}
	if got := branches.take(); len(got) < 2 || slices.ContainsFunc(got, func(v int) bool { return v != 1 }) {
		t.Fatalf("release 2, new instance: branches %v, want 1 on every turn", got)
	}
	evs := b.history("version-2", 1)
	if m := findEvent(evs, history.VersionMarker, "receipt"); m == nil || string(m.Result) != "1" || m.Seq != 2 ||
		countKind(evs, history.VersionMarker, "") != 1 {
		t.Fatalf("release 2's history has no single marker of version 1 after its start:%s", dumpHistory(evs))
	}
	for code, wantErr := range map[int]bool{2: false, 3: false, 5: false, 4: true, 1: true} {
		err := runtimeWith(t, code, nil).ReplayHistory(evs)
		if !wantErr && err != nil {
			t.Errorf("release %d over release 2's history: %v", code, err)
		}
		if wantErr && !errors.As(err, &nd) {
			t.Errorf("release %d over release 2's history: %v, want a *NondeterminismError", code, err)
		}
		if code == 4 && (!strings.Contains(nd.Expected, "VersionMarker") || !strings.Contains(nd.Actual, "no longer supports version 1")) {
			t.Errorf("release 4: %+v", nd)
		}
	}
}

// A running instance whose recorded version the new release no longer
// supports fails, on its next turn, with a *NondeterminismError.
func TestVersion_OutOfRangeFailsTheInstance(t *testing.T) {
	t.Parallel()
	st := testStore(t)
	b := setupOn(t, st, nil, func(rt *herald.Runtime) { registerVersioned(rt, 2, nil) })
	b.start("golden.version", "v", "book")
	b.waitHistory("v", history.EventSubscribed, "confirm", 1)
	if err := b.rt.Stop(b.ctx); err != nil {
		t.Fatal(err)
	}
	b = setupOn(t, st, nil, func(rt *herald.Runtime) { registerVersioned(rt, 4, nil) })
	b.raise("v", "confirm", true, "")
	info := b.waitDone("v")
	var nd *herald.NondeterminismError
	if info.Status != herald.StatusFailed || !errors.As(info.Err(), &nd) || !strings.Contains(nd.Actual, "Version(\"receipt\", 2, 2)") {
		t.Fatalf("%s: %v", info.Status, info.Err())
	}
}

// SideEffect runs its function once and every replay reads the recorded
// value; Random draws the same numbers on every replay (its seed is
// recorded); both in ReplayHistory too. A value that cannot be recorded
// fails the workflow.
func TestSideEffectAndRandom(t *testing.T) {
	t.Parallel()
	var calls atomic.Int32
	register := func(rt *herald.Runtime, fresh func() string) {
		herald.RegisterWorkflow(rt, "dice", func(ctx *herald.Context, _ struct{}) ([]string, error) {
			token, err := herald.SideEffect(ctx, fresh)
			if err != nil {
				return nil, err
			}
			draws := []string{token, fmt.Sprint(ctx.Random().Int64()), fmt.Sprint(ctx.Random().IntN(1000))}
			if err := ctx.CallActivity("dice.note", draws).Get(nil); err != nil {
				return nil, err
			}
			if err := ctx.WaitEvent("go").Get(nil); err != nil {
				return nil, err
			}
			return append(draws, fmt.Sprint(ctx.Random().Int64())), nil
		})
		herald.RegisterActivity(rt, "dice.note", func(context.Context, []string) (string, error) { return "", nil })
		herald.RegisterWorkflow(rt, "bad-effect", func(ctx *herald.Context, _ struct{}) (string, error) {
			var out any
			err := ctx.SideEffect(func() any { return make(chan int) }, &out)
			return "recorded", err
		})
	}
	b := setup(t, nil, func(rt *herald.Runtime) {
		register(rt, func() string { return fmt.Sprintf("token-%d", calls.Add(1)) })
	})
	results := map[string][]string{}
	for _, id := range []string{"d1", "d2"} {
		b.start("dice", id, nil)
		b.waitHistory(id, history.EventSubscribed, "go", 1)
		b.raise(id, "go", nil, "")
		results[id] = resultOf[[]string](b, id)
	}
	if n := calls.Load(); n != 2 {
		t.Fatalf("the side effect ran %d times for two instances, want 2", n)
	}
	for id, got := range results {
		evs := b.history(id, 1)
		var noted []string
		if a := findEvent(evs, history.ActivityScheduled, "dice.note"); a == nil || json.Unmarshal(a.Input, &noted) != nil {
			t.Fatalf("%s: no activity input:%s", id, dumpHistory(evs))
		}
		// The first turn's values, as its activity recorded them, are
		// those the last turn computed again by replay.
		if !slices.Equal(noted, got[:3]) {
			t.Fatalf("%s: first turn drew %q, the replay %q", id, noted, got[:3])
		}
		if countKind(evs, history.SideEffectRecorded, "") != 2 || countKind(evs, history.SideEffectRecorded, "herald.random") != 1 {
			t.Fatalf("%s: want one side effect and one random seed recorded:%s", id, dumpHistory(evs))
		}
		// Replayed elsewhere, with a side effect that would answer
		// differently: the recorded values, and fn never runs.
		rt, err := herald.NewRuntime(testStore(t), nil)
		if err != nil {
			t.Fatal(err)
		}
		var replayCalls atomic.Int32
		register(rt, func() string { replayCalls.Add(1); return "other" })
		if err := rt.ReplayHistory(evs); err != nil {
			t.Fatalf("%s: %v", id, err)
		}
		if replayCalls.Load() != 0 {
			t.Fatalf("%s: ReplayHistory ran the side effect", id)
		}
	}
	if slices.Equal(results["d1"][1:], results["d2"][1:]) {
		t.Fatalf("two instances drew the same numbers: %q", results["d1"])
	}

	b.start("bad-effect", "bad", nil)
	info := b.waitDone("bad")
	var we *herald.WorkflowError
	if info.Status != herald.StatusFailed || !errors.As(info.Err(), &we) || we.Kind != "panic" ||
		!strings.Contains(we.Message, "SideEffect") {
		t.Fatalf("bad side effect: %s %v", info.Status, info.Err())
	}
	if n := countKind(b.history("bad", 1), history.SideEffectRecorded, ""); n != 0 {
		t.Fatalf("a value that cannot be recorded was recorded (%d)", n)
	}
}
