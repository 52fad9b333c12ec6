package heraldtest_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/heraldwf/herald"
	"github.com/heraldwf/herald/heraldtest"
	"github.com/heraldwf/herald/history"
)

// The seed scenarios of the engine's own tests (positional_test.go,
// withdrawn_wait_test.go, queue_test.go), explored in every order: each
// ordering must produce the outcome those tests assert for its placement,
// and every placement must be among the orderings explored.

// placements collects what the checks saw (a check runs once per ordering,
// one at a time).
type placements struct {
	mu   sync.Mutex
	seen map[string]int
}

func (p *placements) add(s string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.seen == nil {
		p.seen = map[string]int{}
	}
	p.seen[s]++
}

func (p *placements) require(t *testing.T, want ...string) {
	t.Helper()
	for _, w := range want {
		if p.seen[w] == 0 {
			t.Errorf("no ordering placed the event %s; seen: %v", w, p.seen)
		}
	}
}

func firstRaised(evs []history.Event, eventID string) *history.Event {
	for i := range evs {
		if evs[i].Kind == history.EventRaised && evs[i].EventID == eventID {
			return &evs[i]
		}
	}
	return nil
}

// raisedOf returns the event's last EventRaised (the execution that has
// it now).
func raisedOf(evs []history.Event, eventID string) *history.Event {
	for i := len(evs) - 1; i >= 0; i-- {
		if evs[i].Kind == history.EventRaised && evs[i].EventID == eventID {
			return &evs[i]
		}
	}
	return nil
}

// Raise before the instance starts, before its wait, after its wait
// (positional_test.go: RaiseBeforeInstanceExists, RaiseBeforeWait,
// RaiseAfterWait): the wait receives the event in every order.
func TestPermute_SeedRaiseBeforeStartBeforeWaitAfterWait(t *testing.T) {
	var seen placements
	rep := heraldtest.Permute(t, heraldtest.Spec{
		Register: func(rt *herald.Runtime) {
			herald.RegisterWorkflow(rt, "w", func(ctx *herald.Context, _ struct{}) (string, error) {
				if err := ctx.CallActivity("prepare", nil).Get(nil); err != nil {
					return "", err
				}
				var s string
				err := ctx.WaitEvent("signal").Get(&s)
				return s, err
			})
			herald.RegisterActivity(rt, "prepare", func(context.Context, any) (bool, error) { return true, nil })
		},
		Workflow: "w",
		Events:   []heraldtest.Event{{Label: "sig", Lane: heraldtest.Positional, Name: "signal", Payload: "payload"}},
		Options:  []heraldtest.Option{withBackendFromEnv()},
		Check: func(t testing.TB, o *heraldtest.Outcome) {
			var got string
			if err := o.Result(&got); err != nil || got != "payload" {
				t.Fatalf("result %q, %v", got, err)
			}
			f := o.Fates["sig"]
			if f == nil || f.Fate != history.FateDelivered || f.Execution != 1 || f.WaitNumber != 1 {
				t.Fatalf("fate %s", o.Fate("sig"))
			}
			r := raisedOf(o.History, "sig")
			if r == nil {
				t.Fatalf("no EventRaised: %v", heraldtest.Shape(o.History))
			}
			switch {
			case r.AtStart: // kept for the instance id, placed at the start
				seen.add("before start")
			case r.TaskSeq == 0: // buffered; the wait took it at once
				seen.add("before wait")
			default:
				seen.add("after wait")
			}
		},
	})
	seen.require(t, "before start", "before wait", "after wait")
	if !rep.Exhaustive || rep.Failures != 0 {
		t.Fatalf("report %+v", rep)
	}
}

// A cancelled wait never steals a later event (withdrawn_wait_test.go,
// DoesNotStealFutureEvent): X reaches the first wait if it comes before the
// timer, else the second; it is never dropped, as the second wait is made
// in the turn that withdraws the first.
func TestPermute_SeedWithdrawnWaitDoesNotSteal(t *testing.T) {
	var seen placements
	heraldtest.Permute(t, heraldtest.Spec{
		Register: func(rt *herald.Runtime) {
			herald.RegisterWorkflow(rt, "w", func(ctx *herald.Context, _ struct{}) ([2]string, error) {
				w := ctx.WaitEvent("X")
				winner := ctx.Select(w, ctx.Timer(50*time.Millisecond))
				if winner == 0 {
					var s string
					err := w.Get(&s)
					return [2]string{"wait", s}, err
				}
				if err := w.Get(nil); !errors.Is(err, herald.ErrCanceled) {
					return [2]string{}, errors.New("the losing wait was not cancelled")
				}
				var s string
				err := ctx.WaitEvent("X").Get(&s)
				return [2]string{"timer", s}, err
			})
		},
		Workflow: "w",
		Events:   []heraldtest.Event{{Label: "x", Lane: heraldtest.Positional, Name: "X", Payload: "data"}},
		Options:  []heraldtest.Option{withBackendFromEnv()},
		Check: func(t testing.TB, o *heraldtest.Outcome) {
			var got [2]string
			if err := o.Result(&got); err != nil {
				t.Fatalf("%v", err)
			}
			f := o.Fates["x"]
			if f == nil || f.Fate != history.FateDelivered {
				t.Fatalf("x is %s", o.Fate("x"))
			}
			switch {
			case got == [2]string{"wait", "data"} && f.WaitNumber == 1:
				seen.add("first wait")
			case got == [2]string{"timer", "data"} && f.WaitNumber == 2:
				seen.add("second wait")
			default:
				t.Fatalf("result %q with x %s", got, o.Fate("x"))
			}
		},
	})
	seen.require(t, "first wait", "second wait")
}

