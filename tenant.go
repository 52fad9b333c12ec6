package herald

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/heraldwf/herald/heraldtype"
	"github.com/heraldwf/herald/storage"
)

// TenantLimits are a tenant's stored overrides of the engine's per-tenant
// limits (Config and ClientConfig fields of the same names). A zero field
// means the engine's value; none may be negative, and MaxPayloadDepth is
// at most MaxPayloadDepthLimit. MaxPayloadDepth can only lower the
// engine's depth: values inside a tenant's workflows (activity inputs and
// results, workflow results, ContinueAsNew inputs) are checked against the
// runtime's, so a deeper tenant limit would admit events its own workflows
// could not pass on.
type TenantLimits = heraldtype.TenantLimits

// Tenant is a registered tenant and its limit overrides.
type Tenant = heraldtype.Tenant

// limitsTTL is how long a tenant's limits are used before they are read
// again: a limit set through another process applies within about this
// long; one set through this process's runtime applies at once.
const limitsTTL = time.Second

// staleLimits is how old cached limits may be before a call waits for a
// fresh read instead of refreshing them in the background: a process that
// was idle does not apply limits another process changed long ago.
const staleLimits = 5 * limitsTTL

// limitCache holds the limit overrides of the tenants a runtime or client
// works for, so that a turn or a send reads them without a store round
// trip: a value older than limitsTTL is still used while one goroutine
// reads it again in the background.
type limitCache struct {
	store  storage.Store
	logger *slog.Logger

	mu sync.Mutex
	m  map[string]*limitEntry
}

type limitEntry struct {
	limits     TenantLimits
	read       time.Time // wall clock
	refreshing bool
}

func newLimitCache(store storage.Store, logger *slog.Logger) *limitCache {
	return &limitCache{store: store, logger: logger, m: map[string]*limitEntry{}}
}

// get returns tenant's overrides. A call waits for the store only for a
// tenant it has not read within staleLimits (the first call, or the first
// after an idle spell); a busy tenant's limits are refreshed in the
// background every limitsTTL. If a read fails, the engine's values are
// used until the next read.
func (c *limitCache) get(ctx context.Context, tenant string) TenantLimits {
	c.mu.Lock()
	e := c.m[tenant]
	if e != nil {
		age := time.Since(e.read)
		if age < staleLimits {
			if age >= limitsTTL && !e.refreshing {
				e.refreshing = true
				go c.refresh(tenant, e)
			}
			l := e.limits
			c.mu.Unlock()
			return l
		}
		// Not read for a while (an idle process): do not act once more on
		// limits another process may have changed long ago.
	}
	c.mu.Unlock()
	l, _ := c.read(ctx, tenant)
	c.mu.Lock()
	defer c.mu.Unlock()
	// A set (SetTenantLimits) or another read that ended while this one
	// ran is at least as new: keep it. A failed read is cached too, so that
	// a store outage costs one read (and one log line) a second, not one
	// per call.
	if c.m[tenant] == e {
		c.m[tenant] = &limitEntry{limits: l, read: time.Now()}
	}
	return l
}

// refresh reads tenant's limits again for entry e, which it updates only
// if it is still the tenant's entry: limits set while it read are newer.
func (c *limitCache) refresh(tenant string, e *limitEntry) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	l, err := c.read(ctx, tenant)
	c.mu.Lock()
	defer c.mu.Unlock()
	e.refreshing = false
	if err == nil && c.m[tenant] == e {
		e.limits, e.read = l, time.Now()
	}
}

func (c *limitCache) read(ctx context.Context, tenant string) (TenantLimits, error) {
	t, err := c.store.TenantGet(ctx, &storage.TenantGetParams{Tenant: tenant})
	switch {
	case err == nil:
		return t.Limits, nil
	case errors.Is(err, heraldtype.ErrNotFound):
		return TenantLimits{}, nil
	default:
		c.logger.Error("herald: read tenant limits", "tenant", tenant, "err", err)
		return TenantLimits{}, err
	}
}

func (c *limitCache) set(tenant string, l TenantLimits) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.m[tenant] = &limitEntry{limits: l, read: time.Now()}
}

// lowerDepth is a tenant's MaxPayloadDepth override applied to the
// engine's depth def: it may lower it, never raise it (see TenantLimits).
func lowerDepth(v, def int) int {
	if v > 0 {
		return min(v, def)
	}
	return def
}

// override returns v if it is set, else def.
func override[T int | time.Duration](v, def T) T {
	if v > 0 {
		return v
	}
	return def
}

// tenantReasons appends to ps why tenant cannot be a tenant id.
func tenantReasons(ps []string, tenant string) []string {
	return textReasons(ps, "tenant", tenant, storage.MaxIDBytes)
}

