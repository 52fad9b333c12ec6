package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/heraldwf/herald/heraldtype"
	"github.com/heraldwf/herald/storage"
	"github.com/heraldwf/herald/storage/internal/backend"
)

// correlatedLockKey is the transaction-level advisory lock that serialises
// CorrelatedPut with the turn commits that register waits on the same
// (tenant, definition, key), so that with delete-after-first exactly one
// waiter receives an event, whichever node each runs on.
func (s *Store) correlatedLockKey(tenant, def, key string) int64 {
	h := fnv.New64a()
	h.Write([]byte("correlated\x00"))
	h.Write([]byte(tenant))
	h.Write([]byte{0})
	h.Write([]byte(def))
	h.Write([]byte{0})
	h.Write([]byte(key))
	return int64(h.Sum64() ^ s.lockKey)
}

// queueCorrelatedLocks queues the advisory locks of the waits' keys, of
// the keys of the withdrawn waits that may have been delivered to and of
// the keys of the returned events, in ascending order so that two commits
// never wait for each other's locks.
// Every transaction that takes these locks takes them before any row lock
// (TurnCommit before its fence; CorrelatedPut before it locks the waiting
// instances), which keeps the lock order acyclic.
func (s *Store) queueCorrelatedLocks(b *batch, tenant string, waits []storage.CorrelatedWait, gone []withdrawnWait,
	returned []storage.ReturnedCorrelated) {
	if len(waits) == 0 && len(gone) == 0 && len(returned) == 0 {
		return
	}
	keys := make([]int64, 0, len(waits)+len(gone)+len(returned))
	for _, w := range waits {
		keys = append(keys, s.correlatedLockKey(tenant, w.Def, w.Key))
	}
	for _, g := range gone {
		keys = append(keys, s.correlatedLockKey(tenant, g.def, g.key))
	}
	for _, r := range returned {
		keys = append(keys, s.correlatedLockKey(tenant, r.Def, r.Key))
	}
	slices.Sort(keys)
	keys = slices.Compact(keys)
	b.exec("lock correlation keys", `SELECT pg_advisory_xact_lock(k) FROM unnest($1::bigint[]) AS t(k) ORDER BY k`, keys)
}

// withdrawnWait is a wait a turn withdraws (its seq, definition and key)
// that a put may have delivered to while the turn ran.
type withdrawnWait struct {
	seq      int
	def, key string
}

// findWithdrawn returns the waits that a commit withdraws and that may hold
// a delivery it must hand on (see backend.HandOnWithdrawn): those of
// CancelCorrelatedWaits, or with ending (a terminal or continue-as-new
// commit) every wait of the execution, as a marker or, if a put delivered
// to it already, as an inbox message. It runs before the commit's
// transaction takes any lock, only to learn which keys to lock: one
// statement sees a marker or the message a put replaced it with, and once
// the commit holds the key's advisory lock no put can deliver to the wait
// any more (the commit deletes the marker), so the hand-on, which runs under
// that lock, sees every such delivery. A message the turn consumed is no
// such delivery (the workflow received it): it does not count, so the
// common end of a correlated wait — the turn that received its event
// completes the instance — stays on the one-batch commit.
func (s *Store) findWithdrawn(ctx context.Context, p *storage.TurnCommitParams, ending bool) ([]withdrawnWait, error) {
	if !ending && len(p.CancelCorrelatedWaits) == 0 {
		return nil, nil
	}
	seqs := make([]int32, len(p.CancelCorrelatedWaits))
	for i, seq := range p.CancelCorrelatedWaits {
		seqs[i] = int32(seq)
	}
	consumed := p.ConsumedMessages
	if consumed == nil {
		consumed = []int64{}
	}
	rows, err := s.pool.Query(ctx, `SELECT task_seq, def, key FROM correlated_waits
			WHERE tenant = $1 AND instance_id = $2 AND execution = $3 AND ($4 OR task_seq = ANY($5::integer[]))
		UNION
		SELECT task_seq, name, key FROM inbox
			WHERE tenant = $1 AND instance_id = $2 AND kind = 'event' AND lane = 'correlated' AND execution = $3
			  AND ($4 OR task_seq = ANY($5::integer[])) AND id <> ALL($6::bigint[])
		ORDER BY 1, 2, 3`, p.Tenant, p.InstanceID, p.Execution, ending, seqs, consumed)
	if err != nil {
		return nil, fmt.Errorf("find withdrawn correlated waits: %w", err)
	}
	defer rows.Close()
	var out []withdrawnWait
	for rows.Next() {
		var (
			g   withdrawnWait
			seq int32
		)
		if err := rows.Scan(&seq, &g.def, &g.key); err != nil {
			return nil, fmt.Errorf("find withdrawn correlated waits: %w", err)
		}
		g.seq = int(seq)
		out = append(out, g)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("find withdrawn correlated waits: %w", err)
	}
	return out, nil
}

