package herald

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"go.opentelemetry.io/otel/attribute"

	"github.com/heraldwf/herald/bus"
	"github.com/heraldwf/herald/bus/jstarget"
	"github.com/heraldwf/herald/bus/pattern"
	"github.com/heraldwf/herald/bus/rule"
	"github.com/heraldwf/herald/heraldtype"
	"github.com/heraldwf/herald/storage"
)

// The event bus's client API (docs/bus.md): Publish, subscriptions,
// scripts, dead letters, attempt records and the fate of a published
// event. The runtime's side (routing, claiming, running targets) is in
// busworker.go.

// Bus limits.
const (
	// DefaultBusMaxBacklog is ClientConfig.BusMaxBacklog's default.
	DefaultBusMaxBacklog = 100_000
	// MaxScriptBytes caps a script's source.
	MaxScriptBytes = 256 << 10
	// DefaultMaxRetries is a subscription's MaxRetries when it sets none.
	DefaultMaxRetries = 3
	// MaxMaxRetries caps a subscription's MaxRetries (2^n s backoff: 20
	// retries already wait 12 days for the last one).
	MaxMaxRetries = 20
	// MaxSubscriptionTimeout caps a subscription's Timeout.
	MaxSubscriptionTimeout = 15 * time.Minute
	// MaxBusResultBytes caps the JSON result of an attempt (a script's
	// return value, a handler's result): a larger one is not stored, and
	// the attempt fails with kind resource.
	MaxBusResultBytes = 1 << 20
	// MaxBusErrorBytes caps the error message and the stack trace recorded
	// for a failed attempt (and its dead letter); longer ones are cut.
	MaxBusErrorBytes = 64 << 10
)

// Bus vocabulary (heraldtype).
type (
	PublishedEvent  = heraldtype.PublishedEvent
	BusFate         = heraldtype.BusFate
	Route           = heraldtype.Route
	Execution       = heraldtype.Execution
	ExecutionStatus = heraldtype.ExecutionStatus
	ErrorKind       = heraldtype.ErrorKind
	Attempt         = heraldtype.Attempt
	DeadLetter      = heraldtype.DeadLetter
	TargetKind      = heraldtype.TargetKind
	Target          = heraldtype.Target
	Subscription    = heraldtype.Subscription
	Script          = heraldtype.Script
	PublishReceipt  = heraldtype.PublishReceipt
	// Duration is a time.Duration that reads and writes JSON as "90s".
	Duration = heraldtype.Duration
)

// Bus fates, execution statuses, error kinds and target kinds
// (heraldtype).
const (
	BusRouting    = heraldtype.BusRouting
	BusNoMatch    = heraldtype.BusNoMatch
	BusFiltered   = heraldtype.BusFiltered
	BusInProgress = heraldtype.BusInProgress
	BusDone       = heraldtype.BusDone

	ExecQueued       = heraldtype.ExecQueued
	ExecRunning      = heraldtype.ExecRunning
	ExecRetrying     = heraldtype.ExecRetrying
	ExecSucceeded    = heraldtype.ExecSucceeded
	ExecDeadLettered = heraldtype.ExecDeadLettered

	ErrorTimeout    = heraldtype.ErrorTimeout
	ErrorRuntime    = heraldtype.ErrorRuntime
	ErrorResource   = heraldtype.ErrorResource
	ErrorPermanent  = heraldtype.ErrorPermanent
	ErrorValidation = heraldtype.ErrorValidation
	ErrorPermission = heraldtype.ErrorPermission

	TargetScript     = heraldtype.TargetScript
	TargetWorkflow   = heraldtype.TargetWorkflow
	TargetSignal     = heraldtype.TargetSignal
	TargetEnqueue    = heraldtype.TargetEnqueue
	TargetCorrelated = heraldtype.TargetCorrelated
	TargetHandler    = heraldtype.TargetHandler
)

// ErrBackPressure: Publish refused an event because the tenant's bus
// backlog is at ClientConfig.BusMaxBacklog; nothing was stored.
var ErrBackPressure = heraldtype.ErrBackPressure

