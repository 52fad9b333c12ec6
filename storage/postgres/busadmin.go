package postgres

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/heraldwf/herald/heraldtype"
	"github.com/heraldwf/herald/storage"
	"github.com/heraldwf/herald/storage/internal/backend"
)

// ---- subscriptions ----

const subscriptionCols = `id, pattern, filter, target, enabled, max_retries, timeout_ns, version, created_at, updated_at`

// subscriptionRow receives subscriptionCols.
type subscriptionRow struct {
	s                    heraldtype.Subscription
	filter, target       []byte
	maxRetries           *int32
	timeout              int64
	version              int32
	createdAt, updatedAt int64
}

func (r *subscriptionRow) dest() []any {
	return []any{&r.s.ID, &r.s.Pattern, &r.filter, &r.target, &r.s.Enabled, &r.maxRetries, &r.timeout, &r.version,
		&r.createdAt, &r.updatedAt}
}

func (r *subscriptionRow) subscription() (*heraldtype.Subscription, error) {
	s := r.s
	s.Filter = backend.RawOf(r.filter)
	t, err := decodeTarget(r.target)
	if err != nil {
		return nil, fmt.Errorf("subscription %q: %w", s.ID, err)
	}
	s.Target = t
	if r.maxRetries != nil {
		n := int(*r.maxRetries)
		s.MaxRetries = &n
	}
	s.Timeout = heraldtype.Duration(r.timeout)
	s.Version = int(r.version)
	s.CreatedAt, s.UpdatedAt = backend.FromNanos(r.createdAt), backend.FromNanos(r.updatedAt)
	return &s, nil
}

// subscriptionPosSQL is the position of a subscription change in tenant
// $1's publish order, taken from bus_events' seq identity: every event
// published after the change has a higher seq (migration 0020).
const subscriptionPosSQL = `c AS MATERIALIZED (SELECT nextval(pg_get_serial_sequence('bus_events', 'seq')) AS pos)`

// subscriptionKeepSQL keeps the version o (a CTE) replaces or deletes, for
// routing tenant $1's unrouted events, all published before the change,
// if it has any.
const subscriptionKeepSQL = `k AS (
	INSERT INTO bus_subscription_versions (tenant, id, version, pattern, filter, target, enabled, max_retries, timeout_ns,
		created_at, updated_at, since, until)
	SELECT o.tenant, o.id, o.version, o.pattern, o.filter, o.target, o.enabled, o.max_retries, o.timeout_ns,
		o.created_at, o.updated_at, o.since, c.pos
	FROM o, c WHERE EXISTS (SELECT 1 FROM bus_events WHERE tenant = $1 AND routed_at = 0)
	RETURNING 1
)`

// subscriptionPutSQL creates or replaces subscription $2 of tenant $1 at
// $9, keeping the version it replaces while events published before need
// it, and changes the tenant's generation, in one statement. o locks the
// row first, so that concurrent puts each keep the version the other made;
// the new since reads k, so that o and k have run before s changes the
// row (a row this statement changed is invisible to o).
const subscriptionPutSQL = `WITH ` + subscriptionPosSQL + `,
o AS MATERIALIZED (SELECT * FROM bus_subscriptions WHERE tenant = $1 AND id = $2 FOR UPDATE),
` + subscriptionKeepSQL + `, s AS (
	INSERT INTO bus_subscriptions AS s (tenant, id, pattern, filter, target, enabled, max_retries, timeout_ns, version, created_at, updated_at, since)
	VALUES ($1, $2, $3, $4, $5, $6, $7, $8, 1, $9, $9, (SELECT c.pos FROM c, (SELECT count(*) FROM k) kept))
	ON CONFLICT (tenant, id) DO UPDATE SET pattern = excluded.pattern, filter = excluded.filter, target = excluded.target,
		enabled = excluded.enabled, max_retries = excluded.max_retries, timeout_ns = excluded.timeout_ns,
		version = s.version + 1, updated_at = excluded.updated_at, since = excluded.since
	RETURNING ` + subscriptionCols + `
), g AS (
	INSERT INTO bus_tenants (tenant, sub_generation) VALUES ($1, 1)
	ON CONFLICT (tenant) DO UPDATE SET sub_generation = bus_tenants.sub_generation + 1
)
SELECT * FROM s`

