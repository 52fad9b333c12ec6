package backend

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/heraldwf/herald/heraldtype"
	"github.com/heraldwf/herald/history"
	"github.com/heraldwf/herald/storage"
)

// The *Row types receive the columns of a row as the drivers scan them
// (Dest gives the scan destinations, in the order of the backends' column
// lists) and decode them into the storage types. Both schemas store times
// as unix nanoseconds (0: zero time) and payloads as JSON text.

// DefinitionRow is a row of event_definitions: tenant, name, schema,
// buffer, retention_ns, max_payload_bytes, correlation, version,
// created_at, updated_at.
type DefinitionRow struct {
	d                          heraldtype.EventDefinition
	tenant                     string // scanned, not returned: the caller named it
	version                    int64  // see Version
	schema, correlation        []byte
	retention, maxPayloadBytes int64
	createdAt, updatedAt       int64
}

// Dest returns the scan destinations of the row's columns.
func (r *DefinitionRow) Dest() []any {
	return []any{&r.tenant, &r.d.Name, &r.schema, &r.d.Buffer, &r.retention, &r.maxPayloadBytes,
		&r.correlation, &r.version, &r.createdAt, &r.updatedAt}
}

// Version is the scanned row's version (storage.CurrentDefinition).
func (r *DefinitionRow) Version() int64 { return r.version }

// Definition decodes the scanned row.
func (r *DefinitionRow) Definition() (*heraldtype.EventDefinition, error) {
	d := r.d
	d.Schema = RawOf(r.schema)
	d.Retention = time.Duration(r.retention)
	d.MaxPayloadBytes = int(r.maxPayloadBytes)
	if len(r.correlation) > 0 {
		var c heraldtype.CorrelationConfig
		if err := json.Unmarshal(r.correlation, &c); err != nil {
			return nil, fmt.Errorf("decode correlation config: %w", err)
		}
		d.Correlation = &c
	}
	d.CreatedAt = FromNanos(r.createdAt)
	d.UpdatedAt = FromNanos(r.updatedAt)
	return &d, nil
}

// InstanceRow is a row of instances without its lease: tenant, id,
// workflow, status, execution, input, output, failure, created_at,
// updated_at, blocked.
type InstanceRow struct {
	inst                   storage.Instance
	status                 string
	input, output, failure []byte
	createdAt, updatedAt   int64
}

// Dest returns the scan destinations of the row's columns.
func (r *InstanceRow) Dest() []any {
	return []any{&r.inst.Tenant, &r.inst.ID, &r.inst.Workflow, &r.status, &r.inst.Execution,
		&r.input, &r.output, &r.failure, &r.createdAt, &r.updatedAt, &r.inst.Blocked, &r.inst.ParentID, &r.inst.HasChildren}
}

// failureCorrupt is the failure kind of a stored row that does not decode,
// as the runtime records it for an instance it cannot replay
// (herald.WorkflowError.Kind "corrupt").
const failureCorrupt = "corrupt"

// Instance decodes the scanned row. It does not fail today (the error is
// kept for columns that might): a failure that does not decode is shown as
// one of kind "corrupt".
func (r *InstanceRow) Instance() (storage.Instance, error) {
	inst := r.inst
	inst.Status = heraldtype.Status(r.status)
	inst.Input = RawOf(r.input)
	inst.Output = RawOf(r.output)
	f, err := FailureOf(r.failure)
	if err != nil {
		// Only an ended instance has a failure, and nothing runs on it:
		// the instance is still shown and listed, with its failure saying
		// what is wrong, so that one damaged row never hides the others
		// (a list) or the rest of the instance (Status).
		f = &history.Failure{Kind: failureCorrupt, Message: "the stored failure does not decode: " +
			strings.ToValidUTF8(err.Error(), "�")}
	}
	inst.Failure = f
	inst.CreatedAt = FromNanos(r.createdAt)
	inst.UpdatedAt = FromNanos(r.updatedAt)
	return inst, nil
}

// MessageRow is a row of inbox: id, kind, execution, task_seq, lane,
// event_id, name, key, payload, latest, result, failure, visible_at,
// created_at, trace.
type MessageRow struct {
	m                        storage.Message
	kind, lane               string
	payload, result, failure []byte
	visibleAt, createdAt     int64
}

// Dest returns the scan destinations of the row's columns.
func (r *MessageRow) Dest() []any {
	return []any{&r.m.ID, &r.kind, &r.m.Execution, &r.m.TaskSeq, &r.lane, &r.m.EventID, &r.m.Name, &r.m.Key,
		&r.payload, &r.m.Latest, &r.result, &r.failure, &r.visibleAt, &r.createdAt, &r.m.TraceParent}
}

