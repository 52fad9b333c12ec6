package herald

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/heraldwf/herald/bus/pattern"
	"github.com/heraldwf/herald/heraldtype"
	"github.com/heraldwf/herald/history"
	"github.com/heraldwf/herald/storage"
)

// admission is the door every event passes on its way in, exactly once:
// a client's sends (RaiseEvent, Enqueue, StartIfAbsent), publishes and
// correlated puts, the events a turn sends, and the bus's deliveries to
// lanes, workflows and correlated events. It applies the rules in one
// order:
//
//  1. text rules (storage.TextProblem) of the target, the name and the id;
//  2. JSON encoding, UTF-8 and depth of the payload (the tenant's depth);
//  3. the event's definition, looked up through the definition cache
//     (defCache: how fresh an entry must be depends on the entry point, see
//     defLookup);
//  4. the size cap (the definition's, else the tenant's, else the
//     config's) and the definition's schema;
//  5. latest-value buffering and retention (the definition's, else the
//     tenant's, else the config's).
//
// The tenant limits (limitCache) are read once per event, before 2. A
// refused event is answered with a typed error (*EventInvalidError,
// *DefinitionInvalidError) and nothing is stored.
//
// A runtime has one admission, shared by its clients, its turns and its
// bus; a NewClient has its own.
type admission struct {
	store  storage.Store
	cfg    *ClientConfig
	limits *limitCache
	defs   *defCache
	// onAdmit, when set (tests, before the runtime starts), is called each
	// time an event is checked against its definition (step 3 to 5).
	onAdmit func(tenant, name string)
}

func newAdmission(store storage.Store, cfg *ClientConfig, limits *limitCache, defs *defCache) *admission {
	return &admission{store: store, cfg: cfg, limits: limits, defs: defs}
}

// clientLimits are the limits the door applies to one event: the tenant's
// overrides, else the config's.
type clientLimits struct {
	maxPayloadBytes int
	maxPayloadDepth int
	eventRetention  time.Duration
}

func (a *admission) limitsFor(ctx context.Context, tenant string) clientLimits {
	l := a.limits.get(ctx, tenant)
	return clientLimits{
		maxPayloadBytes: override(l.MaxPayloadBytes, a.cfg.MaxPayloadBytes),
		maxPayloadDepth: lowerDepth(l.MaxPayloadDepth, a.cfg.MaxPayloadDepth),
		eventRetention:  override(l.EventRetention, a.cfg.EventRetention),
	}
}

// defLookup says how fresh the definition an event is checked against
// must be.
type defLookup int

const (
	// defCached: the cached entry, whatever its age. Only for a store
	// write conditional on the entry's version (EventRaiseParams
	// .CheckDefinition), which the store refuses if the definition changed
	// since (see defCache).
	defCached defLookup = iota
	// defFresh: the cached entry if it was read within defFreshFor on the
	// engine's clock, else a read. For a publish, whose store write is not
	// conditional: a definition changed through this process applies at
	// once (PutEventDefinition drops the entry), one changed through
	// another within about defFreshFor.
	defFresh
	// defRead: read from the store (and cached). For a turn's sends and
	// correlated puts, whose writes are not conditional.
	defRead
)

// defFreshFor is how old a cached definition a publish may be checked
// against (defFresh).
const defFreshFor = limitsTTL

// laneEvent is an event entering a lane of an instance: a client's send or
// a bus delivery.
type laneEvent struct {
	tenant     string
	lane       history.Lane
	instanceID string
	name       string
	eventID    string // "": a new id
	payload    any    // encoded as JSON (a json.RawMessage as it is)
	start      bool   // StartIfAbsent
	workflow   string // StartIfAbsent's
	startInput any    // StartIfAbsent's
}

// checkLane applies the text and JSON rules (steps 1 and 2) to ev and
// encodes its payload and start input. Every problem found is listed in
// one *EventInvalidError.
func (a *admission) checkLane(ev *laneEvent, lim clientLimits) (raw, startInput json.RawMessage, err error) {
	var reasons []string
	reasons = textReasons(reasons, "instance id", ev.instanceID, MaxIDBytes)
	reasons = textReasons(reasons, "event name", ev.name, MaxNameBytes)
	if ev.eventID != "" {
		reasons = textReasons(reasons, "event id", ev.eventID, MaxIDBytes)
	}
	raw, reasons = encodeJSON(reasons, "payload", ev.payload, lim.maxPayloadDepth)
	if ev.start {
		reasons = textReasons(reasons, "StartIfAbsent workflow name", ev.workflow, MaxNameBytes)
		startInput, reasons = encodeJSON(reasons, "StartIfAbsent input", ev.startInput, lim.maxPayloadDepth)
	}
	if len(reasons) > 0 {
		return nil, nil, &EventInvalidError{Name: ev.name, Reasons: reasons}
	}
	return raw, startInput, nil
}

