package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/heraldwf/herald/heraldtype"
	"github.com/heraldwf/herald/history"
	"github.com/heraldwf/herald/storage"
	"github.com/heraldwf/herald/storage/internal/backend"
)

const correlatedCols = `tenant, def, key, payload, created_at, updated_at, expires_at`

func scanCorrelated(sc scanner) (*heraldtype.CorrelatedEvent, error) {
	var r backend.CorrelatedRow
	if err := sc.Scan(r.Dest()...); err != nil {
		return nil, err
	}
	return r.Correlated(), nil
}

// loadCorrelated reads a correlated event with its produced list; it wraps
// heraldtype.ErrNotFound if there is none.
func loadCorrelated(ctx context.Context, q querier, tenant, def, key string) (*heraldtype.CorrelatedEvent, error) {
	c, err := scanCorrelated(q.QueryRowContext(ctx, `SELECT `+correlatedCols+` FROM correlated_events
		WHERE tenant = ? AND def = ? AND key = ?`, tenant, def, key))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("correlated event %q/%q: %w", def, key, heraldtype.ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("load correlated event: %w", err)
	}
	rows, err := q.QueryContext(ctx, `SELECT key, event_id, instance_id, execution, task_seq, created_at
		FROM correlated_produced WHERE tenant = ? AND def = ? AND key = ? ORDER BY rid`, tenant, def, key)
	if err != nil {
		return nil, fmt.Errorf("load produced events: %w", err)
	}
	defer rows.Close()
	if err := scanProduced(rows, func(string) *heraldtype.CorrelatedEvent { return c }); err != nil {
		return nil, err
	}
	return c, nil
}

// scanProduced appends produced rows (key, event_id, instance_id,
// execution, task_seq, created_at) to the events byKey returns.
func scanProduced(rows rowsIter, byKey func(string) *heraldtype.CorrelatedEvent) error {
	for rows.Next() {
		var (
			key       string
			pe        heraldtype.ProducedEvent
			createdAt int64
		)
		if err := rows.Scan(&key, &pe.EventID, &pe.InstanceID, &pe.Execution, &pe.TaskSeq, &createdAt); err != nil {
			return fmt.Errorf("load produced events: %w", err)
		}
		pe.CreatedAt = backend.FromNanos(createdAt)
		if c := byKey(key); c != nil {
			c.Produced = append(c.Produced, pe)
		}
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("load produced events: %w", err)
	}
	return nil
}

