package postgres

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/heraldwf/herald/heraldtype"
	"github.com/heraldwf/herald/storage"
	"github.com/heraldwf/herald/storage/internal/backend"
)

// The event bus's storage (storage.BusStore; schema in migration 0008).
//
// Many nodes share the bus. BusRoute and BusClaim pick their rows with FOR
// UPDATE SKIP LOCKED, so nodes route disjoint events and claim disjoint
// executions without waiting for each other; BusFinish and BusHeartbeat are
// fenced by the execution's lock token (a result whose token no longer owns
// the execution writes nothing), and a running execution whose lease ran
// out is claimed again by anyone (a takeover). The fair-queueing numbers
// come from herald_bus_numbers, which locks the subscriptions' rows of
// bus_fq; locks are taken event, then route (execution), then bus_fq row,
// by every call that takes more than one, so calls do not deadlock one
// another.

// ---- publish ----

// publishSQL stores an event unless the tenant has one with its id ($1
// tenant, $2 id, $3 type, $4 data, $5 source, $6 now, $7 trace). Its one row says
// whether it stored it, and the stored event's type and publish time:
// NULL if an event with the id was committed after the statement's
// snapshot was taken (the caller reads it again).
const publishSQL = `WITH ins AS (
	INSERT INTO bus_events (tenant, id, type, data, source, published_at, trace) VALUES ($1, $2, $3, $4, $5, $6, $7)
	ON CONFLICT (tenant, id) DO NOTHING
	RETURNING type, published_at
)
SELECT EXISTS (SELECT 1 FROM ins), COALESCE((SELECT type FROM ins), e.type), COALESCE((SELECT published_at FROM ins), e.published_at)
FROM (SELECT 1) one
LEFT JOIN bus_events e ON e.tenant = $1 AND e.id = $2`

// publishCall is one BusPublish.
type publishCall struct {
	ctx context.Context
	p   *storage.BusPublishParams
	now int64

	stored bool
	typ    *string
	at     *int64
	err    error
}

func (c *publishCall) args() []any {
	ev := &c.p.Event
	return []any{c.p.Tenant, ev.ID, ev.Type, backend.RawArg(ev.Data), ev.Source, c.now, ev.TraceParent}
}

// Publish batches: concurrent publishes share a transaction, in one round
// trip, as raises do (see raiseBatch): a batch runs publishSQL for each,
// in (tenant, id) order; if it fails, each publish runs again on its own.
const (
	maxPublishBatches = 4  // batches in flight
	maxPublishBatch   = 32 // publishes per batch
)

// publishBatch runs a batch of publishes.
func (s *Store) publishBatch(calls []*combined[*publishCall]) {
	if len(calls) == 1 {
		c := calls[0].call
		c.err = s.publishOne(c.ctx, c)
		return
	}
	slices.SortStableFunc(calls, func(a, b *combined[*publishCall]) int {
		return cmp.Or(cmp.Compare(a.call.p.Tenant, b.call.p.Tenant), cmp.Compare(a.call.p.Event.ID, b.call.p.Event.ID))
	})
	var b batch
	for _, cc := range calls {
		c := cc.call
		b.queryRow("", func(row pgx.Row) error { return row.Scan(&c.stored, &c.typ, &c.at) }, publishSQL, c.args()...)
	}
	ctx, cancel := context.WithTimeout(context.Background(), batchTimeout)
	err := b.send(ctx, s.pool)
	cancel()
	for _, cc := range calls {
		c := cc.call
		if err != nil || c.typ == nil {
			c.err = s.publishOne(c.ctx, c)
		}
	}
}

