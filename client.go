package herald

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"

	"github.com/heraldwf/herald/history"
	"github.com/heraldwf/herald/storage"
)

// Client starts workflows, sends them events and reads their state. It is
// bound to one tenant. A Client does not run workflows: a Runtime on the
// same store does.
type Client struct {
	store storage.Store
	cfg   *Config
	stats *Stats // the runtime's, when the client came from Runtime.Client
}

// NewClient returns a client over store (cfg may be nil for the defaults).
func NewClient(store storage.Store, cfg *Config) *Client {
	return &Client{store: store, cfg: cfg.WithDefaults()}
}

// Status is an instance's status.
type Status = storage.Status

// Instance statuses.
const (
	StatusPending    = storage.StatusPending
	StatusRunning    = storage.StatusRunning
	StatusCompleted  = storage.StatusCompleted
	StatusFailed     = storage.StatusFailed
	StatusTerminated = storage.StatusTerminated
)

// EventRecord is an event's entry in the fate ledger: where it stands.
type EventRecord = storage.EventRecord

// InstanceInfo describes an instance.
type InstanceInfo struct {
	ID        string
	Workflow  string
	Status    Status
	Execution int
	Input     json.RawMessage
	Output    json.RawMessage
	Failure   *history.Failure
	CreatedAt time.Time
	UpdatedAt time.Time
}

// Err returns the instance's failure as a typed error (a
// *NondeterminismError, or a *WorkflowError), or nil.
func (i *InstanceInfo) Err() error { return failureError(i.Failure) }

// Result decodes the output of a completed instance into out. It returns the
// instance's error if it failed or was terminated, and an error if it has
// not finished.
func (i *InstanceInfo) Result(out any) error {
	switch i.Status {
	case StatusCompleted:
		if out == nil {
			return nil
		}
		return json.Unmarshal(i.Output, out)
	case StatusFailed, StatusTerminated:
		return i.Err()
	default:
		return fmt.Errorf("herald: instance %s is %s", i.ID, i.Status)
	}
}

func infoOf(in *storage.Instance) *InstanceInfo {
	return &InstanceInfo{ID: in.ID, Workflow: in.Workflow, Status: in.Status, Execution: in.Execution,
		Input: in.Input, Output: in.Output, Failure: in.Failure, CreatedAt: in.CreatedAt, UpdatedAt: in.UpdatedAt}
}

// StartWorkflow starts an instance of the named workflow with input (encoded
// as JSON) and returns its id. It returns ErrInstanceExists if
// WithInstanceID names an existing instance, and an *InvalidArgumentError
// (ErrInvalidArgument; nothing stored) for an empty or malformed workflow
// name or instance id (see MaxNameBytes, MaxIDBytes) or an input that cannot
// be encoded as JSON or nests deeper than Config.MaxPayloadDepth.
func (c *Client) StartWorkflow(ctx context.Context, workflow string, input any, opts ...StartOption) (string, error) {
	var o startOptions
	for _, opt := range opts {
		opt(&o)
	}
	id := o.instanceID
	if id == "" {
		id = uuid.NewString()
	}
	reasons := textReasons(nil, "workflow name", workflow, MaxNameBytes)
	reasons = textReasons(reasons, "instance id", id, MaxIDBytes)
	in, reasons := encodeJSON(reasons, "input", input, c.cfg.MaxPayloadDepth)
	if len(reasons) > 0 {
		return "", &InvalidArgumentError{Op: "StartWorkflow", Reasons: reasons}
	}
	_, err := c.store.InstanceCreate(ctx, &storage.InstanceCreateParams{
		Tenant: c.cfg.Tenant, ID: id, Workflow: workflow, Input: in, Now: c.cfg.Now(),
	})
	if err != nil {
		return "", fmt.Errorf("start %s: %w", id, err)
	}
	return id, nil
}

// EventReceipt acknowledges an accepted event.
type EventReceipt struct {
	EventID    string
	ReceivedAt time.Time
	// Duplicate: the event id was seen before; this is its first receipt
	// and nothing changed.
	Duplicate bool
	// Started: StartIfAbsent started the instance.
	Started bool
}

// RaiseEvent sends an event on the positional lane to instance (SPEC §3.1).
// The payload is encoded as JSON (any JSON value, "" and null included). An
// instance that does not exist yet keeps the event until it starts.
//
// Errors: ErrEventInvalid (a malformed instance id, name or event id, a
// payload not JSON or over MaxPayloadBytes or MaxPayloadDepth; nothing
// stored), ErrDefinitionInvalid (the stored definition's schema cannot be
// used; nothing stored), ErrInstanceNotRunning (the instance has ended;
// nothing stored), ErrEventIDConflict, ErrUnavailable (after retries with
// the same event id).
func (c *Client) RaiseEvent(ctx context.Context, instanceID, name string, payload any, opts ...RaiseOption) (*EventReceipt, error) {
	return c.send(ctx, history.LanePositional, instanceID, name, payload, opts)
}