func (t *laneTx) Deliveries(execution int, seqs []int, all bool) ([]backend.Delivery, error) {
	s32 := make([]int32, len(seqs))
	for i, seq := range seqs {
		s32[i] = int32(seq)
	}
	var out []backend.Delivery
	t.b.query("find withdrawn correlated deliveries", func(rows pgx.Rows) error {
		for rows.Next() {
			var (
				d       backend.Delivery
				payload *string
			)
			if err := rows.Scan(&d.MessageID, &d.EventID, &d.Def, &d.Key, &payload, &d.Trace); err != nil {
				return err
			}
			if payload != nil {
				d.Payload = json.RawMessage(*payload)
			}
			out = append(out, d)
		}
		return nil
	}, `SELECT id, event_id, name, key, payload, trace FROM inbox
		WHERE tenant = $1 AND instance_id = $2 AND kind = 'event' AND lane = 'correlated' AND execution = $3
		  AND ($4 OR task_seq = ANY($5::integer[]))
		ORDER BY id`, t.tenant, t.id, execution, all, s32)
	if err := t.flush(); err != nil {
		return nil, err
	}
	return out, nil
}

func (t *laneTx) Correlation(def string) (*heraldtype.CorrelationConfig, error) {
	var cc *string
	t.b.query("load definition", func(rows pgx.Rows) error {
		if rows.Next() {
			return rows.Scan(&cc)
		}
		return nil
	}, `SELECT correlation FROM event_definitions WHERE tenant = $1 AND name = $2 AND NOT deleted`, t.tenant, def)
	if err := t.flush(); err != nil {
		return nil, err
	}
	if cc == nil {
		return nil, nil
	}
	var cfg heraldtype.CorrelationConfig
	if err := json.Unmarshal([]byte(*cc), &cfg); err != nil {
		return nil, fmt.Errorf("definition %q: correlation: %w", def, err)
	}
	return &cfg, nil
}

func (t *laneTx) DeleteMessage(id int64) error {
	t.b.exec("delete message", `DELETE FROM inbox WHERE tenant = $1 AND instance_id = $2 AND id = $3`, t.tenant, t.id, id)
	return nil
}

func (t *laneTx) OldestMarker(def, key string, notOwn bool) (backend.Marker, bool, error) {
	var (
		m  backend.Marker
		ok bool
	)
	t.b.query("find correlation markers", func(rows pgx.Rows) error {
		if !rows.Next() {
			return nil
		}
		var exec, seq int32
		if err := rows.Scan(&m.ID, &m.InstanceID, &exec, &seq); err != nil {
			return err
		}
		m.Execution, m.TaskSeq, ok = int(exec), int(seq), true
		return nil
	}, `SELECT w.rid, w.instance_id, w.execution, w.task_seq
		FROM correlated_waits w
		JOIN instances i ON i.tenant = w.tenant AND i.id = w.instance_id
		WHERE w.tenant = $1 AND w.def = $2 AND w.key = $3
		  AND i.execution = w.execution AND i.status IN `+nonTerminal+`
		  AND NOT ($4 AND w.instance_id = $5)
		ORDER BY w.created_at, w.rid
		LIMIT 1`, t.tenant, def, key, notOwn, t.id)
	if err := t.flush(); err != nil {
		return m, false, err
	}
	return m, ok, nil
}

// Produce locks the receiving instance's row (ready_at) after the
// committing instance's, as puts lock theirs; the key's advisory lock keeps
// puts on this key out, and a rare deadlock with a put on another key is
// detected and retried (Store.do).
func (t *laneTx) Produce(m backend.Marker, def, key string, payload json.RawMessage, trace string, listed bool) error {
	eventID, now := backend.NewCorrelatedEventID(), t.now.UnixNano()
	t.b.exec("deliver: ledger", `INSERT INTO events (tenant, event_id, instance_id, lane, name, key, fate, received_at, updated_at)
		VALUES ($1, $2, $3, 'correlated', $4, $5, 'pending', $6, $6)`, t.tenant, eventID, m.InstanceID, def, key, now)
	t.b.exec("deliver: message", `INSERT INTO inbox
		(tenant, instance_id, kind, execution, task_seq, lane, event_id, name, key, payload, visible_at, created_at, trace)
		VALUES ($1, $2, 'event', $3, $4, 'correlated', $5, $6, $7, $8, $9, $9, $10)`,
		t.tenant, m.InstanceID, m.Execution, m.TaskSeq, eventID, def, key, backend.RawArg(payload), now, trace)
	if listed {
		t.b.exec("deliver: produced", `INSERT INTO correlated_produced (tenant, def, key, event_id, instance_id, execution, task_seq, created_at)
			VALUES ($1, $2, $3, $4, $5, $6, $7, $8)`, t.tenant, def, key, eventID, m.InstanceID, m.Execution, m.TaskSeq, now)
	}
	t.b.exec("deliver: ready", `UPDATE instances SET ready_at = LEAST(COALESCE(ready_at, $3), $3)
		WHERE tenant = $1 AND id = $2`, t.tenant, m.InstanceID, now)
	t.delivered = true
	return nil
}