// deleteCorrelated deletes a correlated event and its produced list, and
// reports whether it existed.
func deleteCorrelated(w *wtx, tenant, def, key string) (bool, error) {
	res, err := w.exec(`DELETE FROM correlated_events WHERE tenant = ? AND def = ? AND key = ?`, tenant, def, key)
	if err != nil {
		return false, fmt.Errorf("delete correlated event: %w", err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return false, fmt.Errorf("delete correlated event: %w", err)
	}
	if _, err := w.exec(`DELETE FROM correlated_produced WHERE tenant = ? AND def = ? AND key = ?`, tenant, def, key); err != nil {
		return false, fmt.Errorf("delete produced events: %w", err)
	}
	return n > 0, nil
}

// commitCorrelated applies a turn's correlated-lane output when the turn
// does not end the execution (a terminal or continue-as-new commit deletes
// all markers instead): the withdrawn waits' markers are deleted and their
// deliveries handed on (backend.HandOnWithdrawn), then the new waits are
// registered (backend.RegisterWaits).
func commitCorrelated(lt *laneTx, p *storage.TurnCommitParams, execution int) error {
	if len(p.CancelCorrelatedWaits) > 0 {
		seqs, err := jsonArg(p.CancelCorrelatedWaits)
		if err != nil {
			return err
		}
		if _, err := lt.w.exec(`DELETE FROM correlated_waits WHERE tenant = ? AND instance_id = ? AND execution = ?
			AND task_seq IN (SELECT value FROM json_each(?))`, lt.tenant, lt.id, execution, seqs); err != nil {
			return fmt.Errorf("cancel correlated waits: %w", err)
		}
		if err := backend.HandOnWithdrawn(lt, execution, p.CancelCorrelatedWaits, false, backend.FromNanos(lt.now)); err != nil {
			return err
		}
	}
	return backend.RegisterWaits(lt, p)
}

// The primitives of the correlated-lane rules (backend.CorrelatedTx,
// WaitTx, PutTx, HandOnTx). The single writer serialises every transaction,
// so none needs a lock.

func (t *laneTx) Produce(m backend.Marker, def, key string, payload json.RawMessage, trace string, listed bool) error {
	eventID := backend.NewCorrelatedEventID()
	if _, err := t.w.exec(`INSERT INTO events (tenant, event_id, instance_id, lane, name, key, fate, received_at, updated_at)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)`,
		t.tenant, eventID, m.InstanceID, string(history.LaneCorrelated), def, key, string(history.FatePending), t.now, t.now); err != nil {
		return fmt.Errorf("insert produced event: %w", err)
	}
	if err := insertMessage(t.w, t.tenant, m.InstanceID, &storage.Message{
		Kind:        storage.MsgEvent,
		Execution:   m.Execution,
		TaskSeq:     m.TaskSeq,
		Lane:        history.LaneCorrelated,
		EventID:     eventID,
		Name:        def,
		Key:         key,
		Payload:     payload,
		TraceParent: trace,
		VisibleAt:   backend.FromNanos(t.now),
	}, t.now); err != nil {
		return err
	}
	if err := lowerReady(t.w, t.tenant, m.InstanceID, t.now); err != nil {
		return err
	}
	if listed {
		if _, err := t.w.exec(`INSERT INTO correlated_produced (tenant, def, key, event_id, instance_id, execution, task_seq, created_at)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?)`, t.tenant, def, key, eventID, m.InstanceID, m.Execution, m.TaskSeq, t.now); err != nil {
			return fmt.Errorf("insert produced entry: %w", err)
		}
	}
	t.w.signalKinds(t.tenant, storage.WorkTurns)
	return nil
}

func (t *laneTx) DeleteMarker(id int64) error {
	_, err := t.w.exec(`DELETE FROM correlated_waits WHERE rid = ?`, id)
	return err
}

func (t *laneTx) DeleteCorrelated(def, key string) error {
	_, err := deleteCorrelated(t.w, t.tenant, def, key)
	return err
}

func (t *laneTx) LiveCorrelated(def, key string) (json.RawMessage, string, bool, error) {
	var (
		payload []byte
		trace   string
	)
	err := t.w.queryRow(`SELECT payload, trace FROM correlated_events
		WHERE tenant = ? AND def = ? AND key = ? AND (expires_at = 0 OR expires_at > ?)`,
		t.tenant, def, key, t.now).Scan(&payload, &trace)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, "", false, nil
	}
	if err != nil {
		return nil, "", false, err
	}
	return backend.RawOf(payload), trace, true, nil
}

func (t *laneTx) StoreMarker(execution int, w storage.CorrelatedWait) error {
	_, err := t.w.exec(`INSERT INTO correlated_waits
		(tenant, instance_id, execution, task_seq, def, key, delete_after_first, created_at)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?)
		ON CONFLICT (tenant, instance_id, execution, task_seq) DO UPDATE SET
			def = excluded.def, key = excluded.key, delete_after_first = excluded.delete_after_first,
			created_at = excluded.created_at`,
		t.tenant, t.id, execution, w.TaskSeq, w.Def, w.Key, w.DeleteAfterFirst, t.now)
	return err
}

func (t *laneTx) UpsertCorrelated(p *storage.CorrelatedPutParams) error {
	var expiresAt int64
	err := t.w.queryRow(`SELECT expires_at FROM correlated_events WHERE tenant = ? AND def = ? AND key = ?`,
		t.tenant, p.Def, p.Key).Scan(&expiresAt)
	switch {
	case err == nil:
		if expiresAt > 0 && expiresAt <= t.now {
			if _, err := deleteCorrelated(t.w, t.tenant, p.Def, p.Key); err != nil {
				return err
			}
		}
	case !errors.Is(err, sql.ErrNoRows):
		return fmt.Errorf("load correlated event: %w", err)
	}
	_, err = t.w.exec(`INSERT INTO correlated_events (tenant, def, key, payload, created_at, updated_at, expires_at, trace)
		VALUES (?, ?, ?, ?, ?5, ?5, ?6, ?7)
		ON CONFLICT (tenant, def, key) DO UPDATE SET
			payload = excluded.payload, updated_at = excluded.updated_at, expires_at = excluded.expires_at,
			trace = excluded.trace`,
		t.tenant, p.Def, p.Key, backend.RawArg(p.Payload), t.now, backend.Nanos(p.ExpiresAt), p.TraceParent)
	return err
}