// Continue-as-new (positional_test.go CarryForward, queue_test.go
// CarryForwardKeepsOrderAcrossExecutions): an event buffered in
// execution 1 is carried into execution 2, in order; one that arrives
// between the continue-as-new commit and execution 2's first turn reaches
// execution 2.
func TestPermute_SeedDuringContinueAsNew(t *testing.T) {
	register := func(rt *herald.Runtime) {
		herald.RegisterWorkflow(rt, "pos", func(ctx *herald.Context, _ struct{}) (string, error) {
			if ctx.Execution() == 1 {
				if err := ctx.Sleep(time.Minute); err != nil {
					return "", err
				}
				return "", ctx.ContinueAsNew(nil)
			}
			var s string
			err := ctx.WaitEvent("signal").Get(&s)
			return s, err
		})
		herald.RegisterWorkflow(rt, "queue", func(ctx *herald.Context, _ struct{}) ([]string, error) {
			if ctx.Execution() == 1 {
				if err := ctx.Sleep(time.Minute); err != nil {
					return nil, err
				}
				return nil, ctx.ContinueAsNew(nil)
			}
			var out []string
			for range 2 {
				var s string
				if err := ctx.Dequeue("m").Get(&s); err != nil {
					return out, err
				}
				out = append(out, s)
			}
			return out, nil
		})
	}
	t.Run("positional", func(t *testing.T) {
		var seen placements
		heraldtest.Permute(t, heraldtest.Spec{
			Register: register, Workflow: "pos",
			Events:  []heraldtest.Event{{Label: "sig", Lane: heraldtest.Positional, Name: "signal", Payload: "payload"}},
			Options: []heraldtest.Option{withBackendFromEnv()},
			Check: func(t testing.TB, o *heraldtest.Outcome) {
				var got string
				if err := o.Result(&got); err != nil || got != "payload" {
					t.Fatalf("result %q, %v", got, err)
				}
				f := o.Fates["sig"]
				if f == nil || f.Fate != history.FateDelivered || f.Execution != 2 || f.WaitNumber != 1 {
					t.Fatalf("sig is %s", o.Fate("sig"))
				}
				r := raisedOf(o.History, "sig")
				first := firstRaised(o.History, "sig")
				switch {
				case f.OriginExecution == 1 && r.AtStart && !first.AtStart:
					seen.add("buffered in execution 1, carried")
				case f.OriginExecution == 1 && r.AtStart:
					// Before the start, or between the start and the first
					// turn: one state (the event is placed at the start).
					seen.add("before start, carried")
				case f.OriginExecution == 2 && strings.Contains(o.Ordering, "execution 2] · deliver sig · turn["):
					seen.add("between the continue-as-new and execution 2's first turn")
				case f.OriginExecution == 2:
					seen.add("in execution 2")
				default:
					t.Fatalf("sig %+v in history %v", f, heraldtest.Shape(o.History))
				}
			},
		})
		seen.require(t, "before start, carried", "buffered in execution 1, carried",
			"between the continue-as-new and execution 2's first turn", "in execution 2")
	})
	t.Run("queue", func(t *testing.T) {
		var seen placements
		heraldtest.Permute(t, heraldtest.Spec{
			Register: register, Workflow: "queue",
			Events: []heraldtest.Event{
				{Label: "m1", Lane: heraldtest.Queue, Name: "m", Payload: "m1"},
				{Label: "m2", Lane: heraldtest.Queue, Name: "m", Payload: "m2"},
			},
			Options: []heraldtest.Option{withBackendFromEnv()},
			Check: func(t testing.TB, o *heraldtest.Outcome) {
				var got []string
				if err := o.Result(&got); err != nil {
					t.Fatalf("%v", err)
				}
				// Received in the order they were enqueued, carried or not.
				want := []string{"m1", "m2"}
				if strings.Index(o.Ordering, "deliver m2") < strings.Index(o.Ordering, "deliver m1") {
					want = []string{"m2", "m1"}
				}
				if !slices.Equal(got, want) {
					t.Fatalf("got %q, want %q (the enqueue order)", got, want)
				}
				var origins []string
				for _, l := range want {
					f := o.Fates[l]
					if f == nil || f.Fate != history.FateDelivered || f.Execution != 2 {
						t.Fatalf("%s is %s", l, o.Fate(l))
					}
					origins = append(origins, map[int]string{1: "carried", 2: "new"}[f.OriginExecution])
				}
				sort.Strings(origins)
				seen.add(strings.Join(origins, "+"))
			},
		})
		seen.require(t, "carried+carried", "carried+new", "new+new")
	})
}