// publishOne publishes c in a transaction of its own, retried on
// serialization failures and deadlocks. An event that is there when the
// insert finds it but gone when it is read again was pruned meanwhile: the
// next try stores it.
func (s *Store) publishOne(ctx context.Context, c *publishCall) error {
	return s.do(ctx, func(ctx context.Context) error {
		for range 3 {
			c.typ, c.at = nil, nil
			if err := s.pool.QueryRow(ctx, publishSQL, c.args()...).Scan(&c.stored, &c.typ, &c.at); err != nil || c.typ != nil {
				return err
			}
			var typ string
			var at int64
			err := s.pool.QueryRow(ctx, `SELECT type, published_at FROM bus_events WHERE tenant = $1 AND id = $2`,
				c.p.Tenant, c.p.Event.ID).Scan(&typ, &at)
			if !errors.Is(err, pgx.ErrNoRows) {
				c.stored, c.typ, c.at = false, &typ, &at
				return err
			}
		}
		return errors.New("the event with this id keeps vanishing")
	})
}

// BusPublish: see storage.BusStore. One statement (publishSQL, in a batch
// shared with concurrent publishes); a duplicate costs a second one only if
// its first copy committed while the statement ran.
func (s *Store) BusPublish(ctx context.Context, p *storage.BusPublishParams) (*storage.BusPublished, error) {
	if p == nil {
		return nil, backend.NilParams("postgres: bus publish")
	}
	if err := backend.CheckBusPublish(p); err != nil {
		return nil, fmt.Errorf("postgres: bus publish %.64q: %w", p.Event.ID, err)
	}
	c := &publishCall{ctx: ctx, p: p, now: backend.NowOr(p.Now).UnixNano()}
	if s.closed.Load() {
		c.err = s.publishOne(ctx, c)
	} else if err := s.publishes.do(ctx, c); err != nil {
		c.err = err
	}
	if c.err != nil {
		return nil, fmt.Errorf("postgres: bus publish %q: %w", p.Event.ID, c.err)
	}
	if !c.stored && *c.typ != p.Event.Type {
		return nil, fmt.Errorf("postgres: bus publish %q: first published with type %q: %w", p.Event.ID, *c.typ, heraldtype.ErrEventIDConflict)
	}
	if c.stored {
		s.warmBus.note()
		s.signal(p.Tenant, storage.WorkBus)
	}
	return &storage.BusPublished{Duplicate: !c.stored, PublishedAt: backend.FromNanos(*c.at)}, nil
}

// publishTurnSQL stores a turn's published events ($1 tenant, $2 ids, $3
// types, $4 data, $5 sources, $6 now, $7 traces), in order; an id the
// tenant already has is skipped (see storage.TurnCommitParams.Publish).
const publishTurnSQL = `INSERT INTO bus_events (tenant, id, type, data, source, published_at, trace)
	SELECT $1, t.id, t.type, t.data, t.source, $6, t.trace
	FROM unnest($2::text[], $3::text[], $4::text[], $5::text[], $7::text[]) WITH ORDINALITY AS t(id, type, data, source, trace, ord)
	ORDER BY t.ord
	ON CONFLICT (tenant, id) DO NOTHING`

// checkTurnPublish checks a commit's Publish.
func checkTurnPublish(p *storage.TurnCommitParams) error { return backend.CheckTurnPublish(p.Publish) }

// queuePublish queues the insertion of a commit's published events.
func (b *batch) queuePublish(tenant string, evs []storage.BusPublishEvent, now int64) {
	if len(evs) == 0 {
		return
	}
	ids, types, sources, traces := make([]string, len(evs)), make([]string, len(evs)), make([]string, len(evs)), make([]string, len(evs))
	data := make([]*string, len(evs))
	for i := range evs {
		ev := &evs[i]
		ids[i], types[i], sources[i], data[i], traces[i] = ev.ID, ev.Type, ev.Source, jsonText(ev.Data), ev.TraceParent
	}
	b.exec("publish", publishTurnSQL, tenant, ids, types, data, sources, now, traces)
}

// ---- route ----

// routeSelectSQL locks up to $2 of tenant $1's unrouted events, oldest
// first, skipping those another transaction (another node's BusRoute)
// holds.
const routeSelectSQL = `SELECT ctid, seq, id, type, data, source, published_at, trace FROM bus_events
	WHERE tenant = $1 AND routed_at = 0
	ORDER BY seq
	LIMIT $2
	FOR UPDATE SKIP LOCKED`

