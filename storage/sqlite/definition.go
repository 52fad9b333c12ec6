package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/heraldwf/herald/heraldtype"
	"github.com/heraldwf/herald/history"
	"github.com/heraldwf/herald/storage"
	"github.com/heraldwf/herald/storage/internal/backend"
)

const definitionCols = `tenant, name, schema, buffer, retention_ns, max_payload_bytes, correlation, version, created_at, updated_at`

func scanDefinition(sc scanner) (*heraldtype.EventDefinition, error) {
	d, _, err := scanDefinitionVersion(sc)
	return d, err
}

// scanDefinitionVersion scans a definition and its version.
func scanDefinitionVersion(sc scanner) (*heraldtype.EventDefinition, int64, error) {
	var r backend.DefinitionRow
	if err := sc.Scan(r.Dest()...); err != nil {
		return nil, 0, err
	}
	d, err := r.Definition()
	return d, r.Version(), err
}

// definitionVersionQuery is the current version of definition (?1 tenant,
// ?2 name): 0 if there is none (never put, or deleted), as
// storage.EventRaiseParams.DefinitionVersion names it.
const definitionVersionQuery = `SELECT COALESCE((SELECT version FROM event_definitions
	WHERE tenant = ?1 AND name = ?2 AND deleted = 0), 0)`

