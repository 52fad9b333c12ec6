// Package storage is Herald's storage seam: the Store interface every backend
// implements, the parameter structs its methods take, and the sentinel errors
// backends map their own errors onto.
//
// A backend is a dumb, durable, transactional log plus work queues: it
// stores, fences and batches, and decides nothing. Workflow semantics
// (replay, event-lane matching) live in the engine; the few lane rules a
// store must apply inside its own transactions (the drops when an instance
// ends, the hand-on of a delete-after-first correlated event) are written
// once, in Go, in storage/internal/backend, over primitives each backend
// implements. The store guarantees atomicity (a turn commits in one
// transaction), fencing (leases with lock tokens) and tenant isolation
// (every method is scoped to one tenant and never reads across tenants,
// except those that let one runtime serve many: TenantList, TenantsReady,
// SubscribeAll and NextWake with AllTenants, which return tenant ids,
// limits and times, never a tenant's data; and the API keys of KeyStore,
// which a request is authenticated by before any tenant is known).
// A fast path that handles only some fields of a params struct fails
// closed: any other field set makes it fall back (backend.FieldGuard).
package storage

import (
	"context"
	"encoding/json"
	"errors"
	"time"

	"github.com/heraldwf/herald/heraldtype"
	"github.com/heraldwf/herald/history"
)

// Instance is one workflow instance.
type Instance struct {
	Tenant    string
	ID        string
	Workflow  string
	Status    heraldtype.Status
	Execution int // current execution, 1-based
	Input     json.RawMessage
	Output    json.RawMessage
	Failure   *history.Failure
	CreatedAt time.Time
	UpdatedAt time.Time
	// Blocked says why the instance is not running although it has work
	// ("" if nothing is known to block it): the reason of the last
	// TurnAbandon (cleared by the next TurnCommit or TurnAbandon), or else
	// that of its first activity task released by ActivityRetry with a
	// reason (cleared when that task completes or is retried without one).
	// A claimed Turn's Instance carries the first only.
	Blocked string
	// Attributes are the instance's searchable attributes (attributes.go),
	// sorted by key; set by InstanceGet and InstanceList only.
	Attributes []Attribute
	// ParentID is the instance whose turn started this one as a child
	// workflow (TurnCommitParams.StartChildren); "" otherwise.
	ParentID string
	// HasChildren: a turn of the instance started a child workflow.
	HasChildren bool
}

// MessageKind names an inbox message.
type MessageKind string

// Inbox message kinds.
const (
	MsgKick              MessageKind = "kick" // run a turn (start, continue-as-new)
	MsgEvent             MessageKind = "event"
	MsgActivityCompleted MessageKind = "activity_completed"
	MsgActivityFailed    MessageKind = "activity_failed"
	MsgTimerFired        MessageKind = "timer_fired"
	// MsgChildCompleted, MsgChildFailed: a child workflow ended (see
	// ChildStart); Execution and TaskSeq name the parent's
	// ChildWorkflowScheduled, Name is the child's instance id, Result or
	// Failure its outcome.
	MsgChildCompleted MessageKind = "child_completed"
	MsgChildFailed    MessageKind = "child_failed"
	// MsgCancel asks the workflow to cancel (InstanceCancel); Name is the
	// reason.
	MsgCancel MessageKind = "cancel"
	// MsgTerminate asks the runtime to terminate the instance (its
	// parent ended with ParentCloseTerminate); Name is the reason.
	MsgTerminate MessageKind = "terminate"
)

// Message is an entry of an instance's inbox: something the next turn must
// process. A timer_fired message becomes visible at VisibleAt (when the
// timer fires); every other message is visible as soon as it is committed,
// whatever Now a claim passes.
type Message struct {
	ID   int64 // assigned by the store, increasing in insertion order
	Kind MessageKind
	// Execution: activity and timer messages: the execution that scheduled
	// them; correlated-lane events: the execution of the wait they were
	// produced for.
	Execution int
	// TaskSeq: activity and timer messages: the Seq of the scheduling
	// decision; correlated-lane events: the Seq of the wait.
	TaskSeq int
	// External events.
	Lane    history.Lane
	EventID string
	Name    string
	Payload json.RawMessage
	// Key is the correlation key of a correlated-lane event; TaskSeq then
	// names the wait it was produced for.
	Key string
	// Latest: the queue's event definition says `buffer: latest` (at most
	// one unconsumed message; a newer one supersedes it).
	Latest bool
	// Activity results.
	Result  json.RawMessage
	Failure *history.Failure
	// TraceParent is the W3C traceparent of the span the message was sent
	// in ("" for none): the send's for an event (EventRaiseParams,
	// CorrelatedPutParams), the start's for a kick (InstanceCreateParams),
	// the scheduling turn's for an activity result (ActivityTask). Stored
	// as given; the store never parses it.
	TraceParent string

	VisibleAt time.Time
	CreatedAt time.Time
}

// FateUpdate changes an event's fate in the ledger.
type FateUpdate struct {
	EventID         string
	Fate            history.Fate
	Reason          history.DropReason
	Execution       int
	OriginExecution int
	WaitNumber      int
}

// ActivityTask is a scheduled activity execution.
type ActivityTask struct {
	Tenant     string
	InstanceID string
	Execution  int
	TaskSeq    int
	Name       string
	Input      json.RawMessage
	Attempt    int // 1-based attempt about to run
	Retry      heraldtype.RetryPolicy
	LockToken  string
	LeaseUntil time.Time
	// CancelRequested: the workflow no longer wants the result (a select
	// loser); a worker should stop the activity.
	CancelRequested bool
	// TraceParent is the W3C traceparent of the turn that scheduled the
	// task ("" for none), stored with it (TurnCommit), returned by
	// ActivityClaim and carried by the task's result message.
	TraceParent string
}

