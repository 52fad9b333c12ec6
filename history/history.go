// Package history defines the records Herald keeps about a workflow
// instance: the history events of each execution (the single source of truth
// for replay). Lanes, fates, drop reasons and failures are the shared
// vocabulary of package heraldtype, re-exported here under the names history
// events use.
package history

import (
	"encoding/json"
	"time"

	"github.com/heraldwf/herald/heraldtype"
)

// Kind names a history event. Kinds are either inputs (facts that came from
// outside the workflow code: its start, activity results, fired timers,
// arriving events) or decisions (what the workflow code did in reaction).
// Replay re-runs the code against the inputs and checks that it makes the
// same decisions in the same order.
type Kind string

// Input kinds.
const (
	ExecutionStarted    Kind = "ExecutionStarted"
	ActivityCompleted   Kind = "ActivityCompleted"
	ActivityFailed      Kind = "ActivityFailed"
	TimerFired          Kind = "TimerFired"
	EventRaised         Kind = "EventRaised"  // an external event materialised in history (buffered or delivered)
	EventDropped        Kind = "EventDropped" // breadcrumb: an event (or a burst, see Event.Count) that reached the instance and was dropped, with the reason
	ExecutionTerminated Kind = "ExecutionTerminated"
	// ChildWorkflowCompleted, ChildWorkflowFailed: the child started by
	// the ChildWorkflowScheduled of TaskSeq ended (ChildID, Name its
	// workflow): Result, or Failure (failed, terminated, canceled, or its
	// id was taken: kind child_id_exists).
	ChildWorkflowCompleted Kind = "ChildWorkflowCompleted"
	ChildWorkflowFailed    Kind = "ChildWorkflowFailed"
	// ExecutionCancelRequested: cancellation was requested
	// (Client.CancelWorkflow, a parent's close policy, a parent's Select);
	// Failure.Message is the reason. Carried at the start of the next
	// execution by continue-as-new.
	ExecutionCancelRequested Kind = "ExecutionCancelRequested"
)

// Decision kinds.
const (
	ActivityScheduled        Kind = "ActivityScheduled"
	ActivityCancelRequested  Kind = "ActivityCancelRequested"
	TimerCreated             Kind = "TimerCreated"
	TimerCancelled           Kind = "TimerCancelled"
	EventSubscribed          Kind = "EventSubscribed"
	EventSubscribedCancelled Kind = "EventSubscribedCancelled"
	ExecutionCompleted       Kind = "ExecutionCompleted"
	ExecutionFailed          Kind = "ExecutionFailed"
	ExecutionContinuedAsNew  Kind = "ExecutionContinuedAsNew"
	// EventPublished: the workflow published an event to the bus
	// (ctx.Publish): Name is its type, EventID its id, Payload its data.
	// It is stored with the turn that made it (outbox).
	EventPublished Kind = "EventPublished"
	// AttributesUpserted: the workflow set or removed attributes of its
	// instance (ctx.SetAttributes): Payload is the list of upserts
	// (storage.Attribute; a removal has type ""). At the start of an
	// execution (AtStart) it is the instance's attributes carried across
	// continue-as-new, not a decision of the new execution's code.
	AttributesUpserted Kind = "AttributesUpserted"
	// ChildWorkflowScheduled: the workflow started a child workflow
	// (ctx.CallWorkflow): Name its workflow, ChildID its instance id, Input
	// its input. The child instance is created with the turn that made it.
	ChildWorkflowScheduled Kind = "ChildWorkflowScheduled"
	// ChildWorkflowCancelRequested: the workflow asked the child of
	// TaskSeq (ChildID) to cancel (its future lost a Select).
	ChildWorkflowCancelRequested Kind = "ChildWorkflowCancelRequested"
	// ExecutionCanceled: the workflow returned after cancellation was
	// requested; Failure (kind canceled) the reason, Result what it
	// returned, if anything.
	ExecutionCanceled Kind = "ExecutionCanceled"
	// EventSent: the workflow sent an event to another instance of its
	// tenant (ctx.RaiseEvent, ctx.Enqueue): Target is the receiver, Lane,
	// Name, EventID and Payload the event. Stored with the turn that made it
	// (outbox); the receiver's inbox message is written in the same commit.
	EventSent Kind = "EventSent"
	// VersionMarker: ctx.Version recorded the version (Result, a JSON
	// integer) of the change Name (docs/engine.md#versioning).
	VersionMarker Kind = "VersionMarker"
	// SideEffectRecorded: ctx.SideEffect's value (Result, JSON), recorded
	// once and read back on replay.
	SideEffectRecorded Kind = "SideEffect"
)

// IsDecision reports whether events of kind k are produced by workflow code.
func (k Kind) IsDecision() bool {
	switch k {
	case ActivityScheduled, ActivityCancelRequested, TimerCreated, TimerCancelled,
		EventSubscribed, EventSubscribedCancelled, ExecutionCompleted, ExecutionFailed,
		ExecutionContinuedAsNew, EventPublished, EventSent, VersionMarker, SideEffectRecorded,
		ChildWorkflowScheduled, ChildWorkflowCancelRequested, ExecutionCanceled, AttributesUpserted:
		return true
	}
	return false
}

// Lane names an event lane (heraldtype.Lane).
type Lane = heraldtype.Lane

// Event lanes (docs/positional.md, docs/queue.md, docs/correlated.md).
const (
	LanePositional = heraldtype.LanePositional
	LaneQueue      = heraldtype.LaneQueue
	LaneCorrelated = heraldtype.LaneCorrelated
)

