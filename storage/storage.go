// Package storage is Herald's storage seam: the Store interface every backend
// implements, the parameter structs its methods take, and the sentinel errors
// backends map their own errors onto.
//
// A backend is a dumb, durable, transactional log plus work queues. All
// workflow semantics (replay, event-lane matching) live in the engine; the
// store guarantees atomicity (a turn commits in one transaction), fencing
// (leases with lock tokens) and tenant isolation (every method is scoped to
// one tenant and never reads across tenants).
package storage

import (
	"context"
	"encoding/json"
	"errors"
	"time"

	"github.com/heraldwf/herald/history"
)

// Sentinel errors. Backends wrap them with context; callers use errors.Is.
var (
	ErrNotFound           = errors.New("herald: not found")
	ErrInstanceExists     = errors.New("herald: instance already exists")
	ErrInstanceNotRunning = errors.New("herald: instance is not running")
	// ErrLeaseLost: the caller's lock token no longer owns the work (its lease
	// expired and another worker took it over, or the instance was
	// terminated). Nothing was written.
	ErrLeaseLost = errors.New("herald: lease lost")
	// ErrEventIDConflict: an event id was reused for a different target, lane
	// or name. Nothing was written.
	ErrEventIDConflict = errors.New("herald: event id already used for another event")
	ErrClosed          = errors.New("herald: store closed")
	// ErrInvalidArgument: a parameter can never be valid (a malformed search
	// bookmark, an identifier that breaks the text rules). Nothing was
	// written.
	ErrInvalidArgument = errors.New("herald: invalid argument")
	// ErrUnavailable: the store could not be reached or dropped the
	// connection under the call (PostgreSQL: a terminated backend, a
	// connection failure). The call's effect is unknown for a write; a read
	// or an idempotent write (one that carries an event id) may be retried.
	ErrUnavailable = errors.New("herald: storage unavailable")
	// ErrCorrupt: a stored row cannot be decoded. It concerns one instance:
	// a claim hands that instance's turn out with Turn.Err set, and the
	// runtime fails the instance instead of the claim.
	ErrCorrupt = errors.New("herald: stored data cannot be decoded")
	// ErrStorageFull: the database has no room left (a full disk or file
	// system quota, a database or tablespace size limit). The write that
	// got it was not made; writes succeed again once room is made, without
	// reopening the store.
	ErrStorageFull = errors.New("herald: storage full")
)

// Status is an instance's status.
type Status string

// Instance statuses.
const (
	StatusPending    Status = "pending" // created, first turn not run yet
	StatusRunning    Status = "running"
	StatusCompleted  Status = "completed"
	StatusFailed     Status = "failed"
	StatusTerminated Status = "terminated"
)

// Terminal reports whether s is a final status.
func (s Status) Terminal() bool {
	return s == StatusCompleted || s == StatusFailed || s == StatusTerminated
}

// Instance is one workflow instance.
type Instance struct {
	Tenant    string
	ID        string
	Workflow  string
	Status    Status
	Execution int // current execution, 1-based
	Input     json.RawMessage
	Output    json.RawMessage
	Failure   *history.Failure
	CreatedAt time.Time
	UpdatedAt time.Time
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

	VisibleAt time.Time
	CreatedAt time.Time
}

// EventRecord is the fate ledger's entry for one external event.
type EventRecord struct {
	Tenant     string
	EventID    string
	InstanceID string
	Lane       history.Lane
	Name       string
	Fate       history.Fate
	Reason     history.DropReason
	// Execution the event is buffered in or was delivered in (0 while pending).
	Execution       int
	OriginExecution int
	WaitNumber      int
	// Key is the correlation key of a correlated-lane event: with Name (the
	// event definition) it links the event back to the correlated event that
	// produced it. Empty on the other lanes.
	Key        string
	ReceivedAt time.Time
	UpdatedAt  time.Time
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
	Retry      RetryPolicy
	LockToken  string
	LeaseUntil time.Time
	// CancelRequested: the workflow no longer wants the result (a select
	// loser); a worker should stop the activity.
	CancelRequested bool
}

// RetryPolicy controls activity retries. Zero values mean the engine
// defaults (filled in by the engine before it reaches the store).
type RetryPolicy struct {
	MaxAttempts        int           `json:"max_attempts,omitempty"`
	InitialInterval    time.Duration `json:"initial_interval,omitempty"`
	BackoffCoefficient float64       `json:"backoff_coefficient,omitempty"`
	MaxInterval        time.Duration `json:"max_interval,omitempty"`
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
}

// InstanceGetParams names an instance.
type InstanceGetParams struct {
	Tenant string
	ID     string
}

// InstanceListParams filters instances. Zero fields do not filter.
type InstanceListParams struct {
	Tenant   string
	Workflow string
	Status   Status
	Limit    int // default 100
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
}

