package herald

import (
	"encoding/json"
	"time"

	"github.com/heraldwf/herald/storage"
)

// RetryPolicy controls activity retries: attempt n (n ≥ 2) starts
// InitialInterval × BackoffCoefficient^(n-2) after the previous one failed,
// capped at MaxInterval. Zero fields take the runtime's defaults: 3 attempts,
// 1 s, ×2, 1 min.
type RetryPolicy = storage.RetryPolicy

// ActivityOption configures CallActivity.
type ActivityOption func(*activityOptions)

type activityOptions struct{ retry RetryPolicy }

// WithRetry sets the activity's retry policy.
func WithRetry(p RetryPolicy) ActivityOption {
	return func(o *activityOptions) { o.retry = p }
}

// WaitOption configures WaitEvent.
type WaitOption func(*waitOptions)

type waitOptions struct{ timeout time.Duration }

// WithTimeout makes a wait fail with ErrEventTimeout after d; the wait then
// counts as withdrawn, exactly like a select loser.
func WithTimeout(d time.Duration) WaitOption {
	return func(o *waitOptions) { o.timeout = d }
}

// ContinueAsNewOption configures ContinueAsNew.
type ContinueAsNewOption func(*continueOptions)

type continueOptions struct{ dropUnconsumed bool }

// DropUnconsumedEvents makes ContinueAsNew drop buffered events (fate
// dropped/not_carried_forward) instead of carrying them into the next
// execution.
func DropUnconsumedEvents() ContinueAsNewOption {
	return func(o *continueOptions) { o.dropUnconsumed = true }
}

// StartOption configures StartWorkflow.
type StartOption func(*startOptions)

type startOptions struct{ instanceID string }

// WithInstanceID sets the instance id (default: a generated UUID).
func WithInstanceID(id string) StartOption {
	return func(o *startOptions) { o.instanceID = id }
}

// RaiseOption configures RaiseEvent.
type RaiseOption func(*raiseOptions)

type raiseOptions struct {
	eventID       string
	startWorkflow string
	startInput    any
	start         bool
}

// WithEventID sets the event id, the idempotency key: a second raise with the
// same id returns the first receipt and changes nothing. Default: a
// generated UUID.
func WithEventID(id string) RaiseOption {
	return func(o *raiseOptions) { o.eventID = id }
}

// StartIfAbsent makes RaiseEvent start the instance with workflow and input,
// atomically with the raise, if it does not exist (signal-with-start).
func StartIfAbsent(workflow string, input any) RaiseOption {
	return func(o *raiseOptions) { o.start, o.startWorkflow, o.startInput = true, workflow, input }
}

func marshal(v any) (json.RawMessage, error) {
	if raw, ok := v.(json.RawMessage); ok {
		return raw, nil
	}
	return json.Marshal(v)
}