// routeInsertSQL stores the decisions of a routing ($1 tenant, $2 now; per
// decision, in order: $3 event id, $4 subscription, $5 matched, $6
// filtered_by, $7 the index of its number among those of $8, the
// subscriptions of the matched decisions in order). A matched decision is
// a queued execution, due at once, with its fair-queueing number.
const routeInsertSQL = `INSERT INTO bus_routes (tenant, event_id, subscription, status, filtered_by, fq, due_at, created_at, updated_at)
	SELECT $1, t.event_id, t.sub, CASE WHEN t.matched THEN 'queued' ELSE 'filtered' END, t.filtered_by,
		CASE WHEN t.matched THEN n.nums[t.k] ELSE 0 END, CASE WHEN t.matched THEN $2::bigint ELSE 0 END, $2, $2
	FROM unnest($3::text[], $4::text[], $5::boolean[], $6::bytea[], $7::integer[]) WITH ORDINALITY
		AS t(event_id, sub, matched, filtered_by, k, ord)
	CROSS JOIN (SELECT herald_bus_numbers($1, $8::text[]) AS nums) n
	ORDER BY t.ord`

// routeMarkSQL marks the events at ctids $2 routed at $1. The routing
// locked them in an earlier statement of its transaction, so the snapshot
// of this one has their current versions.
const routeMarkSQL = `UPDATE bus_events SET routed_at = $1 WHERE ctid = ANY($2::tid[])`

// BusRoute: see storage.BusStore. One transaction in two round trips: the
// first locks the events (BEGIN, then routeSelectSQL), the second stores
// the decisions, marks the events and commits. p.Route is called between
// them.
func (s *Store) BusRoute(ctx context.Context, p *storage.BusRouteParams) (int, error) {
	if p == nil {
		return 0, backend.NilParams("postgres: bus route")
	}
	max, err := backend.BusRouteArgs(p)
	if err != nil {
		return 0, fmt.Errorf("postgres: bus route: %w", err)
	}
	now := backend.NowOr(p.Now).UnixNano()
	var routed, queued int
	err = s.do(ctx, func(ctx context.Context) error {
		routed, queued = 0, 0
		var (
			evs   []*storage.BusEvent
			tids  []pgtype.TID
			first batch
		)
		first.exec("", scanSettings)
		first.query("lock events", func(rows pgx.Rows) error {
			for rows.Next() {
				var (
					ev   storage.BusEvent
					tid  pgtype.TID
					data []byte
					at   int64
				)
				if err := rows.Scan(&tid, &ev.Seq, &ev.ID, &ev.Type, &data, &ev.Source, &at, &ev.TraceParent); err != nil {
					return err
				}
				ev.Data, ev.PublishedAt = backend.RawOf(data), backend.FromNanos(at)
				evs, tids = append(evs, &ev), append(tids, tid)
			}
			return nil
		}, routeSelectSQL, p.Tenant, max)
		var gen int64
		if p.CheckGeneration {
			// After the events are locked: a change committed before any
			// of them was published is seen.
			first.queryRow("read the subscription generation", func(row pgx.Row) error { return row.Scan(&gen) },
				`SELECT COALESCE((SELECT sub_generation FROM bus_tenants WHERE tenant = $1), 0)`, p.Tenant)
		}
		return s.txn(ctx, &first, func() (*batch, error) {
			if len(evs) == 0 {
				return nil, nil
			}
			if p.CheckGeneration && gen != p.Generation {
				return nil, fmt.Errorf("generation %d, not %d: %w", gen, p.Generation, storage.ErrSubscriptionsChanged)
			}
			var (
				eventIDs, subs, numbered []string
				matched                  []bool
				filteredBy               [][]byte
				ks                       []int32
			)
			for _, ev := range evs {
				ds := p.Route(ev)
				if err := backend.CheckBusDecisions(ds); err != nil {
					return nil, fmt.Errorf("route of event %q: %w", ev.ID, err)
				}
				for _, d := range ds {
					var k int32
					if d.Matched {
						numbered = append(numbered, d.Subscription)
						k = int32(len(numbered))
					}
					eventIDs, subs, matched = append(eventIDs, ev.ID), append(subs, d.Subscription), append(matched, d.Matched)
					filteredBy, ks = append(filteredBy, textArg(d.FilteredBy)), append(ks, k)
				}
			}
			var b batch
			b.exec("", scanSettings)
			if len(subs) > 0 {
				b.exec("store routes", routeInsertSQL, p.Tenant, now, eventIDs, subs, matched, filteredBy, ks, numbered)
			}
			b.exec("mark routed", routeMarkSQL, now, tids)
			routed, queued = len(evs), len(numbered)
			return &b, nil
		})
	})
	if err != nil {
		return 0, fmt.Errorf("postgres: bus route: %w", err)
	}
	if queued > 0 {
		s.warmBus.note()
		s.signal(p.Tenant, storage.WorkBus)
	}
	return routed, nil
}

