// Package history defines the records Herald keeps about a workflow
// instance: the history events of each execution (the single source of truth
// for replay), event fates, and failures. It has no dependencies beyond the
// standard library, so the replay engine, the storage backends and the public
// client all speak the same types.
package history

import (
	"encoding/json"
	"fmt"
	"time"
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
)

// IsDecision reports whether events of kind k are produced by workflow code.
func (k Kind) IsDecision() bool {
	switch k {
	case ActivityScheduled, ActivityCancelRequested, TimerCreated, TimerCancelled,
		EventSubscribed, EventSubscribedCancelled, ExecutionCompleted, ExecutionFailed,
		ExecutionContinuedAsNew:
		return true
	}
	return false
}

// Lane names an event lane.
type Lane string

// Event lanes. The positional lane pairs the Nth event of a name with the Nth
// active wait of that name (SPEC §3.1).
const (
	LanePositional Lane = "positional"
	// LaneQueue is the durable mailbox: FIFO per queue name, a cancelled
	// receive consumes nothing (SPEC §3.2).
	LaneQueue Lane = "queue"
	// LaneCorrelated delivers by business key: a correlated event put under
	// (event definition, key) reaches every instance waiting on that key
	// (SPEC §3.3). Name is the event definition.
	LaneCorrelated Lane = "correlated"
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
	// it is buffered again. A give-back opens no withdrawn question (SPEC
	// §3.1 rule 3) and is never dropped for a limit.
	Lane    Lane            `json:"lane,omitempty"`
	EventID string          `json:"event_id,omitempty"`
	Payload json.RawMessage `json:"payload,omitempty"`
	// Key is the correlation key of a correlated-lane wait or event.
	Key string `json:"key,omitempty"`
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
}

// Failure is an error recorded in history or on an instance. Kind lets typed
// errors survive storage: "nondeterminism", "activity", "panic",
// "terminated", "application".
type Failure struct {
	Kind    string `json:"kind,omitempty"`
	Message string `json:"message"`
	// Detail carries typed fields (for example the position and both sides of
	// a non-determinism error).
	Detail json.RawMessage `json:"detail,omitempty"`
}

func (f *Failure) Error() string {
	if f == nil {
		return "<nil>"
	}
	if f.Kind != "" {
		return fmt.Sprintf("%s: %s", f.Kind, f.Message)
	}
	return f.Message
}

// Fate is where an external event stands.
type Fate string

// Fates (SPEC §3).
const (
	FatePending   Fate = "pending"   // accepted, not yet seen by the instance
	FateBuffered  Fate = "buffered"  // in the instance's inbox, no waiter yet
	FateDelivered Fate = "delivered" // matched to a wait
	FateDropped   Fate = "dropped"   // see DropReason
)

// DropReason says why an event was dropped.
type DropReason string

// Drop reasons (SPEC §3).
const (
	DropWithdrawnWait     DropReason = "withdrawn_wait"
	DropLimit             DropReason = "limit"
	DropSuperseded        DropReason = "superseded"
	DropCarryForwardLimit DropReason = "carry_forward_limit"
	DropNotCarriedForward DropReason = "not_carried_forward" // ContinueAsNew with DropUnconsumedEvents
	DropExpired           DropReason = "expired"
	DropInstanceTerminal  DropReason = "instance_terminal"
)