// EventDefinitionPut: see storage.DefinitionStore. The version is a column
// of the row, which EventDefinitionDelete keeps.
func (s *Store) EventDefinitionPut(ctx context.Context, p *storage.EventDefinitionPutParams) (*heraldtype.EventDefinition, error) {
	if p == nil {
		return nil, backend.NilParams("sqlite: put event definition")
	}
	d := &p.Definition
	buffer, err := backend.ValidateDefinition(d)
	if err != nil {
		return nil, fmt.Errorf("sqlite: put event definition %q: %w", d.Name, err)
	}
	var correlation any
	if d.Correlation != nil {
		if correlation, err = jsonArg(backend.StoredCorrelation(d.Correlation)); err != nil {
			return nil, fmt.Errorf("sqlite: put event definition %q: %w", d.Name, err)
		}
	}
	now := backend.NowOr(p.Now).UnixNano()
	var out *heraldtype.EventDefinition
	err = s.write(ctx, func(w *wtx) error {
		w.defs = true
		var err error
		out, err = scanDefinition(w.queryRow(`INSERT INTO event_definitions
			(tenant, name, schema, buffer, retention_ns, max_payload_bytes, correlation, version, created_at, updated_at)
			VALUES (?, ?, ?, ?, ?, ?, ?, 1, ?8, ?8)
			ON CONFLICT (tenant, name) DO UPDATE SET
				schema = excluded.schema, buffer = excluded.buffer, retention_ns = excluded.retention_ns,
				max_payload_bytes = excluded.max_payload_bytes, correlation = excluded.correlation,
				version = version + 1, updated_at = excluded.updated_at,
				created_at = CASE WHEN deleted THEN excluded.created_at ELSE created_at END,
				deleted = 0
			RETURNING `+definitionCols,
			p.Tenant, d.Name, backend.RawArg(d.Schema), buffer, int64(d.Retention), d.MaxPayloadBytes, correlation, now))
		if err != nil {
			return fmt.Errorf("upsert: %w", err)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("sqlite: put event definition %q: %w", d.Name, err)
	}
	return out, nil
}

// EventDefinitionGet: see storage.DefinitionStore.
func (s *Store) EventDefinitionGet(ctx context.Context, p *storage.EventDefinitionGetParams) (_ *heraldtype.EventDefinition, err error) {
	defer s.afterDefinitionRead(ctx, &err)
	if p == nil {
		return nil, backend.NilParams("sqlite: get event definition")
	}
	if s.closed.Load() {
		return nil, heraldtype.ErrClosed
	}
	d, err := scanDefinition(s.reader(nil).QueryRowContext(ctx,
		`SELECT `+definitionCols+` FROM event_definitions WHERE tenant = ? AND name = ? AND deleted = 0`, p.Tenant, p.Name))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("sqlite: get event definition %q: %w", p.Name, heraldtype.ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("sqlite: get event definition %q: %w", p.Name, s.readErr(err))
	}
	return d, nil
}

// EventDefinitionCurrent: see storage.DefinitionStore.
func (s *Store) EventDefinitionCurrent(ctx context.Context, p *storage.EventDefinitionGetParams) (_ *storage.CurrentDefinition, err error) {
	defer s.afterDefinitionRead(ctx, &err)
	if p == nil {
		return nil, backend.NilParams("sqlite: read event definition")
	}
	if s.closed.Load() {
		return nil, heraldtype.ErrClosed
	}
	d, v, err := scanDefinitionVersion(s.reader(nil).QueryRowContext(ctx,
		`SELECT `+definitionCols+` FROM event_definitions WHERE tenant = ? AND name = ? AND deleted = 0`, p.Tenant, p.Name))
	if errors.Is(err, sql.ErrNoRows) {
		return &storage.CurrentDefinition{}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("sqlite: read event definition %q: %w", p.Name, s.readErr(err))
	}
	return &storage.CurrentDefinition{Definition: d, Version: v}, nil
}

// EventDefinitionList: see storage.DefinitionStore.
func (s *Store) EventDefinitionList(ctx context.Context, p *storage.EventDefinitionListParams) (_ []*heraldtype.EventDefinition, err error) {
	defer s.afterDefinitionRead(ctx, &err)
	if p == nil {
		return nil, backend.NilParams("sqlite: list event definitions")
	}
	if s.closed.Load() {
		return nil, heraldtype.ErrClosed
	}
	rows, err := s.reader(nil).QueryContext(ctx,
		`SELECT `+definitionCols+` FROM event_definitions WHERE tenant = ? AND deleted = 0 ORDER BY name`, p.Tenant)
	if err != nil {
		return nil, fmt.Errorf("sqlite: list event definitions: %w", s.readErr(err))
	}
	defer rows.Close()
	var out []*heraldtype.EventDefinition
	for rows.Next() {
		d, err := scanDefinition(rows)
		if err != nil {
			return nil, fmt.Errorf("sqlite: list event definitions: %w", err)
		}
		out = append(out, d)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("sqlite: list event definitions: %w", s.readErr(err))
	}
	return out, nil
}

// EventDefinitionDelete: see storage.DefinitionStore. The row is kept as a
// tombstone (deleted set), so that a later put of the name continues its
// version.
func (s *Store) EventDefinitionDelete(ctx context.Context, p *storage.EventDefinitionGetParams) error {
	if p == nil {
		return backend.NilParams("sqlite: delete event definition")
	}
	err := s.write(ctx, func(w *wtx) error {
		w.defs = true
		res, err := w.exec(`UPDATE event_definitions SET deleted = 1 WHERE tenant = ? AND name = ? AND deleted = 0`,
			p.Tenant, p.Name)
		if err != nil {
			return err
		}
		if n, err := res.RowsAffected(); err != nil {
			return err
		} else if n == 0 {
			return heraldtype.ErrNotFound
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("sqlite: delete event definition %q: %w", p.Name, err)
	}
	return nil
}

// expiredEventsQuery selects EventExpire's inbox messages for ?1 = tenant,
// ?2 = now, ?3 = limit. The literal kind and expires_at terms let SQLite use
// the partial index inbox_expiring.
const expiredEventsQuery = `SELECT m.id, m.instance_id, m.event_id FROM inbox m
	WHERE m.tenant = ?1 AND m.kind = 'event' AND m.expires_at > 0 AND m.expires_at <= ?2
	  AND NOT EXISTS (SELECT 1 FROM instances i WHERE i.tenant = ?1 AND i.id = m.instance_id)
	ORDER BY m.expires_at, m.id LIMIT +?3`

// EventExpire: see storage.EventStore. The single writer serialises
// concurrent calls.
func (s *Store) EventExpire(ctx context.Context, p *storage.EventExpireParams) ([]string, error) {
	if p == nil {
		return nil, backend.NilParams("sqlite: expire events")
	}
	now := backend.NowOr(p.Now).UnixNano()
	limit := backend.ExpireLimit(p.Limit)
	var dropped []string
	err := s.write(ctx, func(w *wtx) error {
		dropped = nil
		rows, err := w.query(expiredEventsQuery, p.Tenant, now, limit)
		if err != nil {
			return fmt.Errorf("find expired events: %w", err)
		}
		type msg struct {
			id                  int64
			instanceID, eventID string
		}
		var msgs []msg
		for rows.Next() {
			var m msg
			if err := rows.Scan(&m.id, &m.instanceID, &m.eventID); err != nil {
				rows.Close()
				return fmt.Errorf("find expired events: %w", err)
			}
			msgs = append(msgs, m)
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return fmt.Errorf("find expired events: %w", err)
		}
		for _, m := range msgs {
			if _, err := w.exec(`DELETE FROM inbox WHERE id = ?`, m.id); err != nil {
				return fmt.Errorf("delete event %q: %w", m.eventID, err)
			}
			if _, err := w.exec(`UPDATE events SET fate = ?, reason = ?, updated_at = ?
				WHERE tenant = ? AND event_id = ? AND instance_id = ?`,
				string(history.FateDropped), string(history.DropExpired), now,
				p.Tenant, m.eventID, m.instanceID); err != nil {
				return fmt.Errorf("drop event %q: %w", m.eventID, err)
			}
			dropped = append(dropped, m.eventID)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("sqlite: expire events: %w", err)
	}
	return dropped, nil
}