// Turn is a claimed unit of orchestration work: one instance, its current
// execution's history, and the inbox messages to process.
type Turn struct {
	Instance   Instance
	History    []history.Event
	Messages   []Message
	LockToken  string
	LeaseUntil time.Time
	// Err is set (wrapping ErrCorrupt) when a row of this instance — a
	// history document, an inbox message — could not be decoded. History
	// and Messages are then incomplete and must not be replayed; the lease
	// is held as for any turn. One bad row fails its own turn, never the
	// claim it came in.
	Err error
}

// ---- params ----

// InstanceCreateParams creates an instance with its ExecutionStarted event
// and a kick message. Events already waiting for this instance id stay in
// the inbox and are processed by the first turn.
type InstanceCreateParams struct {
	Tenant   string
	ID       string
	Workflow string
	Input    json.RawMessage
	Now      time.Time
	// TraceParent is stored on the kick message (Message.TraceParent).
	TraceParent string
}

// InstanceGetParams names an instance.
type InstanceGetParams struct {
	Tenant string
	ID     string
}

// InstanceListParams filters and pages instances. Zero fields do not
// filter. A page is ordered newest first: by CreatedAt, then ID (bytewise),
// both descending.
type InstanceListParams struct {
	Tenant   string
	Workflow string
	Status   heraldtype.Status
	// CreatedAfter and CreatedBefore bound CreatedAt to [CreatedAfter,
	// CreatedBefore); a zero time is unbounded.
	CreatedAfter  time.Time
	CreatedBefore time.Time
	// Limit is the page size: default 100, at most 1000 (more is read as
	// 1000).
	Limit int
	// After is the opaque cursor a previous page returned ("" = the first
	// page). Paging is stable across inserts: a page continues after the
	// last instance of the previous one.
	After string
	// Attributes keeps the instances that have every one of these
	// attributes (key, type and value equal; attributes.go). A key named
	// twice matches nothing unless both are equal.
	Attributes []Attribute
}

// InstanceTerminateParams terminates a running or pending instance: its
// status becomes terminated, ExecutionTerminated is appended, every event
// pending or buffered for it is dropped (instance_terminal) with a
// breadcrumb, its inbox, activities and lease are cleared.
//
// With Failure set the instance instead ends failed with that failure, and
// the history event appended is ExecutionFailed: what the runtime does to an
// instance whose stored rows cannot be decoded (it cannot replay it, so it
// cannot run its turn).
type InstanceTerminateParams struct {
	Tenant  string
	ID      string
	Reason  string
	Now     time.Time
	Failure *history.Failure
}

// HistoryListParams reads one execution's history. Execution 0 means the
// current one. Events with Seq > AfterSeq are returned, at most Limit (0 =
// all).
type HistoryListParams struct {
	Tenant     string
	InstanceID string
	Execution  int
	AfterSeq   int
	Limit      int
}

// EventRaiseParams records an external event for an instance.
type EventRaiseParams struct {
	Tenant     string
	InstanceID string
	EventID    string
	Lane       history.Lane
	Name       string
	Payload    json.RawMessage
	Now        time.Time
	// Latest: the event's definition says `buffer: latest` (stored on the
	// inbox message as Message.Latest).
	Latest bool
	// ExpiresAt is when the event expires if its instance still does not
	// exist by then (its retention): EventExpire then drops it with fate
	// dropped/expired. Once the instance exists (pending counts) the event
	// no longer expires this way. Zero: never.
	ExpiresAt time.Time
	// StartIfAbsent, when set, atomically creates the instance (as
	// InstanceCreate does) if it does not exist.
	StartIfAbsent *InstanceCreateParams
	// TraceParent is stored on the inbox message (Message.TraceParent).
	TraceParent string
	// Claim, when set, asks for a direct hand-off: if the raise stores the
	// event for an instance that exists, is not terminal, is not leased
	// (or its lease ran out) and is not held back (not_before), the same
	// transaction leases the instance as TurnClaim would (Claim.Lease,
	// Claim.MaxMessages; Tenant, Now and Max are ignored) and the result's
	// Turn is the claimed turn, loaded as TurnClaim loads it (every message
	// visible by p.Now, the raised one included; a store that hands off
	// several raises in one transaction may load by the earliest Now among
	// them, so a message that became visible in between waits for the next
	// turn: it is never delivered early). A store may always decline
	// (Turn nil: the instance is then claimable as after any raise); a raise
	// that hands off does not signal WorkTurns, as the caller runs the turn.
	// The raise is durable exactly as without Claim; the lease is the
	// caller's to commit or give back (TurnAbandon).
	Claim *TurnClaimParams
	// OnClaimed, with Claim, lets a store hand the claimed turn over
	// before the raise is durable. A store that can (SQLite with its sync
	// pipeline; PostgreSQL, whose raise then commits without waiting for
	// the WAL flush) calls it once, not on a goroutine the store needs
	// back, as soon as the raise's transaction has committed, and the
	// result's Turn is then nil.
	// EventRaise returns only after OnClaimed has returned, so it must not
	// block (start the turn and return); it is called even if the raise
	// then fails to become durable (the turn's commit then fails too). A
	// store that cannot leaves it uncalled and returns the turn in the
	// result. Durability is unchanged: EventRaise returns only once the
	// raise is durable, and a TurnCommit only once it is durable together
	// with every transaction committed before it, the raise's included, so
	// the turn runs while the raise is flushed and one flush can cover both.
	OnClaimed func(*Turn)
	// CheckDefinition, when set, makes the raise conditional on the event's
	// definition: it is stored only if the definition of (Tenant, Name) has
	// exactly DefinitionVersion (the version EventDefinitionCurrent
	// reported; 0: there is no definition, never put or deleted) in the
	// raise's own transaction, otherwise EventRaise returns
	// ErrDefinitionChanged and writes nothing (see EventStore.EventRaise).
	// The caller validated the event against that version, so no event is
	// stored that was validated against another. A negative version is
	// refused. Unset (the zero value), the raise does not look at
	// definitions.
	CheckDefinition   bool
	DefinitionVersion int64
}

