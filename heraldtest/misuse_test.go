package heraldtest_test

import (
	"strings"
	"testing"
	"time"

	"github.com/heraldwf/herald"
	"github.com/heraldwf/herald/heraldtest"
)

func fatalOf(t *testing.T, fn func(tb *fatalT)) string {
	t.Helper()
	ft := &fatalT{T: t}
	runFatal(ft, func() { fn(ft) })
	if ft.msg == "" {
		t.Fatalf("no Fatalf")
	}
	return ft.msg
}

func TestPermute_InvalidSpec(t *testing.T) {
	spec := surveySpec(heraldtest.Positional)
	spec.Events = append(spec.Events,
		heraldtest.Event{Label: "a1", Lane: heraldtest.Positional, Name: "answer"},
		heraldtest.Event{Label: "has space", Lane: heraldtest.Positional, Name: "answer"},
		heraldtest.Event{Label: "nul\x00", Lane: heraldtest.Positional, Name: "answer"},
		heraldtest.Event{Label: "x", Lane: "carrier-pigeon", Name: "answer"},
		heraldtest.Event{Label: "k", Lane: heraldtest.Correlated, Name: "payment"},
		heraldtest.Event{Label: strings.Repeat("L", 300), Lane: heraldtest.Queue, Name: "answer"},
	)
	spec.Budget = -1
	msg := fatalOf(t, func(ft *fatalT) { heraldtest.Permute(ft, spec) })
	for _, want := range []string{`"a1" is used twice`, `"has space"`, `"nul\x00"`, `lane "carrier-pigeon"`, "needs a Key",
		"at most 200 bytes", "must not be negative"} {
		if !strings.Contains(msg, want) {
			t.Errorf("the error does not say %q:\n%s", want, msg)
		}
	}
	msg = fatalOf(t, func(ft *fatalT) { heraldtest.Permute(ft, heraldtest.Spec{}) })
	if !strings.Contains(msg, "Workflow is empty") || !strings.Contains(msg, "Check is nil") {
		t.Errorf("empty spec: %s", msg)
	}
}

// A workflow that never ends fails after MaxChoices instead of running
// forever; one that never parks fails Settle after WithMaxSteps units.
func TestPermute_NeverEndingWorkflowFails(t *testing.T) {
	register := func(rt *herald.Runtime) {
		herald.RegisterWorkflow(rt, "ticker", func(ctx *herald.Context, d time.Duration) (int, error) {
			for {
				if err := ctx.Sleep(d); err != nil {
					return 0, err
				}
			}
		})
	}
	msg := fatalOf(t, func(ft *fatalT) {
		heraldtest.Permute(ft, heraldtest.Spec{Register: register, Workflow: "ticker", Input: time.Minute, MaxChoices: 30,
			Check: func(testing.TB, *heraldtest.Outcome) {}})
	})
	if !strings.Contains(msg, "past 30 choices") || !strings.Contains(msg, "@+") {
		t.Fatalf("%s", msg)
	}
	msg = fatalOf(t, func(ft *fatalT) {
		env := heraldtest.New(ft, register, heraldtest.WithMaxSteps(50))
		env.Start("ticker", "t", time.Duration(0))
	})
	if !strings.Contains(msg, "still runnable after 50 units") {
		t.Fatalf("%s", msg)
	}
	msg = fatalOf(t, func(ft *fatalT) { heraldtest.New(ft, register).Advance(-time.Second) })
	if !strings.Contains(msg, "does not go back") {
		t.Fatalf("%s", msg)
	}
}

// Past the budget Permute samples orderings at random, the same ones for
// the same seed.
func TestPermute_BudgetAndSeededSample(t *testing.T) {
	run := func(seed uint64) *heraldtest.Report {
		spec := surveySpec(heraldtest.Positional)
		spec.Budget, spec.Samples, spec.Seed = 5, 20, seed
		spec.Check = func(testing.TB, *heraldtest.Outcome) {}
		return heraldtest.Permute(t, spec)
	}
	a, b := run(7), run(7)
	if a.Exhaustive || a.Sampled == 0 || a.Orderings != 5+a.Sampled {
		t.Fatalf("report %+v", a)
	}
	if a.Orderings != b.Orderings || a.Sampled != b.Sampled {
		t.Fatalf("same seed, different runs: %+v %+v", a, b)
	}
}
