package heraldtest_test

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/heraldwf/herald"
	"github.com/heraldwf/herald/heraldtest"
	"github.com/heraldwf/herald/history"
)

// The planted bug: a survey collects Want answers, asking again (a
// reminder activity, then a new wait) whenever a wait's deadline passes,
// and gives up after MaxReminders. On the positional lane an answer that
// arrives while the reminder is being sent is the late answer to the
// withdrawn wait and is dropped, by design (docs/positional.md, rule 3):
// it is never counted. On the queue lane it waits for the next Dequeue.

type surveyIn struct {
	Want         int
	MaxReminders int
	Queue        bool
}

func survey(ctx *herald.Context, in surveyIn) (int, error) {
	got, reminders := 0, 0
	for got < in.Want {
		var w herald.Future
		if in.Queue {
			w = ctx.Dequeue("answer", herald.WithTimeout(time.Hour))
		} else {
			w = ctx.WaitEvent("answer", herald.WithTimeout(time.Hour))
		}
		err := w.Get(nil)
		switch {
		case errors.Is(err, herald.ErrEventTimeout):
			if reminders == in.MaxReminders {
				return got, nil
			}
			reminders++
			if err := ctx.CallActivity("remind", reminders).Get(nil); err != nil {
				return got, err
			}
		case err != nil:
			return got, err
		default:
			got++
		}
	}
	return got, nil
}

func registerSurvey(rt *herald.Runtime) {
	herald.RegisterWorkflow(rt, "survey", survey)
	herald.RegisterActivity(rt, "remind", func(context.Context, int) (string, error) { return "sent", nil })
}

// everyAnswerCounted: the result counts every answer the engine accepted
// (one refused because the survey had already ended is not owed).
func everyAnswerCounted(t testing.TB, o *heraldtest.Outcome) {
	var got int
	if err := o.Result(&got); err != nil {
		t.Fatalf("no result: %v", err)
	}
	accepted := 0
	for _, label := range []string{"a1", "a2"} {
		if _, refused := o.Refused[label]; !refused {
			accepted++
		}
	}
	if got != accepted {
		t.Errorf("the survey counted %d answers, %d were accepted (a1 %s, a2 %s)", got, accepted, o.Fate("a1"), o.Fate("a2"))
	}
}

func surveySpec(lane heraldtest.Lane) heraldtest.Spec {
	return heraldtest.Spec{
		Register: registerSurvey,
		Workflow: "survey",
		Input:    surveyIn{Want: 2, MaxReminders: 1, Queue: lane == heraldtest.Queue},
		Events: []heraldtest.Event{
			{Label: "a1", Lane: lane, Name: "answer", Payload: "yes"},
			{Label: "a2", Lane: lane, Name: "answer", Payload: "no"},
		},
		Check:   everyAnswerCounted,
		Options: []heraldtest.Option{withBackendFromEnv()},
	}
}

// fakeT records what Permute reports instead of failing the test.
type fakeT struct {
	*testing.T
	mu     sync.Mutex
	errors []string
	logs   []string
}

func (f *fakeT) Helper() {}
func (f *fakeT) Errorf(format string, args ...any) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.errors = append(f.errors, fmt.Sprintf(format, args...))
}
func (f *fakeT) Logf(format string, args ...any) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.logs = append(f.logs, fmt.Sprintf(format, args...))
}