// ErrDefinitionChanged: a raise with EventRaiseParams.CheckDefinition set
// named a definition version that is not the current one (the definition
// was put, deleted or created since the caller read it). Nothing was
// written; the caller reads the definition again (EventDefinitionCurrent),
// validates the event against it and raises again.
var ErrDefinitionChanged = errors.New("herald: event definition changed")

// EventRaiseResult is the receipt of a raise.
type EventRaiseResult struct {
	EventID    string
	ReceivedAt time.Time
	// Duplicate: the event id was seen before; this is the first receipt and
	// nothing was written.
	Duplicate bool
	// Started: StartIfAbsent created the instance.
	Started bool
	// Turn is the turn the raise claimed (see EventRaiseParams.Claim), or
	// nil.
	Turn *Turn
}

// EventGetParams names an event in the fate ledger.
type EventGetParams struct {
	Tenant  string
	EventID string
}

// EventListParams lists an instance's events, oldest first.
type EventListParams struct {
	Tenant     string
	InstanceID string
	Lane       history.Lane // "" = all lanes
	Name       string       // "" = all names
	Fate       history.Fate // "" = all fates
	Limit      int          // default 1000
}

// TurnClaimParams claims up to Max instances that have visible inbox
// messages and no live lease.
type TurnClaimParams struct {
	Tenant string
	Now    time.Time
	Lease  time.Duration
	Max    int
	// MaxMessages caps the messages returned per turn (default 1000).
	MaxMessages int
}

// TurnCommitParams commits a turn in one transaction: the history delta, the
// consumed inbox messages, outgoing work and the status change. It fails with
// ErrLeaseLost (writing nothing) unless LockToken still owns the instance.
type TurnCommitParams struct {
	Tenant     string
	InstanceID string
	LockToken  string
	Execution  int // the execution the turn ran on
	Now        time.Time

	NewEvents        []history.Event // appended to the execution's history
	ConsumedMessages []int64         // inbox message ids to delete
	Activities       []ActivityTask  // to schedule (LockToken/LeaseUntil ignored)
	Timers           []TimerSchedule
	CancelTimers     []int // TaskSeqs of timers of this execution to delete
	CancelActivities []int // TaskSeqs of activities of this execution to cancel
	Fates            []FateUpdate

	Status  heraldtype.Status // new status (running, completed, failed)
	Output  json.RawMessage
	Failure *history.Failure

	// Attributes are attribute upserts (attributes.go), applied in order
	// to the instance's attributes in the same transaction: an attribute
	// with a type sets its key, one without removes it. They carry across
	// continue-as-new (the row keeps them). A commit with an invalid
	// upsert (AttributeProblem) is refused (ErrInvalidArgument) and writes
	// nothing; the cap of MaxAttributes keys is the engine's to keep (it
	// replays every upsert of the instance).
	Attributes []Attribute

	// ContinueAsNew, when set, ends the execution and starts the next one:
	// the instance's execution becomes Execution+1 with StartEvents as its
	// initial history, and a kick message is added.
	ContinueAsNew *ContinueAsNewParams

	// CorrelatedWaits are correlated-lane waits made this turn (on
	// execution Execution). For each, in the same transaction: if a
	// correlated event exists under (Def, Key), it is delivered at once — an
	// `event` inbox message {Lane: correlated, Name: Def, Key, Execution,
	// TaskSeq: the wait's seq, EventID: a new id, Payload: the correlated
	// event's payload} plus a ledger row (fate pending, Key set) and an
	// entry in the correlated event's produced list; with DeleteAfterFirst
	// the correlated event is then deleted (so exactly one waiter ever
	// receives it). Otherwise a marker (tenant, instance, execution, seq,
	// def, key) is stored, which a later CorrelatedPut delivers to.
	//
	// A wait whose seq is also in CancelCorrelatedWaits (made and withdrawn
	// in the same turn) is neither registered nor delivered to, and a commit
	// that ends the instance or continues it as new registers no waits.
	CorrelatedWaits []CorrelatedWait
	// Publish are events the turn published to the bus (ctx.Publish):
	// stored in the same transaction as BusPublish stores them (a
	// duplicate id is skipped, an id of another type is skipped too: the
	// engine derives these ids, so neither happens but by replay after a
	// lost commit). A commit that publishes wakes the bus workers.
	Publish []BusPublishEvent
	// CancelCorrelatedWaits are seqs (of Execution) of correlated waits
	// withdrawn this turn (timed out, lost a select): their markers are
	// deleted. A commit that ends the instance or continues it as new
	// deletes all its markers, as InstanceTerminate does.
	//
	// A delete-after-first put may have delivered to such a wait after the
	// turn was claimed (the delivery is in the inbox, unseen by the turn).
	// The commit then hands the event on, as the put would have done had
	// the wait been withdrawn first: the message is deleted, its ledger row
	// marked dropped (withdrawn_wait), and the payload delivered under a
	// new event id to the oldest other live marker on (def, key), or, with
	// none, stored again as the correlated event (with the definition's
	// TTL) unless a newer one is stored. The definition's
	// delete_after_first_correlation decides; a fan-out delivery is left
	// in the inbox for the engine to drop (its event is still stored). The
	// same holds for a commit that ends the execution, for every wait.
	CancelCorrelatedWaits []int
	// ReturnedCorrelated are correlated-lane events this turn gives back: a
	// wait had received one (the turn or an earlier one consumed its
	// message) and lost a Select before the workflow got it. The turn's
	// Fates drop the copy (withdrawn_wait). If the definition says
	// delete_after_first_correlation, the commit hands the payload on as it
	// does a withdrawn wait's delivery (CancelCorrelatedWaits): under a new
	// event id to the oldest live marker on (Def, Key) — one this commit
	// registers included, but none of this instance if the commit ends the
	// execution — or, with none, stored again as the correlated event (with
	// the definition's TTL) unless one is stored. A fan-out event is left
	// alone: it is still stored, and a later wait receives it again.
	ReturnedCorrelated []ReturnedCorrelated
	// Sends are events the turn sends to instances of its tenant
	// (ctx.RaiseEvent, ctx.Enqueue: TurnSend).
	Sends []TurnSend

	// StartChildren are child workflows the turn starts (ChildStart).
	StartChildren []ChildStart
	// CancelChildren are the instance ids of children of this instance
	// the turn asks to cancel, as InstanceCancel does (a child that has
	// ended, or was asked already, is left alone).
	CancelChildren []string
	// Family says the instance may have a parent or children
	// (Instance.ParentID, Instance.HasChildren, StartChildren): a commit
	// that ends it must then apply the family rules (FamilyEnd). Without
	// it a store may assume there are none.
	Family bool
}