// txn runs a transaction in two round trips: BEGIN and first's statements,
// then the statements next returns (none: nothing to write) and COMMIT. If
// anything fails the transaction is rolled back (or its connection
// closed). It is run by do, which retries it whole.
func (s *Store) txn(ctx context.Context, first *batch, next func() (*batch, error)) (err error) {
	conn, err := s.pool.Acquire(ctx)
	if err != nil {
		return err
	}
	// A connection left in a transaction (ROLLBACK failed, a panic in
	// next) is closed by Release.
	defer conn.Release()
	var b batch
	b.exec("", "BEGIN")
	b.b.QueuedQueries = append(b.b.QueuedQueries, first.b.QueuedQueries...)
	b.steps = append(b.steps, first.steps...)
	open := true
	defer func() {
		if open {
			rctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			_, _ = conn.Exec(rctx, "ROLLBACK")
		}
	}()
	if err := b.send(ctx, conn); err != nil {
		return err
	}
	second, err := next()
	if err != nil {
		return err
	}
	if second == nil {
		second = &batch{}
	}
	second.exec("commit", "COMMIT")
	err = second.send(ctx, conn)
	if err == nil {
		open = false
	}
	return err
}

// ---- claim ----

// busExecCols are an execution's columns of bus_routes r (scanExecution).
const busExecCols = `r.id, r.event_id, r.subscription, r.status, r.attempts, r.due_at, r.last_error, r.result,
	r.dead_letter, r.reprocessed, r.created_at, r.updated_at`

// execRow receives busExecCols.
type execRow struct {
	e                           heraldtype.Execution
	status                      string
	lastError, result           []byte
	dueAt, createdAt, updatedAt int64
	deadLetter                  int64
	attempts, reprocessed       int32
}

func (r *execRow) dest() []any {
	return []any{&r.e.ID, &r.e.EventID, &r.e.Subscription, &r.status, &r.attempts, &r.dueAt, &r.lastError,
		&r.result, &r.deadLetter, &r.reprocessed, &r.createdAt, &r.updatedAt}
}

func (r *execRow) execution() heraldtype.Execution {
	e := r.e
	e.Status = heraldtype.ExecutionStatus(r.status)
	e.Attempts, e.Reprocessed = int(r.attempts), int(r.reprocessed)
	if e.Status == heraldtype.ExecQueued || e.Status == heraldtype.ExecRetrying {
		e.NextAttemptAt = backend.FromNanos(r.dueAt)
	}
	e.LastError = string(r.lastError)
	e.Result = backend.RawOf(r.result)
	e.DeadLetter = r.deadLetter
	e.CreatedAt, e.UpdatedAt = backend.FromNanos(r.createdAt), backend.FromNanos(r.updatedAt)
	return e
}

