// Package heraldtype is Herald's shared vocabulary: instance statuses,
// event lanes, fates and drop reasons, the fate ledger's records, event
// definitions, correlated events, retry policies, failures and the typed
// errors they turn into. The root package, the replay engine, the storage
// backends (and, later, the HTTP API) all speak these types; the root
// package re-exports them under the same names, so users rarely import this
// package themselves.
//
// It imports nothing of Herald. Every type is JSON-tagged (snake_case) and
// durations encode as Go duration strings ("1m30s"); decoding also accepts
// integer nanoseconds, the form older stored rows use.
package heraldtype

import (
	"encoding/json"
	"errors"
	"fmt"
	"time"
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
	// StatusCanceled: the workflow returned after a cancellation request
	// (Client.CancelWorkflow, or its parent's close policy).
	StatusCanceled Status = "canceled"
)

// Terminal reports whether s is a final status.
func (s Status) Terminal() bool {
	return s == StatusCompleted || s == StatusFailed || s == StatusTerminated || s == StatusCanceled
}

// Lane names an event lane (docs/positional.md, docs/queue.md, docs/correlated.md).
type Lane string

// Event lanes.
const (
	// LanePositional pairs the Nth event of a name with the Nth active wait
	// of that name.
	LanePositional Lane = "positional"
	// LaneQueue is the durable mailbox: FIFO per queue name, a cancelled
	// receive consumes nothing.
	LaneQueue Lane = "queue"
	// LaneCorrelated delivers by business key: a correlated event put under
	// (event definition, key) reaches every instance waiting on that key.
	// Name is the event definition.
	LaneCorrelated Lane = "correlated"
	// LaneBus is the event bus (docs/bus.md): an EventRecord of this lane
	// is a published event; its Bus field holds the routes and
	// executions.
	LaneBus Lane = "bus"
)

// Fate is where an external event stands.
type Fate string

// Fates (docs/fates.md).
const (
	FatePending   Fate = "pending"   // accepted, not yet seen by the instance
	FateBuffered  Fate = "buffered"  // in the instance's inbox, no waiter yet
	FateDelivered Fate = "delivered" // matched to a wait
	FateDropped   Fate = "dropped"   // see DropReason
)

// DropReason says why an event was dropped.
type DropReason string

// Drop reasons (docs/fates.md).
const (
	// DropWithdrawnWait: the wait it was delivered to had been withdrawn
	// (a select loser, a timeout) before the workflow received it.
	DropWithdrawnWait DropReason = "withdrawn_wait"
	// DropLimit: the instance's buffer was full (MaxUnconsumedEvents,
	// MaxQueuedEvents).
	DropLimit DropReason = "limit"
	// DropSuperseded: a newer message of a latest-value queue replaced it.
	DropSuperseded DropReason = "superseded"
	// DropCarryForwardLimit: continue-as-new carried it as often (or as
	// many) as allowed.
	DropCarryForwardLimit DropReason = "carry_forward_limit"
	// DropNotCarriedForward: ContinueAsNew with DropUnconsumedEvents.
	DropNotCarriedForward DropReason = "not_carried_forward"
	// DropExpired: its instance never started within the retention.
	DropExpired DropReason = "expired"
	// DropInstanceTerminal: its instance ended (completed, failed,
	// terminated) before consuming it.
	DropInstanceTerminal DropReason = "instance_terminal"
	// DropNoMatch: a published event no enabled subscription's pattern
	// matched (bus lane): nothing ran.
	DropNoMatch DropReason = "no_match"
	// DropFiltered: a published event whose matching subscriptions all
	// filtered it out (bus lane).
	DropFiltered DropReason = "filtered"
)