// ReturnedCorrelated is a correlated-lane event a turn gives back
// (TurnCommitParams.ReturnedCorrelated).
type ReturnedCorrelated struct {
	EventID string // the copy the instance received
	Def     string
	Key     string
	Payload json.RawMessage
	// TraceParent is the trace context the copy carried
	// (Message.TraceParent), "" if unknown: the hand-on carries it on.
	TraceParent string
}

// CorrelatedWait is a correlated-lane wait (docs/correlated.md).
type CorrelatedWait struct {
	TaskSeq int
	Def     string
	Key     string
	// DeleteAfterFirst copies the definition's
	// delete_after_first_correlation at the time of the wait.
	DeleteAfterFirst bool
}

// TimerSchedule is a durable timer: a timer_fired message visible at FireAt.
type TimerSchedule struct {
	TaskSeq int
	FireAt  time.Time
}

// ContinueAsNewParams describes the next execution.
type ContinueAsNewParams struct {
	Input       json.RawMessage
	StartEvents []history.Event // ExecutionStarted, then carried events and drop breadcrumbs
}

// TurnAbandonParams releases a claimed turn without committing it (graceful
// shutdown, or a turn that failed for a transient reason).
type TurnAbandonParams struct {
	Tenant     string
	InstanceID string
	LockToken  string
	// RetryAt delays the instance's next claim (zero = now).
	RetryAt time.Time
	// Blocked is stored as the instance's Blocked reason (why no runtime
	// could run the turn, e.g. its workflow is registered nowhere); ""
	// clears it.
	Blocked string
}

// ActivityClaimParams claims up to Max visible activity tasks. Taking over a
// task whose lease expired increments its Attempt: the attempt that held the
// lease was lost with its worker.
type ActivityClaimParams struct {
	Tenant string
	Now    time.Time
	Lease  time.Duration
	Max    int
}

// ActivityCompleteParams finishes an activity task: the task is deleted and
// an activity_completed (Failure nil) or activity_failed message is added to
// the instance's inbox, unless the instance is terminal, the execution has
// moved on, or the task was cancelled (then the result is discarded).
// ErrLeaseLost if LockToken no longer owns the task.
type ActivityCompleteParams struct {
	Tenant     string
	InstanceID string
	Execution  int
	TaskSeq    int
	LockToken  string
	Result     json.RawMessage
	Failure    *history.Failure
	Now        time.Time
}

// ActivityRetryParams releases a failed attempt for a later retry: Attempt is
// incremented and the task becomes visible at RetryAt.
type ActivityRetryParams struct {
	Tenant     string
	InstanceID string
	Execution  int
	TaskSeq    int
	LockToken  string
	RetryAt    time.Time
	// Blocked is stored on the task as the reason it did not run (e.g. its
	// activity is registered nowhere); "" clears it. A release with a
	// reason is no attempt: Attempt is then left as it is. InstanceGet shows it
	// as the instance's Blocked while the instance has no reason of its own.
	Blocked string
}

// ActivityHeartbeatParams extends a claimed task's lease. The result says
// whether the workflow has asked to cancel the activity.
type ActivityHeartbeatParams struct {
	Tenant     string
	InstanceID string
	Execution  int
	TaskSeq    int
	LockToken  string
	LeaseUntil time.Time
}

// NextWakeParams asks when the next message or activity of a tenant becomes
// visible.
type NextWakeParams struct {
	Tenant string
	Now    time.Time
	// AllTenants asks for the earliest wake of any registered tenant
	// (Tenant is then ignored).
	AllTenants bool
}

// EventDefinitionPutParams creates or replaces a definition (CreatedAt kept, UpdatedAt = Now; an empty Buffer is stored as BufferFIFO).
// Events already stored are not rewritten.
type EventDefinitionPutParams struct {
	Tenant     string
	Definition heraldtype.EventDefinition // Name identifies it (with Tenant); CreatedAt and UpdatedAt are set by the store
	Now        time.Time
}

// EventDefinitionGetParams names a definition.
type EventDefinitionGetParams struct {
	Tenant string
	Name   string
}

// CurrentDefinition is a definition with its version (see
// EventDefinitionPut): a name and version never denote two different
// definitions, so a version says whether a definition read earlier is
// still the current one.
type CurrentDefinition struct {
	Definition *heraldtype.EventDefinition // nil: none (never put, or deleted)
	Version    int64                       // Definition's version; 0 with none
}

// EventDefinitionListParams lists all of a tenant's definitions, ordered by
// name.
type EventDefinitionListParams struct {
	Tenant string
}

// EventExpireParams drops events whose retention has passed while their
// instance never started: each inbox event message with ExpiresAt <= Now
// whose instance does not exist is deleted and its ledger fate becomes
// dropped/expired (the ledger entry stays, so the id is still deduplicated).
// At most Limit (default 1000) per call, earliest ExpiresAt first.
type EventExpireParams struct {
	Tenant string
	Now    time.Time
	Limit  int
}

