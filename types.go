package herald

import "github.com/heraldwf/herald/heraldtype"

// The shared vocabulary, defined in package heraldtype (where each type is
// documented) and re-exported here so that users of the root package need
// not import it.
type (
	// Status is an instance's status.
	Status = heraldtype.Status
	// InstanceInfo describes an instance: Client.Status's answer.
	InstanceInfo = heraldtype.InstanceInfo
	// EventReceipt acknowledges an accepted event.
	EventReceipt = heraldtype.EventReceipt
	// EventRecord is an event's entry in the fate ledger: where it stands.
	EventRecord = heraldtype.EventRecord
	// EventDefinition declares an event name for a tenant: its schema,
	// buffering policy, retention, payload cap and correlated-lane config.
	EventDefinition = heraldtype.EventDefinition
	// CorrelationConfig is an event definition's correlated-lane settings.
	CorrelationConfig = heraldtype.CorrelationConfig
	// CorrelatedEvent is a piece of data put under (event definition, key),
	// addressed to no instance: every instance waiting on that key with
	// ctx.WaitCorrelated receives it. Produced lists the events it
	// produced, one per wait it reached; each is an ordinary event with a
	// fate (Client.EventFate) whose Name and Key link back here.
	CorrelatedEvent = heraldtype.CorrelatedEvent
	// ProducedEvent links a correlated event to an event it produced.
	ProducedEvent = heraldtype.ProducedEvent
	// RetryPolicy controls activity retries: attempt n (n ≥ 2) starts
	// InitialInterval × BackoffCoefficient^(n-2) after the previous one
	// failed, capped at MaxInterval. Zero fields take Config.DefaultRetry's.
	RetryPolicy = heraldtype.RetryPolicy
	// NondeterminismError: the workflow code no longer matches its
	// history. The instance fails with it; errors.As finds it in the error
	// InstanceInfo.Err returns.
	NondeterminismError = heraldtype.NondeterminismError
	// ActivityError: an activity failed after its last attempt.
	ActivityError = heraldtype.ActivityError
	// WorkflowError is a workflow's failure as recorded: its kind
	// ("application", "activity", "panic", "terminated", "corrupt",
	// "replay") and message.
	WorkflowError = heraldtype.WorkflowError
	// ChildWorkflowError: a child workflow did not complete (failed,
	// terminated, canceled, or its id was taken); errors.As-able from the
	// child's Future.Get, and Unwrap gives the child's own error.
	ChildWorkflowError = heraldtype.ChildWorkflowError
	// CanceledError: the instance ended canceled (InstanceInfo.Err,
	// Result), or ctx.Err inside a workflow asked to cancel. It matches
	// ErrCanceled.
	CanceledError = heraldtype.CanceledError
)

// Instance statuses.
const (
	StatusPending    = heraldtype.StatusPending
	StatusRunning    = heraldtype.StatusRunning
	StatusCompleted  = heraldtype.StatusCompleted
	StatusFailed     = heraldtype.StatusFailed
	StatusTerminated = heraldtype.StatusTerminated
	// StatusCanceled: the workflow returned after CancelWorkflow (or its
	// parent's close policy) asked it to stop.
	StatusCanceled = heraldtype.StatusCanceled
)

// Buffer policies of an event definition.
const (
	BufferFIFO   = heraldtype.BufferFIFO
	BufferLatest = heraldtype.BufferLatest
)
