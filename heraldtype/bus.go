package heraldtype

import (
	"encoding/json"
	"time"
)

// The event bus (docs/bus.md): published events, subscriptions, targets,
// scripts, executions, attempts and dead letters.

// PublishedEvent is an event published to the bus, with its fate.
type PublishedEvent struct {
	ID   string          `json:"id"`
	Type string          `json:"type"`
	Data json.RawMessage `json:"data"`
	// PublishedAt is when the bus stored the event (the engine clock).
	PublishedAt time.Time `json:"published_at"`
	// Source says who published it: "client", or "workflow:<instance id>"
	// for ctx.Publish.
	Source string `json:"source,omitempty"`
	// Fate is where the event stands as a whole (see BusFate).
	Fate BusFate `json:"fate"`
	// RoutedAt is when the event was matched against the subscriptions
	// (zero while Fate is BusRouting).
	RoutedAt time.Time `json:"routed_at,omitzero"`
	// Routes says, for every subscription whose pattern matched the
	// event's type when it was routed, whether its filter let the event
	// through and what became of the execution. Empty with BusNoMatch.
	Routes []*Route `json:"routes,omitempty"`
}

// BusFate is the fate of a published event as a whole.
type BusFate string

const (
	// BusRouting: stored, not yet matched against the subscriptions.
	BusRouting BusFate = "routing"
	// BusNoMatch: no enabled subscription's pattern matched its type.
	// Nothing ran; the event is kept (until retention) to say so.
	BusNoMatch BusFate = "no_match"
	// BusFiltered: patterns matched, every filter said no.
	BusFiltered BusFate = "filtered"
	// BusInProgress: at least one execution is queued, running or
	// retrying.
	BusInProgress BusFate = "in_progress"
	// BusDone: every execution has ended (succeeded or dead-lettered).
	BusDone BusFate = "done"
)

// Route is one subscription's verdict on one published event.
type Route struct {
	Subscription string `json:"subscription"`
	// Matched is false when the subscription's filter rules filtered the
	// event out; FilteredBy then says which condition.
	Matched    bool   `json:"matched"`
	FilteredBy string `json:"filtered_by,omitempty"`
	// Execution is the execution the match queued (nil when filtered).
	Execution *Execution `json:"execution,omitempty"`
}

// ExecutionStatus is where one execution (a published event handed to one
// subscription's target) stands.
type ExecutionStatus string

const (
	ExecQueued       ExecutionStatus = "queued"
	ExecRunning      ExecutionStatus = "running"
	ExecRetrying     ExecutionStatus = "retrying"
	ExecSucceeded    ExecutionStatus = "succeeded"
	ExecDeadLettered ExecutionStatus = "dead_lettered"
)

// Terminal reports whether the execution has ended.
func (s ExecutionStatus) Terminal() bool { return s == ExecSucceeded || s == ExecDeadLettered }

// Execution is a published event handed to one subscription's target:
// there is at most one per (event, subscription).
type Execution struct {
	ID           int64           `json:"id"`
	EventID      string          `json:"event_id"`
	Subscription string          `json:"subscription"`
	Status       ExecutionStatus `json:"status"`
	// Attempts is the number of attempts started (reset by a reprocess).
	Attempts int `json:"attempts"`
	// NextAttemptAt is when a queued or retrying execution becomes due.
	NextAttemptAt time.Time `json:"next_attempt_at,omitzero"`
	// LastError is the error of the latest failed attempt.
	LastError string `json:"last_error,omitempty"`
	// Result is what the target returned on success (a script's return
	// value as JSON).
	Result json.RawMessage `json:"result,omitempty"`
	// DeadLetter is the id of the dead letter the execution ended in.
	DeadLetter int64 `json:"dead_letter,omitempty"`
	// Reprocessed counts how often the execution was reprocessed from the
	// dead-letter queue.
	Reprocessed int       `json:"reprocessed,omitempty"`
	CreatedAt   time.Time `json:"created_at"`
	UpdatedAt   time.Time `json:"updated_at"`
}

// ErrorKind classifies a failed attempt. Transient kinds are retried with
// backoff; permanent ones go straight to the dead-letter queue.
type ErrorKind string

const (
	// Transient.
	ErrorTimeout  ErrorKind = "timeout"  // the target ran past its timeout
	ErrorRuntime  ErrorKind = "runtime"  // a script threw, a handler returned an error
	ErrorResource ErrorKind = "resource" // a script passed its memory or stack cap
	// Permanent.
	ErrorPermanent  ErrorKind = "permanent"  // PermanentError thrown / returned
	ErrorValidation ErrorKind = "validation" // the target refused the input (bad template, schema)
	ErrorPermission ErrorKind = "permission" // the target is not allowed (unknown workflow, script deleted)
)

// Permanent reports whether an error of this kind skips retries.
func (k ErrorKind) Permanent() bool {
	return k == ErrorPermanent || k == ErrorValidation || k == ErrorPermission
}

