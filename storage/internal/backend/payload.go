package backend

import (
	"encoding/json"
	"fmt"

	"github.com/heraldwf/herald/history"
)

// RawArg is the query argument that stores a JSON payload as text; an
// empty payload is NULL.
func RawArg(m json.RawMessage) any {
	if len(m) == 0 {
		return nil
	}
	return string(m)
}

// RawOf decodes a payload column stored by RawArg.
func RawOf(b []byte) json.RawMessage {
	if len(b) == 0 {
		return nil
	}
	return json.RawMessage(b)
}

// FailureOf decodes a failure column stored as JSON; an empty one is nil.
func FailureOf(b []byte) (*history.Failure, error) {
	if len(b) == 0 {
		return nil, nil
	}
	var f history.Failure
	if err := json.Unmarshal(b, &f); err != nil {
		return nil, fmt.Errorf("decode failure: %w", err)
	}
	return &f, nil
}
