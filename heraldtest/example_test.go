package heraldtest_test

// The examples of docs/testing.md ("An example"), as they are printed
// there; the README shows TestExpense (the printed TestMain is
// main_test.go's here).

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/heraldwf/herald"
	"github.com/heraldwf/herald/heraldtest"
	"github.com/heraldwf/herald/history"
)

// expense waits up to a week for a manager's decision.
func expense(ctx *herald.Context, amount int) (string, error) {
	if err := ctx.CallActivity("notify-manager", amount).Get(nil); err != nil {
		return "", err
	}
	var by string
	err := ctx.WaitEvent("decision", herald.WithTimeout(7*24*time.Hour)).Get(&by)
	if errors.Is(err, herald.ErrEventTimeout) {
		return "expired", nil
	}
	return "approved by " + by, err
}

func registerExpense(rt *herald.Runtime) {
	herald.RegisterWorkflow(rt, "expense", expense)
	herald.RegisterActivity(rt, "notify-manager", func(context.Context, int) (bool, error) { return true, nil })
}

func TestExpense(t *testing.T) {
	env := heraldtest.New(t, registerExpense) // a SQLite file in t.TempDir(), a virtual clock
	calls := heraldtest.MockActivity(env, "notify-manager", func(context.Context, int) (bool, error) { return true, nil })

	env.Start("expense", "e-1", 800) // runs until the workflow waits
	env.Advance(6 * 24 * time.Hour)  // six days pass in microseconds
	env.Raise("e-1", "decision", "ann", herald.WithEventID("e-1/decision"))

	env.RequireResult(t, "e-1", "approved by ann")
	env.RequireFate(t, "e-1/decision", history.FateDelivered)
	if calls.Count() != 1 {
		t.Fatalf("notified %d times", calls.Count())
	}

	env.Start("expense", "e-2", 900)
	env.Advance(7 * 24 * time.Hour) // the deadline fires
	env.RequireResult(t, "e-2", "expired")
	env.RequireHistory(t, "e-2",
		"ExecutionStarted expense",
		"ActivityScheduled notify-manager", "ActivityCompleted notify-manager",
		"EventSubscribed decision", "TimerCreated",
		"TimerFired", "EventSubscribedCancelled decision",
		"ExecutionCompleted")
}

func TestExpenseInEveryOrder(t *testing.T) {
	heraldtest.Permute(t, heraldtest.Spec{
		Register: registerExpense,
		Workflow: "expense",
		Input:    800,
		Events: []heraldtest.Event{
			{Label: "yes", Lane: heraldtest.Positional, Name: "decision", Payload: "ann"},
		},
		Check: func(t testing.TB, o *heraldtest.Outcome) {
			var got string
			if err := o.Result(&got); err != nil {
				t.Fatalf("no result: %v", err)
			}
			if _, late := o.Refused["yes"]; got != "approved by ann" && !late {
				t.Errorf("got %q, and the decision was %s", got, o.Fate("yes"))
			}
		},
	})
}

func TestFraudScript(t *testing.T) {
	env := heraldtest.New(t, nil)
	env.PutScript("fraud", `if (ctx.event.data.amount > 5000) throw new Error("needs a human"); return {ok: true};`)
	retries := 1
	env.Subscribe(herald.Subscription{ID: "fraud", Pattern: "order.*", Enabled: true, MaxRetries: &retries,
		Target: herald.Target{Kind: herald.TargetScript, Script: "fraud"}})

	env.Publish("order.paid", map[string]int{"amount": 9000}, herald.WithEventID("pay-1")) // the script ran
	env.Advance(time.Minute)                                                               // its retry ran too

	if at := env.Attempts("pay-1", "fraud"); len(at) != 2 || at[1].Error != "needs a human" {
		t.Fatalf("attempts: %+v", at)
	}
	if dl := env.DeadLetters("fraud"); len(dl) != 1 {
		t.Fatalf("dead letters: %+v", dl)
	}
}