// BusEvent is a published event as a Go handler receives it (and as a
// workflow started by the bus receives its input): the envelope
// {id, type, data, timestamp, source}.
type BusEvent = bus.Envelope

// ScriptSyntaxError is PutScript's refusal of a script that does not
// parse, with the line and column (from 1) of the problem. It matches
// ErrInvalidArgument.
type ScriptSyntaxError struct {
	ScriptID string
	Err      *jstarget.SyntaxError
}

func (e *ScriptSyntaxError) Error() string {
	return fmt.Sprintf("herald: script %q: %v", e.ScriptID, e.Err)
}

// ErrScriptSyntax matches a *ScriptSyntaxError (errors.Is), which also
// matches ErrInvalidArgument.
var ErrScriptSyntax = errors.New("herald: script syntax error")

// Is makes errors.Is(err, ErrInvalidArgument) and errors.Is(err,
// ErrScriptSyntax) true.
func (e *ScriptSyntaxError) Is(target error) bool {
	return target == ErrInvalidArgument || target == ErrScriptSyntax
}

// Unwrap returns the *jstarget.SyntaxError (Line, Column, Message).
func (e *ScriptSyntaxError) Unwrap() error { return e.Err }

// SubscriptionInvalidError lists every problem of a refused subscription:
// its id, pattern, target, retry and timeout settings, and each problem of
// its filter rules with the path of the offending node ($.conditions[1].op).
// It matches ErrInvalidArgument; errors.As also finds the filter's
// *rule.InvalidError when the filter was among the problems.
type SubscriptionInvalidError struct {
	ID       string
	Reasons  []string
	Filter   *rule.InvalidError // nil when the filter compiled
	Template error              // a template problem, if any
}

func (e *SubscriptionInvalidError) Error() string {
	return (&InvalidArgumentError{Op: "PutSubscription " + fmt.Sprintf("%.64q", e.ID), Reasons: e.Reasons}).Error()
}

// Is makes errors.Is(err, ErrInvalidArgument) true.
func (e *SubscriptionInvalidError) Is(target error) bool { return target == ErrInvalidArgument }

// Unwrap exposes the filter's own error to errors.As.
func (e *SubscriptionInvalidError) Unwrap() error {
	if e.Filter != nil {
		return e.Filter
	}
	return nil
}

// Publish publishes an event of eventType (dot-separated segments:
// "order.paid") with data (encoded as JSON) to the tenant's event bus and
// returns at once with a receipt: matching against subscriptions and the
// execution of their targets happen behind it, on the runtimes serving the
// tenant. WithEventID names the event (default: a new UUID); publishing an
// id again changes nothing and returns a receipt marked Duplicate, so a
// caller may retry freely. If an event definition named eventType exists,
// data must satisfy it (schema, size cap). The definition is cached: a
// publish reads it from the store at most about once a second; one put or
// deleted through this process applies to its next publish, one changed
// through another process within about a second.
//
// Errors: *EventInvalidError (ErrEventInvalid) for a malformed type or id,
// data that cannot be encoded, is too large or too deep, or fails the
// definition; ErrEventIDConflict for an id already published with another
// type; ErrBackPressure when the tenant's backlog is at
// ClientConfig.BusMaxBacklog (nothing stored: retry later).
func (c *Client) Publish(ctx context.Context, eventType string, data any, opts ...RaiseOption) (_ *PublishReceipt, err error) {
	var o raiseOptions
	for _, opt := range opts {
		opt(&o)
	}
	lim := c.door.limitsFor(ctx, c.tenant)
	raw, err := c.door.admitPublish(ctx, c.tenant, eventType, o.eventID, o.start, data, lim)
	if err != nil {
		return nil, err
	}
	id := o.eventID
	if id == "" {
		id = newID()
	}
	ctx, span := c.startSendSpan(ctx, "herald.publish", func() []attribute.KeyValue {
		return []attribute.KeyValue{attrEventType.String(eventType), attrEventID.String(id)}
	})
	defer func() { endSpan(span, err) }()
	if err := c.ensureTenant(ctx); err != nil {
		return nil, fmt.Errorf("publish %s: %w", eventType, err)
	}
	if err := c.backPressure(ctx); err != nil {
		c.cfg.Observer.BusPublished(BusPublishReport{Tenant: c.tenant, EventID: id, Type: eventType, Refused: true})
		return nil, err
	}
	tp := traceParent(span)
	res, err := idempotent(ctx, func() (*storage.BusPublished, error) {
		return c.store.BusPublish(ctx, &storage.BusPublishParams{Tenant: c.tenant, Now: c.cfg.Clock.Now(),
			Event: storage.BusPublishEvent{ID: id, Type: eventType, Data: raw, Source: "client", TraceParent: tp}})
	})
	if err != nil {
		return nil, fmt.Errorf("publish %s %s: %w", eventType, id, err)
	}
	if !res.Duplicate {
		c.backlogAdd(1)
	}
	c.cfg.Observer.BusPublished(BusPublishReport{Tenant: c.tenant, EventID: id, Type: eventType, Duplicate: res.Duplicate})
	return &PublishReceipt{EventID: id, Duplicate: res.Duplicate, PublishedAt: res.PublishedAt}, nil
}

