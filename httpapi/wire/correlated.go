package wire

import (
	"encoding/json"

	"github.com/heraldwf/herald/heraldtype"
)

// CorrelatedEvent is a piece of data put under (event definition, key):
// every instance waiting on that key receives it; produced lists the
// events it produced, one per wait it reached.
type CorrelatedEvent = heraldtype.CorrelatedEvent

// PutCorrelatedRequest puts a correlated event (PUT
// /v1/correlated/{def}/{key}).
type PutCorrelatedRequest struct {
	// Payload is the correlated event's payload (any JSON value; omitted:
	// null). The definition's schema and size cap apply.
	Payload json.RawMessage `json:"payload,omitempty"`
}
