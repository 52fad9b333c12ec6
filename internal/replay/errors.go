package replay

import (
	"encoding/json"

	"github.com/heraldwf/herald/heraldtype"
)

// Errors a workflow sees from futures (heraldtype's).
var (
	ErrEventTimeout = heraldtype.ErrEventTimeout
	ErrCanceled     = heraldtype.ErrCanceled
)

// NondeterminismError says the workflow code no longer matches its history.
type NondeterminismError = heraldtype.NondeterminismError

// ActivityError is the error a future returns when its activity failed
// after its last attempt.
type ActivityError = heraldtype.ActivityError

// PanicError is a panic in workflow code; the instance fails with it.
type PanicError struct {
	Value string
	Stack string
}

func (e *PanicError) Error() string { return "workflow panicked: " + e.Value }

// ContinueAsNewError is returned by a workflow to end its execution and
// start the next one with Input.
type ContinueAsNewError struct {
	Input json.RawMessage
	// DropUnconsumed drops buffered events instead of carrying them.
	DropUnconsumed bool
}

func (e *ContinueAsNewError) Error() string { return "herald: continue as new" }

// Failure kinds.
const (
	FailureNondeterminism = heraldtype.FailureNondeterminism
	FailureActivity       = heraldtype.FailureActivity
	FailurePanic          = heraldtype.FailurePanic
	FailureApplication    = heraldtype.FailureApplication
	FailureTerminated     = heraldtype.FailureTerminated
)

// nondeterminism is the panic value used to unwind workflow code when it
// diverges from history.
type nondeterminism struct{ err *NondeterminismError }

// abort is the panic value used to unwind a blocked coroutine at the end of
// a turn.
type abort struct{}