func (t *laneTx) DeleteMarker(id int64) error {
	t.b.exec("delete correlation marker", `DELETE FROM correlated_waits WHERE tenant = $1 AND rid = $2`, t.tenant, id)
	return nil
}

func (t *laneTx) DeleteCorrelated(def, key string) error {
	queueDeleteCorrelated(t.b, nil, t.tenant, def, key)
	return nil
}

func (t *laneTx) LiveCorrelated(def, key string) (json.RawMessage, string, bool, error) {
	var (
		payload []byte
		trace   string
		ok      bool
	)
	t.b.query("load correlated event", func(rows pgx.Rows) error {
		if !rows.Next() {
			return nil
		}
		ok = true
		return rows.Scan(&payload, &trace)
	}, `SELECT payload, trace FROM correlated_events
		WHERE tenant = $1 AND def = $2 AND key = $3 AND (expires_at = 0 OR expires_at > $4)
		FOR UPDATE`, t.tenant, def, key, t.now.UnixNano())
	if err := t.flush(); err != nil {
		return nil, "", false, err
	}
	return backend.RawOf(payload), trace, ok, nil
}

func (t *laneTx) StoreMarker(execution int, w storage.CorrelatedWait) error {
	t.b.exec("store correlation marker", `INSERT INTO correlated_waits
		(tenant, instance_id, execution, task_seq, def, key, delete_after_first, created_at)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8)
		ON CONFLICT (tenant, instance_id, execution, task_seq) DO UPDATE SET
			def = excluded.def, key = excluded.key, delete_after_first = excluded.delete_after_first,
			created_at = excluded.created_at`,
		t.tenant, t.id, execution, w.TaskSeq, w.Def, w.Key, w.DeleteAfterFirst, t.now.UnixNano())
	return nil
}

func (t *laneTx) UpsertCorrelated(p *storage.CorrelatedPutParams) error {
	now := t.now.UnixNano()
	t.b.exec("delete expired correlated event", `DELETE FROM correlated_events
		WHERE tenant = $1 AND def = $2 AND key = $3 AND expires_at > 0 AND expires_at <= $4`,
		t.tenant, p.Def, p.Key, now)
	t.b.exec("delete expired produced events", `DELETE FROM correlated_produced x
		WHERE x.tenant = $1 AND x.def = $2 AND x.key = $3
		  AND NOT EXISTS (SELECT 1 FROM correlated_events c WHERE c.tenant = $1 AND c.def = $2 AND c.key = $3)`,
		t.tenant, p.Def, p.Key)
	t.b.exec("upsert correlated event", upsertCorrelatedSQL,
		t.tenant, p.Def, p.Key, backend.RawArg(p.Payload), now, backend.Nanos(p.ExpiresAt), p.TraceParent)
	return nil
}

func (t *laneTx) Markers(def, key string, limit int) ([]backend.Marker, error) {
	var lim any // NULL: every marker
	if limit > 0 {
		lim = int64(limit)
	}
	var ms []backend.Marker
	t.b.query("find correlation markers", func(rows pgx.Rows) error {
		for rows.Next() {
			var (
				m         backend.Marker
				exec, seq int32
			)
			if err := rows.Scan(&m.ID, &m.InstanceID, &exec, &seq); err != nil {
				return err
			}
			m.Execution, m.TaskSeq = int(exec), int(seq)
			ms = append(ms, m)
		}
		return nil
	}, `SELECT w.rid, w.instance_id, w.execution, w.task_seq
		FROM correlated_waits w
		JOIN instances i ON i.tenant = w.tenant AND i.id = w.instance_id
		WHERE w.tenant = $1 AND w.def = $2 AND w.key = $3
		  AND i.execution = w.execution AND i.status IN `+nonTerminal+`
		ORDER BY w.created_at, w.rid
		LIMIT $4::bigint`, t.tenant, def, key, lim)
	if err := t.flush(); err != nil {
		return nil, err
	}
	return ms, nil
}

func (t *laneTx) LoadCorrelated(def, key string) (*heraldtype.CorrelatedEvent, error) {
	var out *heraldtype.CorrelatedEvent
	queueLoadCorrelated(t.b, &out, t.tenant, def, key)
	if err := t.flush(); err != nil {
		return nil, err
	}
	if out == nil {
		return nil, errors.New("correlated event vanished")
	}
	return out, nil
}

