package storage

import (
	"context"
	"encoding/json"
	"errors"
	"time"

	"github.com/heraldwf/herald/heraldtype"
)

// The event bus's storage (docs/bus.md). The store keeps published events,
// their routes and executions, attempts, dead letters, subscriptions and
// scripts; it fences executions by lock token and batches. It does not
// decide: the engine matches events against subscriptions (BusRoute's
// Route callback), classifies errors and chooses retry times and dead
// letters (BusFinish's outcomes).
//
// Execution states: queued (due at DueAt) → running (leased) → succeeded
// | retrying (due at RetryAt) | dead_lettered. Attempts counts the
// attempts that started: a claim leases an execution without counting (it
// may wait in the claiming runtime's dispatch queue); the attempt is
// counted when it starts (BusHeartbeat with Start) or, at the latest, when
// its end is recorded (BusFinish: Attempts becomes at least the record's
// Number). A running execution whose lease ran out is claimable again: a
// takeover (TakenOver) if its attempt had started, else a plain claim of
// an attempt never made. A release (BusReleased) takes a started
// attempt's count back. BusDeadLetterReprocess puts a dead-lettered
// execution back to queued with Attempts reset.

// BusPublishEvent is one event to publish.
type BusPublishEvent struct {
	ID     string
	Type   string
	Data   json.RawMessage // valid JSON, checked by the engine
	Source string          // "client" or "workflow:<instance id>"
	// TraceParent is the W3C traceparent of the publisher's span ("" for
	// none): stored with the event and returned with it (BusEvent), so that
	// its executions' attempts join the publisher's trace. At most
	// MaxTraceParentBytes of printable ASCII (ErrInvalidArgument
	// otherwise); opaque to the store.
	TraceParent string
}

// BusPublishParams publishes one event of a tenant.
type BusPublishParams struct {
	Tenant string
	Event  BusPublishEvent
	Now    time.Time
}

// BusPublished is the outcome of BusPublish.
type BusPublished struct {
	// Duplicate: an event with this id (and this type) was already
	// published; nothing changed. PublishedAt is the stored event's.
	Duplicate   bool
	PublishedAt time.Time
}

// BusEvent is a published event as the store hands it to the engine.
type BusEvent struct {
	Seq         int64 // the tenant's publish order (store-assigned, increasing)
	ID          string
	Type        string
	Data        json.RawMessage
	Source      string
	PublishedAt time.Time
	TraceParent string // as published (BusPublishEvent.TraceParent)
}

// BusRouteDecision is the engine's verdict for one subscription whose
// pattern matched an event's type.
type BusRouteDecision struct {
	Subscription string
	// Matched: the filter let the event through; an execution is queued.
	// Otherwise FilteredBy says which condition filtered it out.
	Matched    bool
	FilteredBy string
}

// BusRouteParams routes the oldest unrouted events of a tenant.
type BusRouteParams struct {
	Tenant string
	Max    int // events to route at most (default 100)
	Now    time.Time
	// Route returns the decisions for one event (nil: no subscription
	// matched, the event's fate is no_match). It is called inside the
	// store's transaction, once per event, in publish order; it must not
	// call the store. A decision naming the same subscription twice is
	// an error (the call writes nothing).
	Route func(ev *BusEvent) []BusRouteDecision
	// CheckGeneration, when set, makes the routing conditional on the
	// subscriptions Route matches against: the tenant's subscription
	// generation, read in the routing's own transaction after its events
	// are taken, must be exactly Generation (the one the caller built Route
	// from, BusSubscriptionVersions), otherwise BusRoute returns
	// ErrSubscriptionsChanged and writes nothing. So an event published
	// after a subscription change (another node's) that Route does not
	// know of is never routed without it. Unset, the generation is not
	// read.
	CheckGeneration bool
	Generation      int64
}

// ErrSubscriptionsChanged: a routing with BusRouteParams.CheckGeneration
// set named a subscription generation that is not the current one.
// Nothing was written; the caller reads the subscriptions again and
// routes again.
var ErrSubscriptionsChanged = errors.New("herald: bus subscriptions changed")

// BusClaimParams claims due executions of a tenant.
type BusClaimParams struct {
	Tenant string
	Max    int           // default 1
	Now    time.Time     //
	Lease  time.Duration // default 1 min
}

// BusClaimed is a claimed execution with its event.
type BusClaimed struct {
	// Execution is running; its Attempts is the number of the attempt
	// this claim makes (the attempts started before it plus one), which the
	// store counts once the attempt starts.
	Execution heraldtype.Execution
	Event     BusEvent
	LockToken string
	// TakenOver: the previous attempt (number Attempts-1) had started and
	// its lease ran out while it ran (its node died or stalled). An
	// execution whose lease ran out before its attempt started is claimed
	// as if it had never been.
	TakenOver bool
}