// CorrelatedPutParams creates or updates (payload, UpdatedAt, ExpiresAt)
// the correlated event under (Tenant, Def, Key) and, in the same
// transaction, delivers it to every instance with a marker on (Def, Key):
// per marker an `event` inbox message {Lane correlated, Name Def, Key,
// Execution and TaskSeq of the marker's wait, EventID new, Payload}, a
// ledger row (fate pending, lane correlated, name Def, Key) and a Produced
// entry; the marker is deleted. With DeleteAfterFirst only the oldest
// marker receives it and the correlated event is deleted right away (if
// there is no marker it is kept until the first wait). Concurrent puts and
// waits on one key are serialised (PostgreSQL: an advisory transaction lock
// on hash(tenant, def, key)), so with DeleteAfterFirst exactly one waiter
// ever receives it, across nodes.
type CorrelatedPutParams struct {
	Tenant           string
	Def              string
	Key              string
	Payload          json.RawMessage
	DeleteAfterFirst bool
	ExpiresAt        time.Time // from the definition's TTL; zero = never
	Now              time.Time
	// TraceParent is the W3C traceparent of the put's span ("" for none),
	// stored with the correlated event (replacing an earlier put's) and
	// copied onto every inbox message that delivers it: this put's
	// deliveries, a later wait's (TurnCommitParams.CorrelatedWaits) and a
	// delete-after-first hand-on's (a hand-on carries the trace of the
	// message or returned event it hands on, and an event stored again
	// keeps it). At most MaxTraceParentBytes of printable ASCII
	// (ErrInvalidArgument otherwise); opaque to the store.
	TraceParent string
}

// CorrelatedGetParams names a correlated event.
type CorrelatedGetParams struct {
	Tenant string
	Def    string
	Key    string
}

// CorrelatedSearchParams searches the correlated events of one definition,
// ordered by (CreatedAt, Key). Earliest/Latest bound CreatedAt (inclusive;
// zero = unbounded); HasProduced filters on whether it produced any event
// (nil = no filter); Limit defaults to 100 and is capped at 1000; Bookmark is
// the opaque value a previous page returned ("" = first page). Paging is
// stable across inserts: a page continues after the last event of the
// previous one.
type CorrelatedSearchParams struct {
	Tenant      string
	Def         string
	Earliest    time.Time
	Latest      time.Time
	HasProduced *bool
	Limit       int
	Bookmark    string
}

// CorrelatedExpireParams deletes correlated events with a non-zero ExpiresAt
// <= Now (at most Limit, default 1000, most overdue first) and returns their
// keys.
type CorrelatedExpireParams struct {
	Tenant string
	Now    time.Time
	Limit  int
}

// LeaderElectParams asks to hold (or renew) the named leadership of a tenant
// until Now+Lease.
type LeaderElectParams struct {
	Tenant string
	Name   string
	Holder string
	Lease  time.Duration
	Now    time.Time
}

// Store is the storage seam: every role a backend plays. All methods are
// safe for concurrent use, and every method is scoped to params.Tenant (it
// never reads or writes across tenants; the package comment names the
// cross-tenant exceptions). A nil params is an error. A write
// refused for want of room returns an error matching ErrStorageFull, except
// TurnAbandon, ActivityComplete and ActivityRetry, which hand back work the
// caller holds: they wait for room (until ctx ends or the store closes).
// Each method's doc comment below is its contract; the backends' comments
// only add how they keep it.
//
// Store and its role interfaces are not stable; not for implementing
// outside this repository: methods are added and changed as the engine
// needs them, in any release, and the conformance suite (storagetest) is
// what a backend must pass, not this list. Use a backend Herald ships
// (storage/sqlite, storage/postgres); see docs/modules.md.
type Store interface {
	InstanceStore
	EventStore
	DefinitionStore
	TurnStore
	ActivityStore
	CorrelatedStore
	LeaderStore
	Notifier
	TenantStore
	BusStore
	KeyStore

	// Close releases the store; later calls return ErrClosed.
	Close() error
}

// InstanceStore keeps instances and their histories.
//
// Not stable; not for implementing outside this repository (see Store).
type InstanceStore interface {
	// InstanceCreate creates an instance (status pending, execution 1) with
	// its ExecutionStarted event (seq 1) and a kick message visible at
	// p.Now (with p.TraceParent), in one transaction. Events raised for the id before it existed
	// stay in its inbox and no longer expire (see EventExpire). It returns
	// ErrInstanceExists, writing nothing, if (tenant, id) is taken, and
	// refuses an empty id or workflow name.
	InstanceCreate(ctx context.Context, p *InstanceCreateParams) (*Instance, error)
	// InstanceGet returns the instance, or ErrNotFound.
	InstanceGet(ctx context.Context, p *InstanceGetParams) (*Instance, error)
	// InstanceList returns a page of the tenant's instances, newest first,
	// filtered by workflow, status and creation time when set, at most
	// p.Limit (default 100, at most 1000; see InstanceListParams), and the
	// cursor of the next page ("" when there is none); ErrInvalidArgument
	// for a cursor it did not make.
	InstanceList(ctx context.Context, p *InstanceListParams) ([]*Instance, string, error)
	// InstanceTerminate ends a pending or running instance in one
	// transaction: status terminated with failure {Kind: "terminated",
	// Message: p.Reason} and ExecutionTerminated appended to the current
	// execution's history (with p.Failure: status failed and
	// ExecutionFailed); then, as every end of an instance does, every event
	// still pending or buffered for it is dropped (instance_terminal) with
	// an EventDropped breadcrumb, and its inbox, activity tasks and
	// correlation markers are deleted; its lease is cleared, so an
	// in-flight turn's commit fails with ErrLeaseLost. It returns the
	// breadcrumbs, so the caller can log and count the drops; or
	// ErrNotFound, or ErrInstanceNotRunning if the instance already ended.
	InstanceTerminate(ctx context.Context, p *InstanceTerminateParams) ([]history.Event, error)
	// InstanceCancel asks a pending or running instance to cancel, in one
	// transaction: unless it was asked already (then it writes nothing and
	// reports already), it marks the instance and adds a cancel message
	// (MsgCancel, Name p.Reason) to its inbox, visible at p.Now. It returns
	// ErrNotFound, or ErrInstanceNotRunning if the instance has ended.
	InstanceCancel(ctx context.Context, p *InstanceCancelParams) (already bool, err error)
	// HistoryList returns one execution's history (Execution 0: the current
	// one) ordered by seq: the events after p.AfterSeq, at most p.Limit (0
	// = all), read in one snapshot. It returns ErrNotFound if the instance
	// does not exist.
	HistoryList(ctx context.Context, p *HistoryListParams) ([]history.Event, error)
}