func (t *laneTx) StoreCorrelated(def, key string, payload json.RawMessage, trace string, expiresAt time.Time) error {
	t.b.exec("store again", `INSERT INTO correlated_events (tenant, def, key, payload, created_at, updated_at, expires_at, trace)
		VALUES ($1, $2, $3, $4, $5, $5, $6, $7) ON CONFLICT (tenant, def, key) DO NOTHING`,
		t.tenant, def, key, backend.RawArg(payload), t.now.UnixNano(), backend.Nanos(expiresAt), trace)
	return nil
}

// commitWaitSQL is backend.RegisterWaits for one wait, in one statement
// that the commit's batch carries without a round trip of its own: the Go
// rule reads the stored event before it decides, which on PostgreSQL costs
// an interactive transaction, a round trip per read on the commit's path
// (BenchmarkCorrelated, rules=go, shows it). backend.RegisterWaits is the contract's
// reference; the tests run the conformance suite's correlated cases with
// it too (config.goCorrelated), so the two cannot drift apart unseen.
//
// It handles one correlated wait of a turn commit: $1 tenant, $2
// instance, $3 definition, $4 key, $5 execution, $6 wait seq, $7 now, $8 a
// new event id, $9 delete after first. A live correlated event (locked, so
// that a concurrent CorrelatedDelete or CorrelatedExpire waits or skips it)
// is delivered at once (the message carries the event's trace context):
// ledger row, inbox message and produced entry, or
// with delete-after-first the correlated event and its produced list are
// deleted instead of the entry being added. Without one, the marker is
// stored.
const commitWaitSQL = `WITH ev AS MATERIALIZED (
	SELECT payload, trace FROM correlated_events
	WHERE tenant = $1 AND def = $3 AND key = $4 AND (expires_at = 0 OR expires_at > $7)
	FOR UPDATE
), ledger AS (
	INSERT INTO events (tenant, event_id, instance_id, lane, name, key, fate, received_at, updated_at)
	SELECT $1, $8, $2, 'correlated', $3, $4, 'pending', $7, $7 FROM ev
), msg AS (
	INSERT INTO inbox (tenant, instance_id, kind, execution, task_seq, lane, event_id, name, key, payload, visible_at, created_at, trace)
	SELECT $1, $2, 'event', $5, $6, 'correlated', $8, $3, $4, ev.payload, $7, $7, ev.trace FROM ev
), produced AS (
	INSERT INTO correlated_produced (tenant, def, key, event_id, instance_id, execution, task_seq, created_at)
	SELECT $1, $3, $4, $8, $2, $5, $6, $7 FROM ev WHERE NOT $9
), gone AS (
	DELETE FROM correlated_events WHERE tenant = $1 AND def = $3 AND key = $4 AND $9 AND EXISTS (SELECT 1 FROM ev)
), produced_gone AS (
	DELETE FROM correlated_produced WHERE tenant = $1 AND def = $3 AND key = $4 AND $9 AND EXISTS (SELECT 1 FROM ev)
)
INSERT INTO correlated_waits (tenant, instance_id, execution, task_seq, def, key, delete_after_first, created_at)
SELECT $1, $2, $5, $6, $3, $4, $9, $7 WHERE NOT EXISTS (SELECT 1 FROM ev)
ON CONFLICT (tenant, instance_id, execution, task_seq) DO UPDATE SET
	def = excluded.def, key = excluded.key, delete_after_first = excluded.delete_after_first,
	created_at = excluded.created_at`

// queueCorrelatedWaits queues a commit's correlated-lane waits, after the
// fence and after the withdrawn waits' markers were deleted (and their
// deliveries handed on): each wait is delivered an existing correlated
// event or stored as a marker, in order (two waits on one delete-after-first
// key: the first takes the event, the second gets a marker).
func queueCorrelatedWaits(b *batch, p *storage.TurnCommitParams, waits []storage.CorrelatedWait, now int64) {
	for _, w := range waits {
		b.exec(fmt.Sprintf("correlated wait seq %d", w.TaskSeq), commitWaitSQL,
			p.Tenant, p.InstanceID, w.Def, w.Key, p.Execution, w.TaskSeq, now, backend.NewCorrelatedEventID(), w.DeleteAfterFirst)
	}
}

const correlatedCols = `tenant, def, key, payload, created_at, updated_at, expires_at`

func scanCorrelated(row pgx.Row) (*heraldtype.CorrelatedEvent, error) {
	var r backend.CorrelatedRow
	if err := row.Scan(r.Dest()...); err != nil {
		return nil, err
	}
	return r.Correlated(), nil
}

// producedCols are the columns scanProduced reads.
const producedCols = `key, event_id, instance_id, execution, task_seq, created_at`