// raiseFunc stores a checked event: the store's EventRaise, or a client's
// raise with its direct hand-off.
type raiseFunc func(context.Context, *storage.EventRaiseParams) (*storage.EventRaiseResult, error)

// sendLane admits ev (already through checkLane: raw and startInput are
// its encodings, id its event id) and stores it with raise, conditional on
// the definition it was checked against: if that changed meanwhile, it is
// checked against the new one and raised again. An event id the caller
// chose (dedup) that was accepted before is answered first, even if the
// definition changed since: dedup comes before validation (the store
// checks again, atomically). It reports the event to the Observer.
func (a *admission) sendLane(ctx context.Context, ev *laneEvent, id string, dedup bool, raw, startInput json.RawMessage,
	lim clientLimits, traceParent string, raise raiseFunc) (*EventReceipt, error) {
	if dedup {
		rec, err := a.store.EventGet(ctx, &storage.EventGetParams{Tenant: ev.tenant, EventID: id})
		switch {
		case err == nil && rec.InstanceID == ev.instanceID && rec.Lane == ev.lane && rec.Name == ev.name:
			a.cfg.Observer.EventAccepted(EventReport{Tenant: ev.tenant, InstanceID: ev.instanceID, EventID: id,
				Lane: string(ev.lane), Name: ev.name, Duplicate: true})
			return &EventReceipt{EventID: id, ReceivedAt: rec.ReceivedAt, Duplicate: true}, nil
		case err == nil:
			return nil, fmt.Errorf("send %s %q to %s: event id %s: %w", ev.lane, ev.name, ev.instanceID, id, heraldtype.ErrEventIDConflict)
		case !errors.Is(err, heraldtype.ErrNotFound):
			return nil, fmt.Errorf("send %s %q to %s: %w", ev.lane, ev.name, ev.instanceID, err)
		}
	}
	now := a.cfg.Clock.Now()
	p := &storage.EventRaiseParams{
		Tenant: ev.tenant, InstanceID: ev.instanceID, EventID: id, Lane: ev.lane,
		Name: ev.name, Payload: raw, Now: now, TraceParent: traceParent,
	}
	def, err := a.admitRaise(ctx, p, lim, defCached, nil)
	if err != nil {
		return nil, err
	}
	if ev.start {
		p.StartIfAbsent = &storage.InstanceCreateParams{Tenant: ev.tenant, ID: ev.instanceID,
			Workflow: ev.workflow, Input: startInput, Now: now, TraceParent: traceParent}
	}
	var res *storage.EventRaiseResult
	for attempt := 1; ; attempt++ {
		// Stored only if the definition is still the one the event was
		// checked against (see defCache).
		p.CheckDefinition, p.DefinitionVersion = true, def.version
		res, err = raise(ctx, p)
		if !errors.Is(err, storage.ErrDefinitionChanged) {
			break
		}
		// Changed since it was read (by another process, or by this one
		// during the send): read it again and check against it.
		if attempt == maxDefinitionAttempts {
			a.defs.drop(defKey{ev.tenant, ev.name}, def)
			return nil, fmt.Errorf("send %s %q to %s: the event's definition changed under each of %d attempts: %w",
				ev.lane, ev.name, ev.instanceID, attempt, err)
		}
		if def, err = a.admitRaise(ctx, p, lim, defCached, def); err != nil {
			return nil, err
		}
	}
	if err != nil {
		return nil, fmt.Errorf("send %s %q to %s: %w", ev.lane, ev.name, ev.instanceID, err)
	}
	a.cfg.Observer.EventAccepted(EventReport{Tenant: ev.tenant, InstanceID: ev.instanceID, EventID: res.EventID,
		Lane: string(ev.lane), Name: ev.name, Duplicate: res.Duplicate})
	return &EventReceipt{EventID: res.EventID, ReceivedAt: res.ReceivedAt, Duplicate: res.Duplicate, Started: res.Started}, nil
}

// maxDefinitionAttempts bounds the raises of one send refused because the
// event's definition changed (storage.ErrDefinitionChanged): each refusal
// means the definition changed again since the send last read it.
const maxDefinitionAttempts = 4

