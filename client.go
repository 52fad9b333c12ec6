package herald

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/google/uuid"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/heraldwf/herald/heraldtype"
	"github.com/heraldwf/herald/history"
	"github.com/heraldwf/herald/storage"
)

// Client starts workflows, sends them events and reads their state. It is
// bound to one tenant (Runtime.Client, NewClient) and never reads or writes
// another's. A Client does not run workflows: a Runtime on the same store
// does.
type Client struct {
	store  storage.Store
	tenant string
	cfg    *ClientConfig
	door   *admission // the runtime's, for a client of a runtime
	rt     *Runtime   // the client's runtime (Runtime.Client), nil for NewClient: Query needs it
	// raiseFn is raise, made once: a send's store call with its direct
	// hand-off, after the tenant is registered.
	raiseFn raiseFunc

	ensured atomic.Bool // the tenant is registered
	backlog busBacklog  // Publish's view of the tenant's bus backlog
	tracer  trace.Tracer
}

// NewClient returns a client of tenant over store; cfg may be nil for
// every default. It registers the tenant before its first write. It
// returns an *InvalidArgumentError (ErrInvalidArgument) for a nil store, a
// tenant id that breaks the text rules (empty, over MaxIDBytes, not UTF-8,
// a NUL byte) or a cfg that Validate refuses.
func NewClient(store storage.Store, tenant string, cfg *ClientConfig) (*Client, error) {
	ps := cfg.problems(nil)
	if store == nil {
		ps = append(ps, "store is nil")
	}
	ps = tenantReasons(ps, tenant)
	if len(ps) > 0 {
		return nil, &InvalidArgumentError{Op: "NewClient", Reasons: ps}
	}
	c := cfg.WithDefaults()
	c.Observer = guardObserver(c.Observer, c.Logger)
	door := newAdmission(store, c, newLimitCache(store, c.Logger), newDefCache(c.Clock))
	return newClient(store, tenant, c, door, nil, tracerOf(c)), nil
}

func newClient(store storage.Store, tenant string, cfg *ClientConfig, door *admission, rt *Runtime, tracer trace.Tracer) *Client {
	c := &Client{store: store, tenant: tenant, cfg: cfg, door: door, rt: rt, tracer: tracer}
	c.raiseFn = c.registeredRaise
	return c
}

// registeredRaise registers the tenant (once) and raises p.
func (c *Client) registeredRaise(ctx context.Context, p *storage.EventRaiseParams) (*storage.EventRaiseResult, error) {
	if err := c.ensureTenant(ctx); err != nil {
		return nil, err
	}
	return c.raise(ctx, p)
}

func infoOf(in *storage.Instance) *InstanceInfo {
	return &InstanceInfo{ID: in.ID, Workflow: in.Workflow, Status: in.Status, Execution: in.Execution,
		Input: in.Input, Output: in.Output, Failure: in.Failure, CreatedAt: in.CreatedAt, UpdatedAt: in.UpdatedAt,
		Blocked: in.Blocked, ParentID: in.ParentID, Attributes: attributeMap(in.Attributes)}
}

// newID returns a new id for an instance or an event the caller did not
// name: a UUID of version 7 (RFC 9562), whose first bits are the time, so
// that the ids a process generates sort in the order it made them. The
// stores index instances and events by id: a time-ordered id lands next
// to the previous one, on a page the store just wrote, where a random one
// would dirty (and, on PostgreSQL after a checkpoint, log in full) another
// page of the index for each event.
func newID() string { return uuid.Must(uuid.NewV7()).String() }

