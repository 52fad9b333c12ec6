package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/heraldwf/herald/history"
	"github.com/heraldwf/herald/storage"
	"github.com/heraldwf/herald/storage/internal/backend"
)

const correlatedCols = `tenant, def, key, payload, created_at, updated_at, expires_at`

func scanCorrelated(sc scanner) (*storage.CorrelatedEvent, error) {
	var r backend.CorrelatedRow
	if err := sc.Scan(r.Dest()...); err != nil {
		return nil, err
	}
	return r.Correlated(), nil
}

// loadCorrelated reads a correlated event with its produced list; it wraps
// storage.ErrNotFound if there is none.
func loadCorrelated(ctx context.Context, q querier, tenant, def, key string) (*storage.CorrelatedEvent, error) {
	c, err := scanCorrelated(q.QueryRowContext(ctx, `SELECT `+correlatedCols+` FROM correlated_events
		WHERE tenant = ? AND def = ? AND key = ?`, tenant, def, key))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("correlated event %q/%q: %w", def, key, storage.ErrNotFound)
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
	if err := scanProduced(rows, func(string) *storage.CorrelatedEvent { return c }); err != nil {
		return nil, err
	}
	return c, nil
}

// scanProduced appends produced rows (key, event_id, instance_id,
// execution, task_seq, created_at) to the events byKey returns.
func scanProduced(rows rowsIter, byKey func(string) *storage.CorrelatedEvent) error {
	for rows.Next() {
		var (
			key       string
			pe        storage.ProducedEvent
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

// produce delivers a correlated event to one wait: a new event id, its
// ledger row (fate pending), an event message in the instance's inbox and
// an entry in the correlated event's produced list (unless !listed: the
// correlated event is gone). The caller has checked that the instance is
// running.
func produce(w *wtx, tenant, instanceID string, execution, taskSeq int, def, key string, payload json.RawMessage, now int64, listed bool) error {
	eventID := backend.NewCorrelatedEventID()
	if _, err := w.exec(`INSERT INTO events (tenant, event_id, instance_id, lane, name, key, fate, received_at, updated_at)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)`,
		tenant, eventID, instanceID, string(history.LaneCorrelated), def, key, string(history.FatePending), now, now); err != nil {
		return fmt.Errorf("insert produced event: %w", err)
	}
	if err := insertMessage(w, tenant, instanceID, &storage.Message{
		Kind:      storage.MsgEvent,
		Execution: execution,
		TaskSeq:   taskSeq,
		Lane:      history.LaneCorrelated,
		EventID:   eventID,
		Name:      def,
		Key:       key,
		Payload:   payload,
		VisibleAt: backend.FromNanos(now),
	}, now); err != nil {
		return err
	}
	if err := lowerReady(w, tenant, instanceID, now); err != nil {
		return err
	}
	if listed {
		if _, err := w.exec(`INSERT INTO correlated_produced (tenant, def, key, event_id, instance_id, execution, task_seq, created_at)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?)`, tenant, def, key, eventID, instanceID, execution, taskSeq, now); err != nil {
			return fmt.Errorf("insert produced entry: %w", err)
		}
	}
	w.signalKinds(tenant, storage.WorkTurns)
	return nil
}

// commitCorrelated applies a turn's correlated-lane output (TurnCommit):
// the withdrawn waits' markers are deleted, then each new wait is either
// delivered an existing correlated event or stored as a marker. The turn
// does not end the instance (a terminal or continue-as-new commit deletes
// all markers instead).
func commitCorrelated(w *wtx, p *storage.TurnCommitParams, execution int, now int64) error {
	tenant, id := p.Tenant, p.InstanceID
	cancelled := make(map[int]bool, len(p.CancelCorrelatedWaits))
	if len(p.CancelCorrelatedWaits) > 0 {
		seqs, err := jsonArg(p.CancelCorrelatedWaits)
		if err != nil {
			return err
		}
		if _, err := w.exec(`DELETE FROM correlated_waits WHERE tenant = ? AND instance_id = ? AND execution = ?
			AND task_seq IN (SELECT value FROM json_each(?))`, tenant, id, execution, seqs); err != nil {
			return fmt.Errorf("cancel correlated waits: %w", err)
		}
		for _, seq := range p.CancelCorrelatedWaits {
			cancelled[seq] = true
		}
		if err := rerouteWithdrawn(w, tenant, id, execution, p.CancelCorrelatedWaits, false, now); err != nil {
			return err
		}
	}
	for _, cw := range p.CorrelatedWaits {
		if cancelled[cw.TaskSeq] {
			continue
		}
		var payload []byte
		err := w.queryRow(`SELECT payload FROM correlated_events
			WHERE tenant = ? AND def = ? AND key = ? AND (expires_at = 0 OR expires_at > ?)`,
			tenant, cw.Def, cw.Key, now).Scan(&payload)
		switch {
		case err == nil:
			if err := produce(w, tenant, id, execution, cw.TaskSeq, cw.Def, cw.Key, backend.RawOf(payload), now, true); err != nil {
				return fmt.Errorf("correlated wait seq %d: %w", cw.TaskSeq, err)
			}
			if cw.DeleteAfterFirst {
				if _, err := deleteCorrelated(w, tenant, cw.Def, cw.Key); err != nil {
					return fmt.Errorf("correlated wait seq %d: %w", cw.TaskSeq, err)
				}
			}
		case errors.Is(err, sql.ErrNoRows):
			if _, err := w.exec(`INSERT INTO correlated_waits
				(tenant, instance_id, execution, task_seq, def, key, delete_after_first, created_at)
				VALUES (?, ?, ?, ?, ?, ?, ?, ?)
				ON CONFLICT (tenant, instance_id, execution, task_seq) DO UPDATE SET
					def = excluded.def, key = excluded.key, delete_after_first = excluded.delete_after_first,
					created_at = excluded.created_at`,
				tenant, id, execution, cw.TaskSeq, cw.Def, cw.Key, cw.DeleteAfterFirst, now); err != nil {
				return fmt.Errorf("register correlated wait seq %d: %w", cw.TaskSeq, err)
			}
		default:
			return fmt.Errorf("correlated wait seq %d: load correlated event: %w", cw.TaskSeq, err)
		}
	}
	return nil
}

// rerouteWithdrawn hands on the delete-after-first events that a put
// delivered to waits of this turn's instance while the turn ran and that
// the turn withdraws: the waits of seqs (of execution), or with ending (the
// turn ends the execution: terminal or continue-as-new) every wait of the
// execution. Such a delivery sits in the inbox as a correlated-lane message
// for a wait whose marker is gone; the next turn would drop it
// (withdrawn_wait) and no waiter would ever receive the event. So, as
// CorrelatedPut with DeleteAfterFirst would have done had the wait been
// withdrawn first, the message is deleted, its ledger row marked dropped
// (withdrawn_wait), and the payload delivered under a new event id to the
// oldest other live marker on (def, key) (not one of this instance if
// ending), or, with no marker left, stored again as the correlated event
// (with the definition's TTL) unless a newer put already stored one.
// A fan-out delivery is left alone: its correlated event is still stored,
// and the engine drops this instance's copy (withdrawn_wait) itself.
// Consumed messages are deleted before this runs, so a delivery the turn
// saw is never handed on. The single writer serialises this with puts.
func rerouteWithdrawn(w *wtx, tenant, id string, execution int, seqs []int, ending bool, now int64) error {
	if !ending && len(seqs) == 0 {
		return nil
	}
	seqsArg, err := jsonArg(seqs)
	if err != nil {
		return err
	}
	rows, err := w.query(`SELECT m.id, m.event_id, m.name, m.key, m.payload, d.correlation
		FROM inbox m JOIN event_definitions d ON d.tenant = m.tenant AND d.name = m.name
		WHERE m.tenant = ? AND m.instance_id = ? AND m.kind = ? AND m.lane = ? AND m.execution = ?
		  AND (? OR m.task_seq IN (SELECT value FROM json_each(?)))
		ORDER BY m.id`,
		tenant, id, string(storage.MsgEvent), string(history.LaneCorrelated), execution, ending, seqsArg)
	if err != nil {
		return fmt.Errorf("find withdrawn correlated deliveries: %w", err)
	}
	type stale struct {
		id                int64
		eventID, def, key string
		payload           json.RawMessage
		ttl               int64
	}
	var found []stale
	for rows.Next() {
		var (
			m           stale
			payload, cc sql.NullString
		)
		if err := rows.Scan(&m.id, &m.eventID, &m.def, &m.key, &payload, &cc); err != nil {
			rows.Close()
			return fmt.Errorf("find withdrawn correlated deliveries: %w", err)
		}
		if !cc.Valid {
			continue
		}
		var cfg storage.CorrelationConfig
		if err := json.Unmarshal([]byte(cc.String), &cfg); err != nil {
			rows.Close()
			return fmt.Errorf("definition %q: correlation: %w", m.def, err)
		}
		if !cfg.DeleteAfterFirstCorrelation {
			continue
		}
		if payload.Valid {
			m.payload = json.RawMessage(payload.String)
		}
		m.ttl = int64(cfg.TTL)
		found = append(found, m)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return fmt.Errorf("find withdrawn correlated deliveries: %w", err)
	}
	for _, m := range found {
		if _, err := w.exec(`DELETE FROM inbox WHERE id = ?`, m.id); err != nil {
			return fmt.Errorf("withdrawn delivery %q: %w", m.eventID, err)
		}
		if _, err := w.exec(`UPDATE events SET fate = ?, reason = ?,
			execution = CASE WHEN execution = 0 THEN ? ELSE execution END, updated_at = ?
			WHERE tenant = ? AND instance_id = ? AND event_id = ?`,
			string(history.FateDropped), string(history.DropWithdrawnWait), execution, now, tenant, id, m.eventID); err != nil {
			return fmt.Errorf("withdrawn delivery %q: %w", m.eventID, err)
		}
		if err := handOn(w, tenant, id, m.def, m.key, m.payload, m.ttl, ending, now); err != nil {
			return fmt.Errorf("withdrawn delivery %q: %w", m.eventID, err)
		}
	}
	return nil
}

// handOnReturned hands on the delete-after-first events of the commit's
// ReturnedCorrelated (events a wait gave back; the commit's fates dropped
// the instance's copies), as rerouteWithdrawn does a withdrawn wait's
// delivery. It runs after the commit registered its waits, so a wait of
// this very turn can receive the event, unless the commit ends the
// execution. A fan-out event is still stored: nothing to do.
func handOnReturned(w *wtx, p *storage.TurnCommitParams, ending bool, now int64) error {
	for _, r := range p.ReturnedCorrelated {
		var cc sql.NullString
		err := w.queryRow(`SELECT correlation FROM event_definitions WHERE tenant = ? AND name = ?`,
			p.Tenant, r.Def).Scan(&cc)
		if errors.Is(err, sql.ErrNoRows) || err == nil && !cc.Valid {
			continue
		}
		if err != nil {
			return fmt.Errorf("returned event %q: load definition: %w", r.EventID, err)
		}
		var cfg storage.CorrelationConfig
		if err := json.Unmarshal([]byte(cc.String), &cfg); err != nil {
			return fmt.Errorf("definition %q: correlation: %w", r.Def, err)
		}
		if !cfg.DeleteAfterFirstCorrelation {
			continue
		}
		if err := handOn(w, p.Tenant, p.InstanceID, r.Def, r.Key, r.Payload, int64(cfg.TTL), ending, now); err != nil {
			return fmt.Errorf("returned event %q: %w", r.EventID, err)
		}
	}
	return nil
}

// handOn delivers a delete-after-first event that instance id does not
// keep, under a new event id, to the oldest live marker on (def, key) (not
// one of id's if ending), deleting the marker; with none it stores the
// event again (expiring after ttl) unless a newer put stored one.
func handOn(w *wtx, tenant, id, def, key string, payload json.RawMessage, ttl int64, ending bool, now int64) error {
	var (
		rid           int64
		instanceID    string
		exec, taskSeq int
	)
	err := w.queryRow(`SELECT w.rid, w.instance_id, w.execution, w.task_seq FROM correlated_waits w
		JOIN instances i ON i.tenant = w.tenant AND i.id = w.instance_id
		WHERE w.tenant = ? AND w.def = ? AND w.key = ?
		  AND i.execution = w.execution AND i.status IN `+nonTerminal+`
		  AND NOT (? AND w.instance_id = ?)
		ORDER BY w.created_at, w.rid LIMIT 1`, tenant, def, key, ending, id).Scan(&rid, &instanceID, &exec, &taskSeq)
	switch {
	case err == nil:
		if err := produce(w, tenant, instanceID, exec, taskSeq, def, key, payload, now, false); err != nil {
			return fmt.Errorf("hand on to %q: %w", instanceID, err)
		}
		if _, err := w.exec(`DELETE FROM correlated_waits WHERE rid = ?`, rid); err != nil {
			return fmt.Errorf("delete correlation marker: %w", err)
		}
	case errors.Is(err, sql.ErrNoRows):
		var expiresAt int64
		if ttl > 0 {
			expiresAt = now + ttl
		}
		if _, err := w.exec(`INSERT INTO correlated_events (tenant, def, key, payload, created_at, updated_at, expires_at)
			VALUES (?, ?, ?, ?, ?5, ?5, ?6) ON CONFLICT (tenant, def, key) DO NOTHING`,
			tenant, def, key, backend.RawArg(payload), now, expiresAt); err != nil {
			return fmt.Errorf("store again: %w", err)
		}
	default:
		return fmt.Errorf("find correlation markers: %w", err)
	}
	return nil
}

// deleteMarkers deletes every correlation marker of an instance (it ended
// or continued as new).
func deleteMarkers(w *wtx, tenant, id string) error {
	if _, err := w.exec(`DELETE FROM correlated_waits WHERE tenant = ? AND instance_id = ?`, tenant, id); err != nil {
		return fmt.Errorf("delete correlation markers: %w", err)
	}
	return nil
}

// CorrelatedPut creates the correlated event under (Tenant, Def, Key), or
// updates its payload, UpdatedAt and ExpiresAt (CreatedAt is kept), and
// delivers it in the same transaction to the markers on (Def, Key) of
// running instances (on the marker's execution), oldest marker first: to
// all of them, or with DeleteAfterFirst to the oldest only, after which the
// correlated event is deleted. A correlated event whose ExpiresAt has passed
// but that CorrelatedExpire has not deleted yet is replaced as if it did not
// exist (new CreatedAt, empty produced list). The single writer serialises
// puts with the turn commits that register waits.
func (s *Store) CorrelatedPut(ctx context.Context, p *storage.CorrelatedPutParams) (*storage.CorrelatedEvent, error) {
	if p == nil {
		return nil, errors.New("sqlite: put correlated event: nil params")
	}
	if err := backend.ValidateCorrelated(p.Def, p.Key); err != nil {
		return nil, fmt.Errorf("sqlite: put correlated event: %w", err)
	}
	now := backend.NowOr(p.Now).UnixNano()
	var out *storage.CorrelatedEvent
	err := s.write(ctx, func(w *wtx) error {
		out = nil
		var expiresAt int64
		err := w.queryRow(`SELECT expires_at FROM correlated_events WHERE tenant = ? AND def = ? AND key = ?`,
			p.Tenant, p.Def, p.Key).Scan(&expiresAt)
		switch {
		case err == nil:
			if expiresAt > 0 && expiresAt <= now {
				if _, err := deleteCorrelated(w, p.Tenant, p.Def, p.Key); err != nil {
					return err
				}
			}
		case !errors.Is(err, sql.ErrNoRows):
			return fmt.Errorf("load correlated event: %w", err)
		}
		if _, err := w.exec(`INSERT INTO correlated_events (tenant, def, key, payload, created_at, updated_at, expires_at)
			VALUES (?, ?, ?, ?, ?5, ?5, ?6)
			ON CONFLICT (tenant, def, key) DO UPDATE SET
				payload = excluded.payload, updated_at = excluded.updated_at, expires_at = excluded.expires_at`,
			p.Tenant, p.Def, p.Key, backend.RawArg(p.Payload), now, backend.Nanos(p.ExpiresAt)); err != nil {
			return fmt.Errorf("upsert correlated event: %w", err)
		}

		limit := -1
		if p.DeleteAfterFirst {
			limit = 1
		}
		rows, err := w.query(`SELECT m.rid, m.instance_id, m.execution, m.task_seq FROM correlated_waits m
			JOIN instances i ON i.tenant = m.tenant AND i.id = m.instance_id
			WHERE m.tenant = ? AND m.def = ? AND m.key = ?
			  AND i.execution = m.execution AND i.status IN `+nonTerminal+`
			ORDER BY m.created_at, m.rid LIMIT ?`, p.Tenant, p.Def, p.Key, limit)
		if err != nil {
			return fmt.Errorf("find correlation markers: %w", err)
		}
		type marker struct {
			rid             int64
			instanceID      string
			execution, task int
		}
		var markers []marker
		for rows.Next() {
			var m marker
			if err := rows.Scan(&m.rid, &m.instanceID, &m.execution, &m.task); err != nil {
				rows.Close()
				return fmt.Errorf("find correlation markers: %w", err)
			}
			markers = append(markers, m)
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return fmt.Errorf("find correlation markers: %w", err)
		}
		for _, m := range markers {
			if err := produce(w, p.Tenant, m.instanceID, m.execution, m.task, p.Def, p.Key, p.Payload, now, true); err != nil {
				return fmt.Errorf("deliver to %q: %w", m.instanceID, err)
			}
			if _, err := w.exec(`DELETE FROM correlated_waits WHERE rid = ?`, m.rid); err != nil {
				return fmt.Errorf("delete correlation marker: %w", err)
			}
		}
		if out, err = loadCorrelated(w.ctx, w, p.Tenant, p.Def, p.Key); err != nil {
			return err
		}
		if p.DeleteAfterFirst && len(markers) > 0 {
			if _, err := deleteCorrelated(w, p.Tenant, p.Def, p.Key); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("sqlite: put correlated event %q/%q: %w", p.Def, p.Key, err)
	}
	return out, nil
}

// CorrelatedGet returns a correlated event with its produced list (oldest
// first), or storage.ErrNotFound. An event past its ExpiresAt is returned
// until CorrelatedExpire deletes it.
func (s *Store) CorrelatedGet(ctx context.Context, p *storage.CorrelatedGetParams) (_ *storage.CorrelatedEvent, err error) {
	defer s.afterRead(ctx, &err)
	if p == nil {
		return nil, errors.New("sqlite: get correlated event: nil params")
	}
	if s.closed.Load() {
		return nil, storage.ErrClosed
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

// CorrelatedDelete deletes a correlated event and its produced list, or
// returns storage.ErrNotFound. Markers and the ledger are untouched.
func (s *Store) CorrelatedDelete(ctx context.Context, p *storage.CorrelatedGetParams) error {
	if p == nil {
		return errors.New("sqlite: delete correlated event: nil params")
	}
	err := s.write(ctx, func(w *wtx) error {
		found, err := deleteCorrelated(w, p.Tenant, p.Def, p.Key)
		if err != nil {
			return err
		}
		if !found {
			return storage.ErrNotFound
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("sqlite: delete correlated event %q/%q: %w", p.Def, p.Key, err)
	}
	return nil
}

// CorrelatedSearch returns the correlated events of p.Def ordered by
// (CreatedAt, Key, bytewise), filtered as p says, each with its produced
// list, and the bookmark of the next page ("" if this page is the last).
// A bookmark names the last event of its page, so events created meanwhile
// never shift a page. A malformed bookmark is an error.
func (s *Store) CorrelatedSearch(ctx context.Context, p *storage.CorrelatedSearchParams) (_ []*storage.CorrelatedEvent, _ string, err error) {
	defer s.afterRead(ctx, &err)
	if p == nil {
		return nil, "", errors.New("sqlite: search correlated events: nil params")
	}
	if p.Def == "" {
		return nil, "", errors.New("sqlite: search correlated events: empty event definition")
	}
	if s.closed.Load() {
		return nil, "", storage.ErrClosed
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
		ORDER BY c.created_at, c.key LIMIT ?`, args...)
	if err != nil {
		return nil, "", fmt.Errorf("sqlite: search correlated events: %w", s.readErr(err))
	}
	var out []*storage.CorrelatedEvent
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
	byKey := make(map[string]*storage.CorrelatedEvent, len(out))
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
	if err := scanProduced(prows, func(k string) *storage.CorrelatedEvent { return byKey[k] }); err != nil {
		return nil, "", fmt.Errorf("sqlite: search correlated events: %w", s.readErr(err))
	}
	return out, next, nil
}

// CorrelatedExpire deletes, in one transaction, up to p.Limit (default
// 1000) correlated events of the tenant whose ExpiresAt is set and not after
// p.Now, most overdue first (then by definition and key), with their
// produced lists, and returns their keys in that order (nil if none).
// Markers are untouched.
func (s *Store) CorrelatedExpire(ctx context.Context, p *storage.CorrelatedExpireParams) ([]string, error) {
	if p == nil {
		return nil, errors.New("sqlite: expire correlated events: nil params")
	}
	now := backend.NowOr(p.Now).UnixNano()
	limit := backend.ExpireLimit(p.Limit)
	var keys []string
	err := s.write(ctx, func(w *wtx) error {
		keys = nil
		rows, err := w.query(`SELECT def, key FROM correlated_events
			WHERE tenant = ? AND expires_at > 0 AND expires_at <= ?
			ORDER BY expires_at, def, key LIMIT ?`, p.Tenant, now, limit)
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