// SetTenantLimits stores limits as tenant's overrides (registering the
// tenant if needed) and returns the tenant as stored. Every runtime and
// client working for the tenant applies them to its next turns and sends:
// this runtime and its clients at once, other processes within about a
// second. It returns an *InvalidArgumentError (ErrInvalidArgument; nothing
// stored) for a tenant id that breaks the text rules (see MaxIDBytes), a
// negative limit or a MaxPayloadDepth over MaxPayloadDepthLimit.
func (r *Runtime) SetTenantLimits(ctx context.Context, tenant string, limits TenantLimits) (*Tenant, error) {
	ps := tenantReasons(nil, tenant)
	if err := limits.Validate(); err != nil {
		ps = append(ps, err.Error())
	}
	if limits.MaxPayloadDepth > MaxPayloadDepthLimit {
		ps = append(ps, fmt.Sprintf("MaxPayloadDepth %d is over MaxPayloadDepthLimit (%d)", limits.MaxPayloadDepth, MaxPayloadDepthLimit))
	}
	if len(ps) > 0 {
		return nil, &InvalidArgumentError{Op: "SetTenantLimits", Reasons: ps}
	}
	t, err := r.store.TenantPut(ctx, &storage.TenantPutParams{Tenant: tenant, Limits: limits, Now: r.cfg.Clock.Now()})
	if err != nil {
		return nil, fmt.Errorf("set limits of tenant %s: %w", tenant, err)
	}
	r.limits.set(tenant, t.Limits)
	return t, nil
}

// TenantLimits returns tenant's stored overrides (zero fields: the engine's
// values), or ErrNotFound if the tenant is not registered.
func (r *Runtime) TenantLimits(ctx context.Context, tenant string) (TenantLimits, error) {
	t, err := r.Tenant(ctx, tenant)
	if err != nil {
		return TenantLimits{}, err
	}
	return t.Limits, nil
}

// Client returns the client of tenant, bound to the runtime's store and
// config; the same one on every call. The runtime serves the tenant's work
// if it serves every tenant, or if Config.Tenants names it. It returns an
// *InvalidArgumentError (ErrInvalidArgument) for a tenant id that breaks
// the text rules (see MaxIDBytes).
func (r *Runtime) Client(tenant string) (*Client, error) {
	r.clientsMu.Lock()
	defer r.clientsMu.Unlock()
	if c := r.clients[tenant]; c != nil {
		return c, nil
	}
	if ps := tenantReasons(nil, tenant); len(ps) > 0 {
		return nil, &InvalidArgumentError{Op: "Client", Reasons: ps}
	}
	c := newClient(r.store, tenant, &r.cfg.ClientConfig, r.door, r, r.tracer)
	r.clients[tenant] = c
	return c, nil
}

// serves reports whether the runtime runs tenant's work.
func (r *Runtime) serves(tenant string) bool {
	return r.served == nil || r.served[tenant]
}

// unregistered logs, once per runtime for each (tenant, kind, name), that
// work of an unregistered workflow or activity was released, and reports
// every release to the Observer.
func (r *Runtime) unregistered(tenant, kind, name, instanceID string) {
	r.obs.Unregistered(UnregisteredReport{Tenant: tenant, Kind: kind, Name: name, InstanceID: instanceID})
	if _, seen := r.unregLogged.LoadOrStore(tenant+"\x00"+kind+"\x00"+name, true); !seen {
		r.logger.Warn("herald: "+kind+" not registered here; releasing its work until a runtime that has it takes it",
			"tenant", tenant, kind, name, "instance", instanceID)
	}
}

// blockedRetry caps how long released unregistered work waits before a
// runtime claims it again.
const blockedRetry = 5 * time.Second

// blockedRetryAt is when work released because no workflow or activity of
// its name is registered here is claimed again: ten poll intervals later,
// at most blockedRetry (and never before the next poll), so that a
// thousand instances of a misspelt workflow cost a few writes a second,
// not thousands, and a runtime that has it still picks them up within
// seconds.
func (r *Runtime) blockedRetryAt() time.Time {
	d := max(min(10*r.cfg.PollInterval, blockedRetry), r.cfg.PollInterval)
	return r.cfg.Clock.Now().Add(d)
}

// blockedReason is what an instance's status says while no runtime runs
// its work.
func blockedReason(kind, name string) string {
	return "no runtime has " + kind + " " + name + " registered"
}

// ensureTenant registers the client's tenant before its first write.
func (c *Client) ensureTenant(ctx context.Context) error {
	if c.ensured.Load() {
		return nil
	}
	if err := c.store.TenantEnsure(ctx, &storage.TenantEnsureParams{Tenant: c.tenant, Now: c.cfg.Clock.Now()}); err != nil {
		return fmt.Errorf("register tenant %s: %w", c.tenant, err)
	}
	c.ensured.Store(true)
	return nil
}

// Tenants returns every registered tenant with its overrides, ordered by
// id.
func (r *Runtime) Tenants(ctx context.Context) ([]*Tenant, error) {
	ts, err := idempotent(ctx, func() ([]*Tenant, error) {
		return r.store.TenantList(ctx, &storage.TenantListParams{})
	})
	if err != nil {
		return nil, fmt.Errorf("list tenants: %w", err)
	}
	return ts, nil
}

// Tenant returns the registered tenant, or ErrNotFound.
func (r *Runtime) Tenant(ctx context.Context, tenant string) (*Tenant, error) {
	if !textOK(tenant, storage.MaxIDBytes) {
		return nil, notFound("tenant", tenant)
	}
	t, err := idempotent(ctx, func() (*Tenant, error) {
		return r.store.TenantGet(ctx, &storage.TenantGetParams{Tenant: tenant})
	})
	if err != nil {
		return nil, fmt.Errorf("tenant %s: %w", tenant, err)
	}
	return t, nil
}

// EnsureTenant registers tenant (with no overrides) unless it is
// registered. It returns an *InvalidArgumentError for a tenant id that
// breaks the text rules.
func (r *Runtime) EnsureTenant(ctx context.Context, tenant string) error {
	c, err := r.Client(tenant)
	if err != nil {
		return err
	}
	return c.ensureTenant(ctx)
}