// scanProduced appends produced rows to the events byKey returns.
func scanProduced(rows pgx.Rows, byKey func(string) *heraldtype.CorrelatedEvent) error {
	for rows.Next() {
		var (
			key       string
			pe        heraldtype.ProducedEvent
			createdAt int64
		)
		if err := rows.Scan(&key, &pe.EventID, &pe.InstanceID, &pe.Execution, &pe.TaskSeq, &createdAt); err != nil {
			return err
		}
		pe.CreatedAt = backend.FromNanos(createdAt)
		if c := byKey(key); c != nil {
			c.Produced = append(c.Produced, pe)
		}
	}
	return nil
}

// queueLoadCorrelated queues the reads of a correlated event and its
// produced list into *out (left nil if there is none).
func queueLoadCorrelated(b *batch, out **heraldtype.CorrelatedEvent, tenant, def, key string) {
	b.query("load correlated event", func(rows pgx.Rows) error {
		*out = nil
		if rows.Next() {
			c, err := scanCorrelated(rows)
			if err != nil {
				return err
			}
			*out = c
		}
		return nil
	}, `SELECT `+correlatedCols+` FROM correlated_events WHERE tenant = $1 AND def = $2 AND key = $3`, tenant, def, key)
	b.query("load produced events", func(rows pgx.Rows) error {
		return scanProduced(rows, func(string) *heraldtype.CorrelatedEvent { return *out })
	}, `SELECT `+producedCols+` FROM correlated_produced WHERE tenant = $1 AND def = $2 AND key = $3 ORDER BY rid`,
		tenant, def, key)
}

// queueDeleteCorrelated queues the deletion of a correlated event, then (in
// a second statement, which sees every produced entry committed while the
// first waited for the event's row lock) of its produced list. found, if
// set, reports whether the event existed.
func queueDeleteCorrelated(b *batch, found *bool, tenant, def, key string) {
	b.execTag("delete correlated event", func(ct pgconn.CommandTag) error {
		if found != nil {
			*found = ct.RowsAffected() > 0
		}
		return nil
	}, `DELETE FROM correlated_events WHERE tenant = $1 AND def = $2 AND key = $3`, tenant, def, key)
	b.exec("delete produced events", `DELETE FROM correlated_produced WHERE tenant = $1 AND def = $2 AND key = $3`,
		tenant, def, key)
}

// putDeliverSQL is the delivery of backend.CorrelatedPut (the reference,
// held to the same conformance cases, see correlatedPutGo) in one
// statement: the Go rule needs a round trip to read the markers first and
// queues statements per marker, so a put's cost would grow with its
// waiters by round trips, not rows. It
// delivers a put correlated event to the markers on its key
// of running instances (on the marker's execution), oldest first, at most
// $6 (NULL: all): $1 tenant, $2 definition, $3 key, $4 payload, $5 now, $7
// the put's trace context. Each marker gets a ledger row, an inbox message
// (carrying the trace) and a produced
// entry, and is deleted; the instances' ready_at is lowered. The caller
// holds the key's advisory lock and has locked the instances. The event
// ids are made in SQL as backend.NewCorrelatedEventID makes them.
const putDeliverSQL = `WITH m AS MATERIALIZED (
	SELECT w.instance_id, w.execution, w.task_seq, w.created_at, w.rid,
		'corr-' || gen_random_uuid()::text AS event_id
	FROM correlated_waits w
	JOIN instances i ON i.tenant = w.tenant AND i.id = w.instance_id
	WHERE w.tenant = $1 AND w.def = $2 AND w.key = $3
	  AND i.execution = w.execution AND i.status IN ` + nonTerminal + `
	ORDER BY w.created_at, w.rid
	LIMIT $6::bigint
), ledger AS (
	INSERT INTO events (tenant, event_id, instance_id, lane, name, key, fate, received_at, updated_at)
	SELECT $1, m.event_id, m.instance_id, 'correlated', $2, $3, 'pending', $5, $5 FROM m ORDER BY m.created_at, m.rid
), msg AS (
	INSERT INTO inbox (tenant, instance_id, kind, execution, task_seq, lane, event_id, name, key, payload, visible_at, created_at, trace)
	SELECT $1, m.instance_id, 'event', m.execution, m.task_seq, 'correlated', m.event_id, $2, $3, $4, $5, $5, $7
	FROM m ORDER BY m.created_at, m.rid
), produced AS (
	INSERT INTO correlated_produced (tenant, def, key, event_id, instance_id, execution, task_seq, created_at)
	SELECT $1, $2, $3, m.event_id, m.instance_id, m.execution, m.task_seq, $5 FROM m ORDER BY m.created_at, m.rid
), gone AS (
	DELETE FROM correlated_waits w USING m
	WHERE w.tenant = $1 AND w.instance_id = m.instance_id AND w.execution = m.execution AND w.task_seq = m.task_seq
), ready AS (
	UPDATE instances i SET ready_at = LEAST(COALESCE(i.ready_at, $5), $5)
	FROM (SELECT DISTINCT instance_id FROM m) d
	WHERE i.tenant = $1 AND i.id = d.instance_id
)
SELECT count(*) FROM m`

