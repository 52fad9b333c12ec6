package herald

import (
	"fmt"
	"log/slog"
	"sync"
	"time"
)

// Observer receives what the engine reports: events accepted, delivered
// and dropped, turns, activity attempts, claims, instances it had to fail
// and work nobody here can run. Metrics and tracing are adapters of it: the
// reports are plain values (strings, counts, times), with the tenant on
// each.
//
// The engine calls an Observer synchronously, from many goroutines at
// once: methods must be safe for concurrent use and quick (count, record,
// hand off; no I/O). A method that panics does not stop the engine: the
// panic is recovered and logged at ERROR (once per method), and the report
// is lost. Durations are measured on the wall clock, whatever
// Clock the config has.
//
// Implementations embed NopObserver, which implements every method as a
// no-op: a method added in a later version then does not break them.
type Observer interface {
	// EventAccepted: a client stored an event (RaiseEvent, Enqueue), or a
	// correlated event (PutCorrelatedEvent: lane "correlated", no instance).
	EventAccepted(EventReport)
	// EventDelivered: a turn committed an event's delivery to a wait.
	EventDelivered(EventReport)
	// EventsDropped: events were dropped (fate dropped), Count of them when
	// a burst was recorded as one breadcrumb.
	EventsDropped(DropReport)
	// TurnFinished: a claimed turn ended, committed or not (see
	// TurnReport.Outcome).
	TurnFinished(TurnReport)
	// ActivityAttempted: an activity attempt ended (see
	// ActivityReport.Outcome).
	ActivityAttempted(ActivityReport)
	// Claimed: a claim of turns or activities returned.
	Claimed(ClaimReport)
	// InstanceUnreplayable: the runtime failed an instance it could not run
	// (a stored row did not decode, or the engine refused its history).
	InstanceUnreplayable(UnreplayableReport)
	// Unregistered: a runtime released work of a workflow or activity it
	// has not registered.
	Unregistered(UnregisteredReport)

	// BusPublished: an event was published to the bus (Publish, or a
	// turn's ctx.Publish committed).
	BusPublished(BusPublishReport)
	// BusRouted: a published event was matched against the subscriptions.
	BusRouted(BusRouteReport)
	// BusAttempted: an execution's attempt ended (see BusAttemptReport).
	BusAttempted(BusAttemptReport)
	// BusQueue: the depth of the bus's dispatch queue changed (reported
	// after each claim and each finished execution).
	BusQueue(BusQueueReport)

	mustEmbedNopObserver()
}

// BusPublishReport describes one published event.
type BusPublishReport struct {
	Tenant    string
	EventID   string
	Type      string
	Duplicate bool // the id was published before; nothing changed
	// Refused: Publish refused the event (back-pressure); nothing stored.
	Refused bool
}

// BusRouteReport describes the routing of one published event.
type BusRouteReport struct {
	Tenant  string
	EventID string
	Type    string
	// Matched are the subscriptions whose pattern and filter matched (an
	// execution was queued for each); Filtered those whose pattern
	// matched but whose filter did not. Both empty: no match.
	Matched  []string
	Filtered []string
}

// Bus attempt outcomes (BusAttemptReport.Outcome).
const (
	BusOutcomeSucceeded  = "succeeded"
	BusOutcomeRetry      = "retry"
	BusOutcomeDeadLetter = "dead_letter"
	BusOutcomeLeaseLost  = "lease_lost"
)

// BusAttemptReport describes one ended attempt of an execution.
type BusAttemptReport struct {
	Tenant       string
	Subscription string
	Target       string // the target kind (script, workflow, …)
	EventID      string
	Attempt      int // 1 for the first attempt
	// Outcome is BusOutcomeSucceeded, BusOutcomeRetry (a transient
	// failure with retries left), BusOutcomeDeadLetter or
	// BusOutcomeLeaseLost (the result was not recorded: another worker
	// owns the execution now).
	Outcome string
	// ErrorKind is the failure's kind (empty on success): timeout,
	// runtime, resource, permanent, validation or permission.
	ErrorKind string
	Duration  time.Duration
}

// BusQueueReport is the state of a runtime's bus dispatch queue: Depth
// executions claimed and waiting for a worker, out of Capacity
// (Config.Bus.QueueSize; the executions running on the workers are not in
// the queue).
type BusQueueReport struct {
	Depth    int
	Capacity int
}