// Deduplication is sound: exploring without it reaches the same outcomes.
func TestPermute_PruningKeepsEveryOutcome(t *testing.T) {
	outcomes := func(noPrune bool) (map[string]bool, *heraldtest.Report) {
		got := map[string]bool{}
		spec := surveySpec(heraldtest.Positional)
		spec.NoPrune = noPrune
		spec.Check = func(t testing.TB, o *heraldtest.Outcome) {
			got[string(o.Status)+" "+string(o.Output)+" a1 "+o.Fate("a1")+" a2 "+o.Fate("a2")] = true
		}
		return got, heraldtest.Permute(t, spec)
	}
	pruned, rp := outcomes(false)
	full, rf := outcomes(true)
	if len(pruned) != len(full) || rp.Orderings >= rf.Orderings {
		t.Fatalf("pruned: %d orderings, outcomes %v\nfull: %d orderings, outcomes %v", rp.Orderings, pruned, rf.Orderings, full)
	}
	for o := range full {
		if !pruned[o] {
			t.Fatalf("the pruned exploration missed outcome %q", o)
		}
	}
	t.Logf("%d orderings without deduplication, %d with; %d distinct outcomes", rf.Orderings, rp.Orderings, len(full))
}

// An activity's result and an event that reach the inbox before the same
// turn race: the one that arrived first wins the Select. Orderings that
// differ only in that order must not be merged.
func TestPermute_PruningKeepsInboxOrder(t *testing.T) {
	register := func(rt *herald.Runtime) {
		herald.RegisterWorkflow(rt, "race", func(ctx *herald.Context, _ struct{}) (int, error) {
			return ctx.Select(ctx.CallActivity("work", nil), ctx.WaitEvent("X")), nil
		})
		herald.RegisterActivity(rt, "work", func(context.Context, any) (bool, error) { return true, nil })
	}
	outcomes := func(noPrune bool) map[string]bool {
		got := map[string]bool{}
		heraldtest.Permute(t, heraldtest.Spec{Register: register, Workflow: "race", NoPrune: noPrune,
			Events:  []heraldtest.Event{{Label: "x", Lane: heraldtest.Positional, Name: "X"}},
			Options: []heraldtest.Option{withBackendFromEnv()},
			Check: func(t testing.TB, o *heraldtest.Outcome) {
				got[string(o.Output)+" x "+o.Fate("x")+historyKey(o.History)] = true
			}})
		return got
	}
	pruned, full := outcomes(false), outcomes(true)
	// Activity result first: it wins and x, in the same turn, is dropped as
	// the instance ends. x first: the wait wins.
	const (
		activityFirst = "0 x dropped: instance_terminal; ExecutionStarted, ActivityScheduled work, EventSubscribed X, ActivityCompleted work, EventSubscribedCancelled X, ExecutionCompleted, EventDropped X x"
		eventFirst    = "1 x delivered (wait #1 of execution 1); ExecutionStarted, ActivityScheduled work, EventSubscribed X, EventRaised X x→3, ActivityCancelRequested work, ExecutionCompleted"
	)
	if len(pruned) != len(full) || !pruned[activityFirst] || !pruned[eventFirst] {
		t.Fatalf("pruned %v\nfull %v", pruned, full)
	}
	for o := range full {
		if !pruned[o] {
			t.Fatalf("the pruned exploration missed %q (full: %v)", o, full)
		}
	}
	t.Logf("outcomes: %v", full)
}

// historyKey is a history without times: kinds, names, event ids and the
// waits they reached.
func historyKey(evs []history.Event) string {
	parts := make([]string, len(evs))
	for i, ev := range evs {
		parts[i] = string(ev.Kind)
		if ev.Kind != history.ExecutionStarted && ev.Name != "" {
			parts[i] += " " + ev.Name
		}
		if ev.EventID != "" {
			parts[i] += " " + ev.EventID
		}
		if ev.Kind == history.EventRaised && ev.TaskSeq > 0 {
			parts[i] += fmt.Sprintf("→%d", ev.TaskSeq)
		}
		if ev.AtStart {
			parts[i] += " (at start)"
		}
	}
	return "; " + strings.Join(parts, ", ")
}