// CorrelatedPut: see storage.CorrelatedStore. The transaction first takes
// the key's advisory lock, which turn commits registering waits on the key
// take too, then locks the waiting instances (in id order), so a
// terminating instance either loses its markers first or is terminated
// after it received the event.
func (s *Store) CorrelatedPut(ctx context.Context, p *storage.CorrelatedPutParams) (*heraldtype.CorrelatedEvent, error) {
	if p == nil {
		return nil, backend.NilParams("postgres: put correlated event")
	}
	if err := backend.ValidateCorrelated(p.Def, p.Key); err != nil {
		return nil, fmt.Errorf("postgres: put correlated event: %w", err)
	}
	if err := backend.ValidateTraceParent(p.TraceParent); err != nil {
		return nil, fmt.Errorf("postgres: put correlated event: %w", err)
	}
	now := backend.NowOr(p.Now).UnixNano()
	var limit any // NULL: every marker
	if p.DeleteAfterFirst {
		limit = int64(1)
	}
	var (
		out       *heraldtype.CorrelatedEvent
		delivered int64
	)
	if s.cfg.goCorrelated {
		return s.correlatedPutGo(ctx, p)
	}
	err := s.do(ctx, func(ctx context.Context) error {
		out, delivered = nil, 0
		return pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
			var b batch
			b.exec("lock correlation key", `SELECT pg_advisory_xact_lock($1)`, s.correlatedLockKey(p.Tenant, p.Def, p.Key))
			// An expired event that is still there is replaced, not updated.
			b.exec("delete expired correlated event", `DELETE FROM correlated_events
				WHERE tenant = $1 AND def = $2 AND key = $3 AND expires_at > 0 AND expires_at <= $4`,
				p.Tenant, p.Def, p.Key, now)
			b.exec("delete expired produced events", `DELETE FROM correlated_produced x
				WHERE x.tenant = $1 AND x.def = $2 AND x.key = $3
				  AND NOT EXISTS (SELECT 1 FROM correlated_events c WHERE c.tenant = $1 AND c.def = $2 AND c.key = $3)`,
				p.Tenant, p.Def, p.Key)
			b.exec("upsert correlated event", upsertCorrelatedSQL,
				p.Tenant, p.Def, p.Key, backend.RawArg(p.Payload), now, backend.Nanos(p.ExpiresAt), p.TraceParent)
			// Lock the instances that wait on the key (new markers need the
			// key's lock, which this transaction holds).
			b.exec("lock waiting instances", `SELECT 1 FROM instances
				WHERE tenant = $1 AND id IN (SELECT instance_id FROM correlated_waits WHERE tenant = $1 AND def = $2 AND key = $3)
				ORDER BY id FOR NO KEY UPDATE`, p.Tenant, p.Def, p.Key)
			b.queryRow("deliver", func(row pgx.Row) error {
				return row.Scan(&delivered)
			}, putDeliverSQL, p.Tenant, p.Def, p.Key, backend.RawArg(p.Payload), now, limit, p.TraceParent)
			queueLoadCorrelated(&b, &out, p.Tenant, p.Def, p.Key)
			if err := b.send(ctx, tx); err != nil {
				return err
			}
			if out == nil {
				return errors.New("correlated event vanished")
			}
			if p.DeleteAfterFirst && delivered > 0 {
				var d batch
				queueDeleteCorrelated(&d, nil, p.Tenant, p.Def, p.Key)
				return d.send(ctx, tx)
			}
			return nil
		})
	})
	if err != nil {
		return nil, fmt.Errorf("postgres: put correlated event %q/%q: %w", p.Def, p.Key, err)
	}
	if delivered > 0 {
		s.signal(p.Tenant, storage.WorkTurns)
	}
	return out, nil
}

// CorrelatedGet: see storage.CorrelatedStore.
func (s *Store) CorrelatedGet(ctx context.Context, p *storage.CorrelatedGetParams) (*heraldtype.CorrelatedEvent, error) {
	if p == nil {
		return nil, backend.NilParams("postgres: get correlated event")
	}
	var out *heraldtype.CorrelatedEvent
	err := s.do(ctx, func(ctx context.Context) error {
		// One snapshot for the event and its list.
		return pgx.BeginTxFunc(ctx, s.pool, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly}, func(tx pgx.Tx) error {
			var b batch
			queueLoadCorrelated(&b, &out, p.Tenant, p.Def, p.Key)
			if err := b.send(ctx, tx); err != nil {
				return err
			}
			if out == nil {
				return heraldtype.ErrNotFound
			}
			return nil
		})
	})
	if err != nil {
		return nil, fmt.Errorf("postgres: get correlated event %q/%q: %w", p.Def, p.Key, err)
	}
	return out, nil
}

