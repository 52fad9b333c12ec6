package postgres

import (
	"bytes"
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/heraldwf/herald/heraldtype"
	"github.com/heraldwf/herald/storage"
	"github.com/heraldwf/herald/storage/internal/backend"
)

const definitionCols = `tenant, name, schema, buffer, retention_ns, max_payload_bytes, correlation, version, created_at, updated_at`

func scanDefinition(row pgx.Row) (*heraldtype.EventDefinition, error) {
	d, _, err := scanDefinitionVersion(row)
	return d, err
}

// scanDefinitionVersion scans a definition and its version.
func scanDefinitionVersion(row pgx.Row) (*heraldtype.EventDefinition, int64, error) {
	var r backend.DefinitionRow
	if err := row.Scan(r.Dest()...); err != nil {
		return nil, 0, err
	}
	d, err := r.Definition()
	return d, r.Version(), err
}

// EventDefinitionPut: see storage.DefinitionStore. The version is a column
// of the row, which EventDefinitionDelete keeps.
func (s *Store) EventDefinitionPut(ctx context.Context, p *storage.EventDefinitionPutParams) (*heraldtype.EventDefinition, error) {
	if p == nil {
		return nil, backend.NilParams("postgres: put event definition")
	}
	d := &p.Definition
	buffer, err := backend.ValidateDefinition(d)
	if err != nil {
		return nil, fmt.Errorf("postgres: put event definition %q: %w", d.Name, err)
	}
	var correlation any
	if d.Correlation != nil {
		if correlation, err = jsonArg(backend.StoredCorrelation(d.Correlation)); err != nil {
			return nil, fmt.Errorf("postgres: put event definition %q: %w", d.Name, err)
		}
	}
	now := backend.NowOr(p.Now).UnixNano()
	var out *heraldtype.EventDefinition
	err = s.do(ctx, func(ctx context.Context) error {
		var err error
		out, err = scanDefinition(s.pool.QueryRow(ctx, `INSERT INTO event_definitions AS d
			(tenant, name, schema, buffer, retention_ns, max_payload_bytes, correlation, version, created_at, updated_at)
			VALUES ($1, $2, $3, $4, $5, $6, $7, 1, $8, $8)
			ON CONFLICT (tenant, name) DO UPDATE SET
				schema = excluded.schema, buffer = excluded.buffer, retention_ns = excluded.retention_ns,
				max_payload_bytes = excluded.max_payload_bytes, correlation = excluded.correlation,
				version = d.version + 1, updated_at = excluded.updated_at,
				created_at = CASE WHEN d.deleted THEN excluded.created_at ELSE d.created_at END,
				deleted = false
			RETURNING `+definitionCols,
			p.Tenant, d.Name, backend.RawArg(d.Schema), buffer, int64(d.Retention), int64(d.MaxPayloadBytes), correlation, now))
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("postgres: put event definition %q: %w", d.Name, err)
	}
	return out, nil
}

// EventDefinitionGet: see storage.DefinitionStore.
func (s *Store) EventDefinitionGet(ctx context.Context, p *storage.EventDefinitionGetParams) (*heraldtype.EventDefinition, error) {
	if p == nil {
		return nil, backend.NilParams("postgres: get event definition")
	}
	c := s.defGet(ctx, p)
	if c.err != nil {
		return nil, fmt.Errorf("postgres: get event definition %q: %w", p.Name, c.err)
	}
	return c.def, nil
}

// EventDefinitionCurrent: see storage.DefinitionStore. It is read as
// EventDefinitionGet is (batched with concurrent reads).
func (s *Store) EventDefinitionCurrent(ctx context.Context, p *storage.EventDefinitionGetParams) (*storage.CurrentDefinition, error) {
	if p == nil {
		return nil, backend.NilParams("postgres: read event definition")
	}
	c := s.defGet(ctx, p)
	switch {
	case errors.Is(c.err, heraldtype.ErrNotFound):
		return &storage.CurrentDefinition{}, nil
	case c.err != nil:
		return nil, fmt.Errorf("postgres: read event definition %q: %w", p.Name, c.err)
	}
	return &storage.CurrentDefinition{Definition: c.def, Version: c.version}, nil
}

// defGet reads p's definition, in a batch shared with concurrent reads.
func (s *Store) defGet(ctx context.Context, p *storage.EventDefinitionGetParams) *defGetCall {
	c := &defGetCall{ctx: ctx, tenant: p.Tenant, name: p.Name}
	if s.closed.Load() {
		c.err = s.defGetOne(ctx, c)
	} else if err := s.defGets.do(ctx, c); err != nil {
		c.err = err
	}
	return c
}

const defGetSQL = `SELECT ` + definitionCols + ` FROM event_definitions WHERE tenant = $1 AND name = $2 AND NOT deleted`

// defGetCall is one EventDefinitionGet.
type defGetCall struct {
	ctx          context.Context
	tenant, name string

	def     *heraldtype.EventDefinition
	version int64
	err     error
}

// defGetOne reads c's definition on its own.
func (s *Store) defGetOne(ctx context.Context, c *defGetCall) error {
	return s.do(ctx, func(ctx context.Context) error {
		var err error
		c.def, c.version, err = scanDefinitionVersion(s.pool.QueryRow(ctx, defGetSQL, c.tenant, c.name))
		if errors.Is(err, pgx.ErrNoRows) {
			return heraldtype.ErrNotFound
		}
		return err
	})
}

// Definition reads are batched like raises (see raiseBatch): under load
// many concurrent calls read the same definition (the engine's clients
// cache definitions by version, but every turn that sends an event reads
// its definition). The calls of a batch that name the same definition
// share one read. A batch starts after each of its calls was made, so each
// sees the definition as it was at some moment during its call, as alone.
const (
	maxDefGetBatches = 4
	maxDefGetBatch   = 64
)

// defGetBatch runs a batch of definition reads: one statement per distinct
// definition, in one round trip.
func (s *Store) defGetBatch(calls []*combined[*defGetCall]) {
	if len(calls) == 1 {
		c := calls[0].call
		c.err = s.defGetOne(c.ctx, c)
		return
	}
	type key struct{ tenant, name string }
	type read struct {
		def     *heraldtype.EventDefinition
		version int64
		err     error
	}
	reads := make(map[key]*read)
	var b batch
	for _, cc := range calls {
		k := key{cc.call.tenant, cc.call.name}
		if reads[k] != nil {
			continue
		}
		r := &read{}
		reads[k] = r
		b.queryRow("", func(row pgx.Row) error {
			r.def, r.version, r.err = scanDefinitionVersion(row)
			if errors.Is(r.err, pgx.ErrNoRows) {
				r.err = heraldtype.ErrNotFound
			} else if r.err != nil {
				return r.err
			}
			return nil
		}, defGetSQL, k.tenant, k.name)
	}
	ctx, cancel := context.WithTimeout(context.Background(), batchTimeout)
	err := b.send(ctx, s.pool)
	cancel()
	for _, cc := range calls {
		c := cc.call
		if err != nil {
			c.err = s.defGetOne(c.ctx, c)
			continue
		}
		r := reads[key{c.tenant, c.name}]
		c.def, c.version, c.err = copyDefinition(r.def), r.version, r.err
	}
}

// copyDefinition is a copy of d that shares nothing with it.
func copyDefinition(d *heraldtype.EventDefinition) *heraldtype.EventDefinition {
	if d == nil {
		return nil
	}
	c := *d
	c.Schema = bytes.Clone(d.Schema)
	if d.Correlation != nil {
		corr := *d.Correlation
		c.Correlation = &corr
	}
	return &c
}

// EventDefinitionList: see storage.DefinitionStore. Names are compared
// COLLATE "C", so the order is bytewise whatever the database's collation.
func (s *Store) EventDefinitionList(ctx context.Context, p *storage.EventDefinitionListParams) ([]*heraldtype.EventDefinition, error) {
	if p == nil {
		return nil, backend.NilParams("postgres: list event definitions")
	}
	var out []*heraldtype.EventDefinition
	err := s.do(ctx, func(ctx context.Context) error {
		out = nil
		rows, err := s.pool.Query(ctx,
			`SELECT `+definitionCols+` FROM event_definitions WHERE tenant = $1 AND NOT deleted ORDER BY name COLLATE "C"`, p.Tenant)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			d, err := scanDefinition(rows)
			if err != nil {
				return err
			}
			out = append(out, d)
		}
		return rows.Err()
	})
	if err != nil {
		return nil, fmt.Errorf("postgres: list event definitions: %w", err)
	}
	return out, nil
}