// Enqueue puts a message into the named queue of instance on the queue lane
// (SPEC §3.2): a durable FIFO mailbox whose messages wait for the next
// Dequeue, whatever happens to earlier receives. Options and errors are
// RaiseEvent's.
func (c *Client) Enqueue(ctx context.Context, instanceID, queue string, payload any, opts ...RaiseOption) (*EventReceipt, error) {
	return c.send(ctx, history.LaneQueue, instanceID, queue, payload, opts)
}

func (c *Client) send(ctx context.Context, lane history.Lane, instanceID, name string, payload any, opts []RaiseOption) (*EventReceipt, error) {
	var o raiseOptions
	for _, opt := range opts {
		opt(&o)
	}
	raw, startInput, err := c.validateEvent(instanceID, name, payload, &o)
	if err != nil {
		return nil, err
	}
	id := o.eventID
	if id == "" {
		// Chosen once: a retry after a lost connection resends the same id.
		id = uuid.NewString()
	}
	return idempotent(ctx, func() (*EventReceipt, error) {
		return c.sendOnce(ctx, lane, instanceID, name, id, raw, startInput, &o)
	})
}

func (c *Client) sendOnce(ctx context.Context, lane history.Lane, instanceID, name, id string, raw, startInput json.RawMessage, o *raiseOptions) (*EventReceipt, error) {
	if o.eventID != "" {
		// A retry of an accepted event returns its first receipt even if the
		// event's definition has changed since: dedup comes before
		// validation. (The store checks again, atomically.)
		rec, err := c.store.EventGet(ctx, &storage.EventGetParams{Tenant: c.cfg.Tenant, EventID: id})
		switch {
		case err == nil && rec.InstanceID == instanceID && rec.Lane == lane && rec.Name == name:
			return &EventReceipt{EventID: id, ReceivedAt: rec.ReceivedAt, Duplicate: true}, nil
		case err == nil:
			return nil, fmt.Errorf("send %s %q to %s: event id %s: %w", lane, name, instanceID, id, storage.ErrEventIDConflict)
		case !errors.Is(err, storage.ErrNotFound):
			return nil, fmt.Errorf("send %s %q to %s: %w", lane, name, instanceID, err)
		}
	}
	now := c.cfg.Now()
	p := &storage.EventRaiseParams{
		Tenant: c.cfg.Tenant, InstanceID: instanceID, EventID: id, Lane: lane,
		Name: name, Payload: raw, Now: now,
	}
	if err := c.applyDefinition(ctx, p); err != nil {
		return nil, err
	}
	if o.start {
		p.StartIfAbsent = &storage.InstanceCreateParams{Tenant: c.cfg.Tenant, ID: instanceID,
			Workflow: o.startWorkflow, Input: startInput, Now: now}
	}
	res, err := c.store.EventRaise(ctx, p)
	if err != nil {
		return nil, fmt.Errorf("send %s %q to %s: %w", lane, name, instanceID, err)
	}
	return &EventReceipt{EventID: res.EventID, ReceivedAt: res.ReceivedAt, Duplicate: res.Duplicate, Started: res.Started}, nil
}

// validateEvent checks an event at the door: its target, name, id and
// payload (and StartIfAbsent's workflow and input), and encodes the payload
// and the start input. Every problem found is listed in one
// *EventInvalidError.
func (c *Client) validateEvent(instanceID, name string, payload any, o *raiseOptions) (raw, startInput json.RawMessage, err error) {
	var reasons []string
	reasons = textReasons(reasons, "instance id", instanceID, MaxIDBytes)
	reasons = textReasons(reasons, "event name", name, MaxNameBytes)
	if o != nil && o.eventID != "" {
		reasons = textReasons(reasons, "event id", o.eventID, MaxIDBytes)
	}
	raw, reasons = encodeJSON(reasons, "payload", payload, c.cfg.MaxPayloadDepth)
	if o != nil && o.start {
		reasons = textReasons(reasons, "StartIfAbsent workflow name", o.startWorkflow, MaxNameBytes)
		startInput, reasons = encodeJSON(reasons, "StartIfAbsent input", o.startInput, c.cfg.MaxPayloadDepth)
	}
	if len(reasons) > 0 {
		return nil, nil, &EventInvalidError{Name: name, Reasons: reasons}
	}
	return raw, startInput, nil
}

// notFound is what a read of an identifier that can never exist (it breaks
// the text rules of MaxIDBytes and kin) returns: the same as a well-formed
// unknown one.
func notFound(what, id string) error {
	return fmt.Errorf("%s %.64q: %w", what, id, storage.ErrNotFound)
}

