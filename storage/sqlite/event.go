package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"

	"github.com/heraldwf/herald/heraldtype"
	"github.com/heraldwf/herald/history"
	"github.com/heraldwf/herald/storage"
	"github.com/heraldwf/herald/storage/internal/backend"
)

// EventRaise: see storage.EventStore.
func (s *Store) EventRaise(ctx context.Context, p *storage.EventRaiseParams) (*storage.EventRaiseResult, error) {
	if p == nil {
		return nil, errors.New("sqlite: raise event: nil params")
	}
	if err := backend.ValidateRaise(p); err != nil {
		return nil, fmt.Errorf("sqlite: raise event: %w", err)
	}
	start, err := backend.StartIfAbsent(p)
	if err != nil {
		return nil, fmt.Errorf("sqlite: raise event %q: start if absent: %w", p.EventID, err)
	}
	now := backend.NowOr(p.Now)
	var res *storage.EventRaiseResult
	err = s.write(ctx, func(w *wtx) error {
		res = nil
		// The ledger row first: a duplicate id is the only reason it is not
		// inserted, and then the first raise's row says what to answer. A
		// later refusal (the instance is terminal) rolls the insert back.
		ins, err := w.exec(`INSERT INTO events (tenant, event_id, instance_id, lane, name, fate, received_at, updated_at)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (tenant, event_id) DO NOTHING`,
			p.Tenant, p.EventID, p.InstanceID, string(p.Lane), p.Name, string(history.FatePending),
			now.UnixNano(), now.UnixNano())
		if err != nil {
			return fmt.Errorf("insert event: %w", err)
		}
		if n, err := ins.RowsAffected(); err != nil {
			return fmt.Errorf("insert event: %w", err)
		} else if n == 0 {
			var (
				instanceID, lane, name string
				receivedAt             int64
			)
			if err := w.queryRow(`SELECT instance_id, lane, name, received_at FROM events WHERE tenant = ? AND event_id = ?`,
				p.Tenant, p.EventID).Scan(&instanceID, &lane, &name, &receivedAt); err != nil {
				return fmt.Errorf("check event id: %w", err)
			}
			if instanceID != p.InstanceID || lane != string(p.Lane) || name != p.Name {
				return fmt.Errorf("first raised for instance %q, lane %q, name %q: %w",
					instanceID, lane, name, heraldtype.ErrEventIDConflict)
			}
			res = &storage.EventRaiseResult{EventID: p.EventID, ReceivedAt: backend.FromNanos(receivedAt), Duplicate: true}
			return nil
		}

		// The instance's status, and its ready time lowered for the message
		// added below, in one statement.
		started := false
		var status string
		err = w.queryRow(`UPDATE instances SET ready_at = MIN(COALESCE(ready_at, ?3), ?3)
			WHERE tenant = ?1 AND id = ?2 RETURNING status`, p.Tenant, p.InstanceID, now.UnixNano()).Scan(&status)
		switch {
		case err == nil:
			if heraldtype.Status(status).Terminal() {
				return fmt.Errorf("instance %q is %s: %w", p.InstanceID, status, heraldtype.ErrInstanceNotRunning)
			}
		case errors.Is(err, sql.ErrNoRows):
			if start != nil {
				if _, err := createInstance(w, start); err != nil {
					return fmt.Errorf("start instance: %w", err)
				}
				started = true
			}
		default:
			return fmt.Errorf("load instance: %w", err)
		}

		// Only an event kept for an instance that does not exist can expire:
		// once the instance exists its events are the engine's business.
		exists := status != "" || started
		var expiresAt int64
		if !exists {
			expiresAt = backend.Nanos(p.ExpiresAt)
		}
		if err := insertExpiringMessage(w, p.Tenant, p.InstanceID, &storage.Message{
			Kind:        storage.MsgEvent,
			Lane:        p.Lane,
			EventID:     p.EventID,
			Name:        p.Name,
			Payload:     p.Payload,
			Latest:      p.Latest,
			TraceParent: p.TraceParent,
			VisibleAt:   now,
		}, expiresAt, now.UnixNano()); err != nil {
			return err
		}
		if started {
			if err := lowerReady(w, p.Tenant, p.InstanceID, now.UnixNano()); err != nil {
				return err
			}
		}
		w.signalKinds(p.Tenant, storage.WorkTurns)
		res = &storage.EventRaiseResult{EventID: p.EventID, ReceivedAt: now, Started: started}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("sqlite: raise event %q: %w", p.EventID, err)
	}
	return res, nil
}

// EventGet: see storage.EventStore.
func (s *Store) EventGet(ctx context.Context, p *storage.EventGetParams) (_ *heraldtype.EventRecord, err error) {
	defer s.afterRead(ctx, &err)
	if p == nil {
		return nil, errors.New("sqlite: get event: nil params")
	}
	if s.closed.Load() {
		return nil, heraldtype.ErrClosed
	}
	e, err := scanEvent(s.reader(nil).QueryRowContext(ctx, `SELECT `+eventCols+` FROM events WHERE tenant = ? AND event_id = ?`,
		p.Tenant, p.EventID))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("sqlite: get event %q: %w", p.EventID, heraldtype.ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("sqlite: get event %q: %w", p.EventID, s.readErr(err))
	}
	return e, nil
}

// EventList: see storage.EventStore.
func (s *Store) EventList(ctx context.Context, p *storage.EventListParams) (_ []*heraldtype.EventRecord, err error) {
	defer s.afterRead(ctx, &err)
	if p == nil {
		return nil, errors.New("sqlite: list events: nil params")
	}
	if s.closed.Load() {
		return nil, heraldtype.ErrClosed
	}
	var (
		where = []string{"tenant = ?"}
		args  = []any{p.Tenant}
	)
	if p.InstanceID != "" {
		where = append(where, "instance_id = ?")
		args = append(args, p.InstanceID)
	}
	if p.Lane != "" {
		where = append(where, "lane = ?")
		args = append(args, string(p.Lane))
	}
	if p.Name != "" {
		where = append(where, "name = ?")
		args = append(args, p.Name)
	}
	if p.Fate != "" {
		where = append(where, "fate = ?")
		args = append(args, string(p.Fate))
	}
	limit := backend.EventLimit(p.Limit)
	args = append(args, limit)
	rows, err := s.reader(nil).QueryContext(ctx, `SELECT `+eventCols+` FROM events
		WHERE `+strings.Join(where, " AND ")+` ORDER BY rid LIMIT ?`, args...)
	if err != nil {
		return nil, fmt.Errorf("sqlite: list events: %w", s.readErr(err))
	}
	defer rows.Close()
	var out []*heraldtype.EventRecord
	for rows.Next() {
		e, err := scanEvent(rows)
		if err != nil {
			return nil, fmt.Errorf("sqlite: list events: %w", err)
		}
		out = append(out, e)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("sqlite: list events: %w", s.readErr(err))
	}
	return out, nil
}
