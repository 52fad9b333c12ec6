package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/heraldwf/herald/heraldtype"
	"github.com/heraldwf/herald/storage"
	"github.com/heraldwf/herald/storage/internal/backend"
)

const tenantCols = `id, limits, created_at, updated_at`

func scanTenant(sc scanner) (*heraldtype.Tenant, error) {
	var r backend.TenantRow
	if err := sc.Scan(r.Dest()...); err != nil {
		return nil, err
	}
	return r.Tenant()
}

// TenantEnsure: see storage.TenantStore. A tenant this store registered or
// saw registered is remembered, so that later calls for it cost no write.
func (s *Store) TenantEnsure(ctx context.Context, p *storage.TenantEnsureParams) error {
	if p == nil {
		return backend.NilParams("sqlite: ensure tenant")
	}
	if err := storage.ValidateTenantID(p.Tenant); err != nil {
		return fmt.Errorf("sqlite: ensure tenant: %w", err)
	}
	if _, ok := s.tenantsSeen.Load(p.Tenant); ok {
		return nil
	}
	now := backend.NowOr(p.Now).UnixNano()
	err := s.write(ctx, func(w *wtx) error {
		_, err := w.exec(`INSERT INTO tenants (id, created_at, updated_at) VALUES (?1, ?2, ?2)
			ON CONFLICT (id) DO NOTHING`, p.Tenant, now)
		return err
	})
	if err != nil {
		return fmt.Errorf("sqlite: ensure tenant %q: %w", p.Tenant, err)
	}
	s.tenantsSeen.Store(p.Tenant, struct{}{})
	return nil
}