// EventReport describes one event.
type EventReport struct {
	Tenant     string
	InstanceID string // empty for a correlated event put
	EventID    string // empty for a correlated event put
	Lane       string // "positional", "queue" or "correlated"
	Name       string // event or queue name; the event definition on the correlated lane
	Key        string // the correlation key on the correlated lane
	// Duplicate (EventAccepted): the event id was seen before; nothing
	// changed.
	Duplicate bool
}

// DropReport describes dropped events.
type DropReport struct {
	Tenant     string
	InstanceID string // empty when unknown (an expired event's instance)
	EventID    string // the last of a burst
	Lane       string // empty when unknown
	Name       string
	Reason     string // the drop reason: "limit", "expired", "instance_terminal" …
	Count      int    // at least 1
}

// Turn outcomes (TurnReport.Outcome).
const (
	TurnCommitted    = "committed"
	TurnLeaseLost    = "lease_lost"    // another worker took the instance over; nothing written
	TurnCommitFailed = "commit_failed" // the store refused or failed the commit; the turn is released
	TurnUnreplayable = "unreplayable"  // the instance was failed (see InstanceUnreplayable)
	TurnUnregistered = "unregistered"  // no workflow of that name here; the turn is released
)

// TurnReport describes one turn.
type TurnReport struct {
	Tenant     string
	InstanceID string
	Workflow   string
	Outcome    string
	Messages   int // inbox messages the turn processed
	// Latency is how long the oldest of those messages had been visible
	// when the turn was claimed (on the engine's clock).
	Latency  time.Duration
	Start    time.Time
	Duration time.Duration
	Err      error // the commit error (lease_lost, commit_failed)
}

// Activity outcomes (ActivityReport.Outcome).
const (
	ActivityCompleted    = "completed"
	ActivityRetrying     = "retrying"     // failed; another attempt is scheduled
	ActivityFailed       = "failed"       // failed for good: non-retryable, or its last attempt
	ActivityLost         = "lost"         // lost with its worker: every attempt (leases expired), or this one's lease taken over
	ActivityUnregistered = "unregistered" // no activity of that name here; released
)

// ActivityReport describes one activity attempt.
type ActivityReport struct {
	Tenant     string
	InstanceID string
	Execution  int
	Activity   string
	Attempt    int
	Outcome    string
	Start      time.Time
	Duration   time.Duration
	Err        error // the activity's error (retrying, failed)
}

// Claim kinds (ClaimReport.Kind).
const (
	ClaimTurns      = "turns"
	ClaimActivities = "activities"
	ClaimBus        = "bus"
	ClaimBusRoute   = "bus_route"
	// ClaimHandOff is a raise that leased the instance it made runnable
	// and handed its turn to a free worker of this runtime (a direct
	// hand-off: no claim call). Reported only when it did.
	ClaimHandOff = "turn_handoff"
)

// ClaimReport describes one claim call.
type ClaimReport struct {
	Tenant    string
	Kind      string
	Requested int // free worker slots asked for
	Claimed   int
	Duration  time.Duration
	Err       error
}

// UnreplayableReport describes an instance failed because it could not be
// run.
type UnreplayableReport struct {
	Tenant     string
	InstanceID string
	Workflow   string
	Kind       string // the failure kind: "corrupt" or "replay"
	Message    string
}

// UnregisteredReport describes work released because this runtime has not
// registered its workflow or activity.
type UnregisteredReport struct {
	Tenant     string
	Kind       string // "workflow" or "activity"
	Name       string
	InstanceID string
}

// NopObserver ignores every report. It is the default Observer; embed it
// in an Observer of your own.
type NopObserver struct{}

func (NopObserver) EventAccepted(EventReport)               {}
func (NopObserver) EventDelivered(EventReport)              {}
func (NopObserver) EventsDropped(DropReport)                {}
func (NopObserver) TurnFinished(TurnReport)                 {}
func (NopObserver) ActivityAttempted(ActivityReport)        {}
func (NopObserver) Claimed(ClaimReport)                     {}
func (NopObserver) InstanceUnreplayable(UnreplayableReport) {}
func (NopObserver) Unregistered(UnregisteredReport)         {}
func (NopObserver) BusPublished(BusPublishReport)           {}
func (NopObserver) BusRouted(BusRouteReport)                {}
func (NopObserver) BusAttempted(BusAttemptReport)           {}
func (NopObserver) BusQueue(BusQueueReport)                 {}
func (NopObserver) mustEmbedNopObserver()                   {}

// MultiObserver returns an Observer that hands every report to each of
// obs in order (nil entries are skipped).
func MultiObserver(obs ...Observer) Observer {
	m := multiObserver{}
	for _, o := range obs {
		if o != nil {
			m.obs = append(m.obs, o)
		}
	}
	return m
}