// busClaimSQL leases up to $3 of tenant $1's executions due at $2 until
// $4: queued or retrying ones from bus_routes_queue in claim order (a
// retrying one not yet due is stepped over in the index), and running ones
// whose lease ran out from bus_routes_running, both skipping rows other
// transactions hold; the earliest $3 by (fq, due_at, id) are claimed, each
// with a new random token, not started (its attempt is counted when it
// starts: busHeartbeatSQL). It returns them with their events, and whether
// each was taken over (a running one whose attempt had started).
const busClaimSQL = `WITH queued AS MATERIALIZED (
	SELECT ctid, fq, due_at, id, false AS taken FROM bus_routes
	WHERE tenant = $1 AND status IN ('queued', 'retrying') AND due_at <= $2
	ORDER BY fq, due_at, id
	LIMIT $3
	FOR UPDATE SKIP LOCKED
), expired AS MATERIALIZED (
	SELECT ctid, fq, due_at, id, started AS taken FROM bus_routes
	WHERE tenant = $1 AND status = 'running' AND lease_until < $2
	ORDER BY fq, due_at, id
	LIMIT $3
	FOR UPDATE SKIP LOCKED
), pick AS MATERIALIZED (
	SELECT ctid, id, taken FROM (SELECT * FROM queued UNION ALL SELECT * FROM expired) u
	ORDER BY fq, due_at, id
	LIMIT $3
), claimed AS (
	UPDATE bus_routes r SET status = 'running', lock_token = replace(gen_random_uuid()::text, '-', ''),
		lease_until = $4, started = false, updated_at = $2
	WHERE r.ctid = ANY(ARRAY(SELECT ctid FROM pick))
	RETURNING ` + busExecCols + `, r.fq, r.due_at AS due, r.lock_token
)
SELECT r.*, r.id = ANY(ARRAY(SELECT id FROM pick WHERE taken)), e.seq, e.type, e.data, e.source, e.published_at, e.trace
FROM claimed r
LEFT JOIN LATERAL (
	SELECT seq, type, data, source, published_at, trace FROM bus_events e WHERE e.tenant = $1 AND e.id = r.event_id OFFSET 0
) e ON true`