// backlogCheckEvery is how stale the client's view of the tenant's bus
// backlog may get before Publish counts it again.
const backlogCheckEvery = time.Second

// busBacklog is a client's view of its tenant's bus backlog: counted by
// the store at most every backlogCheckEvery, plus what this client
// published since. The cap it enforces is therefore soft by what other
// clients publish within one such interval.
type busBacklog struct {
	mu      sync.Mutex
	counted time.Time
	n       int
}

func (c *Client) backPressure(ctx context.Context) error {
	max := c.cfg.BusMaxBacklog
	b := &c.backlog
	b.mu.Lock()
	defer b.mu.Unlock()
	if time.Since(b.counted) >= backlogCheckEvery || b.n >= max {
		n, err := c.store.BusBacklog(ctx, &storage.BusBacklogParams{Tenant: c.tenant, Limit: max})
		if err != nil {
			return fmt.Errorf("publish: count the bus backlog: %w", err)
		}
		b.n, b.counted = n, time.Now()
	}
	if b.n >= max {
		return fmt.Errorf("publish: the tenant's bus backlog has reached %d (ClientConfig.BusMaxBacklog): %w", max, ErrBackPressure)
	}
	return nil
}

func (c *Client) backlogAdd(n int) {
	c.backlog.mu.Lock()
	c.backlog.n += n
	c.backlog.mu.Unlock()
}

// PublishedEvent returns a published event with its fate: whether it has
// been routed yet; which subscriptions matched, which filtered it out (and
// by which condition), or that none matched (BusNoMatch); and for each
// execution whether it is queued, running, retrying (and when next),
// succeeded (with its result) or dead-lettered. ErrNotFound if the tenant
// has published no event with this id (or it was pruned after
// BusConfig.RecordRetention).
func (c *Client) PublishedEvent(ctx context.Context, eventID string) (*PublishedEvent, error) {
	if !textOK(eventID, MaxIDBytes) {
		return nil, notFound("published event", eventID)
	}
	ev, err := idempotent(ctx, func() (*PublishedEvent, error) {
		return c.store.BusEventGet(ctx, &storage.BusEventGetParams{Tenant: c.tenant, ID: eventID})
	})
	if err != nil {
		return nil, fmt.Errorf("published event %s: %w", eventID, err)
	}
	ev.Fate = busFate(ev)
	return ev, nil
}

// busFate derives a published event's fate from its routes.
func busFate(ev *PublishedEvent) BusFate {
	if ev.RoutedAt.IsZero() {
		return BusRouting
	}
	if len(ev.Routes) == 0 {
		return BusNoMatch
	}
	matched := false
	for _, r := range ev.Routes {
		if !r.Matched {
			continue
		}
		matched = true
		if r.Execution == nil || !r.Execution.Status.Terminal() {
			return BusInProgress
		}
	}
	if !matched {
		return BusFiltered
	}
	return BusDone
}