// StartWorkflow starts an instance of the named workflow with input (encoded
// as JSON) and returns its id. If WithInstanceID names an existing
// instance, the IDReusePolicy decides: ErrInstanceExists (the default), or
// the existing instance of the same workflow (WithIDReusePolicy(
// IDReuseUseExisting)). It returns an *InvalidArgumentError
// (ErrInvalidArgument; nothing stored) for an empty or malformed workflow
// name or instance id (see MaxNameBytes, MaxIDBytes) or an input that cannot
// be encoded as JSON or nests deeper than Config.MaxPayloadDepth.
func (c *Client) StartWorkflow(ctx context.Context, workflow string, input any, opts ...StartOption) (_ string, err error) {
	var o startOptions
	for _, opt := range opts {
		opt(&o)
	}
	id := o.instanceID
	if id == "" {
		id = newID()
	}
	reasons := textReasons(nil, "workflow name", workflow, MaxNameBytes)
	if o.reuse != IDReuseFail && o.reuse != IDReuseUseExisting {
		reasons = append(reasons, fmt.Sprintf("id-reuse policy %d is not one of the IDReuse constants", o.reuse))
	}
	reasons = textReasons(reasons, "instance id", id, MaxIDBytes)
	in, reasons := encodeJSON(reasons, "input", input, c.door.limitsFor(ctx, c.tenant).maxPayloadDepth)
	if len(reasons) > 0 {
		return "", &InvalidArgumentError{Op: "StartWorkflow", Reasons: reasons}
	}
	ctx, span := c.startSendSpan(ctx, "herald.start_workflow", func() []attribute.KeyValue {
		return []attribute.KeyValue{attrInstance.String(id), attrWorkflow.String(workflow)}
	})
	defer func() { endSpan(span, err) }()
	if err := c.ensureTenant(ctx); err != nil {
		return "", fmt.Errorf("start %s: %w", id, err)
	}
	_, err = c.store.InstanceCreate(ctx, &storage.InstanceCreateParams{
		Tenant: c.tenant, ID: id, Workflow: workflow, Input: in, Now: c.cfg.Clock.Now(),
		TraceParent: traceParent(span),
	})
	if errors.Is(err, heraldtype.ErrInstanceExists) && o.reuse == IDReuseUseExisting {
		return c.startExisting(ctx, workflow, id, err)
	}
	if err != nil {
		return "", fmt.Errorf("start %s: %w", id, err)
	}
	return id, nil
}

// startExisting is IDReuseUseExisting's answer to a start whose id is taken:
// the existing instance if it runs workflow, else exists (the create's
// ErrInstanceExists).
func (c *Client) startExisting(ctx context.Context, workflow, id string, exists error) (string, error) {
	in, err := idempotent(ctx, func() (*storage.Instance, error) {
		return c.store.InstanceGet(ctx, &storage.InstanceGetParams{Tenant: c.tenant, ID: id})
	})
	if err != nil {
		return "", fmt.Errorf("start %s: read the existing instance: %w", id, err)
	}
	if in.Workflow != workflow {
		return "", fmt.Errorf("start %s: it runs workflow %q, not %q: %w", id, in.Workflow, workflow, exists)
	}
	return id, nil
}

// RaiseEvent sends an event on the positional lane to instance (docs/positional.md).
// The payload is encoded as JSON (any JSON value, "" and null included). An
// instance that does not exist yet keeps the event until it starts.
//
// Errors: ErrEventInvalid (a malformed instance id, name or event id, a
// payload not JSON or over MaxPayloadBytes or MaxPayloadDepth; nothing
// stored), ErrDefinitionInvalid (the stored definition's schema cannot be
// used; nothing stored), ErrInstanceNotRunning (the instance has ended;
// nothing stored), ErrEventIDConflict, ErrUnavailable (after retries with
// the same event id), storage.ErrDefinitionChanged (the event's definition
// was changed again each time the send validated the event against it,
// a few times in a row; nothing stored, the send may be repeated).
//
// The payload is validated against the event's definition (see
// PutEventDefinition) current when the event is stored, whichever process
// changed it last. The definition is cached: a send reads it from the store
// only the first time, and again after it changed.
func (c *Client) RaiseEvent(ctx context.Context, instanceID, name string, payload any, opts ...RaiseOption) (*EventReceipt, error) {
	return c.send(ctx, history.LanePositional, instanceID, name, payload, opts)
}

// Enqueue puts a message into the named queue of instance on the queue lane
// (docs/queue.md): a durable FIFO mailbox whose messages wait for the next
// Dequeue, whatever happens to earlier receives. Options and errors are
// RaiseEvent's.
func (c *Client) Enqueue(ctx context.Context, instanceID, queue string, payload any, opts ...RaiseOption) (*EventReceipt, error) {
	return c.send(ctx, history.LaneQueue, instanceID, queue, payload, opts)
}

func (c *Client) send(ctx context.Context, lane history.Lane, instanceID, name string, payload any, opts []RaiseOption) (_ *EventReceipt, err error) {
	var o raiseOptions
	for _, opt := range opts {
		opt(&o)
	}
	ev := &laneEvent{tenant: c.tenant, lane: lane, instanceID: instanceID, name: name, eventID: o.eventID, payload: payload,
		start: o.start, workflow: o.startWorkflow, startInput: o.startInput}
	lim := c.door.limitsFor(ctx, c.tenant)
	raw, startInput, err := c.door.checkLane(ev, lim)
	if err != nil {
		return nil, err
	}
	id := o.eventID
	if id == "" {
		// Chosen once: a retry after a lost connection resends the same id.
		id = newID()
	}
	spanName := "herald.raise_event"
	if lane == history.LaneQueue {
		spanName = "herald.enqueue"
	}
	ctx, span := c.startSendSpan(ctx, spanName, func() []attribute.KeyValue {
		return []attribute.KeyValue{attrInstance.String(instanceID), attrLane.String(string(lane)),
			attrEventName.String(name), attrEventID.String(id)}
	})
	defer func() { endSpan(span, err) }()
	tp := traceParent(span)
	raise := c.raiseFn
	return idempotent(ctx, func() (*EventReceipt, error) {
		return c.door.sendLane(ctx, ev, id, o.eventID != "", raw, startInput, lim, tp, raise)
	})
}