// BusOutcome says how an attempt ended.
type BusOutcome uint8

const (
	// BusSucceeded: the execution ends succeeded with Attempt.Result.
	BusSucceeded BusOutcome = iota + 1
	// BusRetry: the execution becomes retrying, due at RetryAt.
	BusRetry
	// BusDeadLetter: the execution ends dead_lettered and DeadLetter is
	// stored (the store sets its ID, Execution, EventID, Subscription,
	// EventType, EventData, Attempts and CreatedAt).
	BusDeadLetter
	// BusReleased: the attempt is given back unmade (the runtime stopped
	// with the execution in its dispatch queue, or cancelled its running
	// attempt at a stop it could not wait for): the execution goes back to
	// queued (retrying if attempts started before this claim's), due at
	// RetryAt, with no attempt record (Attempt is ignored) and this claim's
	// attempt not counted, even if it started.
	BusReleased
)

// BusResult is the end of one claimed attempt.
type BusResult struct {
	Execution int64
	LockToken string
	Outcome   BusOutcome
	// Attempt is the attempt's record, stored as given (the store sets
	// ID, Execution, EventID and Subscription).
	Attempt    heraldtype.Attempt
	RetryAt    time.Time              // BusRetry
	DeadLetter *heraldtype.DeadLetter // BusDeadLetter
}

// BusFinishParams ends claimed attempts, in one transaction.
type BusFinishParams struct {
	Tenant  string
	Results []BusResult
	Now     time.Time
}

// BusHeartbeatParams extends a running execution's lease.
type BusHeartbeatParams struct {
	Tenant     string
	Execution  int64
	LockToken  string
	LeaseUntil time.Time
	// Start: the claim's attempt starts now. The store counts it (the
	// execution's Attempts becomes the claim's number; once per claim,
	// however often Start is written) and marks it started, so that a
	// takeover after its lease runs out is one (BusClaimed.TakenOver).
	Start bool
}

// BusSubscriptionPutParams creates or replaces a subscription.
type BusSubscriptionPutParams struct {
	Tenant       string
	Subscription heraldtype.Subscription // ID, Pattern, Filter, Target, Enabled, MaxRetries, Timeout
	Now          time.Time
}

// BusSubscriptionVersion is a version of a subscription as routing uses
// it: it routes the events with Since < Seq <= Until (Until 0: no end, the
// subscription's current version). Since and Until are positions in the
// tenant's publish order (BusEvent.Seq) taken by the put or delete that
// made and ended the version.
type BusSubscriptionVersion struct {
	Subscription *heraldtype.Subscription
	Since, Until int64
}

// BusSubscriptionGetParams names a subscription.
type BusSubscriptionGetParams struct {
	Tenant string
	ID     string
}

// BusTenantParams names a tenant.
type BusTenantParams struct {
	Tenant string
}

// BusScriptPutParams saves a new version of a script.
type BusScriptPutParams struct {
	Tenant string
	ID     string
	Source string
	Now    time.Time
}

// BusScriptGetParams names a script version (0: the latest).
type BusScriptGetParams struct {
	Tenant  string
	ID      string
	Version int
}

// BusDeadLetterFilter narrows dead-letter lists and bulk operations. Zero
// fields do not filter.
type BusDeadLetterFilter struct {
	Subscription string
	EventType    string
	ErrorKind    heraldtype.ErrorKind
	// Reprocessed: nil lists both, false only letters not reprocessed.
	Reprocessed *bool
	// IDs, when non-nil, restricts to these letters.
	IDs []int64
	// Through, when positive, restricts to letters with ID <= Through: a
	// bulk operation fences its selection at the newest letter when it
	// starts, so letters written while it runs (a reprocessed execution
	// that failed again) are not taken by its later batches.
	Through int64
}

// BusDeadLetterListParams lists dead letters, newest first (by id).
type BusDeadLetterListParams struct {
	Tenant string
	Filter BusDeadLetterFilter
	Limit  int   // default 100, at most 1000
	Before int64 // cursor: only letters with ID < Before (0: from the newest)
}

// BusDeadLetterGetParams names a dead letter.
type BusDeadLetterGetParams struct {
	Tenant string
	ID     int64
}