// busEventRecord answers EventFate for a published event: lane "bus",
// Name its type, fate pending while it is routed or runs, delivered once
// every execution ended, dropped (reason no_match or filtered) when no
// subscription took it; Bus holds the whole story.
func busEventRecord(ev *PublishedEvent) *EventRecord {
	rec := &EventRecord{EventID: ev.ID, Lane: heraldtype.LaneBus, Name: ev.Type, ReceivedAt: ev.PublishedAt,
		UpdatedAt: ev.PublishedAt, Bus: ev}
	if !ev.RoutedAt.IsZero() {
		rec.UpdatedAt = ev.RoutedAt
	}
	switch ev.Fate {
	case BusRouting, BusInProgress:
		rec.Fate = heraldtype.FatePending
	case BusDone:
		rec.Fate = heraldtype.FateDelivered
	case BusNoMatch:
		rec.Fate, rec.Reason = heraldtype.FateDropped, heraldtype.DropNoMatch
	case BusFiltered:
		rec.Fate, rec.Reason = heraldtype.FateDropped, heraldtype.DropFiltered
	}
	for _, r := range ev.Routes {
		if r.Execution != nil && r.Execution.UpdatedAt.After(rec.UpdatedAt) {
			rec.UpdatedAt = r.Execution.UpdatedAt
		}
	}
	return rec
}

// PutSubscription creates a subscription of the tenant or replaces every
// field of the one with its ID (its version goes up; CreatedAt is kept),
// and returns it as stored. Events published after it returns are matched
// against it; those published before are matched against the version in
// force when they were published (none, for a new subscription), even when
// they are routed later, and events already routed are not routed again
// (docs/bus.md, "Routing as of publish").
//
// It is validated first, and refused with a *SubscriptionInvalidError
// (ErrInvalidArgument) listing every problem, nothing stored: an id or
// pattern that breaks the rules (pattern: dot-separated segments, "*" for
// exactly one segment, a final ">" for one or more), filter rules that do
// not compile (unknown op, malformed field path, a value that does not fit
// its op, too deep or too large: docs/bus.md), a target of unknown kind or
// missing what its kind needs (a script id of a stored script, a workflow
// name, an event or queue name, a key or instance id template that does
// not parse), MaxRetries outside 0..MaxMaxRetries, a Timeout outside
// 0..MaxSubscriptionTimeout.
func (c *Client) PutSubscription(ctx context.Context, s Subscription) (*Subscription, error) {
	if err := c.validateSubscription(ctx, &s); err != nil {
		return nil, err
	}
	if err := c.ensureTenant(ctx); err != nil {
		return nil, fmt.Errorf("put subscription %s: %w", s.ID, err)
	}
	out, err := c.store.BusSubscriptionPut(ctx, &storage.BusSubscriptionPutParams{Tenant: c.tenant, Subscription: s,
		Now: c.cfg.Clock.Now()})
	if err != nil {
		return nil, fmt.Errorf("put subscription %s: %w", s.ID, err)
	}
	return out, nil
}

func (c *Client) validateSubscription(ctx context.Context, s *Subscription) error {
	e := &SubscriptionInvalidError{ID: s.ID}
	e.Reasons = textReasons(e.Reasons, "id", s.ID, MaxIDBytes)
	if err := pattern.ValidatePattern(s.Pattern); err != nil {
		e.Reasons = append(e.Reasons, "pattern: "+err.Error())
	}
	if _, err := rule.Compile(s.Filter); err != nil {
		var ie *rule.InvalidError
		if errors.As(err, &ie) {
			e.Filter = ie
			for _, p := range ie.Problems {
				e.Reasons = append(e.Reasons, "filter "+p.Path+": "+p.Message)
			}
		} else {
			e.Reasons = append(e.Reasons, "filter: "+err.Error())
		}
	}
	if s.MaxRetries != nil && (*s.MaxRetries < 0 || *s.MaxRetries > MaxMaxRetries) {
		e.Reasons = append(e.Reasons, fmt.Sprintf("max_retries %d is outside 0..%d", *s.MaxRetries, MaxMaxRetries))
	}
	if s.Timeout < 0 || time.Duration(s.Timeout) > MaxSubscriptionTimeout {
		e.Reasons = append(e.Reasons, fmt.Sprintf("timeout %v is outside 0..%v", time.Duration(s.Timeout), MaxSubscriptionTimeout))
	}
	e.Reasons = c.targetReasons(ctx, e, s.Target)
	if len(e.Reasons) > 0 {
		return e
	}
	return nil
}