// BusSubscriptionPut: see storage.BusStore. The filter and target are
// stored unchecked beyond their text (the engine validates them); a
// negative MaxRetries or Timeout is refused.
func (s *Store) BusSubscriptionPut(ctx context.Context, p *storage.BusSubscriptionPutParams) (*heraldtype.Subscription, error) {
	if p == nil {
		return nil, backend.NilParams("postgres: put subscription")
	}
	sub := &p.Subscription
	if err := backend.CheckBusSubscription(p.Tenant, sub); err != nil {
		return nil, fmt.Errorf("postgres: put subscription %.64q: %w", sub.ID, err)
	}
	target, err := targetArg(&sub.Target)
	if err != nil {
		return nil, fmt.Errorf("postgres: put subscription %q: %w", sub.ID, err)
	}
	var maxRetries *int32
	if sub.MaxRetries != nil {
		n := int32(*sub.MaxRetries)
		maxRetries = &n
	}
	now := backend.NowOr(p.Now).UnixNano()
	var out *heraldtype.Subscription
	err = s.do(ctx, func(ctx context.Context) error {
		var r subscriptionRow
		if err := s.pool.QueryRow(ctx, subscriptionPutSQL, p.Tenant, sub.ID, sub.Pattern, backend.RawArg(sub.Filter), target,
			sub.Enabled, maxRetries, int64(sub.Timeout), now).Scan(r.dest()...); err != nil {
			return err
		}
		var err error
		out, err = r.subscription()
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("postgres: put subscription %q: %w", sub.ID, err)
	}
	return out, nil
}

// BusSubscriptionGet: see storage.BusStore.
func (s *Store) BusSubscriptionGet(ctx context.Context, p *storage.BusSubscriptionGetParams) (*heraldtype.Subscription, error) {
	if p == nil {
		return nil, backend.NilParams("postgres: get subscription")
	}
	if err := backend.CheckBusID(p.Tenant, "subscription id", p.ID); err != nil {
		return nil, fmt.Errorf("postgres: get subscription: %w", err)
	}
	var out *heraldtype.Subscription
	err := s.do(ctx, func(ctx context.Context) error {
		var r subscriptionRow
		err := s.pool.QueryRow(ctx, `SELECT `+subscriptionCols+` FROM bus_subscriptions WHERE tenant = $1 AND id = $2`,
			p.Tenant, p.ID).Scan(r.dest()...)
		if errors.Is(err, pgx.ErrNoRows) {
			return heraldtype.ErrNotFound
		}
		if err != nil {
			return err
		}
		out, err = r.subscription()
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("postgres: get subscription %q: %w", p.ID, err)
	}
	return out, nil
}

// subscriptionListSQL reads tenant $1's subscriptions and generation in one
// statement (one snapshot): a row with a NULL id when it has none.
const subscriptionListSQL = `SELECT g.gen, s.id IS NOT NULL, COALESCE(s.id, ''), COALESCE(s.pattern, ''), s.filter,
	s.target, COALESCE(s.enabled, false), s.max_retries, COALESCE(s.timeout_ns, 0), COALESCE(s.version, 0),
	COALESCE(s.created_at, 0), COALESCE(s.updated_at, 0)
FROM (SELECT COALESCE((SELECT sub_generation FROM bus_tenants WHERE tenant = $1), 0) AS gen) g
LEFT JOIN bus_subscriptions s ON s.tenant = $1
ORDER BY s.id`

// BusSubscriptionList: see storage.BusStore.
func (s *Store) BusSubscriptionList(ctx context.Context, p *storage.BusTenantParams) ([]*heraldtype.Subscription, int64, error) {
	vs, gen, err := s.subscriptionRows(ctx, "list subscriptions", subscriptionListSQL, p, false)
	if err != nil {
		return nil, 0, err
	}
	out := make([]*heraldtype.Subscription, len(vs))
	for i, v := range vs {
		out[i] = v.Subscription
	}
	return out, gen, nil
}

// subscriptionVersionsSQL reads tenant $1's current subscriptions and kept
// versions (migration 0020), by id and since, and its generation in one
// statement (one snapshot): a row with a NULL id when it has none.
const subscriptionVersionsSQL = `SELECT g.gen, v.id IS NOT NULL, COALESCE(v.id, ''), COALESCE(v.pattern, ''), v.filter,
	v.target, COALESCE(v.enabled, false), v.max_retries, COALESCE(v.timeout_ns, 0), COALESCE(v.version, 0),
	COALESCE(v.created_at, 0), COALESCE(v.updated_at, 0), COALESCE(v.since, 0), COALESCE(v.until, 0)
FROM (SELECT COALESCE((SELECT sub_generation FROM bus_tenants WHERE tenant = $1), 0) AS gen) g
LEFT JOIN (
	SELECT ` + subscriptionCols + `, since, 0::bigint AS until FROM bus_subscriptions WHERE tenant = $1
	UNION ALL SELECT ` + subscriptionCols + `, since, until FROM bus_subscription_versions WHERE tenant = $1
) v ON true
ORDER BY v.id, v.since`

// BusSubscriptionVersions: see storage.BusStore.
func (s *Store) BusSubscriptionVersions(ctx context.Context, p *storage.BusTenantParams) ([]*storage.BusSubscriptionVersion, int64, error) {
	return s.subscriptionRows(ctx, "subscription versions", subscriptionVersionsSQL, p, true)
}

// subscriptionRows runs q (subscriptionListSQL or, with versions,
// subscriptionVersionsSQL, whose rows end with since and until) for p's
// tenant: its subscriptions and its generation, read in one snapshot.
func (s *Store) subscriptionRows(ctx context.Context, op, q string, p *storage.BusTenantParams, versions bool) ([]*storage.BusSubscriptionVersion, int64, error) {
	if p == nil {
		return nil, 0, backend.NilParams("postgres: " + op)
	}
	if err := backend.CheckBusTenant(p.Tenant); err != nil {
		return nil, 0, fmt.Errorf("postgres: %s: %w", op, err)
	}
	var (
		out []*storage.BusSubscriptionVersion
		gen int64
	)
	err := s.do(ctx, func(ctx context.Context) error {
		out = nil
		rows, err := s.pool.Query(ctx, q, p.Tenant)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var (
				r  subscriptionRow
				ok bool
				v  storage.BusSubscriptionVersion
			)
			dest := append([]any{&gen, &ok}, r.dest()...)
			if versions {
				dest = append(dest, &v.Since, &v.Until)
			}
			if err := rows.Scan(dest...); err != nil {
				return err
			}
			if !ok {
				continue
			}
			if v.Subscription, err = r.subscription(); err != nil {
				return err
			}
			out = append(out, &v)
		}
		return rows.Err()
	})
	if err != nil {
		return nil, 0, fmt.Errorf("postgres: %s: %w", op, err)
	}
	return out, gen, nil
}

// BusSubscriptionDelete: see storage.BusStore.
func (s *Store) BusSubscriptionDelete(ctx context.Context, p *storage.BusSubscriptionGetParams) error {
	if p == nil {
		return backend.NilParams("postgres: delete subscription")
	}
	if err := backend.CheckBusID(p.Tenant, "subscription id", p.ID); err != nil {
		return fmt.Errorf("postgres: delete subscription: %w", err)
	}
	err := s.do(ctx, func(ctx context.Context) error {
		var n int
		// Its fair-queueing number goes with it: put again, it starts
		// afresh (its executions still queued get numbers as if it were
		// new, when they are retried).
		if err := s.pool.QueryRow(ctx, `WITH `+subscriptionPosSQL+`, o AS (
				DELETE FROM bus_subscriptions WHERE tenant = $1 AND id = $2 RETURNING *
			), d AS (SELECT 1 FROM o), `+subscriptionKeepSQL+`, g AS (
				UPDATE bus_tenants SET sub_generation = sub_generation + 1 WHERE tenant = $1 AND EXISTS (SELECT 1 FROM d)
			), fq AS (
				DELETE FROM bus_fq WHERE tenant = $1 AND subscription = $2 AND EXISTS (SELECT 1 FROM d)
			)
			SELECT count(*) FROM d`, p.Tenant, p.ID).Scan(&n); err != nil {
			return err
		}
		if n == 0 {
			return heraldtype.ErrNotFound
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("postgres: delete subscription %q: %w", p.ID, err)
	}
	return nil
}

// BusSubscriptionGeneration: see storage.BusStore.
func (s *Store) BusSubscriptionGeneration(ctx context.Context, p *storage.BusTenantParams) (int64, error) {
	if p == nil {
		return 0, backend.NilParams("postgres: subscription generation")
	}
	if err := backend.CheckBusTenant(p.Tenant); err != nil {
		return 0, fmt.Errorf("postgres: subscription generation: %w", err)
	}
	var gen int64
	err := s.do(ctx, func(ctx context.Context) error {
		return s.pool.QueryRow(ctx, `SELECT COALESCE((SELECT sub_generation FROM bus_tenants WHERE tenant = $1), 0)`,
			p.Tenant).Scan(&gen)
	})
	if err != nil {
		return 0, fmt.Errorf("postgres: subscription generation: %w", err)
	}
	return gen, nil
}

// ---- scripts ----

const scriptCols = `id, version, source, first_created, created_at`

func scanScript(row pgx.Row) (*heraldtype.Script, error) {
	var (
		sc               heraldtype.Script
		version          int32
		created, updated int64
	)
	if err := row.Scan(&sc.ID, &version, &sc.Source, &created, &updated); err != nil {
		return nil, err
	}
	sc.Version = int(version)
	sc.CreatedAt, sc.UpdatedAt = backend.FromNanos(created), backend.FromNanos(updated)
	return &sc, nil
}

// Script puts: scriptDemoteSQL locks script $2 of tenant $1's latest row
// (a tombstone of a deleted script included) and marks it no longer
// latest; scriptInsertSQL then inserts version max+1 ($3 source, $4 now)
// as the latest, and scriptBuryTombstoneSQL drops the tombstone, in the
// same batch (one transaction). Two puts that race (the first two of an
// id, or one whose demote waited for the other's commit and found no
// latest row left) collide on the primary key or bus_scripts_latest; the
// loser tries again.
const (
	scriptDemoteSQL = `UPDATE bus_scripts SET latest = false WHERE tenant = $1 AND id = $2 AND latest`
	scriptInsertSQL = `INSERT INTO bus_scripts (tenant, id, version, source, created_at, first_created, latest)
	SELECT $1, $2, COALESCE(last.version, 0) + 1, $3, $4,
		CASE WHEN last.deleted IS NOT FALSE THEN $4 ELSE last.first_created END, true
	FROM (SELECT 1) one
	LEFT JOIN (SELECT version, first_created, deleted FROM bus_scripts WHERE tenant = $1 AND id = $2
	           ORDER BY version DESC LIMIT 1) last ON true
	RETURNING ` + scriptCols
	scriptBuryTombstoneSQL = `DELETE FROM bus_scripts WHERE tenant = $1 AND id = $2 AND deleted`
)

// BusScriptPut: see storage.BusStore. The source must be valid UTF-8
// without NUL bytes.
func (s *Store) BusScriptPut(ctx context.Context, p *storage.BusScriptPutParams) (*heraldtype.Script, error) {
	if p == nil {
		return nil, backend.NilParams("postgres: put script")
	}
	if err := backend.CheckBusScriptPut(p); err != nil {
		return nil, fmt.Errorf("postgres: put script %.64q: %w", p.ID, err)
	}
	now := backend.NowOr(p.Now).UnixNano()
	var out *heraldtype.Script
	err := s.do(ctx, func(ctx context.Context) error {
		for try := 0; ; try++ {
			var b batch
			b.exec("demote", scriptDemoteSQL, p.Tenant, p.ID)
			b.queryRow("insert", func(row pgx.Row) error {
				var err error
				out, err = scanScript(row)
				return err
			}, scriptInsertSQL, p.Tenant, p.ID, p.Source, now)
			b.exec("drop tombstone", scriptBuryTombstoneSQL, p.Tenant, p.ID)
			b.exec("change the generation", scriptGenerationSQL, p.Tenant)
			err := b.send(ctx, s.pool)
			if c := pgConstraint(err); (c == "bus_scripts_pkey" || c == "bus_scripts_latest") && try < 10 {
				continue
			}
			return err
		}
	})
	if err != nil {
		return nil, fmt.Errorf("postgres: put script %q: %w", p.ID, err)
	}
	return out, nil
}

// BusScriptGet: see storage.BusStore. A negative version is refused.
func (s *Store) BusScriptGet(ctx context.Context, p *storage.BusScriptGetParams) (*heraldtype.Script, error) {
	if p == nil {
		return nil, backend.NilParams("postgres: get script")
	}
	if err := backend.CheckBusScriptGet(p); err != nil {
		return nil, fmt.Errorf("postgres: get script: %w", err)
	}
	var out *heraldtype.Script
	err := s.do(ctx, func(ctx context.Context) error {
		var row pgx.Row
		if p.Version == 0 {
			row = s.pool.QueryRow(ctx, `SELECT `+scriptCols+` FROM bus_scripts WHERE tenant = $1 AND id = $2 AND latest AND NOT deleted`, p.Tenant, p.ID)
		} else {
			row = s.pool.QueryRow(ctx, `SELECT `+scriptCols+` FROM bus_scripts WHERE tenant = $1 AND id = $2 AND version = $3 AND NOT deleted`,
				p.Tenant, p.ID, p.Version)
		}
		var err error
		out, err = scanScript(row)
		if errors.Is(err, pgx.ErrNoRows) {
			return heraldtype.ErrNotFound
		}
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("postgres: get script %q version %d: %w", p.ID, p.Version, err)
	}
	return out, nil
}

// BusScriptList: see storage.BusStore. One range scan of
// bus_scripts_latest.
func (s *Store) BusScriptList(ctx context.Context, p *storage.BusTenantParams) ([]*heraldtype.Script, error) {
	if p == nil {
		return nil, backend.NilParams("postgres: list scripts")
	}
	if err := backend.CheckBusTenant(p.Tenant); err != nil {
		return nil, fmt.Errorf("postgres: list scripts: %w", err)
	}
	var out []*heraldtype.Script
	err := s.do(ctx, func(ctx context.Context) error {
		out = nil
		rows, err := s.pool.Query(ctx, `SELECT `+scriptCols+` FROM bus_scripts WHERE tenant = $1 AND latest AND NOT deleted ORDER BY id`, p.Tenant)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			sc, err := scanScript(rows)
			if err != nil {
				return err
			}
			out = append(out, sc)
		}
		return rows.Err()
	})
	if err != nil {
		return nil, fmt.Errorf("postgres: list scripts: %w", err)
	}
	return out, nil
}

// scriptDeleteSQL deletes script $2 of tenant $1: its latest row becomes
// a tombstone, the others go. It returns the tombstone's version (no row:
// no such script).
const scriptDeleteSQL = `WITH t AS (
	UPDATE bus_scripts SET deleted = true, source = '' WHERE tenant = $1 AND id = $2 AND latest AND NOT deleted
	RETURNING version
), d AS (
	DELETE FROM bus_scripts WHERE tenant = $1 AND id = $2 AND NOT latest AND EXISTS (SELECT 1 FROM t)
), g AS (
	INSERT INTO bus_tenants (tenant, sub_generation) SELECT $1, 1 WHERE EXISTS (SELECT 1 FROM t)
	ON CONFLICT (tenant) DO UPDATE SET sub_generation = bus_tenants.sub_generation + 1
)
SELECT version FROM t`

// scriptGenerationSQL changes tenant $1's subscription generation when a
// script is put or deleted: the runtimes' script caches are checked
// against it (storage.BusStore.BusSubscriptionGeneration).
const scriptGenerationSQL = `INSERT INTO bus_tenants (tenant, sub_generation) VALUES ($1, 1)
	ON CONFLICT (tenant) DO UPDATE SET sub_generation = bus_tenants.sub_generation + 1`

// BusScriptDelete: see storage.BusStore. p.Version is ignored: every
// version goes. The id's version count is kept (a tombstone), so that the
// id saved again continues it.
func (s *Store) BusScriptDelete(ctx context.Context, p *storage.BusScriptGetParams) error {
	if p == nil {
		return backend.NilParams("postgres: delete script")
	}
	if err := backend.CheckBusID(p.Tenant, "script id", p.ID); err != nil {
		return fmt.Errorf("postgres: delete script: %w", err)
	}
	err := s.do(ctx, func(ctx context.Context) error {
		for range 10 {
			var version int32
			err := s.pool.QueryRow(ctx, scriptDeleteSQL, p.Tenant, p.ID).Scan(&version)
			if !errors.Is(err, pgx.ErrNoRows) {
				return err
			}
			// None, or a put replaced the latest version while the
			// delete waited for its lock: look again.
			var live bool
			if err := s.pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM bus_scripts
				WHERE tenant = $1 AND id = $2 AND latest AND NOT deleted)`, p.Tenant, p.ID).Scan(&live); err != nil {
				return err
			}
			if !live {
				return heraldtype.ErrNotFound
			}
		}
		return errors.New("the script keeps changing")
	})
	if err != nil {
		return fmt.Errorf("postgres: delete script %q: %w", p.ID, err)
	}
	return nil
}

// ---- dead letters ----

const deadLetterCols = `d.id, d.execution, d.event_id, d.subscription, d.target, d.event_type, d.event_data, d.error_kind,
	d.error, d.stack, d.attempts, d.failed_at, d.created_at, d.reprocessed_at`

func scanDeadLetter(row pgx.Row) (*heraldtype.DeadLetter, error) {
	var (
		d                                  heraldtype.DeadLetter
		target, data, errText, stack       []byte
		kind                               string
		attempts                           int32
		failedAt, createdAt, reprocessedAt int64
	)
	if err := row.Scan(&d.ID, &d.Execution, &d.EventID, &d.Subscription, &target, &d.EventType, &data, &kind,
		&errText, &stack, &attempts, &failedAt, &createdAt, &reprocessedAt); err != nil {
		return nil, err
	}
	t, err := decodeTarget(target)
	if err != nil {
		return nil, fmt.Errorf("dead letter %d: %w", d.ID, err)
	}
	d.Target = t
	d.EventData = backend.RawOf(data)
	d.ErrorKind = heraldtype.ErrorKind(kind)
	d.Error, d.Stack = string(errText), string(stack)
	d.Attempts = int(attempts)
	d.FailedAt, d.CreatedAt, d.ReprocessedAt = backend.FromNanos(failedAt), backend.FromNanos(createdAt), backend.FromNanos(reprocessedAt)
	return &d, nil
}

// deadLetterWhere is the WHERE clause of f over bus_dead_letters d, its
// arguments numbered from $2 ($1 is the tenant) appended to args. The
// filter is checked (backend.CheckBusLetterFilter).
func deadLetterWhere(f *storage.BusDeadLetterFilter, args []any) (string, []any) {
	where := []string{"d.tenant = $1"}
	add := func(cond string, v any) {
		args = append(args, v)
		where = append(where, strings.ReplaceAll(cond, "?", "$"+strconv.Itoa(len(args))))
	}
	if f.Subscription != "" {
		// bus_dead_letters_subscription serves it (only it states id > 0).
		add("d.subscription = ? AND d.id > 0", f.Subscription)
	}
	if f.EventType != "" {
		add("d.event_type = ?", f.EventType)
	}
	if f.ErrorKind != "" {
		add("d.error_kind = ?", string(f.ErrorKind))
	}
	if f.Reprocessed != nil {
		if *f.Reprocessed {
			where = append(where, "d.reprocessed_at > 0")
		} else {
			where = append(where, "d.reprocessed_at = 0")
		}
	}
	if f.Through > 0 {
		add("d.id <= ?", f.Through)
	}
	if f.IDs != nil {
		add("d.id = ANY(?::bigint[])", f.IDs)
	}
	return strings.Join(where, " AND "), args
}

// BusDeadLetterList: see storage.BusStore. One range scan of the primary
// key (or, filtered by subscription, of bus_dead_letters_subscription),
// newest first.
func (s *Store) BusDeadLetterList(ctx context.Context, p *storage.BusDeadLetterListParams) ([]*heraldtype.DeadLetter, int64, error) {
	if p == nil {
		return nil, 0, backend.NilParams("postgres: list dead letters")
	}
	limit, err := backend.BusLetterListArgs(p)
	if err != nil {
		return nil, 0, fmt.Errorf("postgres: list dead letters: %w", err)
	}
	if p.Filter.IDs != nil && len(p.Filter.IDs) == 0 {
		return nil, 0, nil
	}
	where, args := deadLetterWhere(&p.Filter, []any{p.Tenant})
	if p.Before > 0 {
		args = append(args, p.Before)
		where += " AND d.id < $" + strconv.Itoa(len(args))
	}
	args = append(args, limit+1)
	q := `SELECT ` + deadLetterCols + ` FROM bus_dead_letters d WHERE ` + where +
		` ORDER BY d.id DESC LIMIT $` + strconv.Itoa(len(args))
	return queryPage(ctx, s, "list dead letters", q, args, limit, scanDeadLetter,
		func(d *heraldtype.DeadLetter) int64 { return d.ID })
}

// queryPage runs a page query (asking for limit+1 rows, so that a further
// page shows) and returns the page and the cursor of the next one (0 when
// this one is the last).
func queryPage[T any](ctx context.Context, s *Store, what, q string, args []any, limit int,
	scan func(pgx.Row) (T, error), id func(T) int64) ([]T, int64, error) {
	var out []T
	err := s.do(ctx, func(ctx context.Context) error {
		out = nil
		var b batch
		b.exec("", scanSettings)
		b.query("", func(rows pgx.Rows) error {
			for rows.Next() {
				v, err := scan(rows)
				if err != nil {
					return err
				}
				out = append(out, v)
			}
			return nil
		}, q, args...)
		return b.send(ctx, s.pool)
	})
	if err != nil {
		return nil, 0, fmt.Errorf("postgres: %s: %w", what, err)
	}
	if len(out) > limit {
		out = out[:limit]
		return out, id(out[limit-1]), nil
	}
	return out, 0, nil
}

// BusDeadLetterGet: see storage.BusStore.
func (s *Store) BusDeadLetterGet(ctx context.Context, p *storage.BusDeadLetterGetParams) (*heraldtype.DeadLetter, error) {
	if p == nil {
		return nil, backend.NilParams("postgres: get dead letter")
	}
	if err := backend.CheckBusTenant(p.Tenant); err != nil {
		return nil, fmt.Errorf("postgres: get dead letter: %w", err)
	}
	var out *heraldtype.DeadLetter
	err := s.do(ctx, func(ctx context.Context) error {
		var err error
		out, err = scanDeadLetter(s.pool.QueryRow(ctx, `SELECT `+deadLetterCols+` FROM bus_dead_letters d WHERE d.tenant = $1 AND d.id = $2`,
			p.Tenant, p.ID))
		if errors.Is(err, pgx.ErrNoRows) {
			return heraldtype.ErrNotFound
		}
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("postgres: get dead letter %d: %w", p.ID, err)
	}
	return out, nil
}

// lettersSet is the SQL of the letter ids the lock statement before it in
// the same transaction stored in the setting herald.letters (none if it
// stored none).
const lettersSet = `COALESCE(NULLIF(current_setting('herald.letters', true), ''), '{}')::bigint[]`

// busReprocessSQL requeues, at $2, the executions of tenant $1's letters
// that the lock statement before it locked (lettersSet, oldest first),
// with fair-queueing numbers in that order, and marks the letters
// reprocessed. Its snapshot has the locked rows' current versions, which
// it changes by ctid.
const busReprocessSQL = `WITH l AS MATERIALIZED (
	SELECT x.ord, d.tid AS dtid, e.tid AS etid, e.subscription
	FROM unnest(` + lettersSet + `) WITH ORDINALITY AS x(id, ord)
	CROSS JOIN LATERAL (SELECT ctid AS tid, execution FROM bus_dead_letters d WHERE d.tenant = $1 AND d.id = x.id OFFSET 0) d
	CROSS JOIN LATERAL (SELECT ctid AS tid, subscription FROM bus_routes e WHERE e.tenant = $1 AND e.id = d.execution OFFSET 0) e
), nums AS MATERIALIZED (
	SELECT herald_bus_numbers($1, ARRAY(SELECT subscription FROM l ORDER BY ord)) AS n
), letters AS (
	UPDATE bus_dead_letters SET reprocessed_at = $2 WHERE ctid = ANY(ARRAY(SELECT dtid FROM l))
), execs AS (
	UPDATE bus_routes e SET status = 'queued', due_at = $2, attempts = 0, reprocessed = e.reprocessed + 1,
		fq = ((SELECT n FROM nums))[(SELECT l.ord FROM l WHERE l.etid = e.ctid)], updated_at = $2
	WHERE e.ctid = ANY(ARRAY(SELECT etid FROM l))
)
SELECT count(*) FROM l`

// BusDeadLetterReprocess: see storage.BusStore. One transaction of two
// statements in one round trip: the first locks up to p.Limit matching
// letters (oldest first) whose execution still ended in them, with those
// executions, skipping letters another transaction holds; the second
// (busReprocessSQL) queues the executions again.
func (s *Store) BusDeadLetterReprocess(ctx context.Context, p *storage.BusDeadLetterOpParams) (int, error) {
	if p == nil {
		return 0, backend.NilParams("postgres: reprocess dead letters")
	}
	limit, err := backend.BusLetterOpArgs(p)
	if err != nil {
		return 0, fmt.Errorf("postgres: reprocess dead letters: %w", err)
	}
	where, args := deadLetterWhere(&p.Filter, []any{p.Tenant})
	if p.Filter.Reprocessed != nil && *p.Filter.Reprocessed {
		return 0, nil // reprocessed letters are never reprocessed again
	}
	if p.Filter.IDs != nil && len(p.Filter.IDs) == 0 {
		return 0, nil
	}
	now := backend.NowOr(p.Now).UnixNano()
	args = append(args, limit)
	lock := `WITH l AS MATERIALIZED (
		SELECT d.id FROM bus_dead_letters d
		CROSS JOIN LATERAL (
			SELECT 1 FROM bus_routes e WHERE e.tenant = $1 AND e.id = d.execution AND e.status = 'dead_lettered'
			  AND e.dead_letter = d.id OFFSET 0 FOR UPDATE
		) e
		WHERE ` + where + ` AND d.reprocessed_at = 0
		ORDER BY d.id
		LIMIT $` + strconv.Itoa(len(args)) + `
		FOR UPDATE OF d SKIP LOCKED
	)
	SELECT set_config('herald.letters', COALESCE((SELECT array_agg(id ORDER BY id) FROM l)::text, ''), true)`
	var n int
	err = s.do(ctx, func(ctx context.Context) error {
		var b batch
		b.exec("", scanSettings)
		b.exec("lock letters", lock, args...)
		b.queryRow("requeue", func(row pgx.Row) error { return row.Scan(&n) }, busReprocessSQL, p.Tenant, now)
		return b.send(ctx, s.pool)
	})
	if err != nil {
		return 0, fmt.Errorf("postgres: reprocess dead letters: %w", err)
	}
	if n > 0 {
		s.signal(p.Tenant, storage.WorkBus)
	}
	return n, nil
}

// BusDeadLetterDelete: see storage.BusStore. The oldest matching letters
// go first; letters another transaction holds are skipped. One
// transaction of two statements in one round trip: the first locks the
// letters, the second (whose snapshot has their current versions) deletes
// them by ctid.
func (s *Store) BusDeadLetterDelete(ctx context.Context, p *storage.BusDeadLetterOpParams) (int, error) {
	if p == nil {
		return 0, backend.NilParams("postgres: delete dead letters")
	}
	limit, err := backend.BusLetterOpArgs(p)
	if err != nil {
		return 0, fmt.Errorf("postgres: delete dead letters: %w", err)
	}
	where, args := deadLetterWhere(&p.Filter, []any{p.Tenant})
	if p.Filter.IDs != nil && len(p.Filter.IDs) == 0 {
		return 0, nil
	}
	args = append(args, limit)
	lock := `SELECT set_config('herald.letters', COALESCE((SELECT array_agg(id ORDER BY id) FROM (
		SELECT d.id FROM bus_dead_letters d WHERE ` + where + ` ORDER BY d.id LIMIT $` + strconv.Itoa(len(args)) + `
		FOR UPDATE SKIP LOCKED) l)::text, ''), true)`
	var n int
	err = s.do(ctx, func(ctx context.Context) error {
		var b batch
		b.exec("", scanSettings)
		b.exec("lock letters", lock, args...)
		b.queryRow("delete", func(row pgx.Row) error { return row.Scan(&n) }, `WITH d AS (
			DELETE FROM bus_dead_letters WHERE ctid = ANY(ARRAY(
				SELECT d.tid FROM unnest(`+lettersSet+`) AS x(id)
				CROSS JOIN LATERAL (SELECT ctid AS tid FROM bus_dead_letters d WHERE d.tenant = $1 AND d.id = x.id OFFSET 0) d))
			RETURNING 1
		) SELECT count(*) FROM d`, p.Tenant)
		return b.send(ctx, s.pool)
	})
	if err != nil {
		return 0, fmt.Errorf("postgres: delete dead letters: %w", err)
	}
	return n, nil
}

// ---- events, attempts, retention ----

// busEventGetSQL reads an event of tenant $1 ($2 id) with its routes, in
// the order they were decided, in one statement (one snapshot).
const busEventGetSQL = `SELECT e.type, e.data, e.source, e.published_at, e.routed_at,
	r.id IS NOT NULL, r.status, r.filtered_by, ` + busExecColsNull + `
FROM bus_events e
LEFT JOIN LATERAL (
	SELECT * FROM bus_routes r WHERE r.tenant = $1 AND r.event_id = e.id AND r.id > 0 OFFSET 0
) r ON true
WHERE e.tenant = $1 AND e.id = $2
ORDER BY r.id`

// busExecColsNull are busExecCols of a route that may be missing.
const busExecColsNull = `COALESCE(r.id, 0), COALESCE(r.event_id, ''), COALESCE(r.subscription, ''), COALESCE(r.status, ''),
	COALESCE(r.attempts, 0), COALESCE(r.due_at, 0), r.last_error, r.result, COALESCE(r.dead_letter, 0),
	COALESCE(r.reprocessed, 0), COALESCE(r.created_at, 0), COALESCE(r.updated_at, 0)`

// BusEventGet: see storage.BusStore.
func (s *Store) BusEventGet(ctx context.Context, p *storage.BusEventGetParams) (*heraldtype.PublishedEvent, error) {
	if p == nil {
		return nil, backend.NilParams("postgres: get bus event")
	}
	if err := backend.CheckBusID(p.Tenant, "event id", p.ID); err != nil {
		return nil, fmt.Errorf("postgres: get bus event: %w", err)
	}
	var out *heraldtype.PublishedEvent
	err := s.do(ctx, func(ctx context.Context) error {
		out = nil
		rows, err := s.pool.Query(ctx, busEventGetSQL, p.Tenant, p.ID)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var (
				ev                  heraldtype.PublishedEvent
				data                []byte
				published, routedAt int64
				hasRoute            bool
				status              *string
				filteredBy          []byte
				r                   execRow
			)
			dest := append([]any{&ev.Type, &data, &ev.Source, &published, &routedAt, &hasRoute, &status, &filteredBy}, r.dest()...)
			if err := rows.Scan(dest...); err != nil {
				return err
			}
			if out == nil {
				ev.ID, ev.Data = p.ID, backend.RawOf(data)
				ev.PublishedAt, ev.RoutedAt = backend.FromNanos(published), backend.FromNanos(routedAt)
				out = &ev
			}
			if !hasRoute {
				continue
			}
			route := &heraldtype.Route{Subscription: r.e.Subscription, FilteredBy: string(filteredBy)}
			if *status != "filtered" {
				route.Matched = true
				e := r.execution()
				route.Execution = &e
			}
			out.Routes = append(out.Routes, route)
		}
		if err := rows.Err(); err != nil {
			return err
		}
		if out == nil {
			return heraldtype.ErrNotFound
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("postgres: get bus event %q: %w", p.ID, err)
	}
	return out, nil
}

const attemptCols = `a.id, a.execution, a.event_id, a.subscription, a.number, a.succeeded, a.started_at, a.duration_ns,
	a.result, a.error_kind, a.error, a.stack, a.logs`

func scanAttempt(row pgx.Row) (*heraldtype.Attempt, error) {
	var (
		a                            heraldtype.Attempt
		number                       int32
		started, dur                 int64
		result, errText, stack, logs []byte
		kind                         string
	)
	if err := row.Scan(&a.ID, &a.Execution, &a.EventID, &a.Subscription, &number, &a.Succeeded, &started, &dur,
		&result, &kind, &errText, &stack, &logs); err != nil {
		return nil, err
	}
	a.Number = int(number)
	a.StartedAt, a.Duration = backend.FromNanos(started), heraldtype.Duration(dur)
	a.Result, a.ErrorKind = backend.RawOf(result), heraldtype.ErrorKind(kind)
	a.Error, a.Stack = string(errText), string(stack)
	lines, err := decodeLogs(logs)
	if err != nil {
		return nil, fmt.Errorf("attempt %d: %w", a.ID, err)
	}
	a.Logs = lines
	return &a, nil
}

// BusAttemptList: see storage.BusStore. One range scan of the index of
// the first condition set (execution, event, subscription), oldest first.
func (s *Store) BusAttemptList(ctx context.Context, p *storage.BusAttemptListParams) ([]*heraldtype.Attempt, int64, error) {
	if p == nil {
		return nil, 0, backend.NilParams("postgres: list attempts")
	}
	limit, err := backend.BusAttemptListArgs(p)
	if err != nil {
		return nil, 0, fmt.Errorf("postgres: list attempts: %w", err)
	}
	// Each condition states its index's predicate (migration 0008).
	where, args := []string{"a.tenant = $1"}, []any{p.Tenant}
	add := func(cond string, v any) {
		args = append(args, v)
		where = append(where, cond+strconv.Itoa(len(args)))
	}
	if p.Execution != 0 {
		add("a.execution > 0 AND a.execution = $", p.Execution)
	}
	if p.EventID != "" {
		add("a.event_id <> '' AND a.event_id = $", p.EventID)
	}
	if p.Subscription != "" {
		add("a.subscription <> '' AND a.subscription = $", p.Subscription)
	}
	if p.After > 0 {
		add("a.id > $", p.After)
	}
	args = append(args, limit+1)
	q := `SELECT ` + attemptCols + ` FROM bus_attempts a WHERE ` + strings.Join(where, " AND ") +
		` ORDER BY a.id LIMIT $` + strconv.Itoa(len(args))
	return queryPage(ctx, s, "list attempts", q, args, limit, scanAttempt,
		func(a *heraldtype.Attempt) int64 { return a.ID })
}

// busPruneLockSQL locks up to $3 of tenant $1's events routed before $2
// whose executions have all ended, oldest routed first (skipping events
// other transactions hold), with their routes, reads the routes' statuses
// again under the lock (a concurrent reprocess may have queued one again),
// and stores the ids of the events still prunable in the setting
// herald.pruned for busPruneSQL.
const busPruneLockSQL = `WITH cand AS MATERIALIZED (
	SELECT e.id FROM bus_events e
	LEFT JOIN LATERAL (
		SELECT 1 AS x FROM bus_routes r WHERE r.tenant = $1 AND r.event_id = e.id AND r.id > 0
		  AND r.status IN ('queued', 'running', 'retrying') LIMIT 1
	) busy ON true
	WHERE e.tenant = $1 AND e.routed_at > 0 AND e.routed_at < $2 AND busy.x IS NULL
	ORDER BY e.routed_at, e.seq
	LIMIT $3
	FOR UPDATE OF e SKIP LOCKED
), locked AS MATERIALIZED (
	SELECT c.id, r.status FROM cand c
	CROSS JOIN LATERAL (
		SELECT status FROM bus_routes r WHERE r.tenant = $1 AND r.event_id = c.id AND r.id > 0 OFFSET 0 FOR UPDATE
	) r
)
SELECT set_config('herald.pruned', COALESCE((SELECT array_agg(c.id)::text FROM cand c WHERE NOT EXISTS (
	SELECT 1 FROM locked l WHERE l.id = c.id AND l.status IN ('queued', 'running', 'retrying'))), ''), true)`

// busPruneSQL deletes tenant $1's events that busPruneLockSQL, before it
// in the same transaction, locked and found prunable, with their routes
// and attempts: its snapshot has the locked rows' current versions, which
// it finds by key and deletes by ctid. It returns how many events it
// deleted.
const busPruneSQL = `WITH ids AS MATERIALIZED (
	SELECT unnest(COALESCE(NULLIF(current_setting('herald.pruned', true), ''), '{}')::text[]) AS id
), routes AS (
	DELETE FROM bus_routes WHERE ctid = ANY(ARRAY(
		SELECT r.tid FROM ids CROSS JOIN LATERAL (
			SELECT ctid AS tid FROM bus_routes r WHERE r.tenant = $1 AND r.event_id = ids.id AND r.id > 0 OFFSET 0) r))
), attempts AS (
	DELETE FROM bus_attempts WHERE ctid = ANY(ARRAY(
		SELECT a.tid FROM ids CROSS JOIN LATERAL (
			SELECT ctid AS tid FROM bus_attempts a WHERE a.tenant = $1 AND a.event_id <> '' AND a.event_id = ids.id OFFSET 0) a))
), events AS (
	DELETE FROM bus_events WHERE ctid = ANY(ARRAY(
		SELECT e.tid FROM ids CROSS JOIN LATERAL (
			SELECT ctid AS tid FROM bus_events e WHERE e.tenant = $1 AND e.id = ids.id OFFSET 0) e))
	RETURNING 1
)
SELECT count(*) FROM events`

// busVersionsPruneSQL deletes tenant $1's kept subscription versions that
// no unrouted event needs: none is at or before the version's end.
const busVersionsPruneSQL = `DELETE FROM bus_subscription_versions v WHERE v.tenant = $1 AND NOT EXISTS (
	SELECT 1 FROM bus_events e WHERE e.tenant = $1 AND e.routed_at = 0 AND e.seq <= v.until)`

// BusPrune: see storage.BusStore. One transaction of three statements in one
// round trip (busPruneLockSQL, busPruneSQL, busVersionsPruneSQL); events another transaction
// holds are skipped.
func (s *Store) BusPrune(ctx context.Context, p *storage.BusPruneParams) (int, error) {
	if p == nil {
		return 0, backend.NilParams("postgres: bus prune")
	}
	limit, err := backend.BusPruneArgs(p)
	if err != nil {
		return 0, fmt.Errorf("postgres: bus prune: %w", err)
	}
	before := backend.Nanos(p.Before)
	if before <= 0 {
		return 0, nil
	}
	var n int
	err = s.do(ctx, func(ctx context.Context) error {
		var b batch
		b.exec("", scanSettings)
		b.exec("lock events", busPruneLockSQL, p.Tenant, before, limit)
		b.queryRow("delete", func(row pgx.Row) error { return row.Scan(&n) }, busPruneSQL, p.Tenant)
		b.exec("delete subscription versions", busVersionsPruneSQL, p.Tenant)
		return b.send(ctx, s.pool)
	})
	if err != nil {
		return 0, fmt.Errorf("postgres: bus prune: %w", err)
	}
	return n, nil
}

// busBacklogSQL counts tenant $1's unrouted events and unended executions,
// each count stopping at $2 (NULL: no limit).
const busBacklogSQL = `SELECT
	(SELECT count(*) FROM (SELECT 1 FROM bus_events WHERE tenant = $1 AND routed_at = 0 LIMIT $2) a) +
	(SELECT count(*) FROM (SELECT 1 FROM bus_routes WHERE tenant = $1 AND status IN ('queued', 'retrying') LIMIT $2) q) +
	(SELECT count(*) FROM (SELECT 1 FROM bus_routes WHERE tenant = $1 AND status = 'running' LIMIT $2) r)`

// BusBacklog: see storage.BusStore. Three index range scans, each
// stopping at p.Limit.
func (s *Store) BusBacklog(ctx context.Context, p *storage.BusBacklogParams) (int, error) {
	if p == nil {
		return 0, backend.NilParams("postgres: bus backlog")
	}
	if err := backend.CheckBusBacklog(p); err != nil {
		return 0, fmt.Errorf("postgres: bus backlog: %w", err)
	}
	var limit *int64
	if p.Limit > 0 {
		l := int64(p.Limit)
		limit = &l
	}
	var n int64
	err := s.do(ctx, func(ctx context.Context) error {
		var b batch
		b.exec("", scanSettings)
		b.queryRow("", func(row pgx.Row) error { return row.Scan(&n) }, busBacklogSQL, p.Tenant, limit)
		return b.send(ctx, s.pool)
	})
	if err != nil {
		return 0, fmt.Errorf("postgres: bus backlog: %w", err)
	}
	if p.Limit > 0 && n > int64(p.Limit) {
		n = int64(p.Limit)
	}
	return int(n), nil
}