// CorrelatedDelete: see storage.CorrelatedStore.
func (s *Store) CorrelatedDelete(ctx context.Context, p *storage.CorrelatedGetParams) error {
	if p == nil {
		return backend.NilParams("postgres: delete correlated event")
	}
	err := s.do(ctx, func(ctx context.Context) error {
		var (
			b     batch
			found bool
		)
		queueDeleteCorrelated(&b, &found, p.Tenant, p.Def, p.Key)
		if err := b.send(ctx, s.pool); err != nil {
			return err
		}
		if !found {
			return heraldtype.ErrNotFound
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("postgres: delete correlated event %q/%q: %w", p.Def, p.Key, err)
	}
	return nil
}

// CorrelatedSearch: see storage.CorrelatedStore.
func (s *Store) CorrelatedSearch(ctx context.Context, p *storage.CorrelatedSearchParams) ([]*heraldtype.CorrelatedEvent, string, error) {
	if p == nil {
		return nil, "", backend.NilParams("postgres: search correlated events")
	}
	if err := backend.ValidateCorrelatedSearch(p); err != nil {
		return nil, "", fmt.Errorf("postgres: search correlated events: %w", err)
	}
	limit := backend.SearchLimit(p.Limit)
	where := []string{"c.tenant = $1", "c.def = $2"}
	args := []any{p.Tenant, p.Def}
	arg := func(v any) string {
		args = append(args, v)
		return "$" + strconv.Itoa(len(args))
	}
	if !p.Earliest.IsZero() {
		where = append(where, "c.created_at >= "+arg(p.Earliest.UnixNano()))
	}
	if !p.Latest.IsZero() {
		where = append(where, "c.created_at <= "+arg(p.Latest.UnixNano()))
	}
	if p.Bookmark != "" {
		createdAt, key, err := backend.DecodeBookmark(p.Bookmark)
		if err != nil {
			return nil, "", fmt.Errorf("postgres: search correlated events: %w", err)
		}
		where = append(where, "(c.created_at, c.key) > ("+arg(createdAt)+"::bigint, "+arg(key)+"::text)")
	}
	if p.HasProduced != nil {
		exists := `EXISTS (SELECT 1 FROM correlated_produced x WHERE x.tenant = c.tenant AND x.def = c.def AND x.key = c.key)`
		if !*p.HasProduced {
			exists = "NOT " + exists
		}
		where = append(where, exists)
	}
	q := `SELECT c.tenant, c.def, c.key, c.payload, c.created_at, c.updated_at, c.expires_at
		FROM correlated_events c WHERE ` + strings.Join(where, " AND ") + `
		ORDER BY c.created_at, c.key LIMIT ` + arg(limit+1)
	var (
		out  []*heraldtype.CorrelatedEvent
		next string
	)
	err := s.do(ctx, func(ctx context.Context) error {
		out, next = nil, ""
		return pgx.BeginTxFunc(ctx, s.pool, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly}, func(tx pgx.Tx) error {
			rows, err := tx.Query(ctx, q, args...)
			if err != nil {
				return err
			}
			for rows.Next() {
				c, err := scanCorrelated(rows)
				if err != nil {
					rows.Close()
					return err
				}
				out = append(out, c)
			}
			rows.Close()
			if err := rows.Err(); err != nil {
				return err
			}
			out, next = backend.SearchPage(out, limit)
			if len(out) == 0 {
				out = nil
				return nil
			}
			byKey := make(map[string]*heraldtype.CorrelatedEvent, len(out))
			keys := make([]string, len(out))
			for i, c := range out {
				byKey[c.Key] = c
				keys[i] = c.Key
			}
			prows, err := tx.Query(ctx, `SELECT `+producedCols+` FROM correlated_produced
				WHERE tenant = $1 AND def = $2 AND key = ANY($3::text[]) ORDER BY rid`, p.Tenant, p.Def, keys)
			if err != nil {
				return err
			}
			defer prows.Close()
			if err := scanProduced(prows, func(k string) *heraldtype.CorrelatedEvent { return byKey[k] }); err != nil {
				return err
			}
			return prows.Err()
		})
	})
	if err != nil {
		return nil, "", fmt.Errorf("postgres: search correlated events: %w", err)
	}
	return out, next, nil
}

// expireCorrelatedSQL deletes up to $3 correlated events of tenant $1 whose
// expires_at is set and not after $2, most overdue first. SKIP LOCKED leaves
// alone the events a put or a commit is delivering at that moment (they are
// deleted by a later call) and keeps concurrent calls disjoint.
const expireCorrelatedSQL = `WITH expired AS MATERIALIZED (
	SELECT def, key, expires_at FROM correlated_events
	WHERE tenant = $1 AND expires_at > 0 AND expires_at <= $2
	ORDER BY expires_at, def, key
	LIMIT $3
	FOR UPDATE SKIP LOCKED
), gone AS (
	DELETE FROM correlated_events c USING expired x
	WHERE c.tenant = $1 AND c.def = x.def AND c.key = x.key
)
SELECT def, key FROM expired ORDER BY expires_at, def, key`

// CorrelatedExpire: see storage.CorrelatedStore.
func (s *Store) CorrelatedExpire(ctx context.Context, p *storage.CorrelatedExpireParams) ([]string, error) {
	if p == nil {
		return nil, backend.NilParams("postgres: expire correlated events")
	}
	now := backend.NowOr(p.Now).UnixNano()
	limit := backend.ExpireLimit(p.Limit)
	var keys []string
	err := s.do(ctx, func(ctx context.Context) error {
		keys = nil
		return pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
			rows, err := tx.Query(ctx, expireCorrelatedSQL, p.Tenant, now, limit)
			if err != nil {
				return fmt.Errorf("delete expired correlated events: %w", err)
			}
			var defs []string
			for rows.Next() {
				var def, key string
				if err := rows.Scan(&def, &key); err != nil {
					rows.Close()
					return fmt.Errorf("delete expired correlated events: %w", err)
				}
				defs, keys = append(defs, def), append(keys, key)
			}
			rows.Close()
			if err := rows.Err(); err != nil {
				return fmt.Errorf("delete expired correlated events: %w", err)
			}
			if len(keys) == 0 {
				return nil
			}
			// A second statement, with a snapshot taken after the first
			// locked the events: it also sees the produced entries of
			// deliveries that committed while the first was running.
			if _, err := tx.Exec(ctx, `DELETE FROM correlated_produced x
				USING unnest($2::text[], $3::text[]) AS t(def, key)
				WHERE x.tenant = $1 AND x.def = t.def AND x.key = t.key`, p.Tenant, defs, keys); err != nil {
				return fmt.Errorf("delete expired produced events: %w", err)
			}
			return nil
		})
	})
	if err != nil {
		return nil, fmt.Errorf("postgres: expire correlated events: %w", err)
	}
	if len(keys) == 0 {
		keys = nil
	}
	return keys, nil
}