// EventDefinitionDelete: see storage.DefinitionStore. The row is kept as a
// tombstone (deleted set), so that a later put of the name continues its
// version.
func (s *Store) EventDefinitionDelete(ctx context.Context, p *storage.EventDefinitionGetParams) error {
	if p == nil {
		return backend.NilParams("postgres: delete event definition")
	}
	err := s.do(ctx, func(ctx context.Context) error {
		var ct pgconn.CommandTag
		ct, err := s.pool.Exec(ctx, `UPDATE event_definitions SET deleted = true WHERE tenant = $1 AND name = $2 AND NOT deleted`,
			p.Tenant, p.Name)
		if err != nil {
			return err
		}
		if ct.RowsAffected() == 0 {
			return heraldtype.ErrNotFound
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("postgres: delete event definition %q: %w", p.Name, err)
	}
	return nil
}

// expireSQL is EventExpire in one statement for $1 tenant, $2 now, $3
// limit. SKIP LOCKED keeps concurrent calls disjoint and leaves alone the
// messages InstanceCreate is rescuing at that moment.
const expireSQL = `WITH expired AS MATERIALIZED (
	SELECT m.id, m.instance_id, m.event_id, m.expires_at FROM inbox m
	WHERE m.tenant = $1 AND m.kind = 'event' AND m.expires_at > 0 AND m.expires_at <= $2
	  AND NOT EXISTS (SELECT 1 FROM instances i WHERE i.tenant = $1 AND i.id = m.instance_id)
	ORDER BY m.expires_at, m.id
	LIMIT $3
	FOR UPDATE OF m SKIP LOCKED
), gone AS (
	DELETE FROM inbox WHERE id IN (SELECT id FROM expired)
), dropped AS (
	UPDATE events e SET fate = 'dropped', reason = 'expired', updated_at = $2
	FROM expired x
	WHERE e.tenant = $1 AND e.event_id = x.event_id AND e.instance_id = x.instance_id
)
SELECT event_id FROM expired ORDER BY expires_at, id`

// EventExpire: see storage.EventStore. The expired messages are locked
// with SKIP LOCKED, so concurrent calls drop disjoint events.
func (s *Store) EventExpire(ctx context.Context, p *storage.EventExpireParams) ([]string, error) {
	if p == nil {
		return nil, backend.NilParams("postgres: expire events")
	}
	now := backend.NowOr(p.Now).UnixNano()
	limit := backend.ExpireLimit(p.Limit)
	var dropped []string
	err := s.do(ctx, func(ctx context.Context) error {
		dropped = nil
		rows, err := s.pool.Query(ctx, expireSQL, p.Tenant, now, limit)
		if err != nil {
			return err
		}
		dropped, err = pgx.CollectRows(rows, pgx.RowTo[string])
		if len(dropped) == 0 {
			dropped = nil
		}
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("postgres: expire events: %w", err)
	}
	return dropped, nil
}