// admitRaise checks p (steps 3 to 5) against the definition of its event,
// looked up as how says, fills in what the definition decides (p.Latest,
// p.ExpiresAt) and returns the definition, which p's raise may be made
// conditional on. refused is an entry the store refused a raise
// conditional on (it changed): it is read again. A cached entry may be out
// of date, so a refusal by one stands only once the definition has been
// read again: an event is refused only by a definition that was current
// during the send.
func (a *admission) admitRaise(ctx context.Context, p *storage.EventRaiseParams, lim clientLimits, how defLookup, refused *defEntry) (*defEntry, error) {
	if a.onAdmit != nil {
		a.onAdmit(p.Tenant, p.Name)
	}
	key := defKey{p.Tenant, p.Name}
	def, cached, err := a.definition(ctx, key, how, refused)
	if err != nil {
		return nil, err
	}
	err = a.applyDefinition(p, def.def, lim)
	if err != nil && cached {
		if def, err = a.reload(ctx, key, def); err != nil {
			return nil, err
		}
		err = a.applyDefinition(p, def.def, lim)
	}
	if err != nil {
		return nil, err
	}
	return def, nil
}

// definition looks up k's definition as how says (refused: an entry to
// read again); cached reports that it came from the cache.
func (a *admission) definition(ctx context.Context, k defKey, how defLookup, refused *defEntry) (_ *defEntry, cached bool, _ error) {
	var (
		def *defEntry
		err error
	)
	switch {
	case refused != nil:
		def, err = a.defs.reload(ctx, a.store, k, refused)
	case how == defRead:
		// A read that replaces the entry, not a drop: a drop would keep
		// the concurrent sends' reads from being cached.
		def, _, err = a.defs.fresh(ctx, a.store, k, 0)
	case how == defFresh:
		def, cached, err = a.defs.fresh(ctx, a.store, k, defFreshFor)
	default:
		def, cached, err = a.defs.get(ctx, a.store, k)
	}
	if err != nil {
		return nil, false, fmt.Errorf("event definition %s: %w", k.name, err)
	}
	return def, cached, nil
}

func (a *admission) reload(ctx context.Context, k defKey, old *defEntry) (*defEntry, error) {
	def, err := a.defs.reload(ctx, a.store, k, old)
	if err != nil {
		return nil, fmt.Errorf("event definition %s: %w", k.name, err)
	}
	return def, nil
}

// applyDefinition checks an event against its definition def (nil: none)
// and fills in what the definition decides (latest-value buffering,
// retention). It returns an *EventInvalidError for a payload the
// definition (or, without one, the size cap) refuses.
func (a *admission) applyDefinition(p *storage.EventRaiseParams, def *EventDefinition, lim clientLimits) error {
	retention := lim.eventRetention
	p.Latest = false
	if err := a.checkPayload(p.Name, "payload", def, p.Payload, lim.maxPayloadBytes); err != nil {
		return err
	}
	if def != nil {
		p.Latest = p.Lane == history.LaneQueue && def.Buffer == heraldtype.BufferLatest
		if def.Retention > 0 {
			retention = def.Retention
		}
	}
	p.ExpiresAt = p.Now.Add(retention)
	return nil
}

// checkPayload checks a payload (what: "payload", "data") of the event
// name against its definition def (nil: none): the size cap (the
// definition's, else maxPayloadBytes: the tenant's or the config's) and
// the schema. It returns nil if the payload is fine, an *EventInvalidError
// (Kind EventTooLarge or EventSchemaViolation) if it is refused, or a
// *DefinitionInvalidError if the schema cannot be used.
func (a *admission) checkPayload(name, what string, def *EventDefinition, payload []byte, maxPayloadBytes int) error {
	limit := maxPayloadBytes
	if def != nil && def.MaxPayloadBytes > 0 {
		limit = def.MaxPayloadBytes
	}
	if len(payload) > limit {
		return &EventInvalidError{Name: name, Kind: EventTooLarge, Reasons: []string{
			fmt.Sprintf("%s is %d bytes, over the %d-byte cap", what, len(payload), limit)}}
	}
	if def == nil || len(def.Schema) == 0 {
		return nil
	}
	sch, err := compileSchema(def.Schema, a.cfg.MaxSchemaBytes)
	if err != nil {
		return &DefinitionInvalidError{Name: def.Name, Reasons: []string{
			fmt.Sprintf("the stored definition (updated %s) cannot be used: schema: %v", def.UpdatedAt.Format(time.RFC3339), err)}}
	}
	inst, err := jsonschema.UnmarshalJSON(bytes.NewReader(payload))
	if err != nil {
		return &EventInvalidError{Name: def.Name, Reasons: []string{what + " is not valid JSON"}}
	}
	reasons, err := validatePayload(def.Name, sch, inst)
	if err != nil {
		return err
	}
	if len(reasons) > 0 {
		return &EventInvalidError{Name: def.Name, Kind: EventSchemaViolation, Reasons: reasons}
	}
	return nil
}

