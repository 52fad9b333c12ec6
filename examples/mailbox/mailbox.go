// Package mailbox is Herald's queue-lane example: a worker that drains an
// "orders" mailbox a few messages per execution, racing each receive against
// an idle timer, and continues as new with the unread messages carried over;
// and a latest-value "settings" queue where only the newest message counts.
package mailbox

import (
	"time"

	"github.com/heraldwf/herald"
)

// State is the mailbox workflow's input and result.
type State struct {
	PerRun    int            `json:"per_run"`  // orders handled per execution
	MaxRuns   int            `json:"max_runs"` // executions before it completes
	Runs      int            `json:"runs"`
	Orders    []string       `json:"orders"`
	IdleTicks int            `json:"idle_ticks"` // receives that lost to the idle timer
	Settings  map[string]any `json:"settings,omitempty"`
}

// Mailbox reads the latest settings (a `buffer: latest` queue: a newer
// message supersedes an unread one), then handles PerRun orders from the
// "orders" queue. Each receive races an idle timer; a receive that loses
// consumes nothing, so no order is ever lost to the race. After PerRun
// orders it continues as new: unread orders are carried into the next
// execution in order.
func Mailbox(ctx *herald.Context, st State) (State, error) {
	var settings map[string]any
	if ok, err := ctx.TryDequeue("settings", &settings); err != nil {
		return st, err
	} else if ok {
		st.Settings = settings
	}
	for handled := 0; handled < st.PerRun; {
		order := ctx.Dequeue("orders")
		if ctx.Select(order, ctx.Timer(100*time.Millisecond)) == 1 {
			st.IdleTicks++
			continue
		}
		var o string
		if err := order.Get(&o); err != nil {
			return st, err
		}
		st.Orders = append(st.Orders, o)
		handled++
	}
	st.Runs++
	if st.Runs >= st.MaxRuns {
		return st, nil
	}
	return st, ctx.ContinueAsNew(st)
}

// Register registers the mailbox workflow.
func Register(rt *herald.Runtime) {
	herald.RegisterWorkflow(rt, "mailbox", Mailbox)
}