// BusDeadLetterOpParams names the letters a bulk operation touches.
type BusDeadLetterOpParams struct {
	Tenant string
	Filter BusDeadLetterFilter
	Limit  int // at most this many letters (default 1000)
	Now    time.Time
}

// BusEventGetParams names a published event.
type BusEventGetParams struct {
	Tenant string
	ID     string
}

// BusAttemptListParams lists attempt records, oldest first. At least one
// of EventID, Subscription and Execution is set.
type BusAttemptListParams struct {
	Tenant       string
	EventID      string
	Subscription string
	Execution    int64
	Limit        int   // default 100, at most 1000
	After        int64 // cursor: only attempts with ID > After
}

// BusPruneParams deletes the bus records of a tenant that have ended
// before Before.
type BusPruneParams struct {
	Tenant string
	Before time.Time
	Limit  int // events to delete at most (default 1000)
}

// BusBacklogParams counts a tenant's bus backlog up to Limit.
type BusBacklogParams struct {
	Tenant string
	Limit  int
}

// BusStore is the event bus's storage. Every call is scoped to p.Tenant:
// no call reads or writes another tenant's rows. Identifiers follow the
// text rules (TextProblem with MaxIDBytes); the store returns
// ErrInvalidArgument for one that breaks them.
//
// Not stable; not for implementing outside this repository (see Store).
type BusStore interface {
	// BusPublish stores an event with fate routing (not yet routed). If
	// the tenant already has an event with this id and type, it changes
	// nothing and reports Duplicate; with this id and another type it
	// returns ErrEventIDConflict. The commit wakes the tenant's bus
	// workers (WorkBus).
	BusPublish(ctx context.Context, p *BusPublishParams) (*BusPublished, error)
	// BusRoute takes up to p.Max of the tenant's unrouted events, oldest
	// first (PostgreSQL: skipping events another node is routing), asks
	// p.Route for each and, in the same transaction, stores the
	// decisions, queues one execution (due at p.Now) per matched
	// decision, and marks each event routed at p.Now. It returns how many
	// events it routed (0: none were waiting) and wakes the tenant's bus
	// workers if it queued executions.
	//
	// Fairness across subscriptions: each execution gets a fair-queueing
	// number, max(the subscription's last number + 1, the tenant's current
	// number: the lowest number of its queued or retrying executions, or if
	// it has none the highest number it ever gave, 0 before the first), and
	// BusClaim takes executions in that order, so a subscription with
	// thousands queued does not hold back another's single one (nor does
	// one whose thousands ran earlier, when the queue had drained since).
	BusRoute(ctx context.Context, p *BusRouteParams) (int, error)
	// BusClaim claims up to p.Max of the tenant's executions that are
	// due: queued or retrying with DueAt not after p.Now, or running with
	// a lease that ended before p.Now (TakenOver if its attempt had
	// started). Oldest fair-queueing number first, then DueAt, then id.
	// Each claimed execution becomes running, not started, with a new
	// random lock token and a lease until p.Now+p.Lease; its stored
	// Attempts does not change (see BusClaimed). Concurrent claims (on
	// PostgreSQL from many nodes: SKIP LOCKED) never hand out the same
	// execution.
	BusClaim(ctx context.Context, p *BusClaimParams) ([]*BusClaimed, error)
	// BusFinish ends claimed attempts in one transaction: each result's
	// attempt record is stored and its execution set as its Outcome says
	// (a retry gets a new fair-queueing number). The returned slice has
	// one entry per result: ErrLeaseLost when the result's lock token no
	// longer owns the execution (nothing of that result is written), nil
	// otherwise. A retry wakes the tenant's bus workers.
	BusFinish(ctx context.Context, p *BusFinishParams) ([]error, error)
	// BusHeartbeat extends a running execution's lease to p.LeaseUntil
	// and, with p.Start, starts its attempt. It returns ErrLeaseLost if
	// p.LockToken no longer owns it.
	BusHeartbeat(ctx context.Context, p *BusHeartbeatParams) error

	// BusSubscriptionPut creates the subscription (Version 1, CreatedAt =
	// UpdatedAt = Now) or replaces every field of an existing one
	// (Version+1, CreatedAt kept) and returns it as stored. It changes the
	// tenant's subscription generation. The new version routes the events
	// published after the put; the one it replaces is kept for routing the
	// unrouted events published before it (BusSubscriptionVersions).
	BusSubscriptionPut(ctx context.Context, p *BusSubscriptionPutParams) (*heraldtype.Subscription, error)
	// BusSubscriptionGet returns ErrNotFound if there is none.
	BusSubscriptionGet(ctx context.Context, p *BusSubscriptionGetParams) (*heraldtype.Subscription, error)
	// BusSubscriptionList returns every subscription of the tenant,
	// ordered by id (bytewise), and the tenant's subscription generation
	// read in the same snapshot.
	BusSubscriptionList(ctx context.Context, p *BusTenantParams) ([]*heraldtype.Subscription, int64, error)
	// BusSubscriptionDelete deletes a subscription (its executions,
	// attempts and dead letters stay) and changes the generation. It
	// returns ErrNotFound if there is none. The deleted version is kept
	// for routing the unrouted events published before the delete.
	BusSubscriptionDelete(ctx context.Context, p *BusSubscriptionGetParams) error
	// BusSubscriptionVersions returns what routing matches the tenant's
	// unrouted events against: every current subscription (Until 0) and
	// every replaced or deleted version still kept, ordered by id then
	// Since, and the subscription generation, read in one snapshot. A
	// version is kept while an unrouted event of the tenant was published
	// before its end (at most until BusPrune finds none).
	BusSubscriptionVersions(ctx context.Context, p *BusTenantParams) ([]*BusSubscriptionVersion, int64, error)
	// BusSubscriptionGeneration returns a number that changes whenever a
	// subscription or a script of the tenant is put or deleted (0 before
	// the first): a runtime's router and script cache are checked against
	// it.
	BusSubscriptionGeneration(ctx context.Context, p *BusTenantParams) (int64, error)

	// BusScriptPut stores a new version of a script (1 for a new id;
	// earlier versions are kept; CreatedAt is the first version's) and
	// returns it.
	BusScriptPut(ctx context.Context, p *BusScriptPutParams) (*heraldtype.Script, error)
	// BusScriptGet returns a version of a script (Version 0: the latest),
	// or ErrNotFound.
	BusScriptGet(ctx context.Context, p *BusScriptGetParams) (*heraldtype.Script, error)
	// BusScriptList returns the latest version of every script of the
	// tenant, ordered by id.
	BusScriptList(ctx context.Context, p *BusTenantParams) ([]*heraldtype.Script, error)
	// BusScriptDelete deletes every version of a script, or returns
	// ErrNotFound.
	BusScriptDelete(ctx context.Context, p *BusScriptGetParams) error

	// BusDeadLetterList returns dead letters matching p.Filter, newest
	// first, and the cursor of the next page (0: this page is the last).
	BusDeadLetterList(ctx context.Context, p *BusDeadLetterListParams) ([]*heraldtype.DeadLetter, int64, error)
	// BusDeadLetterGet returns ErrNotFound if there is none.
	BusDeadLetterGet(ctx context.Context, p *BusDeadLetterGetParams) (*heraldtype.DeadLetter, error)
	// BusDeadLetterReprocess takes up to p.Limit letters matching p.Filter
	// that are not reprocessed and whose execution is still
	// dead_lettered, sets ReprocessedAt = p.Now on each and queues its
	// execution again (due at p.Now, Attempts 0, Reprocessed+1, a new
	// fair-queueing number), in one transaction. It returns how many it
	// reprocessed and wakes the tenant's bus workers.
	BusDeadLetterReprocess(ctx context.Context, p *BusDeadLetterOpParams) (int, error)
	// BusDeadLetterDelete deletes up to p.Limit letters matching p.Filter
	// and returns how many. Their executions stay dead_lettered.
	BusDeadLetterDelete(ctx context.Context, p *BusDeadLetterOpParams) (int, error)

	// BusEventGet returns a published event with its routes, each with
	// its execution (Fate left empty: the engine derives it), or
	// ErrNotFound.
	BusEventGet(ctx context.Context, p *BusEventGetParams) (*heraldtype.PublishedEvent, error)
	// BusAttemptList returns attempt records and the cursor of the next
	// page (0: last page).
	BusAttemptList(ctx context.Context, p *BusAttemptListParams) ([]*heraldtype.Attempt, int64, error)
	// BusPrune deletes up to p.Limit of the tenant's events that were
	// routed before p.Before and whose executions have all ended (or that
	// had none), with their routes, executions and attempts, and returns
	// how many events it deleted. Dead letters are kept until deleted. It
	// also deletes the kept subscription versions (BusSubscriptionVersions)
	// that no unrouted event of the tenant needs any more.
	BusPrune(ctx context.Context, p *BusPruneParams) (int, error)
	// BusBacklog counts the tenant's unrouted events plus its executions
	// that have not ended, stopping at p.Limit (0: no limit).
	BusBacklog(ctx context.Context, p *BusBacklogParams) (int, error)
}