// RaisedMessage is the inbox message a raise of p at now adds (its ID is
// the store's to assign).
func RaisedMessage(p *storage.EventRaiseParams, now time.Time) storage.Message {
	return storage.Message{Kind: storage.MsgEvent, Lane: p.Lane, EventID: p.EventID, Name: p.Name, Payload: p.Payload,
		Latest: p.Latest, TraceParent: p.TraceParent, VisibleAt: now}
}

// StoredMessage returns m, inserted at now, as a read of the inbox returns
// it (see MessageRow): created at now, its payload a copy (nil if empty),
// so that a store that just inserted a message can hand it to a turn
// without reading it back. Its times need nothing more: now, and so
// m.VisibleAt, is the store's time (NowOr: UTC, no monotonic reading),
// which is what the columns give back.
func StoredMessage(m *storage.Message, now time.Time) storage.Message {
	out := *m
	out.Payload = RawOf(bytes.Clone(m.Payload))
	out.CreatedAt = now
	return out
}

// Message decodes the scanned row.
func (r *MessageRow) Message() (storage.Message, error) {
	m := r.m
	m.Kind = storage.MessageKind(r.kind)
	m.Lane = history.Lane(r.lane)
	m.Payload = RawOf(r.payload)
	m.Result = RawOf(r.result)
	f, err := FailureOf(r.failure)
	if err != nil {
		return m, fmt.Errorf("%w: %w", heraldtype.ErrCorrupt, err)
	}
	m.Failure = f
	m.VisibleAt = FromNanos(r.visibleAt)
	m.CreatedAt = FromNanos(r.createdAt)
	return m, nil
}

// EventRow is a row of the events ledger: tenant, event_id, instance_id,
// lane, name, fate, reason, execution, origin_execution, wait_number, key,
// received_at, updated_at, sender.
type EventRow struct {
	e                     heraldtype.EventRecord
	tenant                string // scanned, not returned: the caller named it
	lane, fate, reason    string
	receivedAt, updatedAt int64
}

// Dest returns the scan destinations of the row's columns.
func (r *EventRow) Dest() []any {
	return []any{&r.tenant, &r.e.EventID, &r.e.InstanceID, &r.lane, &r.e.Name, &r.fate, &r.reason,
		&r.e.Execution, &r.e.OriginExecution, &r.e.WaitNumber, &r.e.Key, &r.receivedAt, &r.updatedAt, &r.e.Sender}
}

// Event decodes the scanned row.
func (r *EventRow) Event() *heraldtype.EventRecord {
	e := r.e
	e.Lane = history.Lane(r.lane)
	e.Fate = history.Fate(r.fate)
	e.Reason = history.DropReason(r.reason)
	e.ReceivedAt = FromNanos(r.receivedAt)
	e.UpdatedAt = FromNanos(r.updatedAt)
	return &e
}

// CorrelatedRow is a row of correlated_events: tenant, def, key, payload,
// created_at, updated_at, expires_at.
type CorrelatedRow struct {
	c                               heraldtype.CorrelatedEvent
	tenant                          string // scanned, not returned: the caller named it
	payload                         []byte
	createdAt, updatedAt, expiresAt int64
}

// Dest returns the scan destinations of the row's columns.
func (r *CorrelatedRow) Dest() []any {
	return []any{&r.tenant, &r.c.Def, &r.c.Key, &r.payload, &r.createdAt, &r.updatedAt, &r.expiresAt}
}

// Correlated decodes the scanned row (its produced list is left empty).
func (r *CorrelatedRow) Correlated() *heraldtype.CorrelatedEvent {
	c := r.c
	c.Payload = RawOf(r.payload)
	c.CreatedAt = FromNanos(r.createdAt)
	c.UpdatedAt = FromNanos(r.updatedAt)
	c.ExpiresAt = FromNanos(r.expiresAt)
	return &c
}

// StoredCorrelation is the form a correlation config is stored in: the TTL
// in integer nanoseconds (PostgreSQL's SQL reads it as a bigint), whatever
// form heraldtype gives it in JSON for users. Reading accepts both.
func StoredCorrelation(c *heraldtype.CorrelationConfig) any {
	if c == nil {
		return nil
	}
	return struct {
		TTL                         int64 `json:"ttl,omitempty"`
		DeleteAfterFirstCorrelation bool  `json:"delete_after_first_correlation,omitempty"`
	}{int64(c.TTL), c.DeleteAfterFirstCorrelation}
}