func (t *laneTx) Markers(def, key string, limit int) ([]backend.Marker, error) {
	if limit <= 0 {
		limit = -1 // SQLite: no limit
	}
	rows, err := t.w.query(`SELECT w.rid, w.instance_id, w.execution, w.task_seq FROM correlated_waits w
		JOIN instances i ON i.tenant = w.tenant AND i.id = w.instance_id
		WHERE w.tenant = ? AND w.def = ? AND w.key = ?
		  AND i.execution = w.execution AND i.status IN `+nonTerminal+`
		ORDER BY w.created_at, w.rid LIMIT +?`, t.tenant, def, key, limit)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var ms []backend.Marker
	for rows.Next() {
		var m backend.Marker
		if err := rows.Scan(&m.ID, &m.InstanceID, &m.Execution, &m.TaskSeq); err != nil {
			return nil, err
		}
		ms = append(ms, m)
	}
	return ms, rows.Err()
}

func (t *laneTx) LoadCorrelated(def, key string) (*heraldtype.CorrelatedEvent, error) {
	return loadCorrelated(t.w.ctx, t.w, t.tenant, def, key)
}

func (t *laneTx) Deliveries(execution int, seqs []int, all bool) ([]backend.Delivery, error) {
	const cols = `SELECT id, event_id, name, key, payload, trace FROM inbox
		WHERE tenant = ? AND instance_id = ? AND kind = ? AND lane = ? AND execution = ?`
	var (
		rows rowsIter
		err  error
	)
	if all {
		// Every ending commit asks: without the seqs' json_each, which
		// SQLite would build even when the OR does not need it.
		rows, err = t.w.query(cols+` ORDER BY id`,
			t.tenant, t.id, string(storage.MsgEvent), string(history.LaneCorrelated), execution)
	} else {
		var seqsArg any
		if seqsArg, err = jsonArg(seqs); err != nil {
			return nil, err
		}
		rows, err = t.w.query(cols+` AND task_seq IN (SELECT value FROM json_each(?)) ORDER BY id`,
			t.tenant, t.id, string(storage.MsgEvent), string(history.LaneCorrelated), execution, seqsArg)
	}
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []backend.Delivery
	for rows.Next() {
		var (
			d       backend.Delivery
			payload sql.NullString
		)
		if err := rows.Scan(&d.MessageID, &d.EventID, &d.Def, &d.Key, &payload, &d.Trace); err != nil {
			return nil, err
		}
		if payload.Valid {
			d.Payload = json.RawMessage(payload.String)
		}
		out = append(out, d)
	}
	return out, rows.Err()
}

func (t *laneTx) Correlation(def string) (*heraldtype.CorrelationConfig, error) {
	var cc sql.NullString
	err := t.w.queryRow(`SELECT correlation FROM event_definitions WHERE tenant = ? AND name = ? AND deleted = 0`,
		t.tenant, def).Scan(&cc)
	if errors.Is(err, sql.ErrNoRows) || err == nil && !cc.Valid {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("load definition %q: %w", def, err)
	}
	var cfg heraldtype.CorrelationConfig
	if err := json.Unmarshal([]byte(cc.String), &cfg); err != nil {
		return nil, fmt.Errorf("definition %q: correlation: %w", def, err)
	}
	return &cfg, nil
}

func (t *laneTx) DeleteMessage(id int64) error {
	_, err := t.w.exec(`DELETE FROM inbox WHERE id = ? AND tenant = ? AND instance_id = ?`, id, t.tenant, t.id)
	return err
}

func (t *laneTx) OldestMarker(def, key string, notOwn bool) (backend.Marker, bool, error) {
	var m backend.Marker
	err := t.w.queryRow(`SELECT w.rid, w.instance_id, w.execution, w.task_seq FROM correlated_waits w
		JOIN instances i ON i.tenant = w.tenant AND i.id = w.instance_id
		WHERE w.tenant = ? AND w.def = ? AND w.key = ?
		  AND i.execution = w.execution AND i.status IN `+nonTerminal+`
		  AND NOT (? AND w.instance_id = ?)
		ORDER BY w.created_at, w.rid LIMIT 1`, t.tenant, def, key, notOwn, t.id).Scan(&m.ID, &m.InstanceID, &m.Execution, &m.TaskSeq)
	if errors.Is(err, sql.ErrNoRows) {
		return m, false, nil
	}
	return m, err == nil, err
}

