// Package approval holds Herald's example workflows: an approval that races
// a human decision against a deadline, and a meter that reads events in a
// loop and continues as new. `herald demo` runs them end to end.
package approval

import (
	"context"
	"fmt"
	"time"

	"github.com/heraldwf/herald"
)

// Request asks for an approval.
type Request struct {
	Item   string `json:"item"`
	Amount int    `json:"amount"`
	// Deadline is how long the approver has before the request escalates
	// (JSON: a duration string, "1h").
	Deadline herald.Duration `json:"deadline"`
	// Escalation is how long escalating takes (a durable sleep).
	Escalation herald.Duration `json:"escalation"`
}

// Decision is the approver's answer, sent as the "decision" event.
type Decision struct {
	Approved bool   `json:"approved"`
	By       string `json:"by"`
}

// Approval notifies an approver and waits for a "decision" event, racing it
// against a deadline. If the deadline wins, the wait is withdrawn: a decision
// that arrives while the request is being escalated answers a question
// nobody asks any more and is dropped (fate withdrawn_wait). After escalating
// it asks again and takes the next decision.
func Approval(ctx *herald.Context, req Request) (string, error) {
	if err := ctx.CallActivity("notify", req.Item).Get(nil); err != nil {
		return "", err
	}
	decision := ctx.WaitEvent("decision")
	deadline := ctx.Timer(time.Duration(req.Deadline))
	if ctx.Select(decision, deadline) == 1 {
		ctx.Logger().Info("deadline passed; escalating", "item", req.Item)
		if err := ctx.Sleep(time.Duration(req.Escalation)); err != nil {
			return "", err
		}
		decision = ctx.WaitEvent("decision")
	}
	var d Decision
	if err := decision.Get(&d); err != nil {
		return "", err
	}
	verdict := "rejected"
	if d.Approved {
		verdict = "approved"
	}
	return fmt.Sprintf("%s (%d) %s by %s", req.Item, req.Amount, verdict, d.By), nil
}

// MeterState is the meter's input: readings summed so far and how many
// readings each execution takes before continuing as new.
type MeterState struct {
	Total    int `json:"total"`
	PerRun   int `json:"per_run"`
	Runs     int `json:"runs"`
	MaxRuns  int `json:"max_runs"`
	Readings int `json:"readings"`
}

// Meter sums "reading" events, PerRun per execution, then continues as new
// so its history stays short. Readings raised faster than it consumes them
// stay buffered and are carried into the next execution in order.
func Meter(ctx *herald.Context, st MeterState) (MeterState, error) {
	for range st.PerRun {
		var v int
		if err := ctx.WaitEvent("reading").Get(&v); err != nil {
			return st, err
		}
		st.Total += v
		st.Readings++
	}
	st.Runs++
	if st.Runs >= st.MaxRuns {
		return st, nil
	}
	return st, ctx.ContinueAsNew(st)
}

// Register registers the example workflows and activities.
func Register(rt *herald.Runtime) {
	herald.RegisterWorkflow(rt, "approval", Approval)
	herald.RegisterWorkflow(rt, "meter", Meter)
	herald.RegisterActivity(rt, "notify", func(ctx context.Context, item string) (string, error) {
		return "notified approver of " + item, nil
	})
}
