package wire

import (
	"encoding/json"
	"time"

	"github.com/heraldwf/herald/heraldtype"
)

// The event bus (docs/bus.md): publishing, published events, subscriptions,
// scripts and their dry runs, attempt records, dead letters.

// Aliases of the bus's domain types whose JSON is the wire form.
type (
	PublishReceipt = heraldtype.PublishReceipt
	PublishedEvent = heraldtype.PublishedEvent
	Subscription   = heraldtype.Subscription
	Target         = heraldtype.Target
	Script         = heraldtype.Script
	Attempt        = heraldtype.Attempt
	DeadLetter     = heraldtype.DeadLetter
)

// PublishRequest publishes an event to the tenant's bus (POST /v1/publish).
type PublishRequest struct {
	// Type is the event type: dot-separated segments ("order.paid").
	Type string `json:"type"`
	// Data is the event's data (any JSON value; absent: null).
	Data json.RawMessage `json:"data,omitempty"`
	// EventID names the event (default: a new UUID). Publishing an id
	// again with the same type changes nothing (receipt duplicate: true).
	EventID string `json:"event_id,omitempty"`
}

// PutSubscriptionRequest creates or replaces a subscription (PUT
// /v1/subscriptions/{id}); every field is replaced.
type PutSubscriptionRequest struct {
	// Pattern is an event type or a pattern: "*" for one segment, a
	// final ">" for one or more.
	Pattern string `json:"pattern"`
	// Filter is a filter rule tree (docs/bus.md); absent lets every event
	// through.
	Filter json.RawMessage `json:"filter,omitempty"`
	Target Target          `json:"target"`
	// Enabled defaults to true.
	Enabled *bool `json:"enabled,omitempty"`
	// MaxRetries after a transient failure (absent: 3; 0 to 20).
	MaxRetries *int `json:"max_retries,omitempty"`
	// Timeout of one attempt ("30s"; absent: the runtime's default; at
	// most 15m).
	Timeout heraldtype.Duration `json:"timeout,omitempty"`
}

// PutScriptRequest saves a new version of a script (PUT /v1/scripts/{id}).
type PutScriptRequest struct {
	// Source is the body of a strict-mode function (docs/bus.md).
	Source string `json:"source"`
}

// ValidateScriptRequest checks a script's syntax (POST
// /v1/scripts/validate); nothing is stored.
type ValidateScriptRequest struct {
	Source string `json:"source"`
}

// ValidateScriptResponse says whether the source parses.
type ValidateScriptResponse struct {
	OK bool `json:"ok"`
	// SyntaxError is where the source does not parse (when OK is false).
	SyntaxError *ScriptSyntaxError `json:"syntax_error,omitempty"`
}

// ScriptSyntaxError is the position (line and column from 1) and message
// of a syntax error.
type ScriptSyntaxError struct {
	Line    int    `json:"line"`
	Column  int    `json:"column"`
	Message string `json:"message"`
}

// TestScriptRequest is a dry run of a script (POST /v1/scripts/test):
// either Source, or the stored script Script (Version: 0 for the latest),
// runs against Event in the bus's sandbox; nothing is stored.
type TestScriptRequest struct {
	Source  string `json:"source,omitempty"`
	Script  string `json:"script,omitempty"`
	Version int    `json:"version,omitempty"`
	// Event is the sample event the script sees as ctx.event.
	Event SampleEvent `json:"event"`
	// Timeout bounds the run ("5s"; absent: the bus's default; at most
	// 1m).
	Timeout heraldtype.Duration `json:"timeout,omitempty"`
}

// SampleEvent is a dry run's event: Type is required, ID defaults to
// "dry-run", Timestamp to now, Data to null.
type SampleEvent struct {
	ID        string          `json:"id,omitempty"`
	Type      string          `json:"type"`
	Data      json.RawMessage `json:"data,omitempty"`
	Timestamp time.Time       `json:"timestamp,omitzero"`
}

// TestScriptResponse is a dry run's outcome. A script that threw, timed
// out, or passed its memory or stack cap is succeeded: false with
// error_kind (timeout, runtime, resource, permanent), its message and
// stack — as an attempt of the bus records it.
type TestScriptResponse struct {
	Succeeded bool `json:"succeeded"`
	// Result is the returned value (null when it returned nothing).
	Result    json.RawMessage `json:"result,omitempty"`
	Logs      []string        `json:"logs,omitempty"`
	ErrorKind string          `json:"error_kind,omitempty"`
	Error     string          `json:"error,omitempty"`
	Stack     string          `json:"stack,omitempty"`
	// Duration is how long the run took, including its process's start.
	Duration heraldtype.Duration `json:"duration"`
}

// DeadLetterSelection selects dead letters for a bulk reprocess or delete
// (POST /v1/dead-letters/reprocess, /v1/dead-letters/delete). An empty
// selection is refused: name a filter, or set All to act on every letter
// (waiting for a decision, or also reprocessed ones with
// IncludeReprocessed). All with a filter is refused too.
type DeadLetterSelection struct {
	Subscription string  `json:"subscription,omitempty"`
	EventType    string  `json:"event_type,omitempty"`
	ErrorKind    string  `json:"error_kind,omitempty"`
	IDs          []int64 `json:"ids,omitempty"`
	// IncludeReprocessed also selects letters already reprocessed (kept
	// as the link to their failure); it widens, it is not a filter.
	IncludeReprocessed bool `json:"include_reprocessed,omitempty"`
	All                bool `json:"all,omitempty"`
}

// ReprocessResponse says how many dead letters were queued again.
type ReprocessResponse struct {
	Reprocessed int `json:"reprocessed"`
}

// DeleteResponse says how many dead letters were deleted.
type DeleteResponse struct {
	Deleted int `json:"deleted"`
}

// ScriptInfo is a script's latest version in a list (GET /v1/scripts),
// without its source: GET /v1/scripts/{id} has it.
type ScriptInfo struct {
	ID      string `json:"id"`
	Version int    `json:"version"`
	// Size is the source's length in bytes.
	Size      int       `json:"size"`
	CreatedAt time.Time `json:"created_at"`
	UpdatedAt time.Time `json:"updated_at"`
}