func (c *Client) targetReasons(ctx context.Context, e *SubscriptionInvalidError, t Target) []string {
	ps := e.Reasons
	tmpl := func(field, text string, required bool) {
		if text == "" {
			if required {
				ps = append(ps, "target."+field+" is required for a "+string(t.Kind)+" target")
			}
			return
		}
		if _, err := bus.ParseTemplate(text); err != nil {
			ps = append(ps, "target."+field+": "+err.Error())
			if e.Template == nil {
				e.Template = err
			}
		}
	}
	name := func(field, v string) {
		if v == "" {
			ps = append(ps, "target."+field+" is required for a "+string(t.Kind)+" target")
			return
		}
		ps = textReasons(ps, "target."+field, v, MaxNameBytes)
	}
	unused := func(fields map[string]string) {
		for f, v := range fields {
			if v != "" {
				ps = append(ps, "target."+f+" does not apply to a "+string(t.Kind)+" target")
			}
		}
	}
	switch t.Kind {
	case TargetScript:
		ps = textReasons(ps, "target.script", t.Script, MaxIDBytes)
		if textOK(t.Script, MaxIDBytes) {
			if _, err := c.store.BusScriptGet(ctx, &storage.BusScriptGetParams{Tenant: c.tenant, ID: t.Script}); err != nil {
				ps = append(ps, fmt.Sprintf("target.script %q: %v", t.Script, err))
			}
		}
		unused(map[string]string{"workflow": t.Workflow, "instance_id": t.InstanceID, "name": t.Name, "key": t.Key, "handler": t.Handler})
	case TargetWorkflow:
		name("workflow", t.Workflow)
		tmpl("instance_id", t.InstanceID, false)
		unused(map[string]string{"script": t.Script, "name": t.Name, "key": t.Key, "handler": t.Handler})
	case TargetSignal, TargetEnqueue:
		name("name", t.Name)
		tmpl("instance_id", t.InstanceID, true)
		unused(map[string]string{"script": t.Script, "workflow": t.Workflow, "key": t.Key, "handler": t.Handler})
	case TargetCorrelated:
		name("name", t.Name)
		tmpl("key", t.Key, true)
		unused(map[string]string{"script": t.Script, "workflow": t.Workflow, "instance_id": t.InstanceID, "handler": t.Handler})
	case TargetHandler:
		name("handler", t.Handler)
		unused(map[string]string{"script": t.Script, "workflow": t.Workflow, "instance_id": t.InstanceID, "name": t.Name, "key": t.Key})
	case "":
		ps = append(ps, "target.kind is required (script, workflow, signal, enqueue, correlated or handler)")
	default:
		ps = append(ps, fmt.Sprintf("target.kind %.64q is not one of script, workflow, signal, enqueue, correlated, handler", t.Kind))
	}
	return ps
}

// Subscription returns a subscription of the tenant, or ErrNotFound.
func (c *Client) Subscription(ctx context.Context, id string) (*Subscription, error) {
	if !textOK(id, MaxIDBytes) {
		return nil, notFound("subscription", id)
	}
	s, err := c.store.BusSubscriptionGet(ctx, &storage.BusSubscriptionGetParams{Tenant: c.tenant, ID: id})
	if err != nil {
		return nil, fmt.Errorf("subscription %s: %w", id, err)
	}
	return s, nil
}

// Subscriptions lists the tenant's subscriptions, ordered by id.
func (c *Client) Subscriptions(ctx context.Context) ([]*Subscription, error) {
	subs, _, err := c.store.BusSubscriptionList(ctx, &storage.BusTenantParams{Tenant: c.tenant})
	if err != nil {
		return nil, fmt.Errorf("list subscriptions: %w", err)
	}
	return subs, nil
}

