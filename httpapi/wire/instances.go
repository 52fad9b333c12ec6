package wire

import (
	"encoding/json"

	"github.com/heraldwf/herald/heraldtype"
	"github.com/heraldwf/herald/history"
)

// HistoryEvent is one entry of an execution's history, as the engine
// records it (package history, itself a leaf over heraldtype): snake_case,
// fields that do not apply to its kind omitted, payloads, inputs and
// results as the JSON they were.
type HistoryEvent = history.Event

// EventRecord is an event's entry in the fate ledger: its lane, name,
// fate (pending, buffered, delivered, dropped with a reason), wait number
// and execution. For an event published to the bus, lane is "bus" and bus
// holds its routes and executions.
type EventRecord = heraldtype.EventRecord

// History is one execution's history (GET /v1/instances/{id}/history).
type History struct {
	InstanceID string `json:"instance_id"`
	// Execution is the execution shown, 1-based.
	Execution int            `json:"execution"`
	Events    []HistoryEvent `json:"events"`
}

// TerminateRequest terminates a running instance (POST
// /v1/instances/{id}/terminate). The body may be omitted.
type TerminateRequest struct {
	// Reason is recorded in the instance's failure.
	Reason string `json:"reason,omitempty"`
}

// CancelRequest asks a running instance to cancel (POST
// /v1/instances/{id}/cancel). The body may be omitted.
type CancelRequest struct {
	// Reason is what the workflow's ctx.Err and the canceled instance's
	// failure say.
	Reason string `json:"reason,omitempty"`
}

// Timeline is everything the herald CLI's timeline shows of one instance
// (GET /v1/instances/{id}/timeline): the outcome, the history of every
// execution, and the fate of every event sent to it. Its JSON is that of
// the renderer's input (internal/timeline.Instance), so a client renders
// it as `herald demo` does.
type Timeline struct {
	ID       string `json:"id"`
	Workflow string `json:"workflow"`
	Status   string `json:"status"`
	// Output is a completed instance's result.
	Output json.RawMessage `json:"output,omitempty"`
	// Error is a failed or terminated instance's failure.
	Error string `json:"error,omitempty"`
	// Executions holds the history of every execution, the first first.
	Executions [][]HistoryEvent `json:"executions"`
	// Events are the instance's entries in the fate ledger, oldest first.
	Events []TimelineEvent `json:"events,omitempty"`
}

// TimelineEvent is the fate of one event sent to the instance.
type TimelineEvent struct {
	ID   string          `json:"id"`
	Lane heraldtype.Lane `json:"lane"`
	Name string          `json:"name"`
	// Key is the correlation key of a correlated-lane event.
	Key    string                `json:"key,omitempty"`
	Fate   heraldtype.Fate       `json:"fate"`
	Reason heraldtype.DropReason `json:"reason,omitempty"`
	// Execution the event is buffered in or was delivered in.
	Execution       int `json:"execution,omitempty"`
	OriginExecution int `json:"origin_execution,omitempty"`
	WaitNumber      int `json:"wait_number,omitempty"`
}

// QueryResponse is a query's answer (POST
// /v1/instances/{id}/queries/{name}).
type QueryResponse struct {
	// Result is the query handler's result, as JSON.
	Result json.RawMessage `json:"result"`
}