// EventStore keeps external events and their fate ledger.
//
// Not stable; not for implementing outside this repository (see Store).
type EventStore interface {
	// EventRaise records an external event in one transaction:
	//
	//   - if the event id is already in the tenant's ledger for the same
	//     instance, lane and name, it returns the first receipt with
	//     Duplicate set and writes nothing; for another target it returns
	//     ErrEventIDConflict;
	//   - if p.CheckDefinition is set and the current version of the
	//     definition of (p.Tenant, p.Name) is not p.DefinitionVersion (0: no
	//     definition, never put or deleted), it returns ErrDefinitionChanged
	//     and stores nothing. The version is read in the raise's own
	//     transaction, after the duplicate check above (a duplicate is
	//     answered whatever the version) and before the instance is looked
	//     at, so a concurrent EventDefinitionPut or EventDefinitionDelete
	//     is either seen by the raise or ordered after it;
	//   - if the instance is terminal it returns ErrInstanceNotRunning and
	//     stores nothing;
	//   - if the instance does not exist and p.StartIfAbsent is set, it
	//     creates it as InstanceCreate does (Started set; the tenant and id
	//     are those of p);
	//   - it adds the ledger row (fate pending, received at p.Now) and an
	//     event message to the instance's inbox, visible at once, with
	//     Latest and TraceParent from p. An instance that does not exist yet keeps
	//     the message until it is created, or until p.ExpiresAt (when set)
	//     has passed and EventExpire drops it. p.ExpiresAt is ignored when
	//     the instance exists.
	EventRaise(ctx context.Context, p *EventRaiseParams) (*EventRaiseResult, error)
	// EventGet returns an event's ledger entry, or ErrNotFound.
	EventGet(ctx context.Context, p *EventGetParams) (*heraldtype.EventRecord, error)
	// EventList returns an instance's ledger entries in the order they were
	// received, filtered by lane, name and fate when set, at most p.Limit
	// (default 1000). An empty InstanceID lists the whole tenant's ledger.
	EventList(ctx context.Context, p *EventListParams) ([]*heraldtype.EventRecord, error)
	// EventExpire drops, in one transaction, up to p.Limit (default 1000)
	// event messages of the tenant kept for instance ids that do not exist,
	// whose ExpiresAt (from EventRaise) is set and not after p.Now: most
	// overdue first (by ExpiresAt, then in raise order). Each message is
	// deleted from the inbox and its ledger entry gets fate dropped, reason
	// expired, updated at p.Now; the ledger entry stays, so a later raise of
	// the same id is still a duplicate. No history breadcrumb is written
	// (there is no instance). It returns the dropped event ids in that
	// order (nil if none). Events of an instance that exists never expire
	// this way. Concurrent calls drop disjoint events.
	EventExpire(ctx context.Context, p *EventExpireParams) ([]string, error)
}

// DefinitionStore keeps event definitions.
//
// Not stable; not for implementing outside this repository (see Store).
type DefinitionStore interface {
	// EventDefinitionPut creates the definition of (p.Tenant,
	// Definition.Name) with version 1, or replaces every field of an
	// existing one, keeping its CreatedAt and incrementing its version (a
	// column of the stored row, which EventDefinitionCurrent reports;
	// heraldtype.EventDefinition does not carry it). A definition created again after EventDefinitionDelete continues
	// the deleted one's version (a name and version never denote two
	// different definitions) but gets a new CreatedAt. UpdatedAt (and CreatedAt on
	// creation) is p.Now; an empty Buffer is stored as BufferFIFO. It
	// returns the definition as stored. The schema is stored unchecked (the
	// engine compiles it before calling); an unknown buffer policy or a
	// negative retention, payload cap or correlation TTL is refused.
	EventDefinitionPut(ctx context.Context, p *EventDefinitionPutParams) (*heraldtype.EventDefinition, error)
	// EventDefinitionGet returns a definition, or ErrNotFound (also for a
	// deleted one).
	EventDefinitionGet(ctx context.Context, p *EventDefinitionGetParams) (*heraldtype.EventDefinition, error)
	// EventDefinitionCurrent returns the definition of (p.Tenant, p.Name)
	// with its version, read together (as EventDefinitionGet reads it), for
	// a raise conditional on it (EventRaiseParams.CheckDefinition). With no
	// definition (never put, or deleted) it returns Definition nil and
	// Version 0, not ErrNotFound.
	EventDefinitionCurrent(ctx context.Context, p *EventDefinitionGetParams) (*CurrentDefinition, error)
	// EventDefinitionList returns the tenant's definitions (not the deleted
	// ones) ordered by name, bytewise.
	EventDefinitionList(ctx context.Context, p *EventDefinitionListParams) ([]*heraldtype.EventDefinition, error)
	// EventDefinitionDelete deletes a definition, or returns ErrNotFound.
	// Events already stored are not touched; from then on the definition's
	// rules no longer apply to them (a delete-after-first event is no
	// longer handed on, see TurnCommit).
	EventDefinitionDelete(ctx context.Context, p *EventDefinitionGetParams) error
}