// SetSubscriptionEnabled enables or disables a subscription without
// deleting it: a disabled one matches no new event (executions it already
// queued still run). ErrNotFound if there is none.
func (c *Client) SetSubscriptionEnabled(ctx context.Context, id string, enabled bool) (*Subscription, error) {
	s, err := c.Subscription(ctx, id)
	if err != nil {
		return nil, err
	}
	if s.Enabled == enabled {
		return s, nil
	}
	s.Enabled = enabled
	out, err := c.store.BusSubscriptionPut(ctx, &storage.BusSubscriptionPutParams{Tenant: c.tenant, Subscription: *s,
		Now: c.cfg.Clock.Now()})
	if err != nil {
		return nil, fmt.Errorf("set subscription %s enabled=%v: %w", id, enabled, err)
	}
	return out, nil
}

// DeleteSubscription deletes a subscription; its executions, attempt
// records and dead letters stay (an execution still queued then ends in
// the dead-letter queue, kind permission). Events published before the
// delete and not yet routed are still matched against it. ErrNotFound if
// there is none.
func (c *Client) DeleteSubscription(ctx context.Context, id string) error {
	if !textOK(id, MaxIDBytes) {
		return notFound("subscription", id)
	}
	if err := c.store.BusSubscriptionDelete(ctx, &storage.BusSubscriptionGetParams{Tenant: c.tenant, ID: id}); err != nil {
		return fmt.Errorf("delete subscription %s: %w", id, err)
	}
	return nil
}

// PutScript saves a new version of the tenant's script id (version 1 for
// a new id) and returns it. The source is the body of a function run in
// strict mode (docs/bus.md: what a script sees and may do); it is
// compiled first and refused with a *ScriptSyntaxError (line and column)
// if it does not parse, or an *InvalidArgumentError for a bad id or a
// source over MaxScriptBytes. Executions run the latest version at the
// time of each attempt.
func (c *Client) PutScript(ctx context.Context, id, source string) (*Script, error) {
	var ps []string
	ps = textReasons(ps, "script id", id, MaxIDBytes)
	if len(source) > MaxScriptBytes {
		ps = append(ps, fmt.Sprintf("source is %d bytes, over the %d-byte cap", len(source), MaxScriptBytes))
	} else if !cleanText(source) {
		ps = append(ps, "source is not valid UTF-8 or contains a NUL byte")
	}
	if len(ps) > 0 {
		return nil, &InvalidArgumentError{Op: "PutScript", Reasons: ps}
	}
	if _, err := jstarget.Compile(id, source); err != nil {
		var se *jstarget.SyntaxError
		if errors.As(err, &se) {
			return nil, &ScriptSyntaxError{ScriptID: id, Err: se}
		}
		return nil, &InvalidArgumentError{Op: "PutScript", Reasons: []string{err.Error()}}
	}
	if err := c.ensureTenant(ctx); err != nil {
		return nil, fmt.Errorf("put script %s: %w", id, err)
	}
	s, err := c.store.BusScriptPut(ctx, &storage.BusScriptPutParams{Tenant: c.tenant, ID: id, Source: source,
		Now: c.cfg.Clock.Now()})
	if err != nil {
		return nil, fmt.Errorf("put script %s: %w", id, err)
	}
	return s, nil
}

// Script returns a version of a script (0: the latest), or ErrNotFound.
func (c *Client) Script(ctx context.Context, id string, version int) (*Script, error) {
	if !textOK(id, MaxIDBytes) || version < 0 {
		return nil, notFound("script", id)
	}
	s, err := c.store.BusScriptGet(ctx, &storage.BusScriptGetParams{Tenant: c.tenant, ID: id, Version: version})
	if err != nil {
		return nil, fmt.Errorf("script %s: %w", id, err)
	}
	return s, nil
}

// Scripts lists the latest version of each of the tenant's scripts.
func (c *Client) Scripts(ctx context.Context) ([]*Script, error) {
	s, err := c.store.BusScriptList(ctx, &storage.BusTenantParams{Tenant: c.tenant})
	if err != nil {
		return nil, fmt.Errorf("list scripts: %w", err)
	}
	return s, nil
}

