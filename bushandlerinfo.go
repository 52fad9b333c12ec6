package herald

import (
	"context"
	"strconv"
	"time"
)

// BusHandlerInfo describes the bus execution attempt a Go handler runs
// for: what ActivityInfo is to an activity. Event ids are unique only
// within a tenant, so a side effect keyed by the event id alone collides
// across tenants (and across subscriptions of one tenant); key it by
// IdempotencyKey instead.
type BusHandlerInfo struct {
	Tenant       string
	Subscription string
	// Execution is the execution's id (the event's route to this
	// subscription): the same for every attempt, and after a reprocess.
	Execution int64
	EventID   string
	// Attempt counts from 1; a reprocess starts again at 1.
	Attempt int
	// Deadline is when the attempt's timeout ends its ctx (also
	// ctx.Deadline()).
	Deadline time.Time
	// IdempotencyKey is "bus/<tenant>/<execution>": the same for every
	// attempt of one delivery and distinct across tenants and
	// subscriptions, so side effects can be deduplicated.
	IdempotencyKey string
}

type busHandlerInfoKey struct{}

// BusHandlerInfoFrom returns the info of the bus handler attempt running
// in ctx; false outside one.
func BusHandlerInfoFrom(ctx context.Context) (BusHandlerInfo, bool) {
	bi, ok := ctx.Value(busHandlerInfoKey{}).(BusHandlerInfo)
	return bi, ok
}

// withBusHandlerInfo puts the info of it's attempt on ctx, whose deadline
// is the attempt's timeout.
func withBusHandlerInfo(ctx context.Context, it *busItem) context.Context {
	ex := &it.Execution
	deadline, _ := ctx.Deadline()
	return context.WithValue(ctx, busHandlerInfoKey{}, BusHandlerInfo{Tenant: it.tenant, Subscription: ex.Subscription,
		Execution: ex.ID, EventID: ex.EventID, Attempt: ex.Attempts, Deadline: deadline,
		IdempotencyKey: "bus/" + it.tenant + "/" + strconv.FormatInt(ex.ID, 10)})
}