// TurnStore hands out and commits the turns of instances.
//
// Not stable; not for implementing outside this repository (see Store).
type TurnStore interface {
	// TurnClaim claims up to p.Max (default 1) instances of the tenant that
	// are not terminal, have at least one inbox message visible at p.Now,
	// have no live lease (none, or one that ended before p.Now) and are not
	// delayed by TurnAbandon's RetryAt. The instance that has waited
	// longest comes first: instances are ordered by the visible_at of their
	// earliest message (ties in creation order). Each gets a new lock token
	// (no two turns share one) and a lease until p.Now+p.Lease (default
	// 30 s); its turn holds the current execution's whole history and its
	// visible messages in id order, at most p.MaxMessages (default 1000).
	// Messages for instance ids that do not exist are never claimed. A row
	// of an instance that cannot be decoded fails that turn (Turn.Err,
	// wrapping ErrCorrupt), not the claim. A claim may return fewer turns
	// than there is work (PostgreSQL skips rows other transactions hold):
	// callers claim again when woken.
	TurnClaim(ctx context.Context, p *TurnClaimParams) ([]*Turn, error)
	// TurnCommit commits a claimed turn in one transaction. It fails with
	// ErrLeaseLost, writing nothing, unless p.LockToken still owns the
	// instance (the lease may have run out as long as no one else claimed
	// the instance since) and the instance is not terminal. Any other
	// failure (a NewEvents seq already taken, a bad status, a turn that ran
	// on another execution) writes nothing either.
	//
	// In order it: appends NewEvents to p.Execution's history (their Seq
	// set by the caller); deletes ConsumedMessages; schedules Activities
	// (attempt 1, visible at once, with their TraceParent; Tenant,
	// InstanceID and a zero Execution are taken from p); adds Timers as timer_fired messages visible at
	// FireAt; deletes the timers of CancelTimers; cancels CancelActivities
	// (an unleased task, or one whose lease ran out, is deleted; a leased
	// one is marked cancel_requested); applies Fates to the instance's
	// ledger rows (the last update of an id wins; ids not in the ledger are
	// ignored). Then the correlated lane (see CorrelatedWaits,
	// CancelCorrelatedWaits and ReturnedCorrelated on TurnCommitParams):
	// unless the turn ends the execution, the markers of
	// CancelCorrelatedWaits are deleted and the delete-after-first events a
	// put delivered to those waits while the turn ran are handed on, and
	// CorrelatedWaits are handled (a wait also withdrawn is skipped; a live
	// correlated event is delivered at once, otherwise a marker is
	// stored); a turn that ends the execution hands on such deliveries made
	// to any wait of the execution; the delete-after-first events of
	// ReturnedCorrelated are handed on the same way, after the waits. A
	// hand-on follows the event definition as it is at the commit: a
	// definition deleted since has no rule to follow, and nothing is handed
	// on. It then sets status (empty means running), output and failure. A
	// terminal status drops the instance's pending and buffered events
	// (instance_terminal) with EventDropped breadcrumbs appended after
	// NewEvents, and deletes its inbox, activity tasks and correlation
	// markers. ContinueAsNew moves the instance to execution p.Execution+1
	// (status running, its input), writes StartEvents as that execution's
	// history, deletes the old executions' timers and activity results and
	// the instance's correlation markers, deletes their unleased activity
	// tasks and marks leased ones cancel_requested, and adds a kick
	// message. Finally the lease is cleared. StartChildren are created (or
	// the parent told their id is taken) and CancelChildren asked to
	// cancel in the same transaction, and a commit that ends the instance
	// with Family set applies the family rules (see ChildStart).
	//
	// It returns the EventDropped breadcrumbs of the instance_terminal
	// drops, so the caller can log and count them.
	TurnCommit(ctx context.Context, p *TurnCommitParams) ([]history.Event, error)
	// TurnAbandon releases a claimed turn without committing it; with
	// RetryAt set the instance cannot be claimed before RetryAt. It returns
	// ErrLeaseLost if p.LockToken no longer owns the instance.
	TurnAbandon(ctx context.Context, p *TurnAbandonParams) error
}

// ActivityStore hands out activity tasks and takes their results.
//
// Not stable; not for implementing outside this repository (see Store).
type ActivityStore interface {
	// ActivityClaim claims up to p.Max (default 1) activity tasks of the
	// tenant that are visible at p.Now and have no live lease, oldest
	// first, giving each a new random lock token and a lease until
	// p.Now+p.Lease (default 30 s). Taking over a task whose lease expired
	// increments its Attempt. Tasks whose cancellation was requested are
	// not handed out again: once their lease runs out they are deleted.
	ActivityClaim(ctx context.Context, p *ActivityClaimParams) ([]*ActivityTask, error)
	// ActivityComplete finishes a claimed task: the task is deleted and,
	// unless the instance is terminal or gone, has moved to another
	// execution, or the task's cancellation was requested, an
	// activity_completed (p.Failure nil) or activity_failed message
	// carrying p.Result or p.Failure, and the task's TraceParent, is added
	// to the instance's inbox, visible at p.Now. It returns ErrLeaseLost, writing nothing, if
	// p.LockToken no longer owns the task.
	ActivityComplete(ctx context.Context, p *ActivityCompleteParams) error
	// ActivityRetry releases a failed attempt of a claimed task: Attempt is
	// incremented and the task becomes visible at p.RetryAt (zero: at
	// once). A task whose cancellation was requested is deleted instead.
	// It returns ErrLeaseLost if p.LockToken no longer owns the task.
	ActivityRetry(ctx context.Context, p *ActivityRetryParams) error
	// ActivityHeartbeat extends a claimed task's lease to p.LeaseUntil (a
	// zero LeaseUntil leaves it as it is) and reports whether the workflow
	// asked to cancel the activity. It returns ErrLeaseLost if p.LockToken
	// no longer owns the task.
	ActivityHeartbeat(ctx context.Context, p *ActivityHeartbeatParams) (cancelRequested bool, err error)
}

