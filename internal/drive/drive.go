// Package drive lets package heraldtest run a runtime's work synchronously,
// one unit at a time in the calling goroutine, without adding public API
// to package herald: herald sets these function variables in its init
// (drive.go there), heraldtest calls them. rt is always a *herald.Runtime.
package drive

import (
	"context"
	"time"
)

// Unit kinds.
const (
	Turn     = "turn"
	Activity = "activity"
	Bus      = "bus"
)

// Unit is what one Step ran.
type Unit struct {
	Kind     string // Turn, Activity or Bus
	Instance string // the instance of a turn or an activity attempt
	Name     string // the activity of an attempt, the subscription of a bus attempt
	EventID  string // the published event of a bus attempt
	Attempt  int    // the attempt number of an activity or bus attempt
	Routed   int    // published events the step routed to subscriptions first
}

var (
	// Step routes the tenant's published events, then claims and runs at
	// most one unit that is claimable now on the engine clock: a turn,
	// else an activity attempt, else a bus attempt. ran is false when
	// nothing was claimable (routing alone is no unit).
	Step func(ctx context.Context, rt any, tenant string) (u Unit, ran bool, err error)
	// NextWake is when the tenant's next work becomes claimable after now
	// (ok false: none known).
	NextWake func(ctx context.Context, rt any, tenant string) (at time.Time, ok bool, err error)
	// Maintain runs the tenant's maintenance pass now: retention expiry of
	// events kept for instances that never started, correlated TTL expiry,
	// pruning of ended bus records.
	Maintain func(ctx context.Context, rt any, tenant string)
	// Close stops what the runtime started for synchronous runs (the
	// script child processes).
	Close func(rt any)
)