// Event is one entry of an execution's history. Fields that do not apply to
// a kind are left zero and omitted from JSON.
type Event struct {
	// Seq is the 1-based position of the event in its execution's history.
	// Decisions are referred to by their Seq (an activity result names the
	// Seq of its ActivityScheduled).
	Seq  int       `json:"seq"`
	Time time.Time `json:"time"`
	Kind Kind      `json:"kind"`

	// Workflow and Input: ExecutionStarted, ExecutionContinuedAsNew.
	Workflow string          `json:"workflow,omitempty"`
	Input    json.RawMessage `json:"input,omitempty"`
	// Execution is set on ExecutionStarted.
	Execution int `json:"execution,omitempty"`

	// Name is the activity name or the event name.
	Name string `json:"name,omitempty"`
	// TaskSeq names the decision an input or cancellation refers to: the
	// ActivityScheduled of a result, the TimerCreated of a firing, the
	// EventSubscribed of a delivery or a withdrawal.
	TaskSeq int `json:"task_seq,omitempty"`
	// FireAt is when a TimerCreated fires.
	FireAt time.Time `json:"fire_at,omitzero"`
	// Result is an activity's or execution's JSON result.
	Result json.RawMessage `json:"result,omitempty"`
	// Failure is an activity's or execution's error.
	Failure *Failure `json:"failure,omitempty"`

	// External events (EventRaised, EventDropped, an EventSubscribed that
	// consumed a buffered event at once, and an EventSubscribedCancelled
	// that gave one back).
	//
	// Give-back: a wait that had already received an event when it lost a
	// Select, and whose result the workflow never got, gives the event back
	// on its EventSubscribedCancelled: EventID names the event, which goes
	// back to its place in the order, as if it had never been taken. Then
	// WaitNumber, when set, is the wait of the same lane and name that was
	// listening and received it at once; Reason, when set, says it was
	// dropped instead (superseded: a newer message of its latest-value queue
	// had arrived; withdrawn_wait: a correlated-lane copy, whose correlated
	// event the store keeps or, with delete-after-first, hands on); otherwise
	// it is buffered again. A give-back opens no withdrawn question
	// (docs/positional.md, rule 3) and is never dropped for a limit.
	Lane    Lane            `json:"lane,omitempty"`
	EventID string          `json:"event_id,omitempty"`
	Payload json.RawMessage `json:"payload,omitempty"`
	// Key is the correlation key of a correlated-lane wait or event.
	Key string `json:"key,omitempty"`
	// Target is the receiving instance of an EventSent.
	Target string `json:"target,omitempty"`
	// OriginExecution is the execution the event first reached; it is kept
	// when the event is carried across continue-as-new.
	OriginExecution int `json:"origin_execution,omitempty"`
	// AtStart marks events placed at the start of an execution, before its
	// code first ran: events carried over by continue-as-new and events that
	// arrived before the instance started.
	AtStart bool `json:"at_start,omitempty"`
	// WaitNumber is the per-name ordinal of the wait an event was delivered
	// to (1 = the execution's first WaitEvent of that name).
	WaitNumber int `json:"wait_number,omitempty"`
	// NoWait marks a non-blocking receive (TryDequeue) on an
	// EventSubscribed decision.
	NoWait bool `json:"no_wait,omitempty"`
	// Reason is why an event was dropped.
	Reason DropReason `json:"reason,omitempty"`
	// Count and LastEventID: an EventDropped breadcrumb with reason limit
	// opens a burst of limit drops of its lane and name. It stands for the
	// Count events (0 means one) of that lane and name dropped one after the
	// other in the turn that wrote it (EventID, with Payload and ReceivedAt,
	// the first of them, LastEventID the last), and for every later limit
	// drop of that lane and name until history records anything else of that
	// lane (an arrival kept or dropped for another reason, a wait, a
	// withdrawal; limit breadcrumbs of other names do not count): later
	// turns write no breadcrumb for those. Each event of
	// a burst has its own fate (dropped/limit) in the ledger; history keeps
	// one breadcrumb per burst, so that a flood does not grow it without
	// bound.
	Count       int    `json:"count,omitempty"`
	LastEventID string `json:"last_event_id,omitempty"`
	// Latest marks a queue-lane arrival on a latest-value queue (its event
	// definition says `buffer: latest`).
	Latest bool `json:"latest,omitempty"`
	// ReceivedAt is when Herald accepted an external event.
	ReceivedAt time.Time `json:"received_at,omitzero"`
	// ChildID is the instance id of a child workflow (ChildWorkflow*).
	ChildID string `json:"child_id,omitempty"`
}

// Failure is an error recorded in history or on an instance
// (heraldtype.Failure).
type Failure = heraldtype.Failure

// Fate is where an external event stands (heraldtype.Fate).
type Fate = heraldtype.Fate

// Fates (docs/fates.md).
const (
	FatePending   = heraldtype.FatePending
	FateBuffered  = heraldtype.FateBuffered
	FateDelivered = heraldtype.FateDelivered
	FateDropped   = heraldtype.FateDropped
)

// DropReason says why an event was dropped (heraldtype.DropReason).
type DropReason = heraldtype.DropReason

// Drop reasons (docs/fates.md).
const (
	DropWithdrawnWait     = heraldtype.DropWithdrawnWait
	DropLimit             = heraldtype.DropLimit
	DropSuperseded        = heraldtype.DropSuperseded
	DropCarryForwardLimit = heraldtype.DropCarryForwardLimit
	DropNotCarriedForward = heraldtype.DropNotCarriedForward
	DropExpired           = heraldtype.DropExpired
	DropInstanceTerminal  = heraldtype.DropInstanceTerminal
)
