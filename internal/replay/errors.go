package replay

import (
	"encoding/json"
	"errors"
	"fmt"

	"github.com/heraldwf/herald/history"
)

// Errors a workflow sees from futures.
var (
	// ErrEventTimeout: a wait's timeout elapsed before an event arrived. The
	// wait counts as cancelled (withdrawn).
	ErrEventTimeout = errors.New("herald: timed out waiting for event")
	// ErrCanceled: the future lost a Select and was cancelled.
	ErrCanceled = errors.New("herald: canceled")
)

// NondeterminismError says the workflow code no longer matches its history:
// at history position Seq, history recorded Expected and the code did
// Actual.
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
func (e *NondeterminismError) Failure() *history.Failure {
	d, _ := json.Marshal(e)
	return &history.Failure{Kind: FailureNondeterminism, Message: e.Error(), Detail: d}
}

// ActivityError is the error a future returns when its activity failed
// after its last attempt.
type ActivityError struct {
	Name    string
	Message string
}

func (e *ActivityError) Error() string {
	return fmt.Sprintf("activity %s failed: %s", e.Name, e.Message)
}

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
	FailureNondeterminism = "nondeterminism"
	FailureActivity       = "activity"
	FailurePanic          = "panic"
	FailureApplication    = "application"
	FailureTerminated     = "terminated"
)

// nondeterminism is the panic value used to unwind workflow code when it
// diverges from history.
type nondeterminism struct{ err *NondeterminismError }

// abort is the panic value used to unwind a blocked coroutine at the end of
// a turn.
type abort struct{}