// upsertCorrelatedSQL creates a correlated event or updates its payload,
// times and trace context: $1 tenant, $2 definition, $3 key, $4 payload, $5
// now, $6 expires at, $7 trace.
const upsertCorrelatedSQL = `INSERT INTO correlated_events (tenant, def, key, payload, created_at, updated_at, expires_at, trace)
	VALUES ($1, $2, $3, $4, $5, $5, $6, $7)
	ON CONFLICT (tenant, def, key) DO UPDATE SET
		payload = excluded.payload, updated_at = excluded.updated_at, expires_at = excluded.expires_at,
		trace = excluded.trace`

// correlatedPutGo is CorrelatedPut by the reference rule,
// backend.CorrelatedPut, over laneTx's primitives: the same locks, then a
// round trip to read the markers and one to load the event. It runs only
// in tests (config.goCorrelated), where the conformance suite holds it and
// putDeliverSQL to the same cases.
func (s *Store) correlatedPutGo(ctx context.Context, p *storage.CorrelatedPutParams) (*heraldtype.CorrelatedEvent, error) {
	var (
		out       *heraldtype.CorrelatedEvent
		delivered int
	)
	err := s.do(ctx, func(ctx context.Context) error {
		return pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
			lt := newLaneTx(ctx, tx, p.Tenant, "", backend.NowOr(p.Now))
			lt.b.exec("lock correlation key", `SELECT pg_advisory_xact_lock($1)`, s.correlatedLockKey(p.Tenant, p.Def, p.Key))
			lt.b.exec("lock waiting instances", `SELECT 1 FROM instances
				WHERE tenant = $1 AND id IN (SELECT instance_id FROM correlated_waits WHERE tenant = $1 AND def = $2 AND key = $3)
				ORDER BY id FOR NO KEY UPDATE`, p.Tenant, p.Def, p.Key)
			var err error
			if out, delivered, err = backend.CorrelatedPut(lt, p); err != nil {
				return err
			}
			return lt.flush()
		})
	})
	if err != nil {
		return nil, fmt.Errorf("postgres: put correlated event %q/%q: %w", p.Def, p.Key, err)
	}
	if delivered > 0 {
		s.signal(p.Tenant, storage.WorkTurns)
	}
	return out, nil
}