// TenantPut: see storage.TenantStore.
func (s *Store) TenantPut(ctx context.Context, p *storage.TenantPutParams) (*heraldtype.Tenant, error) {
	if p == nil {
		return nil, backend.NilParams("sqlite: put tenant")
	}
	limits, err := backend.TenantPutArgs(p)
	if err != nil {
		return nil, fmt.Errorf("sqlite: put tenant %.64q: %w", p.Tenant, err)
	}
	now := backend.NowOr(p.Now).UnixNano()
	var t *heraldtype.Tenant
	err = s.write(ctx, func(w *wtx) error {
		var err error
		t, err = scanTenant(w.queryRow(`INSERT INTO tenants (id, limits, created_at, updated_at) VALUES (?1, ?2, ?3, ?3)
			ON CONFLICT (id) DO UPDATE SET limits = excluded.limits, updated_at = excluded.updated_at
			RETURNING `+tenantCols, p.Tenant, limits, now))
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("sqlite: put tenant %q: %w", p.Tenant, err)
	}
	s.tenantsSeen.Store(p.Tenant, struct{}{})
	return t, nil
}

// TenantGet: see storage.TenantStore.
func (s *Store) TenantGet(ctx context.Context, p *storage.TenantGetParams) (_ *heraldtype.Tenant, err error) {
	defer s.afterRead(ctx, &err)
	if p == nil {
		return nil, backend.NilParams("sqlite: get tenant")
	}
	if s.closed.Load() {
		return nil, heraldtype.ErrClosed
	}
	t, err := scanTenant(s.reader(nil).QueryRowContext(ctx, `SELECT `+tenantCols+` FROM tenants WHERE id = ?`, p.Tenant))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("sqlite: get tenant %q: %w", p.Tenant, heraldtype.ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("sqlite: get tenant %q: %w", p.Tenant, s.readErr(err))
	}
	return t, nil
}

// TenantList: see storage.TenantStore.
func (s *Store) TenantList(ctx context.Context, p *storage.TenantListParams) (_ []*heraldtype.Tenant, err error) {
	defer s.afterRead(ctx, &err)
	if p == nil {
		return nil, backend.NilParams("sqlite: list tenants")
	}
	if s.closed.Load() {
		return nil, heraldtype.ErrClosed
	}
	rows, err := s.reader(nil).QueryContext(ctx, `SELECT `+tenantCols+` FROM tenants ORDER BY id`)
	if err != nil {
		return nil, fmt.Errorf("sqlite: list tenants: %w", s.readErr(err))
	}
	defer rows.Close()
	var out []*heraldtype.Tenant
	for rows.Next() {
		t, err := scanTenant(rows)
		if err != nil {
			return nil, fmt.Errorf("sqlite: list tenants: %w", err)
		}
		out = append(out, t)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("sqlite: list tenants: %w", s.readErr(err))
	}
	return out, nil
}

// Probes of TenantsReady, for the tenant tn.id at ?1: each an EXISTS that
// stops at the first row of the claim index it walks.
const (
	readyTurnsSQL = `EXISTS (SELECT 1 FROM instances WHERE tenant = tn.id AND lock_token IS NULL
			AND ready_at <= ?1 AND not_before <= ?1 AND status IN ` + nonTerminal + `)
		OR EXISTS (SELECT 1 FROM instances WHERE tenant = tn.id AND lock_token IS NOT NULL
			AND lease_until < ?1 AND ready_at <= ?1 AND not_before <= ?1 AND status IN ` + nonTerminal + `)`
	readyActivitiesSQL = `EXISTS (SELECT 1 FROM activities WHERE tenant = tn.id AND lock_token IS NULL AND visible_at <= ?1)
		OR EXISTS (SELECT 1 FROM activities WHERE tenant = tn.id AND lock_token IS NOT NULL
			AND lease_until < ?1 AND visible_at <= ?1 AND cancel_requested = 0)`
	readyBusSQL = `EXISTS (SELECT 1 FROM bus_events WHERE tenant = tn.id AND routed_at = 0)
		OR EXISTS (SELECT 1 FROM bus_routes WHERE tenant = tn.id AND status = 'queued' AND due_at <= ?1)
		OR EXISTS (SELECT 1 FROM bus_routes WHERE tenant = tn.id AND status = 'retrying' AND due_at <= ?1)
		OR EXISTS (SELECT 1 FROM bus_routes WHERE tenant = tn.id AND status = 'running' AND lease_until < ?1)`
)

// TenantsReady: see storage.TenantStore. Per tenant, an EXISTS probe of
// each claim index. Like NextWake it does not wait for what it read to be
// durable: it only says where to claim.
func (s *Store) TenantsReady(ctx context.Context, p *storage.TenantsReadyParams) ([]string, error) {
	if p == nil {
		return nil, backend.NilParams("sqlite: tenants ready")
	}
	kinds, err := backend.ValidateTenantsReady(p)
	if err != nil {
		return nil, fmt.Errorf("sqlite: tenants ready: %w", err)
	}
	if s.closed.Load() {
		return nil, heraldtype.ErrClosed
	}
	if p.Tenants != nil && len(p.Tenants) == 0 {
		return nil, nil
	}
	var preds []string
	if kinds&storage.WorkTurns != 0 {
		preds = append(preds, readyTurnsSQL)
	}
	if kinds&storage.WorkActivities != 0 {
		preds = append(preds, readyActivitiesSQL)
	}
	if kinds&storage.WorkBus != 0 {
		preds = append(preds, readyBusSQL)
	}
	from := `tenants tn`
	args := []any{backend.NowOr(p.Now).UnixNano()}
	if p.Tenants != nil {
		list, err := json.Marshal(p.Tenants)
		if err != nil {
			return nil, fmt.Errorf("sqlite: tenants ready: %w", err)
		}
		from = `(SELECT DISTINCT value AS id FROM json_each(?2)) tn`
		args = append(args, string(list))
	}
	rows, err := s.reader(nil).QueryContext(ctx, `SELECT tn.id FROM `+from+`
		WHERE `+strings.Join(preds, " OR ")+` ORDER BY tn.id`, args...)
	if err != nil {
		return nil, fmt.Errorf("sqlite: tenants ready: %w", s.readErr(err))
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			return nil, fmt.Errorf("sqlite: tenants ready: %w", err)
		}
		out = append(out, id)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("sqlite: tenants ready: %w", s.readErr(err))
	}
	return out, nil
}

// SubscribeAll: see storage.Notifier.
func (s *Store) SubscribeAll(kinds storage.WorkKind) (<-chan struct{}, func() []string, func()) {
	return s.hub.SubscribeAll(kinds)
}

// nextWakeAll is NextWake with AllTenants: the earliest of each registered
// tenant's NextWake, in one statement.
func (s *Store) nextWakeAll(ctx context.Context, now int64) (*int64, error) {
	perTenant := strings.ReplaceAll(strings.ReplaceAll(nextWakeSQL, "?1", "tn.id"), "?2", "?1")
	var at sql.NullInt64
	if err := s.reader(nil).QueryRowContext(ctx, `SELECT MIN((`+perTenant+`)) FROM tenants tn`, now).Scan(&at); err != nil {
		return nil, err
	}
	if !at.Valid {
		return nil, nil
	}
	return &at.Int64, nil
}

func wrapNextWake(s *Store, err error) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("sqlite: next wake: %w", s.readErr(err))
}

// shownInstanceCols are instanceCols for InstanceGet and InstanceList: the
// instance's Blocked is its own reason, or else that of its first activity
// task that has one (a primary-key range probe).
var shownInstanceCols = strings.Replace(instanceCols, "blocked", `CASE WHEN blocked <> '' THEN blocked ELSE COALESCE(
	(SELECT a.blocked FROM activities a WHERE a.tenant = instances.tenant AND a.instance_id = instances.id
	 AND a.blocked <> '' ORDER BY a.execution, a.task_seq LIMIT 1), '') END`, 1)