// raise stores an event. A client of a running runtime that serves its
// tenant and has a free turn worker asks the store for a direct hand-off:
// the raise's own transaction leases the instance it makes runnable, and
// the turn runs on that worker at once, with no wake-up and no claim round
// trip in between. The raise is as durable either way; a store that
// declines (the instance is leased or not yet started, or, on PostgreSQL,
// the raise shared a transaction with another tenant's hand-offs) leaves
// the instance to the claim loop. A store that can hands the turn over at
// the raise's commit, before the raise is durable (OnClaimed: SQLite).
func (c *Client) raise(ctx context.Context, p *storage.EventRaiseParams) (*storage.EventRaiseResult, error) {
	var pool *turnPool
	if c.rt != nil {
		pool = c.rt.handOff(c.tenant)
	}
	if pool == nil {
		return c.store.EventRaise(ctx, p)
	}
	began := time.Now()
	handed := false // OnClaimed ran: it returns before EventRaise does
	p.Claim = &storage.TurnClaimParams{Lease: c.rt.cfg.TurnLease}
	p.OnClaimed = func(t *storage.Turn) {
		handed = true
		c.rt.runHandOff(pool, c.tenant, t, time.Since(began))
	}
	res, err := c.store.EventRaise(ctx, p)
	p.Claim, p.OnClaimed = nil, nil
	switch {
	case handed:
	case err != nil || res.Turn == nil:
		pool.release()
	default:
		c.rt.runHandOff(pool, c.tenant, res.Turn, time.Since(began))
	}
	if res != nil {
		res.Turn = nil
	}
	return res, err
}

// notFound is what a read of an identifier that can never exist (it breaks
// the text rules of MaxIDBytes and kin) returns: the same as a well-formed
// unknown one.
func notFound(what, id string) error {
	return fmt.Errorf("%s %.64q: %w", what, id, heraldtype.ErrNotFound)
}

// Status returns an instance's state, or ErrNotFound.
func (c *Client) Status(ctx context.Context, instanceID string) (*InstanceInfo, error) {
	if !textOK(instanceID, MaxIDBytes) {
		return nil, notFound("status of", instanceID)
	}
	in, err := idempotent(ctx, func() (*storage.Instance, error) {
		return c.store.InstanceGet(ctx, &storage.InstanceGetParams{Tenant: c.tenant, ID: instanceID})
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
		return c.store.HistoryList(ctx, &storage.HistoryListParams{Tenant: c.tenant, InstanceID: instanceID, Execution: execution})
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
	dropped, err := c.store.InstanceTerminate(ctx, &storage.InstanceTerminateParams{Tenant: c.tenant, ID: instanceID,
		Reason: reason, Now: c.cfg.Clock.Now()})
	if err != nil {
		return fmt.Errorf("terminate %s: %w", instanceID, err)
	}
	reportDrops(c.cfg.Logger, c.cfg.Observer, c.tenant, instanceID, dropped)
	return nil
}

// EventFate returns where an event stands: pending, buffered, delivered
// (with its wait number and execution) or dropped (with the reason).
// For an id the tenant published to the bus (and never used for an event
// sent to an instance: the lanes' ledger is looked at first), the record
// has lane "bus" and its Bus field holds the routes and executions (see
// PublishedEvent). ErrNotFound if the id is unknown.
func (c *Client) EventFate(ctx context.Context, eventID string) (*EventRecord, error) {
	if !textOK(eventID, MaxIDBytes) {
		return nil, notFound("fate of event", eventID)
	}
	rec, err := idempotent(ctx, func() (*EventRecord, error) {
		return c.store.EventGet(ctx, &storage.EventGetParams{Tenant: c.tenant, EventID: eventID})
	})
	if errors.Is(err, heraldtype.ErrNotFound) {
		// Not an event sent to an instance: perhaps one published to the bus.
		if ev, busErr := c.PublishedEvent(ctx, eventID); busErr == nil {
			return busEventRecord(ev), nil
		} else if !errors.Is(busErr, heraldtype.ErrNotFound) {
			return nil, fmt.Errorf("fate of event %s: %w", eventID, busErr)
		}
	}
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
	p := &storage.EventListParams{Tenant: c.tenant, InstanceID: instanceID}
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
