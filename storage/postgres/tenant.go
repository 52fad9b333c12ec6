package postgres

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/heraldwf/herald/heraldtype"
	"github.com/heraldwf/herald/storage"
	"github.com/heraldwf/herald/storage/internal/backend"
)

const tenantCols = `id, limits, created_at, updated_at`

func scanTenant(row pgx.Row) (*heraldtype.Tenant, error) {
	var r backend.TenantRow
	if err := row.Scan(r.Dest()...); err != nil {
		return nil, err
	}
	return r.Tenant()
}

// TenantEnsure: see storage.TenantStore. A tenant this store registered or
// saw registered is remembered, so that later calls for it cost no round
// trip.
func (s *Store) TenantEnsure(ctx context.Context, p *storage.TenantEnsureParams) error {
	if p == nil {
		return backend.NilParams("postgres: ensure tenant")
	}
	if err := storage.ValidateTenantID(p.Tenant); err != nil {
		return fmt.Errorf("postgres: ensure tenant: %w", err)
	}
	if _, ok := s.tenantsSeen.Load(p.Tenant); ok {
		return nil
	}
	now := backend.NowOr(p.Now).UnixNano()
	err := s.do(ctx, func(ctx context.Context) error {
		_, err := s.pool.Exec(ctx, `INSERT INTO tenants (id, created_at, updated_at) VALUES ($1, $2, $2)
			ON CONFLICT (id) DO NOTHING`, p.Tenant, now)
		return err
	})
	if err != nil {
		return fmt.Errorf("postgres: ensure tenant %q: %w", p.Tenant, err)
	}
	s.tenantsSeen.Store(p.Tenant, struct{}{})
	return nil
}