func (t *laneTx) StoreCorrelated(def, key string, payload json.RawMessage, trace string, expiresAt time.Time) error {
	_, err := t.w.exec(`INSERT INTO correlated_events (tenant, def, key, payload, created_at, updated_at, expires_at, trace)
		VALUES (?, ?, ?, ?, ?5, ?5, ?6, ?7) ON CONFLICT (tenant, def, key) DO NOTHING`,
		t.tenant, def, key, backend.RawArg(payload), t.now, backend.Nanos(expiresAt), trace)
	return err
}

// deleteMarkers deletes every correlation marker of an instance (it ended
// or continued as new).
func deleteMarkers(w *wtx, tenant, id string) error {
	if _, err := w.exec(`DELETE FROM correlated_waits WHERE tenant = ? AND instance_id = ?`, tenant, id); err != nil {
		return fmt.Errorf("delete correlation markers: %w", err)
	}
	return nil
}

// CorrelatedPut: see storage.CorrelatedStore; the rule is
// backend.CorrelatedPut. The single writer serialises puts with the turn
// commits that register waits.
func (s *Store) CorrelatedPut(ctx context.Context, p *storage.CorrelatedPutParams) (*heraldtype.CorrelatedEvent, error) {
	if p == nil {
		return nil, backend.NilParams("sqlite: put correlated event")
	}
	if err := backend.ValidateCorrelated(p.Def, p.Key); err != nil {
		return nil, fmt.Errorf("sqlite: put correlated event: %w", err)
	}
	if err := backend.ValidateTraceParent(p.TraceParent); err != nil {
		return nil, fmt.Errorf("sqlite: put correlated event: %w", err)
	}
	now := backend.NowOr(p.Now).UnixNano()
	var out *heraldtype.CorrelatedEvent
	err := s.write(ctx, func(w *wtx) (err error) {
		out, _, err = backend.CorrelatedPut(&laneTx{w: w, tenant: p.Tenant, now: now}, p)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("sqlite: put correlated event %q/%q: %w", p.Def, p.Key, err)
	}
	return out, nil
}

// CorrelatedGet: see storage.CorrelatedStore.
func (s *Store) CorrelatedGet(ctx context.Context, p *storage.CorrelatedGetParams) (_ *heraldtype.CorrelatedEvent, err error) {
	defer s.afterRead(ctx, &err)
	if p == nil {
		return nil, backend.NilParams("sqlite: get correlated event")
	}
	if s.closed.Load() {
		return nil, heraldtype.ErrClosed
	}
	tx, err := s.rdb.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		return nil, fmt.Errorf("sqlite: get correlated event: %w", s.readErr(err))
	}
	defer tx.Rollback()
	c, err := loadCorrelated(ctx, s.reader(tx), p.Tenant, p.Def, p.Key)
	if err != nil {
		return nil, fmt.Errorf("sqlite: get correlated event: %w", s.readErr(err))
	}
	return c, nil
}

