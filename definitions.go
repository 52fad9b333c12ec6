package herald

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/google/uuid"
	"github.com/santhosh-tekuri/jsonschema/v6"
	"golang.org/x/text/language"
	"golang.org/x/text/message"

	"github.com/heraldwf/herald/heraldtype"
	"github.com/heraldwf/herald/history"
	"github.com/heraldwf/herald/internal/schema"
	"github.com/heraldwf/herald/storage"
)

// ErrDefinitionInvalid: PutEventDefinition was given a definition that
// cannot be used (empty name, unknown buffer policy, a schema that cannot be
// used, negative retention or cap); nothing was stored. An event whose
// stored definition's schema cannot be used (put before these checks, or
// through a client with a larger Config.MaxSchemaBytes) is refused with it
// too, and nothing is stored. The error is a *DefinitionInvalidError with
// the reasons.
var ErrDefinitionInvalid = errors.New("herald: event definition invalid")

// DefinitionInvalidError lists why an event definition was refused, or why
// a stored one cannot be used. It matches ErrDefinitionInvalid with
// errors.Is.
type DefinitionInvalidError struct {
	Name    string
	Reasons []string
}

func (e *DefinitionInvalidError) Error() string {
	return fmt.Sprintf("herald: event definition %.64q invalid: %s", e.Name, strings.Join(e.Reasons, "; "))
}

// Is makes errors.Is(err, ErrDefinitionInvalid) true.
func (e *DefinitionInvalidError) Is(target error) bool { return target == ErrDefinitionInvalid }

// PutEventDefinition creates or replaces the definition of def.Name. Events
// already stored are not rewritten: the new definition applies to events
// sent from now on, by every client of every process (a send validates its
// event against the definition current when the event is stored).
//
// The schema is compiled first (draft 2020-12 unless its $schema names
// another draft), and a definition whose schema cannot be used is refused
// with a *DefinitionInvalidError (ErrDefinitionInvalid), nothing stored:
//   - larger than Config.MaxSchemaBytes (default 256 KiB), not UTF-8, not
//     JSON, not a JSON Schema;
//   - nested more than 64 levels deep, or with more than 4096 objects and
//     booleans, 512 references ($ref, $dynamicRef, $recursiveRef), 512
//     identifiers ($id, $anchor, $dynamicAnchor) or 256 regular
//     expressions: the JSON Schema library's work grows faster than the
//     schema, and these limits keep a compile under a second where a
//     2.3 MB schema took 38 s;
//   - a reference that does not resolve inside the schema: nothing is ever
//     loaded from a URL or a file (http, https, file ...), so referenced
//     schemas belong under $defs; the JSON Schema meta-schemas, which the
//     library embeds, are the only exception;
//   - a reference cycle that never descends into the value, such as
//     {"$ref":"#"}, which no value can satisfy (recursion through
//     properties or items is fine);
//   - in-place applicators ($ref, allOf, anyOf, oneOf ...) fanning out to
//     more than 10,000 subschema evaluations for a single value.
//
// A schema is normally compiled once per process (again only after the
// process-wide cache evicted it), whichever client puts it or sends
// its events.
func (c *Client) PutEventDefinition(ctx context.Context, def EventDefinition) (*EventDefinition, error) {
	if def.Buffer == "" {
		def.Buffer = heraldtype.BufferFIFO
	}
	problems := textReasons(nil, "name", def.Name, MaxNameBytes)
	if def.Buffer != heraldtype.BufferFIFO && def.Buffer != heraldtype.BufferLatest {
		problems = append(problems, fmt.Sprintf("buffer %q is neither %q nor %q", def.Buffer, heraldtype.BufferFIFO, heraldtype.BufferLatest))
	}
	if def.Retention < 0 {
		problems = append(problems, "negative retention")
	}
	if def.MaxPayloadBytes < 0 {
		problems = append(problems, "negative max payload bytes")
	}
	if def.Correlation != nil && def.Correlation.TTL < 0 {
		problems = append(problems, "negative correlation ttl")
	}
	if len(def.Schema) > 0 {
		if _, err := compileSchema(def.Schema, c.cfg.MaxSchemaBytes); err != nil {
			problems = append(problems, "schema: "+err.Error())
		}
	}
	if len(problems) > 0 {
		return nil, &DefinitionInvalidError{Name: def.Name, Reasons: problems}
	}
	if err := c.ensureTenant(ctx); err != nil {
		return nil, fmt.Errorf("put event definition %s: %w", def.Name, err)
	}
	out, err := c.store.EventDefinitionPut(ctx, &storage.EventDefinitionPutParams{Tenant: c.tenant, Definition: def, Now: c.cfg.Clock.Now()})
	// Even after an error (the put may have committed): the next send
	// reads the definition instead of having its raise refused.
	c.door.defs.drop(defKey{c.tenant, def.Name}, nil)
	if err != nil {
		return nil, fmt.Errorf("put event definition %s: %w", def.Name, err)
	}
	return out, nil
}