// admitPublish admits an event published to the tenant's bus: its type
// and id (steps 1), its data (2), and the definition named by its type, if
// any (3, 4; defFresh). It returns the encoded data.
func (a *admission) admitPublish(ctx context.Context, tenant, eventType, eventID string, start bool, data any, lim clientLimits) (json.RawMessage, error) {
	var reasons []string
	if err := pattern.ValidateEventType(eventType); err != nil {
		reasons = append(reasons, "event type: "+err.Error())
	}
	if eventID != "" {
		reasons = textReasons(reasons, "event id", eventID, MaxIDBytes)
	}
	if start {
		reasons = append(reasons, "StartIfAbsent does not apply to Publish (a subscription with a workflow target starts workflows)")
	}
	raw, reasons := encodeJSON(reasons, "data", data, lim.maxPayloadDepth)
	if len(reasons) > 0 {
		return nil, &EventInvalidError{Name: eventType, Reasons: reasons}
	}
	if a.onAdmit != nil {
		a.onAdmit(tenant, eventType)
	}
	key := defKey{tenant, eventType}
	def, cached, err := a.definition(ctx, key, defFresh, nil)
	if err != nil {
		return nil, err
	}
	err = a.checkPayload(eventType, "data", def.def, raw, lim.maxPayloadBytes)
	if err != nil && cached {
		if def, err = a.reload(ctx, key, def); err != nil {
			return nil, err
		}
		err = a.checkPayload(eventType, "data", def.def, raw, lim.maxPayloadBytes)
	}
	if err != nil {
		return nil, err
	}
	return raw, nil
}

// admitCorrelated admits a correlated put: its definition name and key
// (1), its payload (2), and its definition (3, 4; defRead), which must
// exist and have a correlation config. It returns the encoded payload and
// the definition.
func (a *admission) admitCorrelated(ctx context.Context, tenant, name, key string, payload any, lim clientLimits) (json.RawMessage, *EventDefinition, error) {
	var reasons []string
	reasons = textReasons(reasons, "event definition name", name, MaxNameBytes)
	reasons = textReasons(reasons, "correlation key", key, MaxKeyBytes)
	raw, reasons := encodeJSON(reasons, "payload", payload, lim.maxPayloadDepth)
	if len(reasons) > 0 {
		return nil, nil, &EventInvalidError{Name: name, Reasons: reasons}
	}
	if a.onAdmit != nil {
		a.onAdmit(tenant, name)
	}
	def, _, err := a.definition(ctx, defKey{tenant, name}, defRead, nil)
	switch {
	case err != nil:
		return nil, nil, err
	case def.def == nil:
		return nil, nil, &EventInvalidError{Name: name, Reasons: []string{"no event definition " + name + ": correlated events need one with a correlation config"}}
	case def.def.Correlation == nil:
		return nil, nil, &EventInvalidError{Name: name, Reasons: []string{"event definition " + name + " has no correlation config"}}
	}
	if err := a.checkPayload(name, "payload", def.def, raw, lim.maxPayloadBytes); err != nil {
		return nil, nil, err
	}
	return raw, def.def, nil
}

// admitTurnSends admits the events a turn sends (their text and JSON were
// checked by the workflow's Context calls): steps 3 to 5, each definition
// read from the store (defRead: a turn's sends are not conditional on a
// definition version), and gives them the turn's trace context. refused is
// the first event refused (the instance is to fail with it); err is a
// store error (the turn is to be retried).
func (a *admission) admitTurnSends(ctx context.Context, tenant string, sends []storage.TurnSend, traceParent string) (refused, err error) {
	if len(sends) == 0 {
		return nil, nil
	}
	lim := a.limitsFor(ctx, tenant)
	now := a.cfg.Clock.Now()
	for i := range sends {
		s := &sends[i]
		s.TraceParent = traceParent
		p := storage.EventRaiseParams{Tenant: tenant, InstanceID: s.InstanceID, EventID: s.EventID, Lane: s.Lane,
			Name: s.Name, Payload: s.Payload, Now: now}
		if _, err := a.admitRaise(ctx, &p, lim, defRead, nil); err != nil {
			var ei *EventInvalidError
			var di *DefinitionInvalidError
			if errors.As(err, &ei) || errors.As(err, &di) {
				return fmt.Errorf("send %s %q to %s (event %s): %w", s.Lane, s.Name, s.InstanceID, s.EventID, err), nil
			}
			return nil, err
		}
		s.Latest, s.ExpiresAt = p.Latest, p.ExpiresAt
	}
	return nil, nil
}