// Attempt is the record of one attempt of an execution.
type Attempt struct {
	ID           int64           `json:"id"`
	Execution    int64           `json:"execution"`
	EventID      string          `json:"event_id"`
	Subscription string          `json:"subscription"`
	Number       int             `json:"number"` // 1 for the first attempt
	Succeeded    bool            `json:"succeeded"`
	StartedAt    time.Time       `json:"started_at"`
	Duration     Duration        `json:"duration"`
	Result       json.RawMessage `json:"result,omitempty"`
	ErrorKind    ErrorKind       `json:"error_kind,omitempty"`
	Error        string          `json:"error,omitempty"`
	Stack        string          `json:"stack,omitempty"`
	// Logs are the lines a script logged (capped).
	Logs []string `json:"logs,omitempty"`
}

// DeadLetter is an execution that failed for good: a permanent error, or
// a transient one after the subscription's last retry.
type DeadLetter struct {
	ID           int64           `json:"id"`
	Execution    int64           `json:"execution"`
	EventID      string          `json:"event_id"`
	Subscription string          `json:"subscription"`
	Target       Target          `json:"target"`
	EventType    string          `json:"event_type"`
	EventData    json.RawMessage `json:"event_data"`
	ErrorKind    ErrorKind       `json:"error_kind"`
	Error        string          `json:"error"`
	Stack        string          `json:"stack,omitempty"`
	Attempts     int             `json:"attempts"`
	FailedAt     time.Time       `json:"failed_at"`
	CreatedAt    time.Time       `json:"created_at"`
	// ReprocessedAt is set once the letter was reprocessed: its execution
	// was queued again (the letter is kept as the link to the failure).
	ReprocessedAt time.Time `json:"reprocessed_at,omitzero"`
}

// TargetKind says what a subscription hands matched events to.
type TargetKind string

const (
	// TargetScript runs the tenant's stored JavaScript script Script.
	TargetScript TargetKind = "script"
	// TargetWorkflow starts workflow Workflow with the event as input,
	// the instance id from the template InstanceID.
	TargetWorkflow TargetKind = "workflow"
	// TargetSignal raises positional event Name on the instance whose id
	// the template InstanceID gives.
	TargetSignal TargetKind = "signal"
	// TargetEnqueue enqueues on queue Name of the instance InstanceID.
	TargetEnqueue TargetKind = "enqueue"
	// TargetCorrelated puts correlated event Name under the key the
	// template Key gives.
	TargetCorrelated TargetKind = "correlated"
	// TargetHandler calls the Go handler Handler registered in the
	// runtime.
	TargetHandler TargetKind = "handler"
)

// Target is what a subscription hands a matched event to. Templates
// (InstanceID, Key) are text with {field.path} placeholders over the
// event: {id}, {type}, {data.order_id} (docs/bus.md).
type Target struct {
	Kind       TargetKind `json:"kind"`
	Script     string     `json:"script,omitempty"`
	Workflow   string     `json:"workflow,omitempty"`
	InstanceID string     `json:"instance_id,omitempty"`
	Name       string     `json:"name,omitempty"`
	Key        string     `json:"key,omitempty"`
	Handler    string     `json:"handler,omitempty"`
}

// Subscription hands the tenant's published events whose type matches
// Pattern, and that pass Filter, to Target.
type Subscription struct {
	ID string `json:"id"`
	// Pattern is an event type (user.created) or a pattern: * stands for
	// exactly one segment (user.*), a trailing > for one or more (user.>).
	Pattern string `json:"pattern"`
	// Filter is a filter rule tree (docs/bus.md); empty lets every event
	// through.
	Filter  json.RawMessage `json:"filter,omitempty"`
	Target  Target          `json:"target"`
	Enabled bool            `json:"enabled"`
	// MaxRetries is the number of retries after the first attempt of a
	// transient failure (nil: 3; 0: none).
	MaxRetries *int `json:"max_retries,omitempty"`
	// Timeout bounds one attempt (zero: the runtime's default, 30 s).
	Timeout   Duration  `json:"timeout,omitempty"`
	Version   int       `json:"version"`
	CreatedAt time.Time `json:"created_at"`
	UpdatedAt time.Time `json:"updated_at"`
}

// Script is a stored JavaScript script of a tenant; every save makes a new
// version.
type Script struct {
	ID        string    `json:"id"`
	Version   int       `json:"version"`
	Source    string    `json:"source"`
	CreatedAt time.Time `json:"created_at"`
	UpdatedAt time.Time `json:"updated_at"`
}

// PublishReceipt is what Publish returns.
type PublishReceipt struct {
	EventID string `json:"event_id"`
	// Duplicate: an event with this id was published before; nothing
	// changed.
	Duplicate   bool      `json:"duplicate,omitempty"`
	PublishedAt time.Time `json:"published_at"`
}

// PermanentError marks an error as permanent (herald.Permanent): the
// activity fails, or the bus execution goes to the dead-letter queue, at
// once, without a retry. It is found through wrapping (errors.As).
type PermanentError struct{ Err error }

func (e *PermanentError) Error() string { return "permanent: " + e.Err.Error() }
func (e *PermanentError) Unwrap() error { return e.Err }