// EventRaiseResult is the receipt of a raise.
type EventRaiseResult struct {
	EventID    string
	ReceivedAt time.Time
	// Duplicate: the event id was seen before; this is the first receipt and
	// nothing was written.
	Duplicate bool
	// Started: StartIfAbsent created the instance.
	Started bool
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

	Status  Status // new status (running, completed, failed)
	Output  json.RawMessage
	Failure *history.Failure

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
}

// ReturnedCorrelated is a correlated-lane event a turn gives back
// (TurnCommitParams.ReturnedCorrelated).
type ReturnedCorrelated struct {
	EventID string // the copy the instance received
	Def     string
	Key     string
	Payload json.RawMessage
}

// CorrelatedWait is a correlated-lane wait (SPEC §3.3).
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
}

// Buffer policies of an event definition.
const (
	BufferFIFO   = "fifo"
	BufferLatest = "latest"
)

// EventDefinition is a stored, per-tenant declaration of an event name:
// JSON Schema for its payload, buffering policy, retention, payload cap and
// correlation config (SPEC §1, seed 003's ExternalEventDef).
type EventDefinition struct {
	Tenant string
	Name   string
	// Schema is a JSON Schema for the payload; empty accepts any JSON.
	Schema json.RawMessage
	// Buffer is BufferFIFO (default) or BufferLatest.
	Buffer string
	// Retention is how long an event for an instance that has not started
	// is kept; 0 means the runtime default (24 h).
	Retention time.Duration
	// MaxPayloadBytes caps the payload; 0 means the runtime default.
	MaxPayloadBytes int
	// Correlation enables the correlated lane for this name; nil refuses
	// correlated puts.
	Correlation *CorrelationConfig
	// Version increases on every put (1 on the first), also across a
	// delete and a new put of the name, so caches of compiled schemas know
	// when to recompile.
	Version   int64
	CreatedAt time.Time
	UpdatedAt time.Time
}

// CorrelationConfig is an event definition's correlated-lane settings.
type CorrelationConfig struct {
	// TTL deletes correlated events older than this; 0 keeps them.
	TTL time.Duration `json:"ttl,omitempty"`
	// DeleteAfterFirstCorrelation: exactly one waiter receives a
	// correlated event, which is then deleted.
	DeleteAfterFirstCorrelation bool `json:"delete_after_first_correlation,omitempty"`
}

// EventDefinitionPutParams creates or replaces a definition (Version+1;
// CreatedAt kept, UpdatedAt = Now; an empty Buffer is stored as BufferFIFO).
// Events already stored are not rewritten.
type EventDefinitionPutParams struct {
	Definition EventDefinition // Tenant and Name identify it; Version, CreatedAt, UpdatedAt are set by the store
	Now        time.Time
}