// GetEventDefinition returns the definition of name, or ErrNotFound.
func (c *Client) GetEventDefinition(ctx context.Context, name string) (*EventDefinition, error) {
	if !textOK(name, MaxNameBytes) {
		return nil, notFound("event definition", name)
	}
	d, err := idempotent(ctx, func() (*EventDefinition, error) {
		return c.store.EventDefinitionGet(ctx, &storage.EventDefinitionGetParams{Tenant: c.tenant, Name: name})
	})
	if err != nil {
		return nil, fmt.Errorf("event definition %s: %w", name, err)
	}
	return d, nil
}

// ListEventDefinitions returns the tenant's definitions by name.
func (c *Client) ListEventDefinitions(ctx context.Context) ([]*EventDefinition, error) {
	ds, err := idempotent(ctx, func() ([]*EventDefinition, error) {
		return c.store.EventDefinitionList(ctx, &storage.EventDefinitionListParams{Tenant: c.tenant})
	})
	if err != nil {
		return nil, fmt.Errorf("list event definitions: %w", err)
	}
	return ds, nil
}

// DeleteEventDefinition deletes the definition of name (ErrNotFound if
// none). Events already stored keep their fates.
func (c *Client) DeleteEventDefinition(ctx context.Context, name string) error {
	if !textOK(name, MaxNameBytes) {
		return notFound("delete event definition", name)
	}
	err := c.store.EventDefinitionDelete(ctx, &storage.EventDefinitionGetParams{Tenant: c.tenant, Name: name})
	c.door.defs.drop(defKey{c.tenant, name}, nil)
	if err != nil {
		return fmt.Errorf("delete event definition %s: %w", name, err)
	}
	return nil
}

// compiledSchemas holds the compiled schemas of every client of the
// process: at most 1024, about 64 MiB. Every event with a schema looks its
// schema up here.
var compiledSchemas = schema.NewCache(1024, 64<<20)

// compileSchema returns raw compiled, or why it cannot be used; see
// PutEventDefinition.
func compileSchema(raw []byte, maxBytes int) (*jsonschema.Schema, error) {
	if len(raw) > maxBytes {
		return nil, fmt.Errorf("%d bytes, over the %d-byte cap (Config.MaxSchemaBytes)", len(raw), maxBytes)
	}
	return compiledSchemas.Get(raw)
}

// validatePayload returns why inst does not satisfy sch (nil if it does). A
// panic in the JSON Schema library is returned as an error rather than
// taking down the caller.
func validatePayload(name string, sch *jsonschema.Schema, inst any) (reasons []string, err error) {
	defer func() {
		if r := recover(); r != nil {
			reasons, err = nil, fmt.Errorf("event definition %s: the JSON Schema validator failed: %v", name, r)
		}
	}()
	if err := sch.Validate(inst); err != nil {
		return schemaReasons(err), nil
	}
	return nil, nil
}

// schemaReasons flattens a validation error into "where: what" lines, one
// per failing leaf of the error tree (a $ref's own error only says
// "validation failed"; its causes say why).
func schemaReasons(err error) []string {
	var ve *jsonschema.ValidationError
	if !errors.As(err, &ve) {
		return []string{err.Error()}
	}
	var out []string
	var walk func(e *jsonschema.ValidationError)
	walk = func(e *jsonschema.ValidationError) {
		if len(e.Causes) == 0 {
			out = append(out, "/"+strings.Join(e.InstanceLocation, "/")+": "+e.ErrorKind.LocalizedString(schemaPrinter))
			return
		}
		for _, c := range e.Causes {
			walk(c)
		}
	}
	walk(ve)
	sort.Strings(out)
	return slices.Compact(out)
}