// Failure kinds (Failure.Kind, WorkflowError.Kind).
const (
	FailureNondeterminism = "nondeterminism"
	FailureActivity       = "activity"
	FailurePanic          = "panic"
	FailureApplication    = "application"
	FailureTerminated     = "terminated"
	// FailureCorrupt: a stored row of the instance cannot be decoded.
	FailureCorrupt = "corrupt"
	// FailureReplay: the engine refused the instance's history (or failed
	// on it).
	FailureReplay = "replay"
	// FailureCanceled: the instance ended canceled; Message is the
	// cancellation's reason.
	FailureCanceled = "canceled"
	// FailureChildIDExists: a child workflow's instance id was taken by an
	// instance that existed already (ChildWorkflowError).
	FailureChildIDExists = "child_id_exists"
	// FailureSend: an event the workflow sent (ctx.RaiseEvent, ctx.Enqueue)
	// was refused when its turn committed: its definition refused the
	// payload, or its event id was first used for another target.
	FailureSend = "send"
)

// Failure is an error recorded in history or on an instance. Kind lets
// typed errors survive storage.
type Failure struct {
	Kind    string `json:"kind,omitempty"`
	Message string `json:"message"`
	// Detail carries typed fields (for example the position and both sides
	// of a non-determinism error).
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

// Err turns a recorded failure back into a typed error: a
// *NondeterminismError when it is one, else a *WorkflowError. Nil for nil.
func (f *Failure) Err() error {
	if f == nil {
		return nil
	}
	if f.Kind == FailureNondeterminism && len(f.Detail) > 0 {
		var nd NondeterminismError
		if json.Unmarshal(f.Detail, &nd) == nil {
			return &nd
		}
	}
	if f.Kind == FailureCanceled {
		return &CanceledError{Reason: f.Message}
	}
	return &WorkflowError{Kind: f.Kind, Message: f.Message}
}

// CanceledError is the error of an instance that ended canceled
// (InstanceInfo.Err, Result), and the error a workflow's ctx.Err returns
// once cancellation was requested. It matches ErrCanceled with errors.Is.
type CanceledError struct {
	Reason string `json:"reason"`
}

func (e *CanceledError) Error() string {
	if e.Reason == "" {
		return "herald: canceled"
	}
	return "herald: canceled: " + e.Reason
}

// Is makes errors.Is(err, ErrCanceled) true.
func (e *CanceledError) Is(target error) bool { return target == ErrCanceled }

// ChildWorkflowError is the error a child workflow's future returns when
// the child did not complete: it failed, was terminated or canceled, or
// its instance id was taken by an instance that existed already (Failure.Kind
// FailureChildIDExists; errors.Is(err, ErrInstanceExists)). Unwrap gives the
// child's own error (a *WorkflowError, *CanceledError,
// *NondeterminismError).
type ChildWorkflowError struct {
	InstanceID string   `json:"instance_id"`
	Workflow   string   `json:"workflow"`
	Failure    *Failure `json:"failure,omitempty"`
}

func (e *ChildWorkflowError) Error() string {
	return fmt.Sprintf("child workflow %s (%s) did not complete: %s", e.InstanceID, e.Workflow, e.Failure.Error())
}

// Unwrap returns the child's failure as a typed error.
func (e *ChildWorkflowError) Unwrap() error {
	if e.Failure != nil && e.Failure.Kind == FailureChildIDExists {
		return ErrInstanceExists
	}
	return e.Failure.Err()
}

// Errors a workflow sees from futures.
var (
	// ErrEventTimeout: a wait's timeout elapsed before an event arrived. The
	// wait counts as withdrawn, exactly like a select loser.
	ErrEventTimeout = errors.New("herald: timed out waiting for event")
	// ErrCanceled: the future lost a Select and was cancelled; also what a
	// *CanceledError (an instance canceled, a cancellation requested)
	// matches.
	ErrCanceled = errors.New("herald: canceled")
)

// NondeterminismError says the workflow code no longer matches its
// history: at history position Seq, history recorded Expected and the code
// did Actual. The instance fails with it; errors.As finds it in the error
// InstanceInfo.Err returns.
type NondeterminismError struct {
	InstanceID string `json:"instance_id,omitempty"`
	Execution  int    `json:"execution,omitempty"`
	Seq        int    `json:"seq"`
	Expected   string `json:"expected"`
	Actual     string `json:"actual"`
}

func (e *NondeterminismError) Error() string {
	return fmt.Sprintf("herald: non-deterministic workflow %s (execution %d) at history seq %d: history has %s, code did %s",
		e.InstanceID, e.Execution, e.Seq, e.Expected, e.Actual)
}

// Failure converts the error into its stored form.
func (e *NondeterminismError) Failure() *Failure {
	d, _ := json.Marshal(e)
	return &Failure{Kind: FailureNondeterminism, Message: e.Error(), Detail: d}
}

// ActivityError is the error a workflow's future returns when its activity
// failed after its last attempt.
type ActivityError struct {
	Name    string `json:"name"`
	Message string `json:"message"`
}

func (e *ActivityError) Error() string {
	return fmt.Sprintf("activity %s failed: %s", e.Name, e.Message)
}

// WorkflowError is a workflow's failure as recorded: its kind (one of the
// Failure* constants, "application" for an error the workflow returned)
// and message.
type WorkflowError struct {
	Kind    string `json:"kind"`
	Message string `json:"message"`
}

func (e *WorkflowError) Error() string { return fmt.Sprintf("workflow %s: %s", e.Kind, e.Message) }

// InstanceInfo describes a workflow instance.
type InstanceInfo struct {
	ID       string `json:"id"`
	Workflow string `json:"workflow"`
	Status   Status `json:"status"`
	// Execution is the current execution, 1-based (continue-as-new starts
	// the next one).
	Execution int             `json:"execution"`
	Input     json.RawMessage `json:"input,omitempty"`
	// Output is a completed instance's result.
	Output json.RawMessage `json:"output,omitempty"`
	// Failure is a failed or terminated instance's failure.
	Failure   *Failure  `json:"failure,omitempty"`
	CreatedAt time.Time `json:"created_at"`
	UpdatedAt time.Time `json:"updated_at"`
	// Blocked says why the instance is not running although it has work,
	// e.g. "no runtime has workflow X registered" (or activity X); "" when
	// nothing is known to hold it up.
	Blocked string `json:"blocked,omitempty"`
	// Attributes are the searchable attributes the workflow set
	// (ctx.SetAttributes): strings, int64s, bools and time.Times; nil for
	// none.
	Attributes map[string]any `json:"attributes,omitempty"`
	// ParentID is the instance that started this one as a child workflow
	// (ctx.CallWorkflow); "" for an instance started otherwise.
	ParentID string `json:"parent_id,omitempty"`
}

// Err returns the instance's failure as a typed error (a
// *NondeterminismError, or a *WorkflowError), or nil.
func (i *InstanceInfo) Err() error { return i.Failure.Err() }

// Result decodes the output of a completed instance into out. It returns
// the instance's error if it failed or was terminated, and an error if it
// has not finished.
func (i *InstanceInfo) Result(out any) error {
	switch i.Status {
	case StatusCompleted:
		if out == nil {
			return nil
		}
		return json.Unmarshal(i.Output, out)
	case StatusFailed, StatusTerminated, StatusCanceled:
		return i.Err()
	default:
		return fmt.Errorf("herald: instance %s is %s", i.ID, i.Status)
	}
}

// EventReceipt acknowledges an accepted event.
type EventReceipt struct {
	EventID    string    `json:"event_id"`
	ReceivedAt time.Time `json:"received_at"`
	// Duplicate: the event id was seen before; this is its first receipt
	// and nothing changed.
	Duplicate bool `json:"duplicate,omitempty"`
	// Started: StartIfAbsent started the instance.
	Started bool `json:"started,omitempty"`
}

// EventRecord is an event's entry in the fate ledger: where it stands.
type EventRecord struct {
	EventID    string     `json:"event_id"`
	InstanceID string     `json:"instance_id"`
	Lane       Lane       `json:"lane"`
	Name       string     `json:"name"`
	Fate       Fate       `json:"fate"`
	Reason     DropReason `json:"reason,omitempty"`
	// Execution the event is buffered in or was delivered in (0 while
	// pending).
	Execution int `json:"execution,omitempty"`
	// OriginExecution is the execution the event first arrived in (it may
	// have been carried across continue-as-new since).
	OriginExecution int `json:"origin_execution,omitempty"`
	// WaitNumber is the number of the wait (of its name, in its execution)
	// the event was delivered to.
	WaitNumber int `json:"wait_number,omitempty"`
	// Key is the correlation key of a correlated-lane event: with Name (the
	// event definition) it links the event back to the correlated event
	// that produced it. Empty on the other lanes.
	Key string `json:"key,omitempty"`
	// Sender is the instance that sent the event from its workflow
	// (ctx.RaiseEvent, ctx.Enqueue); empty for an event sent by a client.
	Sender     string    `json:"sender,omitempty"`
	ReceivedAt time.Time `json:"received_at"`
	UpdatedAt  time.Time `json:"updated_at"`
	// Bus is the published event, with its routes and executions, of a
	// LaneBus record.
	Bus *PublishedEvent `json:"bus,omitempty"`
}

// Buffer policies of an event definition.
const (
	BufferFIFO   = "fifo"
	BufferLatest = "latest"
)

// EventDefinition declares an event name for a tenant: a JSON Schema every
// payload of that name must satisfy, its buffering policy (BufferFIFO or
// BufferLatest: a latest-value queue keeps at most one unconsumed message,
// a newer one supersedes it), how long events for an instance that has not
// started are kept (Retention), a payload cap and the correlated-lane
// config. The name applies to positional events and queue names alike;
// Buffer applies to the queue lane.
type EventDefinition struct {
	Name string `json:"name"`
	// Schema is a JSON Schema for the payload; empty accepts any JSON.
	Schema json.RawMessage `json:"schema,omitempty"`
	// Buffer is BufferFIFO (default) or BufferLatest.
	Buffer string `json:"buffer,omitempty"`
	// Retention is how long an event for an instance that has not started
	// is kept; 0 means the tenant's default (24 h unless overridden).
	Retention time.Duration `json:"-"`
	// MaxPayloadBytes caps the payload; 0 means the tenant's default.
	MaxPayloadBytes int `json:"max_payload_bytes,omitempty"`
	// Correlation enables the correlated lane for this name; nil refuses
	// correlated puts.
	Correlation *CorrelationConfig `json:"correlation,omitempty"`
	CreatedAt   time.Time          `json:"created_at,omitzero"`
	UpdatedAt   time.Time          `json:"updated_at,omitzero"`
}

type eventDefinitionJSON EventDefinition

// MarshalJSON writes Retention as a duration string.
func (d EventDefinition) MarshalJSON() ([]byte, error) {
	return json.Marshal(struct {
		eventDefinitionJSON
		Retention Duration `json:"retention,omitempty"`
	}{eventDefinitionJSON(d), Duration(d.Retention)})
}

// UnmarshalJSON reads Retention as a duration string or nanoseconds.
func (d *EventDefinition) UnmarshalJSON(b []byte) error {
	var v struct {
		eventDefinitionJSON
		Retention Duration `json:"retention,omitempty"`
	}
	if err := json.Unmarshal(b, &v); err != nil {
		return err
	}
	*d = EventDefinition(v.eventDefinitionJSON)
	d.Retention = time.Duration(v.Retention)
	return nil
}

// CorrelationConfig is an event definition's correlated-lane settings.
type CorrelationConfig struct {
	// TTL deletes correlated events older than this; 0 keeps them.
	TTL time.Duration `json:"-"`
	// DeleteAfterFirstCorrelation: exactly one waiter receives a
	// correlated event, which is then deleted.
	DeleteAfterFirstCorrelation bool `json:"delete_after_first_correlation,omitempty"`
}

// MarshalJSON writes TTL as a duration string.
func (c CorrelationConfig) MarshalJSON() ([]byte, error) {
	return json.Marshal(struct {
		TTL                         Duration `json:"ttl,omitempty"`
		DeleteAfterFirstCorrelation bool     `json:"delete_after_first_correlation,omitempty"`
	}{Duration(c.TTL), c.DeleteAfterFirstCorrelation})
}

// UnmarshalJSON reads TTL as a duration string or nanoseconds.
func (c *CorrelationConfig) UnmarshalJSON(b []byte) error {
	var v struct {
		TTL                         Duration `json:"ttl,omitempty"`
		DeleteAfterFirstCorrelation bool     `json:"delete_after_first_correlation,omitempty"`
	}
	if err := json.Unmarshal(b, &v); err != nil {
		return err
	}
	c.TTL, c.DeleteAfterFirstCorrelation = time.Duration(v.TTL), v.DeleteAfterFirstCorrelation
	return nil
}

// CorrelatedEvent is a piece of data put under (event definition, key),
// addressed to no instance: every instance waiting on that key receives
// it.
type CorrelatedEvent struct {
	Def       string          `json:"def"`
	Key       string          `json:"key"`
	Payload   json.RawMessage `json:"payload"`
	CreatedAt time.Time       `json:"created_at"`
	UpdatedAt time.Time       `json:"updated_at"`
	// ExpiresAt is when TTL expiry deletes it; zero = never.
	ExpiresAt time.Time `json:"expires_at,omitzero"`
	// Produced lists the events it produced, oldest first, one per
	// instance wait it reached (each is an ordinary event with a fate in
	// the ledger, whose Name and Key are Def and Key).
	Produced []ProducedEvent `json:"produced,omitempty"`
}

// ProducedEvent links a correlated event to an event it produced.
type ProducedEvent struct {
	EventID    string    `json:"event_id"`
	InstanceID string    `json:"instance_id"`
	Execution  int       `json:"execution"`
	TaskSeq    int       `json:"task_seq"`
	CreatedAt  time.Time `json:"created_at"`
}

// RetryPolicy controls activity retries: attempt n (n ≥ 2) starts
// InitialInterval × BackoffCoefficient^(n-2) after the previous one failed,
// capped at MaxInterval. Zero fields take the runtime's defaults (Config.
// DefaultRetry: 3 attempts, 1 s, ×2, 1 min).
type RetryPolicy struct {
	MaxAttempts        int           `json:"max_attempts,omitempty"`
	InitialInterval    time.Duration `json:"-"`
	BackoffCoefficient float64       `json:"backoff_coefficient,omitempty"`
	MaxInterval        time.Duration `json:"-"`
}

type retryPolicyJSON struct {
	MaxAttempts        int      `json:"max_attempts,omitempty"`
	InitialInterval    Duration `json:"initial_interval,omitempty"`
	BackoffCoefficient float64  `json:"backoff_coefficient,omitempty"`
	MaxInterval        Duration `json:"max_interval,omitempty"`
}

// MarshalJSON writes the intervals as duration strings.
func (p RetryPolicy) MarshalJSON() ([]byte, error) {
	return json.Marshal(retryPolicyJSON{p.MaxAttempts, Duration(p.InitialInterval), p.BackoffCoefficient, Duration(p.MaxInterval)})
}

// UnmarshalJSON reads the intervals as duration strings or nanoseconds.
func (p *RetryPolicy) UnmarshalJSON(b []byte) error {
	var v retryPolicyJSON
	if err := json.Unmarshal(b, &v); err != nil {
		return err
	}
	*p = RetryPolicy{v.MaxAttempts, time.Duration(v.InitialInterval), v.BackoffCoefficient, time.Duration(v.MaxInterval)}
	return nil
}

// Duration is a time.Duration that encodes as a Go duration string
// ("1m30s") and decodes from one or from integer nanoseconds.
type Duration time.Duration

// MarshalJSON writes d as a duration string.
func (d Duration) MarshalJSON() ([]byte, error) { return json.Marshal(time.Duration(d).String()) }

// UnmarshalJSON reads a duration string ("90s") or integer nanoseconds.
func (d *Duration) UnmarshalJSON(b []byte) error {
	if string(b) == "null" {
		return nil
	}
	if len(b) > 0 && b[0] == '"' {
		var s string
		if err := json.Unmarshal(b, &s); err != nil {
			return err
		}
		v, err := time.ParseDuration(s)
		if err != nil {
			return fmt.Errorf("heraldtype: duration %q: %w", s, err)
		}
		*d = Duration(v)
		return nil
	}
	var n int64
	if err := json.Unmarshal(b, &n); err != nil {
		return fmt.Errorf("heraldtype: duration %s: want a string such as \"90s\" or integer nanoseconds", b)
	}
	*d = Duration(n)
	return nil
}