// EventDefinitionGetParams names a definition.
type EventDefinitionGetParams struct {
	Tenant string
	Name   string
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

// CorrelatedEvent is a piece of data put under (tenant, event definition,
// key), not addressed to any instance (SPEC §3.3, seed 003).
type CorrelatedEvent struct {
	Tenant    string
	Def       string
	Key       string
	Payload   json.RawMessage
	CreatedAt time.Time
	UpdatedAt time.Time
	// ExpiresAt is when TTL expiry deletes it; zero = never.
	ExpiresAt time.Time
	// Produced lists the events it produced, oldest first, one per instance
	// wait it reached (each is an ordinary event with a fate in the ledger,
	// whose Name and Key are Def and Key).
	Produced []ProducedEvent
}

// ProducedEvent links a correlated event to an event it produced.
type ProducedEvent struct {
	EventID    string
	InstanceID string
	Execution  int
	TaskSeq    int
	CreatedAt  time.Time
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

// Store is the storage seam. All methods are safe for concurrent use. Every
// method is scoped to params.Tenant. A write refused for want of room
// returns an error matching ErrStorageFull, except TurnAbandon,
// ActivityComplete and ActivityRetry, which hand back work the caller holds:
// they wait for room (until ctx ends or the store closes).
type Store interface {
	// InstanceCreate returns ErrInstanceExists if the id is taken.
	InstanceCreate(ctx context.Context, p *InstanceCreateParams) (*Instance, error)
	// InstanceGet returns ErrNotFound.
	InstanceGet(ctx context.Context, p *InstanceGetParams) (*Instance, error)
	InstanceList(ctx context.Context, p *InstanceListParams) ([]*Instance, error)
	// InstanceTerminate returns the EventDropped breadcrumbs of the events it
	// dropped (instance_terminal), so the caller can log and count them; or
	// ErrNotFound, or ErrInstanceNotRunning if the instance already ended.
	InstanceTerminate(ctx context.Context, p *InstanceTerminateParams) ([]history.Event, error)

	// HistoryList returns ErrNotFound if the instance does not exist.
	HistoryList(ctx context.Context, p *HistoryListParams) ([]history.Event, error)

	// EventRaise records an event (fate pending) and an inbox message. It
	// returns ErrInstanceNotRunning (storing nothing) if the instance is
	// terminal, and ErrEventIDConflict if the id was used for another
	// target, lane or name. An instance that does not exist yet gets the
	// event kept in its inbox until it starts.
	EventRaise(ctx context.Context, p *EventRaiseParams) (*EventRaiseResult, error)
	// EventGet returns ErrNotFound.
	EventGet(ctx context.Context, p *EventGetParams) (*EventRecord, error)
	EventList(ctx context.Context, p *EventListParams) ([]*EventRecord, error)

	// EventDefinitionPut returns the definition as stored. It validates
	// nothing about the schema (the engine compiles it before calling).
	EventDefinitionPut(ctx context.Context, p *EventDefinitionPutParams) (*EventDefinition, error)
	// EventDefinitionGet returns ErrNotFound.
	EventDefinitionGet(ctx context.Context, p *EventDefinitionGetParams) (*EventDefinition, error)
	EventDefinitionList(ctx context.Context, p *EventDefinitionListParams) ([]*EventDefinition, error)
	// EventDefinitionDelete returns ErrNotFound.
	EventDefinitionDelete(ctx context.Context, p *EventDefinitionGetParams) error
	// EventExpire returns the ids of the events it dropped.
	EventExpire(ctx context.Context, p *EventExpireParams) ([]string, error)

	TurnClaim(ctx context.Context, p *TurnClaimParams) ([]*Turn, error)
	// TurnCommit returns the EventDropped breadcrumbs the store added
	// itself (instance_terminal drops when the turn ended the instance), so
	// the caller can log and count them.
	TurnCommit(ctx context.Context, p *TurnCommitParams) ([]history.Event, error)
	TurnAbandon(ctx context.Context, p *TurnAbandonParams) error

	ActivityClaim(ctx context.Context, p *ActivityClaimParams) ([]*ActivityTask, error)
	ActivityComplete(ctx context.Context, p *ActivityCompleteParams) error
	ActivityRetry(ctx context.Context, p *ActivityRetryParams) error
	// ActivityHeartbeat returns cancelRequested, or ErrLeaseLost.
	ActivityHeartbeat(ctx context.Context, p *ActivityHeartbeatParams) (cancelRequested bool, err error)

	// NextWake returns the earliest future time a message or activity task
	// becomes visible, or ok=false if there is none.
	NextWake(ctx context.Context, p *NextWakeParams) (at time.Time, ok bool, err error)

	// CorrelatedPut returns the stored correlated event with its produced
	// list (including what this put produced). With DeleteAfterFirst and a
	// waiter, the returned event is the one that was delivered and deleted.
	CorrelatedPut(ctx context.Context, p *CorrelatedPutParams) (*CorrelatedEvent, error)
	// CorrelatedGet returns ErrNotFound.
	CorrelatedGet(ctx context.Context, p *CorrelatedGetParams) (*CorrelatedEvent, error)
	// CorrelatedDelete deletes a correlated event and its produced list (the
	// ledger keeps each produced event's fate and Key); or ErrNotFound.
	// Markers are untouched.
	CorrelatedDelete(ctx context.Context, p *CorrelatedGetParams) error
	// CorrelatedSearch returns a page and the bookmark of the next page
	// ("" when there is none).
	CorrelatedSearch(ctx context.Context, p *CorrelatedSearchParams) ([]*CorrelatedEvent, string, error)
	// CorrelatedExpire returns the keys of the correlated events it deleted,
	// in the order it deleted them.
	CorrelatedExpire(ctx context.Context, p *CorrelatedExpireParams) ([]string, error)

	// LeaderElect makes Holder the leader if no live lease is held by
	// another holder (a lease whose end is before Now is not live), renewing
	// it if Holder already leads; it reports whether Holder leads until
	// Now+Lease.
	LeaderElect(ctx context.Context, p *LeaderElectParams) (bool, error)
	// LeaderResign gives up the leadership if Holder has it.
	LeaderResign(ctx context.Context, p *LeaderElectParams) error

	// Subscribe returns a channel that receives a value (coalesced) whenever
	// this store writes new work for the tenant, so idle workers wake at once.
	Subscribe(tenant string) (ch <-chan struct{}, cancel func())
	// SubscribeKinds is Subscribe for the work of the kinds in the mask, so
	// that a worker loop for turns is not woken (and does not make an empty
	// claim) for a new activity task, and the other way round. A store that
	// cannot tell may wake a subscriber for any kind.
	SubscribeKinds(tenant string, kinds WorkKind) (ch <-chan struct{}, cancel func())

	Close() error
}

// WorkKind is a kind of work a wake-up announces: the bits of a mask.
type WorkKind uint8

// Kinds of work.
const (
	// WorkTurns: an instance may have a turn to run (a message arrived,
	// a turn left work, a lease was released).
	WorkTurns WorkKind = 1 << iota
	// WorkActivities: an activity task may be claimable.
	WorkActivities

	WorkAll = WorkTurns | WorkActivities
)
