package backend

import (
	"encoding/json"
	"fmt"

	"github.com/google/uuid"

	"github.com/heraldwf/herald/heraldtype"
	"github.com/heraldwf/herald/history"
)

// EncodeHistoryEvent encodes the i-th event of an append to an execution's
// history as the JSON document the stores keep; its Seq must be positive.
func EncodeHistoryEvent(i int, ev *history.Event) (string, error) {
	if ev.Seq <= 0 {
		return "", Invalid("history event %d (%s): seq %d must be positive", i, ev.Kind, ev.Seq)
	}
	b, err := json.Marshal(ev)
	if err != nil {
		return "", fmt.Errorf("encode history event seq %d: %w", ev.Seq, err)
	}
	return string(b), nil
}

// DecodeHistoryEvent decodes a document made by EncodeHistoryEvent.
func DecodeHistoryEvent(b []byte) (history.Event, error) {
	var ev history.Event
	if err := json.Unmarshal(b, &ev); err != nil {
		return ev, fmt.Errorf("decode history event: %w: %w", heraldtype.ErrCorrupt, err)
	}
	return ev, nil
}

// NewCorrelatedEventID returns a new id of an event a correlated event
// produces: "corr-" and a time-ordered UUID (version 7; see the client's
// newID).
func NewCorrelatedEventID() string { return "corr-" + uuid.Must(uuid.NewV7()).String() }