// CorrelatedDelete: see storage.CorrelatedStore.
func (s *Store) CorrelatedDelete(ctx context.Context, p *storage.CorrelatedGetParams) error {
	if p == nil {
		return backend.NilParams("sqlite: delete correlated event")
	}
	err := s.write(ctx, func(w *wtx) error {
		found, err := deleteCorrelated(w, p.Tenant, p.Def, p.Key)
		if err != nil {
			return err
		}
		if !found {
			return heraldtype.ErrNotFound
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("sqlite: delete correlated event %q/%q: %w", p.Def, p.Key, err)
	}
	return nil
}

// CorrelatedSearch: see storage.CorrelatedStore.
func (s *Store) CorrelatedSearch(ctx context.Context, p *storage.CorrelatedSearchParams) (_ []*heraldtype.CorrelatedEvent, _ string, err error) {
	defer s.afterRead(ctx, &err)
	if p == nil {
		return nil, "", backend.NilParams("sqlite: search correlated events")
	}
	if err := backend.ValidateCorrelatedSearch(p); err != nil {
		return nil, "", fmt.Errorf("sqlite: search correlated events: %w", err)
	}
	if s.closed.Load() {
		return nil, "", heraldtype.ErrClosed
	}
	limit := backend.SearchLimit(p.Limit)
	where := []string{"c.tenant = ?", "c.def = ?"}
	args := []any{p.Tenant, p.Def}
	if !p.Earliest.IsZero() {
		where = append(where, "c.created_at >= ?")
		args = append(args, p.Earliest.UnixNano())
	}
	if !p.Latest.IsZero() {
		where = append(where, "c.created_at <= ?")
		args = append(args, p.Latest.UnixNano())
	}
	if p.Bookmark != "" {
		createdAt, key, err := backend.DecodeBookmark(p.Bookmark)
		if err != nil {
			return nil, "", fmt.Errorf("sqlite: search correlated events: %w", err)
		}
		where = append(where, "(c.created_at > ? OR (c.created_at = ? AND c.key > ?))")
		args = append(args, createdAt, createdAt, key)
	}
	if p.HasProduced != nil {
		exists := `EXISTS (SELECT 1 FROM correlated_produced x WHERE x.tenant = c.tenant AND x.def = c.def AND x.key = c.key)`
		if !*p.HasProduced {
			exists = "NOT " + exists
		}
		where = append(where, exists)
	}
	args = append(args, limit+1)

	tx, err := s.rdb.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		return nil, "", fmt.Errorf("sqlite: search correlated events: %w", s.readErr(err))
	}
	defer tx.Rollback()
	r := s.reader(tx)
	rows, err := r.QueryContext(ctx, `SELECT c.tenant, c.def, c.key, c.payload, c.created_at, c.updated_at, c.expires_at
		FROM correlated_events c WHERE `+strings.Join(where, " AND ")+`
		ORDER BY c.created_at, c.key LIMIT +?`, args...)
	if err != nil {
		return nil, "", fmt.Errorf("sqlite: search correlated events: %w", s.readErr(err))
	}
	var out []*heraldtype.CorrelatedEvent
	for rows.Next() {
		c, err := scanCorrelated(rows)
		if err != nil {
			rows.Close()
			return nil, "", fmt.Errorf("sqlite: search correlated events: %w", err)
		}
		out = append(out, c)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, "", fmt.Errorf("sqlite: search correlated events: %w", s.readErr(err))
	}
	out, next := backend.SearchPage(out, limit)
	if len(out) == 0 {
		return nil, "", nil
	}
	byKey := make(map[string]*heraldtype.CorrelatedEvent, len(out))
	keys := make([]string, len(out))
	for i, c := range out {
		byKey[c.Key] = c
		keys[i] = c.Key
	}
	keysArg, err := jsonArg(keys)
	if err != nil {
		return nil, "", fmt.Errorf("sqlite: search correlated events: %w", err)
	}
	prows, err := r.QueryContext(ctx, `SELECT key, event_id, instance_id, execution, task_seq, created_at
		FROM correlated_produced WHERE tenant = ? AND def = ? AND key IN (SELECT value FROM json_each(?))
		ORDER BY rid`, p.Tenant, p.Def, keysArg)
	if err != nil {
		return nil, "", fmt.Errorf("sqlite: search correlated events: %w", s.readErr(err))
	}
	defer prows.Close()
	if err := scanProduced(prows, func(k string) *heraldtype.CorrelatedEvent { return byKey[k] }); err != nil {
		return nil, "", fmt.Errorf("sqlite: search correlated events: %w", s.readErr(err))
	}
	return out, next, nil
}

// CorrelatedExpire: see storage.CorrelatedStore.
func (s *Store) CorrelatedExpire(ctx context.Context, p *storage.CorrelatedExpireParams) ([]string, error) {
	if p == nil {
		return nil, backend.NilParams("sqlite: expire correlated events")
	}
	now := backend.NowOr(p.Now).UnixNano()
	limit := backend.ExpireLimit(p.Limit)
	var keys []string
	err := s.write(ctx, func(w *wtx) error {
		keys = nil
		rows, err := w.query(`SELECT def, key FROM correlated_events
			WHERE tenant = ? AND expires_at > 0 AND expires_at <= ?
			ORDER BY expires_at, def, key LIMIT +?`, p.Tenant, now, limit)
		if err != nil {
			return fmt.Errorf("find expired correlated events: %w", err)
		}
		var defs []string
		for rows.Next() {
			var def, key string
			if err := rows.Scan(&def, &key); err != nil {
				rows.Close()
				return fmt.Errorf("find expired correlated events: %w", err)
			}
			defs, keys = append(defs, def), append(keys, key)
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return fmt.Errorf("find expired correlated events: %w", err)
		}
		for i := range keys {
			if _, err := deleteCorrelated(w, p.Tenant, defs[i], keys[i]); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("sqlite: expire correlated events: %w", err)
	}
	return keys, nil
}