// BusClaim: see storage.BusStore. One statement, committed without waiting
// for a disk flush (as TurnClaim's: a claim lost in a database crash only
// loses its lease, and its token then fails to finish).
func (s *Store) BusClaim(ctx context.Context, p *storage.BusClaimParams) ([]*storage.BusClaimed, error) {
	if p == nil {
		return nil, backend.NilParams("postgres: bus claim")
	}
	max, lease, err := backend.BusClaimArgs(p)
	if err != nil {
		return nil, fmt.Errorf("postgres: bus claim: %w", err)
	}
	now := backend.NowOr(p.Now)
	leaseUntil := now.Add(lease)
	type claimed struct {
		c       *storage.BusClaimed
		fq, due int64
	}
	var out []*storage.BusClaimed
	err = s.do(ctx, func(ctx context.Context) error {
		out = nil
		var (
			cs []claimed
			b  batch
		)
		b.exec("", claimSettings)
		b.query("lease executions", func(rows pgx.Rows) error {
			for rows.Next() {
				var (
					r           execRow
					c           claimed
					seq         *int64
					typ, source *string
					trace       *string
					data        []byte
					at          *int64
					bc          storage.BusClaimed
				)
				dest := append(r.dest(), &c.fq, &c.due, &bc.LockToken, &bc.TakenOver, &seq, &typ, &data, &source, &at, &trace)
				if err := rows.Scan(dest...); err != nil {
					return err
				}
				bc.Execution = r.execution()
				bc.Execution.Attempts++ // the number of the attempt this claim makes
				bc.Event = storage.BusEvent{ID: r.e.EventID, Data: backend.RawOf(data)}
				if seq != nil {
					bc.Event.Seq, bc.Event.Type, bc.Event.Source, bc.Event.PublishedAt = *seq, *typ, *source, backend.FromNanos(*at)
					bc.Event.TraceParent = *trace
				}
				c.c = &bc
				cs = append(cs, c)
			}
			return nil
		}, busClaimSQL, p.Tenant, now.UnixNano(), max, leaseUntil.UnixNano())
		if err := b.send(ctx, s.pool); err != nil {
			return err
		}
		slices.SortFunc(cs, func(a, b claimed) int {
			return cmp.Or(cmp.Compare(a.fq, b.fq), cmp.Compare(a.due, b.due), cmp.Compare(a.c.Execution.ID, b.c.Execution.ID))
		})
		for _, c := range cs {
			out = append(out, c.c)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("postgres: bus claim: %w", err)
	}
	return out, nil
}

// ---- finish ----

// busFinishLockSQL locks the executions of tenant $1 (ids $2, ascending)
// that tokens $3 still own. BusFinish runs it before busFinishSQL, in the
// same transaction, so that the snapshot of busFinishSQL has the locked
// rows' current versions (a heartbeat may have changed one since the lock
// statement began) and may change them by ctid.
const busFinishLockSQL = `SELECT count(*) FROM unnest($2::bigint[], $3::text[]) AS x(id, token)
	CROSS JOIN LATERAL (
		SELECT 1 FROM bus_routes r WHERE r.tenant = $1 AND r.id = x.id AND r.lock_token = x.token OFFSET 0 FOR UPDATE
	) l`

// busFinishSQL ends claimed attempts of tenant $1 at $2, one per element of
// the arrays $3..$21 (see BusFinish). It reads the executions each
// result's token still owns (f: a token is set only while its execution
// runs), stores their dead letters and attempt records, gives the retries
// their fair-queueing numbers, and sets the executions as the outcomes
// say. It returns the ord of each result it wrote. Every row is found by
// its key: one probe per result.
const busFinishSQL = `WITH r AS (
	SELECT * FROM unnest($3::integer[], $4::bigint[], $5::text[], $6::integer[], $7::bigint[],
		$8::integer[], $9::boolean[], $10::bigint[], $11::bigint[], $12::text[], $13::text[], $14::bytea[], $15::bytea[], $16::bytea[],
		$17::text[], $18::text[], $19::bytea[], $20::bytea[], $21::bigint[])
	AS t(ord, exec, token, outcome, retry_at, number, succeeded, started_at, duration, result, error_kind, error, stack, logs,
		dl_target, dl_kind, dl_error, dl_stack, dl_failed)
), f AS MATERIALIZED (
	SELECT r.*, l.tid, l.event_id, l.subscription, l.attempts,
		CASE WHEN r.outcome = 2 THEN row_number() OVER (PARTITION BY r.outcome = 2 ORDER BY r.ord) END AS k
	FROM r CROSS JOIN LATERAL (
		SELECT ctid AS tid, event_id, subscription, attempts FROM bus_routes e
		WHERE e.tenant = $1 AND e.id = r.exec AND e.lock_token = r.token OFFSET 0
	) l
), nums AS MATERIALIZED (
	SELECT herald_bus_numbers($1, ARRAY(SELECT subscription FROM f WHERE outcome = 2 ORDER BY ord)) AS n
), dl AS (
	INSERT INTO bus_dead_letters (tenant, execution, event_id, subscription, target, event_type, event_data,
		error_kind, error, stack, attempts, failed_at, created_at)
	SELECT $1, f.exec, f.event_id, f.subscription, f.dl_target, COALESCE(ev.type, ''), ev.data,
		f.dl_kind, f.dl_error, f.dl_stack, GREATEST(f.attempts, f.number), f.dl_failed, $2
	FROM f LEFT JOIN LATERAL (
		SELECT type, data FROM bus_events ev WHERE ev.tenant = $1 AND ev.id = f.event_id OFFSET 0
	) ev ON true
	WHERE f.outcome = 3
	ORDER BY f.ord
	RETURNING id, execution
), att AS (
	INSERT INTO bus_attempts (tenant, execution, event_id, subscription, number, succeeded, started_at, duration_ns,
		result, error_kind, error, stack, logs)
	SELECT $1, f.exec, f.event_id, f.subscription, f.number, f.succeeded, f.started_at, f.duration,
		f.result, f.error_kind, f.error, f.stack, f.logs
	FROM f WHERE f.outcome <> 4 ORDER BY f.ord
), up AS (
	UPDATE bus_routes e SET (status, attempts, started, lock_token, lease_until, due_at, fq, result, last_error, dead_letter,
			updated_at) = (
		SELECT CASE f.outcome WHEN 1 THEN 'succeeded' WHEN 2 THEN 'retrying'
				WHEN 4 THEN CASE WHEN e.attempts - e.started::int > 0 THEN 'retrying' ELSE 'queued' END
				ELSE 'dead_lettered' END,
			CASE WHEN f.outcome = 4 THEN e.attempts - e.started::int ELSE GREATEST(e.attempts, f.number) END,
			false, NULL, 0,
			CASE WHEN f.outcome IN (2, 4) THEN f.retry_at ELSE 0 END,
			CASE WHEN f.outcome = 2 THEN ((SELECT n FROM nums))[f.k] ELSE e.fq END,
			CASE WHEN f.outcome = 1 THEN f.result ELSE e.result END,
			CASE WHEN f.outcome IN (1, 4) THEN e.last_error ELSE f.error END,
			COALESCE((SELECT dl.id FROM dl WHERE dl.execution = f.exec), e.dead_letter),
			$2
		FROM f WHERE f.tid = e.ctid)
	WHERE e.ctid = ANY(ARRAY(SELECT tid FROM f))
)
SELECT ord FROM f`

// BusFinish: see storage.BusStore. One round trip for all the results: a
// statement that locks the executions the results' tokens own, then
// busFinishSQL. A result whose lock token is empty (or no text), or
// repeats an (execution, token) pair of an earlier result of the call,
// gets ErrLeaseLost without being sent.
func (s *Store) BusFinish(ctx context.Context, p *storage.BusFinishParams) ([]error, error) {
	if p == nil {
		return nil, backend.NilParams("postgres: bus finish")
	}
	if err := backend.CheckBusFinish(p); err != nil {
		return nil, fmt.Errorf("postgres: bus finish: %w", err)
	}
	now := backend.NowOr(p.Now).UnixNano()
	n := len(p.Results)
	var (
		ords, outcomes, numbers                []int32
		execs, retryAt, started, dur, dlFailed []int64
		tokens, errKinds, dlTargets, dlKinds   []string
		succeeded                              []bool
		results                                []*string
		errs, stacks, logs, dlErrs, dlStacks   [][]byte
	)
	out := make([]error, n)
	type key struct {
		exec  int64
		token string
	}
	seen := make(map[key]bool, n)
	retries := false
	for i := range p.Results {
		r := &p.Results[i]
		a := &r.Attempt
		var (
			target, kind   string
			dlErr, dlStack []byte
			failedAt       int64
		)
		if r.Outcome == storage.BusDeadLetter {
			d := r.DeadLetter
			var err error
			if target, err = targetArg(&d.Target); err != nil {
				return nil, fmt.Errorf("postgres: bus finish: result %d: %w", i, err)
			}
			kind, dlErr, dlStack, failedAt = string(d.ErrorKind), textArg(d.Error), textArg(d.Stack), backend.Nanos(d.FailedAt)
		}
		k := key{r.Execution, r.LockToken}
		if !backend.BusTokenValid(r.LockToken) || seen[k] {
			out[i] = heraldtype.ErrLeaseLost
			continue
		}
		seen[k] = true
		retry := now
		if r.Outcome == storage.BusRetry || r.Outcome == storage.BusReleased {
			retries = true
			if !r.RetryAt.IsZero() {
				retry = r.RetryAt.UnixNano()
			}
		}
		ords, execs, tokens, outcomes = append(ords, int32(i)), append(execs, r.Execution), append(tokens, r.LockToken), append(outcomes, int32(r.Outcome))
		retryAt, numbers, succeeded = append(retryAt, retry), append(numbers, int32(a.Number)), append(succeeded, a.Succeeded)
		started, dur = append(started, backend.Nanos(a.StartedAt)), append(dur, int64(a.Duration))
		results, errKinds = append(results, jsonText(a.Result)), append(errKinds, string(a.ErrorKind))
		errs, stacks, logs = append(errs, textArg(a.Error)), append(stacks, textArg(a.Stack)), append(logs, encodeLogs(a.Logs))
		dlTargets, dlKinds, dlErrs, dlStacks, dlFailed = append(dlTargets, target), append(dlKinds, kind),
			append(dlErrs, dlErr), append(dlStacks, dlStack), append(dlFailed, failedAt)
	}
	if len(ords) == 0 {
		return out, nil
	}
	// The lock statement's arguments: the executions in id order (the
	// order every statement that locks several takes them in).
	lockIDs, lockTokens := slices.Clone(execs), slices.Clone(tokens)
	byID := make([]int, len(execs))
	for i := range byID {
		byID[i] = i
	}
	slices.SortFunc(byID, func(a, b int) int { return cmp.Compare(execs[a], execs[b]) })
	for i, j := range byID {
		lockIDs[i], lockTokens[i] = execs[j], tokens[j]
	}
	written := make(map[int32]bool, len(ords))
	err := s.do(ctx, func(ctx context.Context) error {
		clear(written)
		var b batch
		b.exec("", scanSettings)
		b.exec("lock executions", busFinishLockSQL, p.Tenant, lockIDs, lockTokens)
		b.query("finish", func(rows pgx.Rows) error {
			for rows.Next() {
				var ord int32
				if err := rows.Scan(&ord); err != nil {
					return err
				}
				written[ord] = true
			}
			return nil
		}, busFinishSQL, p.Tenant, now, ords, execs, tokens, outcomes, retryAt,
			numbers, succeeded, started, dur, results, errKinds, errs, stacks, logs,
			dlTargets, dlKinds, dlErrs, dlStacks, dlFailed)
		return b.send(ctx, s.pool)
	})
	if err != nil {
		return nil, fmt.Errorf("postgres: bus finish: %w", err)
	}
	retried := false
	for j, ord := range ords {
		if !written[ord] {
			out[ord] = heraldtype.ErrLeaseLost
		} else if outcomes[j] == int32(storage.BusRetry) || outcomes[j] == int32(storage.BusReleased) {
			retried = true
		}
	}
	s.warmBus.note()
	if retries && retried {
		s.signal(p.Tenant, storage.WorkBus)
	}
	return out, nil
}

// busHeartbeatSQL moves the lease of tenant $1's execution $2 to $4 if
// token $3 owns it and, with $5 (Start), starts its attempt: counted once,
// however often the start is written. A token is set only while its
// execution runs (the query names no status, so that no partial index of
// statuses competes with the primary key). It commits with
// synchronous_commit off, as the claims do (postgres.go): an attempt waits
// for its start before its target runs, and a heartbeat or start lost in a
// database crash loses only a lease's extension or one attempt's count,
// never an outcome (a start guards against a Go handler that crashes
// Herald's process, which the server outlives).
const busHeartbeatSQL = `UPDATE bus_routes SET lease_until = $4,
	attempts = attempts + CASE WHEN $5::boolean AND NOT started THEN 1 ELSE 0 END, started = started OR $5::boolean
	WHERE tenant = $1 AND id = $2 AND lock_token = $3 AND set_config('synchronous_commit', 'off', true) IS NOT NULL`

// BusHeartbeat: see storage.BusStore. A zero LeaseUntil is refused.
func (s *Store) BusHeartbeat(ctx context.Context, p *storage.BusHeartbeatParams) error {
	if p == nil {
		return backend.NilParams("postgres: bus heartbeat")
	}
	if err := backend.CheckBusHeartbeat(p); err != nil {
		return fmt.Errorf("postgres: bus heartbeat: %w", err)
	}
	err := s.do(ctx, func(ctx context.Context) error {
		ct, err := s.pool.Exec(ctx, busHeartbeatSQL,
			p.Tenant, p.Execution, p.LockToken, backend.Nanos(p.LeaseUntil), p.Start)
		if err != nil {
			return err
		}
		if ct.RowsAffected() == 0 {
			return heraldtype.ErrLeaseLost
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("postgres: bus heartbeat of execution %d: %w", p.Execution, err)
	}
	return nil
}
