package herald

import (
	"encoding/json"
	"time"
)

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

type startOptions struct {
	instanceID string
	reuse      IDReusePolicy
}

// WithInstanceID sets the instance id (default: a generated UUID).
func WithInstanceID(id string) StartOption {
	return func(o *startOptions) { o.instanceID = id }
}

// IDReusePolicy says what StartWorkflow does when WithInstanceID names an
// instance that exists already.
type IDReusePolicy int

const (
	// IDReuseFail refuses the start with ErrInstanceExists. The default.
	IDReuseFail IDReusePolicy = iota
	// IDReuseUseExisting returns the existing instance's id, changing
	// nothing, if it runs the same workflow — whatever its status and
	// input, so a program that starts "order-1" can simply run again. An
	// instance of another workflow under that id is still refused with
	// ErrInstanceExists.
	IDReuseUseExisting
)

// WithIDReusePolicy sets what StartWorkflow does when the instance id is
// taken (default IDReuseFail). A value that is not one of the IDReuse
// constants makes StartWorkflow refuse the call (ErrInvalidArgument).
func WithIDReusePolicy(p IDReusePolicy) StartOption {
	return func(o *startOptions) { o.reuse = p }
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