// DeleteScript deletes every version of a script. Executions of
// subscriptions that still name it then end in the dead-letter queue
// (kind permission). ErrNotFound if there is none.
func (c *Client) DeleteScript(ctx context.Context, id string) error {
	if !textOK(id, MaxIDBytes) {
		return notFound("script", id)
	}
	if err := c.store.BusScriptDelete(ctx, &storage.BusScriptGetParams{Tenant: c.tenant, ID: id}); err != nil {
		return fmt.Errorf("delete script %s: %w", id, err)
	}
	return nil
}

// DeadLetterFilter selects dead letters. Zero fields do not filter.
type DeadLetterFilter struct {
	Subscription string
	EventType    string
	ErrorKind    ErrorKind
	// IncludeReprocessed lists letters that were reprocessed too (they
	// are kept as the link to the failure); by default only letters
	// waiting for a decision are listed and touched.
	IncludeReprocessed bool
	// IDs restricts to these letters (at most MaxListLimit).
	IDs []int64
	// Limit is the page size of DeadLetters (default 100, at most 1000).
	Limit int
	// Cursor is a page's NextCursor (0: the newest letters first).
	Cursor int64
}

// DeadLetterPage is a page of dead letters, newest first.
type DeadLetterPage struct {
	Letters []*DeadLetter `json:"letters"`
	// NextCursor continues the list (0: this page is the last).
	NextCursor int64 `json:"next_cursor,omitempty"`
}

func (f DeadLetterFilter) store() (storage.BusDeadLetterFilter, error) {
	var ps []string
	if f.Subscription != "" {
		ps = textReasons(ps, "subscription", f.Subscription, MaxIDBytes)
	}
	if f.EventType != "" {
		ps = textReasons(ps, "event type", f.EventType, MaxNameBytes)
	}
	if f.Limit < 0 || f.Limit > MaxListLimit {
		ps = append(ps, fmt.Sprintf("limit %d is outside 0..%d", f.Limit, MaxListLimit))
	}
	if f.Cursor < 0 {
		ps = append(ps, "cursor is negative")
	}
	if len(f.IDs) > MaxListLimit {
		ps = append(ps, fmt.Sprintf("%d ids, more than %d", len(f.IDs), MaxListLimit))
	}
	if len(ps) > 0 {
		return storage.BusDeadLetterFilter{}, &InvalidArgumentError{Op: "DeadLetterFilter", Reasons: ps}
	}
	sf := storage.BusDeadLetterFilter{Subscription: f.Subscription, EventType: f.EventType, ErrorKind: f.ErrorKind, IDs: f.IDs}
	if !f.IncludeReprocessed {
		no := false
		sf.Reprocessed = &no
	}
	return sf, nil
}

// DeadLetters lists the tenant's dead letters, newest first, a page at a
// time.
func (c *Client) DeadLetters(ctx context.Context, f DeadLetterFilter) (*DeadLetterPage, error) {
	sf, err := f.store()
	if err != nil {
		return nil, err
	}
	letters, next, err := c.store.BusDeadLetterList(ctx, &storage.BusDeadLetterListParams{Tenant: c.tenant, Filter: sf,
		Limit: f.Limit, Before: f.Cursor})
	if err != nil {
		return nil, fmt.Errorf("list dead letters: %w", err)
	}
	return &DeadLetterPage{Letters: letters, NextCursor: next}, nil
}

// DeadLetterByID returns one dead letter with its error, stack trace,
// attempts and the event's type and data, or ErrNotFound.
func (c *Client) DeadLetterByID(ctx context.Context, id int64) (*DeadLetter, error) {
	d, err := c.store.BusDeadLetterGet(ctx, &storage.BusDeadLetterGetParams{Tenant: c.tenant, ID: id})
	if err != nil {
		return nil, fmt.Errorf("dead letter %d: %w", id, err)
	}
	return d, nil
}

// ReprocessDeadLetters queues the executions of the dead letters f selects
// again (every one that waits for a decision when f is zero): attempts
// start from zero, the subscription's current target runs (a script's
// latest version), and each letter is kept, marked reprocessed, as the link
// to the failure. It returns how many it queued. It takes the letters
// selected when it starts: one written while it runs (an execution it queued
// that failed again) waits for the next call.
func (c *Client) ReprocessDeadLetters(ctx context.Context, f DeadLetterFilter) (int, error) {
	return c.deadLetterBulk(ctx, f, "reprocess", c.store.BusDeadLetterReprocess)
}

