package wire

import (
	"encoding/json"

	"github.com/heraldwf/herald/heraldtype"
)

// SendEventRequest sends an event to an instance: on the positional lane
// (POST /v1/instances/{id}/events/{name}) or into one of its queues (POST
// /v1/instances/{id}/queues/{queue}). The instance need not exist yet: the
// event waits for it (or StartIfAbsent starts it).
type SendEventRequest struct {
	// Payload is the event's payload (any JSON value; omitted: null).
	Payload json.RawMessage `json:"payload,omitempty"`
	// EventID is the idempotency key: sending the same id again answers
	// with the first receipt (duplicate: true) and changes nothing.
	// Omitted: the server chooses one.
	EventID string `json:"event_id,omitempty"`
	// StartIfAbsent starts the instance with this workflow and input,
	// atomically with the event, if it does not exist
	// (signal-with-start).
	StartIfAbsent *StartIfAbsent `json:"start_if_absent,omitempty"`
}

// StartIfAbsent is SendEventRequest's signal-with-start.
type StartIfAbsent struct {
	Workflow string          `json:"workflow"`
	Input    json.RawMessage `json:"input,omitempty"`
}

// EventReceipt acknowledges an accepted event: its id, when it was
// received, whether it was a duplicate and whether it started the
// instance.
type EventReceipt = heraldtype.EventReceipt