type multiObserver struct {
	NopObserver
	obs []Observer
}

func (m multiObserver) EventAccepted(r EventReport) {
	for _, o := range m.obs {
		o.EventAccepted(r)
	}
}
func (m multiObserver) EventDelivered(r EventReport) {
	for _, o := range m.obs {
		o.EventDelivered(r)
	}
}
func (m multiObserver) EventsDropped(r DropReport) {
	for _, o := range m.obs {
		o.EventsDropped(r)
	}
}
func (m multiObserver) TurnFinished(r TurnReport) {
	for _, o := range m.obs {
		o.TurnFinished(r)
	}
}
func (m multiObserver) ActivityAttempted(r ActivityReport) {
	for _, o := range m.obs {
		o.ActivityAttempted(r)
	}
}
func (m multiObserver) Claimed(r ClaimReport) {
	for _, o := range m.obs {
		o.Claimed(r)
	}
}
func (m multiObserver) InstanceUnreplayable(r UnreplayableReport) {
	for _, o := range m.obs {
		o.InstanceUnreplayable(r)
	}
}
func (m multiObserver) Unregistered(r UnregisteredReport) {
	for _, o := range m.obs {
		o.Unregistered(r)
	}
}

func (m multiObserver) BusPublished(r BusPublishReport) {
	for _, o := range m.obs {
		o.BusPublished(r)
	}
}

func (m multiObserver) BusRouted(r BusRouteReport) {
	for _, o := range m.obs {
		o.BusRouted(r)
	}
}

func (m multiObserver) BusAttempted(r BusAttemptReport) {
	for _, o := range m.obs {
		o.BusAttempted(r)
	}
}

func (m multiObserver) BusQueue(r BusQueueReport) {
	for _, o := range m.obs {
		o.BusQueue(r)
	}
}

// guardObserver wraps o so that a panicking method is recovered and logged
// (once per method) instead of ending the turn, the claim loop or the
// process that called it. The no-op observer needs no guard.
func guardObserver(o Observer, logger *slog.Logger) Observer {
	switch o.(type) {
	case NopObserver, *guardedObserver:
		return o
	}
	return &guardedObserver{o: o, logger: logger}
}

type guardedObserver struct {
	NopObserver
	o      Observer
	logger *slog.Logger
	logged sync.Map // method name → true once its panic was logged
}

func (g *guardedObserver) recover(method string) {
	if p := recover(); p != nil {
		if _, seen := g.logged.LoadOrStore(method, true); !seen {
			g.logger.Error("herald: observer panicked; its reports of this kind may be lost", "method", method, "panic", fmt.Sprint(p))
		}
	}
}

func (g *guardedObserver) EventAccepted(r EventReport) {
	defer g.recover("EventAccepted")
	g.o.EventAccepted(r)
}

func (g *guardedObserver) EventDelivered(r EventReport) {
	defer g.recover("EventDelivered")
	g.o.EventDelivered(r)
}

func (g *guardedObserver) EventsDropped(r DropReport) {
	defer g.recover("EventsDropped")
	g.o.EventsDropped(r)
}

func (g *guardedObserver) TurnFinished(r TurnReport) {
	defer g.recover("TurnFinished")
	g.o.TurnFinished(r)
}

func (g *guardedObserver) ActivityAttempted(r ActivityReport) {
	defer g.recover("ActivityAttempted")
	g.o.ActivityAttempted(r)
}

func (g *guardedObserver) Claimed(r ClaimReport) {
	defer g.recover("Claimed")
	g.o.Claimed(r)
}

func (g *guardedObserver) InstanceUnreplayable(r UnreplayableReport) {
	defer g.recover("InstanceUnreplayable")
	g.o.InstanceUnreplayable(r)
}

func (g *guardedObserver) Unregistered(r UnregisteredReport) {
	defer g.recover("Unregistered")
	g.o.Unregistered(r)
}

func (g *guardedObserver) BusPublished(r BusPublishReport) {
	defer g.recover("BusPublished")
	g.o.BusPublished(r)
}

func (g *guardedObserver) BusRouted(r BusRouteReport) {
	defer g.recover("BusRouted")
	g.o.BusRouted(r)
}

func (g *guardedObserver) BusAttempted(r BusAttemptReport) {
	defer g.recover("BusAttempted")
	g.o.BusAttempted(r)
}

func (g *guardedObserver) BusQueue(r BusQueueReport) {
	defer g.recover("BusQueue")
	g.o.BusQueue(r)
}