// DeleteDeadLetters deletes the dead letters f selects and returns how
// many. Their executions stay dead-lettered.
func (c *Client) DeleteDeadLetters(ctx context.Context, f DeadLetterFilter) (int, error) {
	return c.deadLetterBulk(ctx, f, "delete", c.store.BusDeadLetterDelete)
}

func (c *Client) deadLetterBulk(ctx context.Context, f DeadLetterFilter, what string,
	op func(context.Context, *storage.BusDeadLetterOpParams) (int, error)) (int, error) {
	sf, err := f.store()
	if err != nil {
		return 0, err
	}
	// Fence the selection at the newest matching letter now: a reprocessed
	// execution that fails again during the call writes a new letter, which
	// a later batch would otherwise take (and count) again.
	newest, _, err := c.store.BusDeadLetterList(ctx, &storage.BusDeadLetterListParams{Tenant: c.tenant, Filter: sf, Limit: 1})
	if err != nil {
		return 0, fmt.Errorf("%s dead letters: %w", what, err)
	}
	if len(newest) == 0 {
		return 0, nil
	}
	sf.Through = newest[0].ID
	total := 0
	for {
		n, err := op(ctx, &storage.BusDeadLetterOpParams{Tenant: c.tenant, Filter: sf, Limit: deadLetterBatch, Now: c.cfg.Clock.Now()})
		total += n
		if err != nil {
			return total, fmt.Errorf("%s dead letters: %w", what, err)
		}
		// A reprocessed letter no longer matches Reprocessed=false and a
		// deleted one is gone, so the next call takes the next batch; a
		// batch short of the limit was the last.
		if n < deadLetterBatch || sf.Reprocessed == nil {
			return total, nil
		}
	}
}

// deadLetterBatch is how many letters one store call of a bulk dead-letter
// operation takes (a variable so that tests can make batches small).
var deadLetterBatch = 1000

// AttemptFilter selects attempt records: at least one of EventID,
// Subscription and Execution.
type AttemptFilter struct {
	EventID      string
	Subscription string
	Execution    int64
	Limit        int   // default 100, at most 1000
	Cursor       int64 // a page's NextCursor
}

// AttemptPage is a page of attempt records, oldest first.
type AttemptPage struct {
	Attempts   []*Attempt `json:"attempts"`
	NextCursor int64      `json:"next_cursor,omitempty"`
}

// Attempts lists the record of every attempt of the executions f selects:
// status, attempt number, start, duration, result or error (kind, message,
// stack) and a script's log lines. Records are kept for
// BusConfig.RecordRetention after their event ended.
func (c *Client) Attempts(ctx context.Context, f AttemptFilter) (*AttemptPage, error) {
	var ps []string
	if f.EventID == "" && f.Subscription == "" && f.Execution == 0 {
		ps = append(ps, "name an event, a subscription or an execution")
	}
	if f.Limit < 0 || f.Limit > MaxListLimit {
		ps = append(ps, fmt.Sprintf("limit %d is outside 0..%d", f.Limit, MaxListLimit))
	}
	if f.Cursor < 0 {
		ps = append(ps, "cursor is negative")
	}
	if len(ps) > 0 {
		return nil, &InvalidArgumentError{Op: "Attempts", Reasons: ps}
	}
	if (f.EventID != "" && !textOK(f.EventID, MaxIDBytes)) || (f.Subscription != "" && !textOK(f.Subscription, MaxIDBytes)) {
		return &AttemptPage{}, nil
	}
	as, next, err := c.store.BusAttemptList(ctx, &storage.BusAttemptListParams{Tenant: c.tenant, EventID: f.EventID,
		Subscription: f.Subscription, Execution: f.Execution, Limit: f.Limit, After: f.Cursor})
	if err != nil {
		return nil, fmt.Errorf("list attempts: %w", err)
	}
	return &AttemptPage{Attempts: as, NextCursor: next}, nil
}
