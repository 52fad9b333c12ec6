package wire

import (
	"encoding/json"
	"time"

	"github.com/heraldwf/herald/heraldtype"
)

// EventDefinition declares an event name for a tenant: the JSON Schema
// every payload of that name must satisfy, the buffering policy of its
// queues, the retention of events for instances not started yet, a payload
// cap and the correlated-lane config. Its JSON is heraldtype's
// EventDefinition's (a test keeps the two equal); it is spelled out here so
// that the OpenAPI document shows every field.
type EventDefinition struct {
	Name string `json:"name"`
	// Schema is a JSON Schema (draft 2020-12 unless $schema says
	// otherwise); omitted: any JSON.
	Schema json.RawMessage `json:"schema,omitempty"`
	// Buffer is "fifo" (the default) or "latest" (a queue keeps only the
	// newest unconsumed message).
	Buffer string `json:"buffer,omitempty"`
	// Retention is how long an event for an instance that has not started
	// is kept; omitted: the tenant's default.
	Retention heraldtype.Duration `json:"retention,omitempty"`
	// MaxPayloadBytes caps the payload; omitted: the tenant's default.
	MaxPayloadBytes int `json:"max_payload_bytes,omitempty"`
	// Correlation enables the correlated lane for this name.
	Correlation *CorrelationConfig `json:"correlation,omitempty"`
	CreatedAt   time.Time          `json:"created_at,omitzero"`
	UpdatedAt   time.Time          `json:"updated_at,omitzero"`
}

// CorrelationConfig is an event definition's correlated-lane settings.
type CorrelationConfig struct {
	// TTL deletes correlated events older than this; omitted: kept.
	TTL heraldtype.Duration `json:"ttl,omitempty"`
	// DeleteAfterFirstCorrelation: exactly one waiter receives a
	// correlated event, which is then deleted.
	DeleteAfterFirstCorrelation bool `json:"delete_after_first_correlation,omitempty"`
}

// PutDefinitionRequest creates or replaces an event definition (PUT
// /v1/definitions/{name}); the name is the path's.
type PutDefinitionRequest struct {
	Schema          json.RawMessage     `json:"schema,omitempty"`
	Buffer          string              `json:"buffer,omitempty"`
	Retention       heraldtype.Duration `json:"retention,omitempty"`
	MaxPayloadBytes int                 `json:"max_payload_bytes,omitempty"`
	Correlation     *CorrelationConfig  `json:"correlation,omitempty"`
}

// DefinitionOf converts the engine's definition to its wire form.
func DefinitionOf(d *heraldtype.EventDefinition) *EventDefinition {
	if d == nil {
		return nil
	}
	out := &EventDefinition{Name: d.Name, Schema: d.Schema, Buffer: d.Buffer, Retention: heraldtype.Duration(d.Retention),
		MaxPayloadBytes: d.MaxPayloadBytes, CreatedAt: d.CreatedAt, UpdatedAt: d.UpdatedAt}
	if d.Correlation != nil {
		out.Correlation = &CorrelationConfig{TTL: heraldtype.Duration(d.Correlation.TTL),
			DeleteAfterFirstCorrelation: d.Correlation.DeleteAfterFirstCorrelation}
	}
	return out
}

// Definition is the engine's definition named name that r puts.
func (r *PutDefinitionRequest) Definition(name string) heraldtype.EventDefinition {
	d := heraldtype.EventDefinition{Name: name, Schema: r.Schema, Buffer: r.Buffer, Retention: time.Duration(r.Retention),
		MaxPayloadBytes: r.MaxPayloadBytes}
	if r.Correlation != nil {
		d.Correlation = &heraldtype.CorrelationConfig{TTL: time.Duration(r.Correlation.TTL),
			DeleteAfterFirstCorrelation: r.Correlation.DeleteAfterFirstCorrelation}
	}
	return d
}