// Status returns an instance's state, or ErrNotFound.
func (c *Client) Status(ctx context.Context, instanceID string) (*InstanceInfo, error) {
	if !textOK(instanceID, MaxIDBytes) {
		return nil, notFound("status of", instanceID)
	}
	in, err := idempotent(ctx, func() (*storage.Instance, error) {
		return c.store.InstanceGet(ctx, &storage.InstanceGetParams{Tenant: c.cfg.Tenant, ID: instanceID})
	})
	if err != nil {
		return nil, fmt.Errorf("status of %s: %w", instanceID, err)
	}
	return infoOf(in), nil
}

// WaitForCompletion blocks until the instance completes, fails or is
// terminated, or ctx ends. The returned info's Result and Err give the
// outcome; the error is for the wait itself (ctx, storage, ErrNotFound).
func (c *Client) WaitForCompletion(ctx context.Context, instanceID string) (*InstanceInfo, error) {
	delay := 2 * time.Millisecond
	t := time.NewTimer(0)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-t.C:
		}
		info, err := c.Status(ctx, instanceID)
		if err != nil {
			return nil, err
		}
		if info.Status.Terminal() {
			return info, nil
		}
		t.Reset(delay)
		delay = min(delay*2, 100*time.Millisecond)
	}
}

// History returns an execution's history (execution 0: the current one).
func (c *Client) History(ctx context.Context, instanceID string, execution int) ([]history.Event, error) {
	if !textOK(instanceID, MaxIDBytes) {
		return nil, notFound("history of", instanceID)
	}
	evs, err := idempotent(ctx, func() ([]history.Event, error) {
		return c.store.HistoryList(ctx, &storage.HistoryListParams{Tenant: c.cfg.Tenant, InstanceID: instanceID, Execution: execution})
	})
	if err != nil {
		return nil, fmt.Errorf("history of %s: %w", instanceID, err)
	}
	return evs, nil
}

// Terminate ends a running instance at once: status terminated, every event
// still pending or buffered for it dropped (instance_terminal), its
// activities and timers cancelled. ErrInstanceNotRunning if it had ended.
func (c *Client) Terminate(ctx context.Context, instanceID, reason string) error {
	if !textOK(instanceID, MaxIDBytes) {
		return notFound("terminate", instanceID)
	}
	if !cleanText(reason) {
		return &InvalidArgumentError{Op: "Terminate", Reasons: []string{"reason is not valid UTF-8 or contains a NUL byte"}}
	}
	dropped, err := c.store.InstanceTerminate(ctx, &storage.InstanceTerminateParams{Tenant: c.cfg.Tenant, ID: instanceID,
		Reason: reason, Now: c.cfg.Now()})
	if err != nil {
		return fmt.Errorf("terminate %s: %w", instanceID, err)
	}
	reportDrops(c.cfg.Logger, c.stats, instanceID, dropped)
	return nil
}

// EventFate returns where an event stands: pending, buffered, delivered
// (with its wait number and execution) or dropped (with the reason).
// ErrNotFound if the id is unknown.
func (c *Client) EventFate(ctx context.Context, eventID string) (*EventRecord, error) {
	if !textOK(eventID, MaxIDBytes) {
		return nil, notFound("fate of event", eventID)
	}
	rec, err := idempotent(ctx, func() (*EventRecord, error) {
		return c.store.EventGet(ctx, &storage.EventGetParams{Tenant: c.cfg.Tenant, EventID: eventID})
	})
	if err != nil {
		return nil, fmt.Errorf("fate of event %s: %w", eventID, err)
	}
	return rec, nil
}

// EventFilter narrows Client.Events. Zero fields do not filter.
type EventFilter struct {
	Lane  history.Lane
	Name  string
	Fate  history.Fate
	Limit int // default 1000
}

// Events lists the events sent to an instance, oldest first, with their lane,
// name, fate, wait number and timestamps, so "where did my event go" always
// has an answer. An optional filter narrows the list. An instance id or name
// that can never exist lists nothing, as an unknown one does.
func (c *Client) Events(ctx context.Context, instanceID string, filter ...EventFilter) ([]*EventRecord, error) {
	p := &storage.EventListParams{Tenant: c.cfg.Tenant, InstanceID: instanceID}
	if len(filter) > 0 {
		f := filter[0]
		p.Lane, p.Name, p.Fate, p.Limit = f.Lane, f.Name, f.Fate, f.Limit
	}
	if !textOK(instanceID, MaxIDBytes) || (p.Name != "" && !textOK(p.Name, MaxNameBytes)) ||
		!cleanText(string(p.Lane)) || !cleanText(string(p.Fate)) {
		return nil, nil
	}
	recs, err := idempotent(ctx, func() ([]*EventRecord, error) { return c.store.EventList(ctx, p) })
	if err != nil {
		return nil, fmt.Errorf("events of %s: %w", instanceID, err)
	}
	return recs, nil
}