func TestPermute_FindsPlantedBug(t *testing.T) {
	// The obvious order is fine: both answers arrive while the survey waits.
	env := newEnv(t, registerSurvey)
	env.Start("survey", "s", surveyIn{Want: 2, MaxReminders: 1})
	env.Raise("s", "answer", "yes", herald.WithEventID("a1"))
	env.Raise("s", "answer", "no", herald.WithEventID("a2"))
	env.RequireResult(t, "s", 2)

	fake := &fakeT{T: t}
	began := time.Now()
	rep := heraldtest.Permute(fake, surveySpec(heraldtest.Positional))
	took := time.Since(began)
	if len(fake.errors) != 1 || rep.Failures == 0 {
		t.Fatalf("Permute reported %d errors (%d failing orderings), want the planted bug: %q", len(fake.errors), rep.Failures, fake.errors)
	}
	// The shortest failing ordering: the first wait times out, the reminder
	// is scheduled, a1 arrives before the reminder is sent (withdrawn
	// wait: dropped), the second wait times out too and the survey ends
	// with a1 uncounted; a2 comes too late (refused, not owed).
	const want = "start · turn[wait answer, timer 1h0m0s] · @+1h0m0s turn[timer fired, withdraw answer, call remind] · deliver a1 · " +
		"turn[a1 dropped (withdrawn_wait)] · activity remind#1 · turn[remind done, wait answer, timer 1h0m0s] · " +
		"@+2h0m0s turn[timer fired, withdraw answer, completed] · deliver a2"
	if rep.Shortest != want {
		t.Fatalf("shortest failing ordering\n  got:  %s\n  want: %s", rep.Shortest, want)
	}
	msg := fake.errors[0]
	for _, s := range []string{want, "counted 0 answers, 1 were accepted", "a1 dropped: withdrawn_wait", "a2 refused (the instance had ended)", "Spec.Ordering"} {
		if !strings.Contains(msg, s) {
			t.Fatalf("the report does not say %q:\n%s", s, msg)
		}
	}
	if !rep.Exhaustive || rep.Orderings < 10 {
		t.Fatalf("report %+v: want an exhaustive exploration of more than a few orderings", rep)
	}
	t.Logf("planted bug: %d orderings explored (%d runs cut short), %d fail; %v", rep.Orderings, rep.Pruned, rep.Failures, took)
	t.Logf("the report:\n%s", msg)

	// Re-running the printed ordering reproduces exactly that failure.
	fake2 := &fakeT{T: t}
	spec := surveySpec(heraldtest.Positional)
	spec.Ordering = rep.Shortest
	rep2 := heraldtest.Permute(fake2, spec)
	if rep2.Orderings != 1 || rep2.Failures != 1 || rep2.Shortest != want {
		t.Fatalf("re-run: %+v, errors %q", rep2, fake2.errors)
	}

	// The same survey on the queue lane counts every answer in every order.
	rep3 := heraldtest.Permute(t, surveySpec(heraldtest.Queue))
	if rep3.Failures != 0 || !rep3.Exhaustive {
		t.Fatalf("queue lane: %+v", rep3)
	}
	t.Logf("queue lane: %d orderings, all pass", rep3.Orderings)
}

func TestPermute_OrderingMustMatch(t *testing.T) {
	spec := surveySpec(heraldtest.Positional)
	spec.Ordering = "start · deliver nope"
	// A label that is not in the spec is refused before anything runs.
	ft := &fatalT{T: t}
	runFatal(ft, func() { heraldtest.Permute(ft, spec) })
	if !strings.Contains(ft.msg, `"nope", which is no label`) {
		t.Fatalf("fatal %q", ft.msg)
	}
	// An ordering the workflow no longer follows says where it diverged.
	spec.Ordering = "start · activity remind#1"
	ft = &fatalT{T: t}
	runFatal(ft, func() { heraldtest.Permute(ft, spec) })
	if !strings.Contains(ft.msg, `diverged at choice 2: the ordering says "activity remind#1", the workflow ran "turn[wait answer, timer 1h0m0s]"`) {
		t.Fatalf("fatal %q", ft.msg)
	}
	spec.Ordering = "start · bogus"
	ft = &fatalT{T: t}
	runFatal(ft, func() { heraldtest.Permute(ft, spec) })
	if !strings.Contains(ft.msg, `choice 2 "bogus" is neither`) {
		t.Fatalf("fatal %q", ft.msg)
	}
}

// fatalT records a Fatalf and ends the goroutine, as testing.T does.
type fatalT struct {
	*testing.T
	msg string
}

func (f *fatalT) Helper() {}
func (f *fatalT) Fatalf(format string, args ...any) {
	f.msg = fmt.Sprintf(format, args...)
	runtimeGoexit()
}
func (f *fatalT) Logf(string, ...any) {}

func runFatal(_ *fatalT, fn func()) {
	done := make(chan struct{})
	go func() { defer close(done); fn() }()
	<-done
}

var _ = history.FateDelivered

func runtimeGoexit() { runtime.Goexit() }