// CorrelatedStore keeps correlated events (docs/correlated.md).
//
// Not stable; not for implementing outside this repository (see Store).
type CorrelatedStore interface {
	// CorrelatedPut creates the correlated event under (Tenant, Def, Key),
	// or updates its payload, UpdatedAt and ExpiresAt (CreatedAt is kept),
	// and delivers it in the same transaction as CorrelatedPutParams says.
	// A correlated event whose ExpiresAt has passed but that
	// CorrelatedExpire has not deleted yet is replaced as if it did not
	// exist (new CreatedAt, empty produced list). It returns the stored
	// event with its produced list (including what this put produced);
	// with DeleteAfterFirst and a waiter, the event that was delivered and
	// deleted.
	CorrelatedPut(ctx context.Context, p *CorrelatedPutParams) (*heraldtype.CorrelatedEvent, error)
	// CorrelatedGet returns a correlated event with its produced list
	// (oldest first), or ErrNotFound. An event past its ExpiresAt is
	// returned until CorrelatedExpire deletes it.
	CorrelatedGet(ctx context.Context, p *CorrelatedGetParams) (*heraldtype.CorrelatedEvent, error)
	// CorrelatedDelete deletes a correlated event and its produced list
	// (the ledger keeps each produced event's fate and Key), or returns
	// ErrNotFound. Markers are untouched.
	CorrelatedDelete(ctx context.Context, p *CorrelatedGetParams) error
	// CorrelatedSearch returns the correlated events of p.Def ordered by
	// (CreatedAt, Key bytewise), filtered as p says, each with its produced
	// list, and the bookmark of the next page ("" when this page is the
	// last). A bookmark names the last event of its page, so events
	// created meanwhile never shift a page. A malformed bookmark wraps
	// ErrInvalidArgument.
	CorrelatedSearch(ctx context.Context, p *CorrelatedSearchParams) ([]*heraldtype.CorrelatedEvent, string, error)
	// CorrelatedExpire deletes, in one transaction, up to p.Limit (default
	// 1000) correlated events of the tenant whose ExpiresAt is set and not
	// after p.Now, most overdue first (then by definition and key), with
	// their produced lists, and returns their keys in that order (nil if
	// none). Markers are untouched. Concurrent calls delete disjoint
	// events.
	CorrelatedExpire(ctx context.Context, p *CorrelatedExpireParams) ([]string, error)
}

// LeaderStore elects the node that runs a tenant's maintenance.
//
// Not stable; not for implementing outside this repository (see Store).
type LeaderStore interface {
	// LeaderElect makes p.Holder the leader of (p.Tenant, p.Name) until
	// p.Now+p.Lease if nobody holds it, if p.Holder already holds it (a
	// renewal, even of a lease that ran out), or if another holder's lease
	// ended before p.Now; it reports whether p.Holder leads. A lease ending
	// exactly at p.Now is still live. A non-positive Lease is refused.
	LeaderElect(ctx context.Context, p *LeaderElectParams) (bool, error)
	// LeaderResign ends p.Holder's leadership of (p.Tenant, p.Name) at
	// once, if it has it; otherwise it does nothing.
	LeaderResign(ctx context.Context, p *LeaderElectParams) error
}

// Notifier tells idle workers when to look for work.
//
// Not stable; not for implementing outside this repository (see Store).
type Notifier interface {
	// SubscribeKinds returns a channel that receives a value (coalesced:
	// its buffer holds one) whenever new work of the kinds in the mask is
	// committed for the tenant, so that idle workers wake at once and a
	// loop for turns is not woken (and does not make an empty claim) for a
	// new activity task, and the other way round. A store that cannot tell
	// may wake a subscriber for any kind. Writers never block on the
	// channel; it is never closed. cancel unsubscribes and is idempotent.
	SubscribeKinds(tenant string, kinds WorkKind) (ch <-chan struct{}, cancel func())
	// NextWake returns the earliest time after p.Now at which work of the
	// tenant may become claimable (a message or activity task becoming
	// visible, a TurnAbandon RetryAt passing, a lease running out so that
	// its work can be taken over), or ok=false if there is none. A store
	// may leave out a time its own commits signal (see the backends).
	NextWake(ctx context.Context, p *NextWakeParams) (at time.Time, ok bool, err error)
	// SubscribeAll is SubscribeKinds for every tenant: the channel receives
	// a value (coalesced) whenever work of the kinds is written for any
	// tenant, and drain returns (and forgets) the tenants notified since
	// the previous drain, in no particular order. drain returns AnyTenant
	// among them when notifications may have been lost (PostgreSQL: the
	// LISTEN connection was re-established): any tenant may have work.
	SubscribeAll(kinds WorkKind) (ch <-chan struct{}, drain func() []string, cancel func())
}

// AnyTenant, among the tenants a SubscribeAll drain returns, means that any
// tenant may have new work. It is no valid tenant id.
const AnyTenant = ""

// WorkKind is a kind of work a wake-up announces: the bits of a mask.
type WorkKind uint8

// Kinds of work.
const (
	// WorkTurns: an instance may have a turn to run (a message arrived,
	// a turn left work, a lease was released).
	WorkTurns WorkKind = 1 << iota
	// WorkActivities: an activity task may be claimable.
	WorkActivities
	// WorkBus: the event bus has work: an unrouted published event, or
	// an execution that is due (queued, retrying past its time, or
	// running with a lease that ran out).
	WorkBus

	WorkAll = WorkTurns | WorkActivities | WorkBus
)