// TenantPut: see storage.TenantStore.
func (s *Store) TenantPut(ctx context.Context, p *storage.TenantPutParams) (*heraldtype.Tenant, error) {
	if p == nil {
		return nil, backend.NilParams("postgres: put tenant")
	}
	limits, err := backend.TenantPutArgs(p)
	if err != nil {
		return nil, fmt.Errorf("postgres: put tenant %.64q: %w", p.Tenant, err)
	}
	now := backend.NowOr(p.Now).UnixNano()
	var t *heraldtype.Tenant
	err = s.do(ctx, func(ctx context.Context) error {
		var err error
		t, err = scanTenant(s.pool.QueryRow(ctx, `INSERT INTO tenants (id, limits, created_at, updated_at) VALUES ($1, $2, $3, $3)
			ON CONFLICT (id) DO UPDATE SET limits = excluded.limits, updated_at = excluded.updated_at
			RETURNING `+tenantCols, p.Tenant, limits, now))
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("postgres: put tenant %q: %w", p.Tenant, err)
	}
	s.tenantsSeen.Store(p.Tenant, struct{}{})
	return t, nil
}

// TenantGet: see storage.TenantStore.
func (s *Store) TenantGet(ctx context.Context, p *storage.TenantGetParams) (*heraldtype.Tenant, error) {
	if p == nil {
		return nil, backend.NilParams("postgres: get tenant")
	}
	var t *heraldtype.Tenant
	err := s.do(ctx, func(ctx context.Context) error {
		var err error
		t, err = scanTenant(s.pool.QueryRow(ctx, `SELECT `+tenantCols+` FROM tenants WHERE id = $1`, p.Tenant))
		if errors.Is(err, pgx.ErrNoRows) {
			return heraldtype.ErrNotFound
		}
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("postgres: get tenant %q: %w", p.Tenant, err)
	}
	return t, nil
}

// TenantList: see storage.TenantStore.
func (s *Store) TenantList(ctx context.Context, p *storage.TenantListParams) ([]*heraldtype.Tenant, error) {
	if p == nil {
		return nil, backend.NilParams("postgres: list tenants")
	}
	var out []*heraldtype.Tenant
	err := s.do(ctx, func(ctx context.Context) error {
		out = nil
		rows, err := s.pool.Query(ctx, `SELECT `+tenantCols+` FROM tenants ORDER BY id COLLATE "C"`)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			t, err := scanTenant(rows)
			if err != nil {
				return err
			}
			out = append(out, t)
		}
		return rows.Err()
	})
	if err != nil {
		return nil, fmt.Errorf("postgres: list tenants: %w", err)
	}
	return out, nil
}

// Probes of TenantsReady, for the tenant tn.id at $1, with the predicates
// of the claims: each a lateral subquery with LIMIT 1 on one claim index
// (instances_ready, instances_leased, activities_ready, activities_leased,
// and the bus's bus_events_unrouted, bus_routes_due, bus_routes_running),
// so that it is an index probe per tenant whatever the statistics say (an
// EXISTS became, on tables that looked small, one scan of every tenant's
// entries hashed for all tenants).
var (
	readyTurnProbes = []string{
		`SELECT 1 AS x FROM instances WHERE tenant = tn.id AND lock_token IS NULL
			AND ready_at <= $1 AND not_before <= $1 AND status IN ` + nonTerminal + ` LIMIT 1`,
		`SELECT 1 AS x FROM instances WHERE tenant = tn.id AND lock_token IS NOT NULL
			AND lease_until < $1 AND ready_at <= $1 AND not_before <= $1 AND status IN ` + nonTerminal + ` LIMIT 1`,
	}
	// The bus: an unrouted event (bus_events_unrouted), a due queued or
	// retrying execution (bus_routes_due), a running one whose lease ran
	// out (bus_routes_running).
	readyBusProbes = []string{
		`SELECT 1 AS x FROM bus_events WHERE tenant = tn.id AND routed_at = 0 LIMIT 1`,
		`SELECT 1 AS x FROM bus_routes WHERE tenant = tn.id AND status IN ('queued', 'retrying')
			AND due_at > 0 AND due_at <= $1 LIMIT 1`,
		`SELECT 1 AS x FROM bus_routes WHERE tenant = tn.id AND status = 'running' AND lease_until < $1 LIMIT 1`,
	}
	readyActivityProbes = []string{
		`SELECT 1 AS x FROM activities WHERE tenant = tn.id AND lock_token IS NULL AND visible_at <= $1 LIMIT 1`,
		`SELECT 1 AS x FROM activities WHERE tenant = tn.id AND lock_token IS NOT NULL
			AND lease_until < $1 AND visible_at <= $1 AND NOT cancel_requested LIMIT 1`,
	}
)

// tenantsReadySQL is TenantsReady's statement for kinds, over the
// registered tenants or (list) the tenants of the text[] $2.
func tenantsReadySQL(kinds storage.WorkKind, list bool) string {
	var probes []string
	if kinds&storage.WorkTurns != 0 {
		probes = append(probes, readyTurnProbes...)
	}
	if kinds&storage.WorkActivities != 0 {
		probes = append(probes, readyActivityProbes...)
	}
	if kinds&storage.WorkBus != 0 {
		probes = append(probes, readyBusProbes...)
	}
	from := `tenants tn`
	if list {
		from = `(SELECT DISTINCT t AS id FROM unnest($2::text[]) AS t) tn`
	}
	var joins, preds []string
	for i, p := range probes {
		joins = append(joins, fmt.Sprintf(`LEFT JOIN LATERAL (%s) p%d ON true`, p, i))
		preds = append(preds, fmt.Sprintf(`p%d.x IS NOT NULL`, i))
	}
	return `SELECT tn.id FROM ` + from + ` ` + strings.Join(joins, " ") + ` WHERE ` + strings.Join(preds, " OR ") +
		` ORDER BY tn.id COLLATE "C"`
}

// TenantsReady: see storage.TenantStore. Per tenant, an EXISTS probe of
// each claim index, with the plan settings of the claims (see scanPlans).
func (s *Store) TenantsReady(ctx context.Context, p *storage.TenantsReadyParams) ([]string, error) {
	if p == nil {
		return nil, backend.NilParams("postgres: tenants ready")
	}
	kinds, err := backend.ValidateTenantsReady(p)
	if err != nil {
		return nil, fmt.Errorf("postgres: tenants ready: %w", err)
	}
	if p.Tenants != nil && len(p.Tenants) == 0 {
		return nil, nil
	}
	args := []any{backend.NowOr(p.Now).UnixNano()}
	if p.Tenants != nil {
		args = append(args, p.Tenants)
	}
	q := tenantsReadySQL(kinds, p.Tenants != nil)
	var out []string
	err = s.do(ctx, func(ctx context.Context) error {
		out = nil
		var b batch
		b.exec("", scanSettings)
		b.query("", func(rows pgx.Rows) error {
			for rows.Next() {
				var id string
				if err := rows.Scan(&id); err != nil {
					return err
				}
				out = append(out, id)
			}
			return nil
		}, q, args...)
		return b.send(ctx, s.pool)
	})
	if err != nil {
		return nil, fmt.Errorf("postgres: tenants ready: %w", err)
	}
	return out, nil
}

// nextWakeAllSQL is NextWake with AllTenants at $1: the earliest of every
// registered tenant's nextWakeSQL.
var nextWakeAllSQL = `SELECT MIN((` +
	strings.ReplaceAll(strings.ReplaceAll(nextWakeSQL, "$1", "tn.id"), "$2", "$1") + `)) FROM tenants tn`

// SubscribeAll: see storage.Notifier. Other stores' NOTIFYs reach it too
// (their payload names the tenant).
func (s *Store) SubscribeAll(kinds storage.WorkKind) (<-chan struct{}, func() []string, func()) {
	ch, drain, cancel := s.hub.SubscribeAll(kinds)
	if !s.closed.Load() {
		s.listener.ensure()
	}
	return ch, drain, cancel
}

// unblockSQL clears instance $1/$2's Blocked reason. A simple commit
// (herald_commit) runs it after the function when the claim saw a reason,
// or did not note what it saw.
const unblockSQL = `UPDATE instances SET blocked = '' WHERE tenant = $1 AND id = $2 AND blocked <> ''`

// shownInstanceCols are instanceCols for InstanceGet and InstanceList: the
// instance's Blocked is its own reason, or else that of its first activity
// task that has one (a primary-key range probe).
var shownInstanceCols = strings.Replace(instanceCols, "blocked", `CASE WHEN blocked <> '' THEN blocked ELSE COALESCE(
	(SELECT a.blocked FROM activities a WHERE a.tenant = instances.tenant AND a.instance_id = instances.id
	 AND a.blocked <> '' ORDER BY a.execution, a.task_seq LIMIT 1), '') END`, 1)
