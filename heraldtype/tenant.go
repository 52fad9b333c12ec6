package heraldtype

import (
	"encoding/json"
	"fmt"
	"time"
)

// TenantLimits are a tenant's overrides of the engine's per-tenant limits. A
// zero field means "the engine default"; no field may be negative.
//
// In JSON the fields are snake_case and omitted when zero; EventRetention is
// a Go duration string ("24h0m0s") and is read from a duration string or an
// integer number of nanoseconds.
type TenantLimits struct {
	// MaxUnconsumedEvents caps the events buffered for one instance.
	MaxUnconsumedEvents int `json:"max_unconsumed_events,omitempty"`
	// MaxCarryForwardExecutions caps how many executions an unconsumed
	// event is carried through by continue-as-new.
	MaxCarryForwardExecutions int `json:"max_carry_forward_executions,omitempty"`
	// MaxQueuedEvents caps the events waiting in one instance's queue lane.
	MaxQueuedEvents int `json:"max_queued_events,omitempty"`
	// MaxPayloadBytes caps an event's payload.
	MaxPayloadBytes int `json:"max_payload_bytes,omitempty"`
	// MaxPayloadDepth caps the nesting depth of an event's payload.
	MaxPayloadDepth int `json:"max_payload_depth,omitempty"`
	// EventRetention is how long an event for an instance that has not
	// started is kept.
	EventRetention time.Duration `json:"event_retention,omitempty"`
}

// Validate returns an error wrapping ErrInvalidArgument that names the first
// negative field, or nil.
func (l *TenantLimits) Validate() error {
	for _, f := range []struct {
		name string
		v    int64
	}{
		{"max_unconsumed_events", int64(l.MaxUnconsumedEvents)},
		{"max_carry_forward_executions", int64(l.MaxCarryForwardExecutions)},
		{"max_queued_events", int64(l.MaxQueuedEvents)},
		{"max_payload_bytes", int64(l.MaxPayloadBytes)},
		{"max_payload_depth", int64(l.MaxPayloadDepth)},
		{"event_retention", int64(l.EventRetention)},
	} {
		if f.v < 0 {
			return fmt.Errorf("tenant limit %s is negative (%d): %w", f.name, f.v, ErrInvalidArgument)
		}
	}
	return nil
}

// tenantLimitsJSON is TenantLimits with its duration as JSON sees it.
type tenantLimitsJSON struct {
	MaxUnconsumedEvents       int      `json:"max_unconsumed_events,omitempty"`
	MaxCarryForwardExecutions int      `json:"max_carry_forward_executions,omitempty"`
	MaxQueuedEvents           int      `json:"max_queued_events,omitempty"`
	MaxPayloadBytes           int      `json:"max_payload_bytes,omitempty"`
	MaxPayloadDepth           int      `json:"max_payload_depth,omitempty"`
	EventRetention            Duration `json:"event_retention,omitempty"`
}

// MarshalJSON writes EventRetention as a duration string.
func (l TenantLimits) MarshalJSON() ([]byte, error) {
	return json.Marshal(tenantLimitsJSON{l.MaxUnconsumedEvents, l.MaxCarryForwardExecutions, l.MaxQueuedEvents,
		l.MaxPayloadBytes, l.MaxPayloadDepth, Duration(l.EventRetention)})
}

// UnmarshalJSON reads EventRetention from a duration string or an integer
// number of nanoseconds.
func (l *TenantLimits) UnmarshalJSON(b []byte) error {
	var j tenantLimitsJSON
	if err := json.Unmarshal(b, &j); err != nil {
		return err
	}
	*l = TenantLimits{j.MaxUnconsumedEvents, j.MaxCarryForwardExecutions, j.MaxQueuedEvents,
		j.MaxPayloadBytes, j.MaxPayloadDepth, time.Duration(j.EventRetention)}
	return nil
}

// Tenant is a registered tenant and its limit overrides.
type Tenant struct {
	ID        string       `json:"id"`
	Limits    TenantLimits `json:"limits"`
	CreatedAt time.Time    `json:"created_at"`
	UpdatedAt time.Time    `json:"updated_at"`
}
