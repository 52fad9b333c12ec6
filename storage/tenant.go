package storage

import (
	"context"
	"fmt"
	"time"

	"github.com/heraldwf/herald/heraldtype"
)

// TenantEnsureParams registers a tenant if it is not registered.
type TenantEnsureParams struct {
	Tenant string
	Now    time.Time
}

// TenantPutParams registers a tenant (if needed) and replaces its limit
// overrides (CreatedAt kept, UpdatedAt = Now).
type TenantPutParams struct {
	Tenant string
	Limits heraldtype.TenantLimits
	Now    time.Time
}

// TenantGetParams names a tenant.
type TenantGetParams struct {
	Tenant string
}

// TenantListParams lists every registered tenant, ordered by id (bytewise).
type TenantListParams struct{}

// TenantsReadyParams asks which tenants have work of Kinds claimable at Now.
type TenantsReadyParams struct {
	// Tenants are the tenants to look at; nil means every registered
	// tenant. (Tenants in this list need not be registered.)
	Tenants []string
	// Kinds: WorkTurns looks for an instance TurnClaim would pick (not
	// terminal, a visible inbox message, not delayed by TurnAbandon's
	// RetryAt, no live lease); WorkActivities for a task ActivityClaim
	// would pick (visible, no live lease). Zero means WorkAll.
	Kinds WorkKind
	Now   time.Time
}

// TenantStore is the tenant registry: the tenants one runtime serves, each
// with its limit overrides, and the question the runtime's shared claim
// loops ask first (which tenants have work?).
//
// The store never registers a tenant by itself (InstanceCreate and the
// other writes do not): the engine calls TenantEnsure before it writes for a
// tenant. A migration registers every tenant a database already held data
// of.
//
// Not stable; not for implementing outside this repository (see Store).
type TenantStore interface {
	// TenantEnsure registers p.Tenant (no overrides, CreatedAt = UpdatedAt
	// = Now) unless it is registered; it changes nothing otherwise. It
	// returns ErrInvalidArgument for a tenant id that breaks the text rules
	// (TextProblem with MaxIDBytes).
	TenantEnsure(ctx context.Context, p *TenantEnsureParams) error
	// TenantPut stores p.Limits as the tenant's overrides, registering it
	// if needed, and returns the tenant as stored. It returns
	// ErrInvalidArgument, writing nothing, for a negative limit or a
	// tenant id that breaks the text rules.
	TenantPut(ctx context.Context, p *TenantPutParams) (*heraldtype.Tenant, error)
	// TenantGet returns ErrNotFound if the tenant is not registered.
	TenantGet(ctx context.Context, p *TenantGetParams) (*heraldtype.Tenant, error)
	// TenantList returns every registered tenant, ordered by id (bytewise).
	TenantList(ctx context.Context, p *TenantListParams) ([]*heraldtype.Tenant, error)
	// TenantsReady returns, ordered by id and without duplicates, the
	// tenants (of p.Tenants, or registered) that have work of p.Kinds
	// claimable at p.Now. It costs a few index probes per tenant, however
	// much work a tenant has. It returns ErrInvalidArgument for a kinds
	// mask with unknown bits or a tenant id that breaks the text rules.
	TenantsReady(ctx context.Context, p *TenantsReadyParams) ([]string, error)
}

// ValidateTenantID returns an error wrapping ErrInvalidArgument if tenant
// breaks the text rules, or nil.
func ValidateTenantID(tenant string) error {
	if problem := TextProblem(tenant, MaxIDBytes); problem != "" {
		return fmt.Errorf("tenant id %s: %w", problem, heraldtype.ErrInvalidArgument)
	}
	return nil
}