var schemaPrinter = message.NewPrinter(language.English)

// maintenanceLoop runs each served tenant's background maintenance on one
// node at a time (the tenant's elected leader, docs/engine.md, Maintenance): events kept for
// instances that never started are dropped once their retention has passed
// (fate dropped/expired), and correlated events past their TTL are
// deleted. It runs beside the workers and never blocks them: each pass is a
// few short writes per tenant.
func (r *Runtime) maintenanceLoop(ctx context.Context) {
	holder := uuid.NewString()
	lease := 3 * r.cfg.ExpiryInterval
	led := map[string]bool{}
	defer func() {
		for tenant := range led {
			_ = r.store.LeaderResign(context.WithoutCancel(ctx), &storage.LeaderElectParams{Tenant: tenant,
				Name: "maintenance", Holder: holder, Lease: lease, Now: r.cfg.Clock.Now()})
		}
	}()
	// On the engine's clock: retention and TTLs are measured on it, so a
	// virtual clock advanced past them runs the pass that expires them.
	t := r.cfg.Clock.NewTimer(r.cfg.ExpiryInterval)
	defer t.Stop()
	for {
		for _, tenant := range r.servedTenants(ctx) {
			leader, err := r.store.LeaderElect(ctx, &storage.LeaderElectParams{Tenant: tenant, Name: "maintenance",
				Holder: holder, Lease: lease, Now: r.cfg.Clock.Now()})
			if err != nil && ctx.Err() == nil {
				r.logger.Error("herald: elect maintenance leader", "tenant", tenant, "err", err)
			}
			if leader {
				led[tenant] = true
				r.expireEvents(ctx, tenant)
				r.expireCorrelated(ctx, tenant)
				r.pruneBus(ctx, tenant)
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C():
			t.Reset(r.cfg.ExpiryInterval)
		}
	}
}

// servedTenants returns the tenants the runtime serves: Config.Tenants, or
// every registered one.
func (r *Runtime) servedTenants(ctx context.Context) []string {
	if r.cfg.Tenants != nil {
		return r.cfg.Tenants
	}
	ts, err := r.store.TenantList(ctx, &storage.TenantListParams{})
	if err != nil {
		if ctx.Err() == nil {
			r.logger.Error("herald: list tenants", "err", err)
		}
		return nil
	}
	out := make([]string, len(ts))
	for i, t := range ts {
		out[i] = t.ID
	}
	return out
}

func (r *Runtime) expireEvents(ctx context.Context, tenant string) {
	for {
		ids, err := r.store.EventExpire(ctx, &storage.EventExpireParams{Tenant: tenant, Now: r.cfg.Clock.Now(), Limit: 1000})
		if err != nil {
			if ctx.Err() == nil {
				r.logger.Error("herald: expire events", "err", err)
			}
			return
		}
		for _, id := range ids {
			r.obs.EventsDropped(DropReport{Tenant: tenant, EventID: id, Reason: string(history.DropExpired), Count: 1})
			r.logger.Warn("herald: event dropped", "tenant", tenant, "event_id", id, "reason", history.DropExpired)
		}
		if len(ids) < 1000 {
			return
		}
	}
}

func (r *Runtime) expireCorrelated(ctx context.Context, tenant string) {
	for {
		keys, err := r.store.CorrelatedExpire(ctx, &storage.CorrelatedExpireParams{Tenant: tenant, Now: r.cfg.Clock.Now(), Limit: 1000})
		if err != nil {
			if ctx.Err() == nil {
				r.logger.Error("herald: expire correlated events", "err", err)
			}
			return
		}
		if len(keys) > 0 {
			r.logger.Info("herald: correlated events expired (ttl)", "count", len(keys))
		}
		if len(keys) < 1000 {
			return
		}
	}
}
