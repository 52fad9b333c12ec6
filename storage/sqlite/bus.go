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

// The event bus's storage (storage.BusStore); the schema is migration
// 0005_bus.sql. Writes go through the writer (group commit), reads through
// the read pool; every statement is by tenant through an index that leads
// with it.
//
// Choices the contract leaves open:
//
//   - A route and the execution it queues are one row (bus_routes): the
//     execution's id is the route's, so ids of executions have gaps where
//     filtered routes took one. Routes are returned in decision order.
//   - The fair-queueing number: a subscription without a stored last number
//     counts as having -1 (its first execution gets the tenant's current
//     number). The last numbers live in bus_fair_queue (a subscription's
//     row is deleted with it), the highest number given in bus_tenants.
//   - Fencing is by lock token only: BusFinish and BusHeartbeat succeed
//     after the lease ran out as long as nobody claimed the execution since.
//     An ended execution has no token, so a second finish gets
//     ErrLeaseLost.
//   - BusFinish reads a zero RetryAt as Now. An execution's LastError is
//     the error of its latest failed attempt (a retry's or a dead
//     letter's); DeadLetter keeps the id of the latest letter after a
//     reprocess.
//   - BusScriptPut after BusScriptDelete goes on from the deleted script's
//     last version (with a new CreatedAt), so a script id and version never
//     name two sources.
//   - The params are checked as storage.BusStore says, by backend
//     (busparams.go), before the write.
//   - BusRoute calls Route on the writer goroutine, inside the write
//     transaction (it must be quick). If the group-commit transaction it ran
//     in fails as a whole (an I/O error at COMMIT), the call is run again
//     alone, and Route is called again for its events.

// ---- publish ----

// BusPublish: see storage.BusStore. The bus's hot path: one insert, and a
// read only for an id already taken.
func (s *Store) BusPublish(ctx context.Context, p *storage.BusPublishParams) (*storage.BusPublished, error) {
	if p == nil {
		return nil, backend.NilParams("sqlite: publish")
	}
	if err := backend.CheckBusPublish(p); err != nil {
		return nil, fmt.Errorf("sqlite: publish: %w", err)
	}
	now := backend.NowOr(p.Now).UnixNano()
	var res *storage.BusPublished
	err := s.write(ctx, func(w *wtx) error {
		var err error
		res, err = publishTx(w, p.Tenant, &p.Event, now)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("sqlite: publish %q: %w", p.Event.ID, err)
	}
	return res, nil
}

// publishTx stores ev unless the tenant has an event with its id: then it
// reports a duplicate (same type) or returns ErrEventIDConflict.
func publishTx(w *wtx, tenant string, ev *storage.BusPublishEvent, now int64) (*storage.BusPublished, error) {
	res, err := w.exec(`INSERT INTO bus_events (tenant, id, type, data, source, published_at, trace) VALUES (?, ?, ?, ?, ?, ?, ?)
		ON CONFLICT (tenant, id) DO NOTHING`, tenant, ev.ID, ev.Type, string(ev.Data), ev.Source, now, ev.TraceParent)
	if err != nil {
		return nil, fmt.Errorf("insert event: %w", err)
	}
	if n, err := res.RowsAffected(); err != nil {
		return nil, fmt.Errorf("insert event: %w", err)
	} else if n == 1 {
		w.signalKinds(tenant, storage.WorkBus)
		return &storage.BusPublished{PublishedAt: backend.FromNanos(now)}, nil
	}
	var (
		typ string
		at  int64
	)
	if err := w.queryRow(`SELECT type, published_at FROM bus_events WHERE tenant = ? AND id = ?`, tenant, ev.ID).Scan(&typ, &at); err != nil {
		return nil, fmt.Errorf("check event id: %w", err)
	}
	if typ != ev.Type {
		return nil, fmt.Errorf("published before with type %q: %w", typ, heraldtype.ErrEventIDConflict)
	}
	return &storage.BusPublished{Duplicate: true, PublishedAt: backend.FromNanos(at)}, nil
}

// publishTurn stores a turn's published events (TurnCommitParams.Publish),
// skipping duplicates and ids of another type.
func publishTurn(w *wtx, tenant string, evs []storage.BusPublishEvent, now int64) error {
	for i := range evs {
		if _, err := publishTx(w, tenant, &evs[i], now); err != nil && !errors.Is(err, heraldtype.ErrEventIDConflict) {
			return fmt.Errorf("publish %q: %w", evs[i].ID, err)
		}
	}
	return nil
}

// checkTurnPublish checks a turn's published events before its commit.
func checkTurnPublish(evs []storage.BusPublishEvent) error { return backend.CheckTurnPublish(evs) }

// ---- fair queueing ----

// fairQueue numbers executions within one write transaction: the number is
// max(the subscription's last number + 1, the tenant's current number) (see
// storage.BusStore's BusRoute), where the current number is the lowest
// number of the tenant's queued or retrying executions, or, with none, the
// highest number given (bus_tenants.fq_top; -1 before the first, which
// max ignores). It is read once: within the transaction the set of queued
// or retrying executions only grows, by the numbers given here, which are
// never below it.
type fairQueue struct {
	w      *wtx
	tenant string
	loaded bool  // cur and top have been read
	queued bool  // the tenant has queued or retrying executions
	cur    int64 // the tenant's current number
	top    int64 // the highest number given
	last   map[string]int64
}

func newFairQueue(w *wtx, tenant string) *fairQueue {
	return &fairQueue{w: w, tenant: tenant, last: map[string]int64{}}
}

// next returns the number of a new (or renumbered) execution of sub.
func (f *fairQueue) next(sub string) (int64, error) {
	if !f.loaded {
		var low sql.NullInt64
		if err := f.w.queryRow(busLowSQL, f.tenant).Scan(&low, &f.top); err != nil {
			return 0, fmt.Errorf("read the current fair-queueing number: %w", err)
		}
		f.loaded, f.queued, f.cur = true, low.Valid, f.top
		if low.Valid {
			f.cur = low.Int64
		}
	}
	last, ok := f.last[sub]
	if !ok {
		err := f.w.queryRow(`SELECT last FROM bus_fair_queue WHERE tenant = ? AND subscription = ?`, f.tenant, sub).Scan(&last)
		switch {
		case errors.Is(err, sql.ErrNoRows):
			last = -1
		case err != nil:
			return 0, fmt.Errorf("read the fair-queueing number of %q: %w", sub, err)
		}
	}
	n := max(last+1, f.cur)
	if !f.queued {
		// The first queued execution: the lowest number from now on.
		f.queued, f.cur = true, n
	}
	f.last[sub], f.top = n, max(f.top, n)
	return n, nil
}

// busLowSQL is the lowest fair-queueing number of tenant ?1's queued or
// retrying executions (NULL: none), the first entry of two partial indexes,
// and the highest number the tenant gave (-1: none).
const busLowSQL = `SELECT (SELECT MIN(m) FROM (
		SELECT MIN(fq) AS m FROM bus_routes WHERE tenant = ?1 AND status = 'queued'
		UNION ALL
		SELECT MIN(fq) FROM bus_routes WHERE tenant = ?1 AND status = 'retrying')),
	COALESCE((SELECT fq_top FROM bus_tenants WHERE tenant = ?1), -1)`

// save stores the subscriptions' last numbers and the highest number.
func (f *fairQueue) save() error {
	if len(f.last) == 0 {
		return nil
	}
	if _, err := f.w.exec(`INSERT INTO bus_tenants (tenant, fq_top) VALUES (?1, ?2)
		ON CONFLICT (tenant) DO UPDATE SET fq_top = MAX(fq_top, ?2)`, f.tenant, f.top); err != nil {
		return fmt.Errorf("store the highest fair-queueing number: %w", err)
	}
	for sub, last := range f.last {
		if _, err := f.w.exec(`INSERT INTO bus_fair_queue (tenant, subscription, last) VALUES (?, ?, ?)
			ON CONFLICT (tenant, subscription) DO UPDATE SET last = excluded.last`, f.tenant, sub, last); err != nil {
			return fmt.Errorf("store the fair-queueing number of %q: %w", sub, err)
		}
	}
	return nil
}

// ---- route ----

// BusRoute: see storage.BusStore. One write transaction: the unrouted
// events (bus_events_unrouted, in seq order), Route's decisions, the routes
// and executions, the events marked routed.
func (s *Store) BusRoute(ctx context.Context, p *storage.BusRouteParams) (int, error) {
	if p == nil {
		return 0, backend.NilParams("sqlite: route")
	}
	max, err := backend.BusRouteArgs(p)
	if err != nil {
		return 0, fmt.Errorf("sqlite: route: %w", err)
	}
	now := backend.NowOr(p.Now).UnixNano()
	var routed int
	err = s.write(ctx, func(w *wtx) error {
		routed = 0
		rows, err := w.query(busUnroutedSQL, p.Tenant, max)
		if err != nil {
			return fmt.Errorf("read unrouted events: %w", err)
		}
		var evs []*storage.BusEvent
		for rows.Next() {
			ev, err := scanBusEvent(rows)
			if err != nil {
				return fmt.Errorf("read unrouted events: %w", err)
			}
			evs = append(evs, ev)
		}
		if len(evs) == 0 {
			return nil
		}
		if p.CheckGeneration {
			var gen int64
			if err := w.queryRow(`SELECT COALESCE((SELECT sub_generation FROM bus_tenants WHERE tenant = ?), 0)`,
				p.Tenant).Scan(&gen); err != nil {
				return fmt.Errorf("read the subscription generation: %w", err)
			}
			if gen != p.Generation {
				return fmt.Errorf("generation %d, not %d: %w", gen, p.Generation, storage.ErrSubscriptionsChanged)
			}
		}
		fq := newFairQueue(w, p.Tenant)
		queued := false
		for _, ev := range evs {
			seq, id := ev.Seq, ev.ID
			ds := p.Route(ev)
			if err := backend.CheckBusDecisions(ds); err != nil {
				return fmt.Errorf("event %q: %w", id, err)
			}
			for _, d := range ds {
				if !d.Matched {
					if _, err := w.exec(`INSERT INTO bus_routes (tenant, event_seq, event_id, subscription, matched, filtered_by,
						status, created_at, updated_at) VALUES (?, ?, ?, ?, 0, ?, 'filtered', ?, ?)`,
						p.Tenant, seq, id, d.Subscription, d.FilteredBy, now, now); err != nil {
						return fmt.Errorf("event %q: store the route to %q: %w", id, d.Subscription, err)
					}
					continue
				}
				n, err := fq.next(d.Subscription)
				if err != nil {
					return err
				}
				if _, err := w.exec(`INSERT INTO bus_routes (tenant, event_seq, event_id, subscription, matched,
					status, due_at, fq, created_at, updated_at) VALUES (?, ?, ?, ?, 1, 'queued', ?, ?, ?, ?)`,
					p.Tenant, seq, id, d.Subscription, now, n, now, now); err != nil {
					return fmt.Errorf("event %q: queue the execution of %q: %w", id, d.Subscription, err)
				}
				queued = true
			}
			if _, err := w.exec(`UPDATE bus_events SET routed_at = ? WHERE seq = ?`, now, seq); err != nil {
				return fmt.Errorf("event %q: mark routed: %w", id, err)
			}
		}
		if err := fq.save(); err != nil {
			return err
		}
		if queued {
			w.signalKinds(p.Tenant, storage.WorkBus)
		}
		routed = len(evs)
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("sqlite: route: %w", err)
	}
	return routed, nil
}

const busEventCols = `seq, id, type, data, source, published_at, trace`

// busUnroutedSQL reads the oldest ?2 unrouted events of tenant ?1.
const busUnroutedSQL = `SELECT ` + busEventCols + ` FROM bus_events
	WHERE tenant = ?1 AND routed_at = 0 ORDER BY seq LIMIT +?2`

func scanBusEvent(sc scanner) (*storage.BusEvent, error) {
	var (
		ev   storage.BusEvent
		data []byte
		at   int64
	)
	if err := sc.Scan(&ev.Seq, &ev.ID, &ev.Type, &data, &ev.Source, &at, &ev.TraceParent); err != nil {
		return nil, err
	}
	ev.Data, ev.PublishedAt = json.RawMessage(data), backend.FromNanos(at)
	return &ev, nil
}

// ---- executions ----

// execCols are an execution's columns of bus_routes, read by scanExec.
const execCols = `id, event_id, subscription, status, attempts, due_at, last_error, result, dead_letter, reprocessed, created_at, updated_at`

func scanExec(sc scanner, extra ...any) (*heraldtype.Execution, error) {
	var (
		x                          heraldtype.Execution
		due, created, updated      int64
		result                     []byte
		status                     string
		attempts, reprocessed      int
		lastError, eventID, subscr string
	)
	if err := sc.Scan(append([]any{&x.ID, &eventID, &subscr, &status, &attempts, &due, &lastError, &result,
		&x.DeadLetter, &reprocessed, &created, &updated}, extra...)...); err != nil {
		return nil, err
	}
	x.EventID, x.Subscription, x.Status = eventID, subscr, heraldtype.ExecutionStatus(status)
	x.Attempts, x.LastError, x.Result, x.Reprocessed = attempts, lastError, backend.RawOf(result), reprocessed
	if x.Status == heraldtype.ExecQueued || x.Status == heraldtype.ExecRetrying {
		x.NextAttemptAt = backend.FromNanos(due)
	}
	x.CreatedAt, x.UpdatedAt = backend.FromNanos(created), backend.FromNanos(updated)
	return &x, nil
}

// busDueSQL finds up to ?3 executions of tenant ?1 due at ?2, in claim
// order: the first ?3 of each partial index, merged.
const busDueSQL = `SELECT id, status, started FROM (
		SELECT * FROM (SELECT id, status, 0 AS started, fq, due_at FROM bus_routes
			WHERE tenant = ?1 AND status = 'queued' AND due_at <= ?2 ORDER BY fq, due_at, id LIMIT +?3)
		UNION ALL
		SELECT * FROM (SELECT id, status, 0 AS started, fq, due_at FROM bus_routes
			WHERE tenant = ?1 AND status = 'retrying' AND due_at <= ?2 ORDER BY fq, due_at, id LIMIT +?3)
		UNION ALL
		SELECT * FROM (SELECT id, status, started, fq, due_at FROM bus_routes
			WHERE tenant = ?1 AND status = 'running' AND lease_until < ?2 ORDER BY fq, due_at, id LIMIT +?3)
	) ORDER BY fq, due_at, id LIMIT +?3`

// busLeaseSQL leases the executions whose ids are the JSON array ?4, with
// lock token ?1 || id, until ?2, at ?3. The attempt is not counted until it
// starts (busStartSQL): a claimed execution may wait in the runtime's
// dispatch queue, and one that never starts spends no attempt.
const busLeaseSQL = `UPDATE bus_routes SET status = 'running', lock_token = ?1 || id, lease_until = ?2,
	started = 0, updated_at = ?3 WHERE id IN (SELECT value FROM json_each(?4))
	RETURNING ` + execCols + `, event_seq, lock_token`

// busClaimEventsSQL reads tenant ?2's events whose seqs are the JSON array
// ?1, by primary key (the unary + keeps the planner off the tenant's index,
// which it would otherwise scan: it cannot size the JSON list).
const busClaimEventsSQL = `SELECT ` + busEventCols + ` FROM bus_events
	WHERE seq IN (SELECT value FROM json_each(?1)) AND +tenant = ?2`

// BusClaim: see storage.BusStore. The due executions come from three
// partial indexes (queued in fair-queueing order, retrying by due time,
// running by lease end), merged in fair-queueing order; the claim is
// answered at commit, before its fsync (a claim lost to a power loss only
// fails its tokens; see writeEarly).
func (s *Store) BusClaim(ctx context.Context, p *storage.BusClaimParams) ([]*storage.BusClaimed, error) {
	if p == nil {
		return nil, backend.NilParams("sqlite: claim executions")
	}
	max, lease, err := backend.BusClaimArgs(p)
	if err != nil {
		return nil, fmt.Errorf("sqlite: claim executions: %w", err)
	}
	now := backend.NowOr(p.Now)
	nowN, until := now.UnixNano(), now.Add(lease).UnixNano()
	var claimed []*storage.BusClaimed
	err = s.writeEarly(ctx, func(w *wtx) error {
		claimed = nil
		rows, err := w.query(busDueSQL, p.Tenant, nowN, max)
		if err != nil {
			return fmt.Errorf("find due executions: %w", err)
		}
		type due struct {
			id      int64
			status  string
			started bool
		}
		var dues []due
		for rows.Next() {
			var d due
			if err := rows.Scan(&d.id, &d.status, &d.started); err != nil {
				return fmt.Errorf("find due executions: %w", err)
			}
			dues = append(dues, d)
		}
		if len(dues) == 0 {
			return nil
		}
		// One UPDATE leases them all and one SELECT reads their events
		// (the id lists passed as JSON arrays, so that each statement is
		// prepared once). Each lock token is the batch's random prefix and
		// the execution's id: unique per execution and claim.
		ids := make([]int64, len(dues))
		order := make(map[int64]int, len(dues))
		for i, d := range dues {
			ids[i], order[d.id] = d.id, i
		}
		idList, _ := json.Marshal(ids)
		rows, err = w.query(busLeaseSQL, backend.NewToken()+".", until, nowN, string(idList))
		if err != nil {
			return fmt.Errorf("lease executions: %w", err)
		}
		claimed = make([]*storage.BusClaimed, len(dues))
		seqs := make([]int64, 0, len(dues))
		bySeq := make(map[int64][]int, len(dues))
		for rows.Next() {
			var (
				seq   int64
				token string
			)
			x, err := scanExec(rows, &seq, &token)
			if err != nil {
				return fmt.Errorf("lease executions: %w", err)
			}
			i, ok := order[x.ID]
			if !ok || claimed[i] != nil {
				return fmt.Errorf("lease executions: unexpected execution %d", x.ID)
			}
			x.Attempts++ // the number of the attempt this claim starts
			claimed[i] = &storage.BusClaimed{Execution: *x, LockToken: token,
				TakenOver: dues[i].status == string(heraldtype.ExecRunning) && dues[i].started}
			if bySeq[seq] == nil {
				seqs = append(seqs, seq)
			}
			bySeq[seq] = append(bySeq[seq], i)
		}
		for i, c := range claimed {
			if c == nil {
				return fmt.Errorf("lease execution %d: %w", dues[i].id, sql.ErrNoRows)
			}
		}
		seqList, _ := json.Marshal(seqs)
		rows, err = w.query(busClaimEventsSQL, string(seqList), p.Tenant)
		if err != nil {
			return fmt.Errorf("read the events of the executions: %w", err)
		}
		for rows.Next() {
			ev, err := scanBusEvent(rows)
			if err != nil {
				return fmt.Errorf("read the events of the executions: %w", err)
			}
			for _, i := range bySeq[ev.Seq] {
				claimed[i].Event = *ev
			}
			delete(bySeq, ev.Seq)
		}
		for _, is := range bySeq {
			return fmt.Errorf("read the event of execution %d: %w", dues[is[0]].id, sql.ErrNoRows)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("sqlite: claim executions: %w", err)
	}
	return claimed, nil
}

// finishArgs are a result's values encoded before the write.
type finishArgs struct {
	logs, target any
}

// encodeResult encodes a result checked by backend.CheckBusResult.
func encodeResult(i int, r *storage.BusResult) (finishArgs, error) {
	var a finishArgs
	if r.Outcome == storage.BusDeadLetter {
		b, err := json.Marshal(r.DeadLetter.Target)
		if err != nil {
			return a, fmt.Errorf("result %d: encode target: %w", i, err)
		}
		a.target = string(b)
	}
	if len(r.Attempt.Logs) > 0 {
		b, err := json.Marshal(r.Attempt.Logs)
		if err != nil {
			return a, fmt.Errorf("result %d: encode logs: %w", i, err)
		}
		a.logs = string(b)
	}
	return a, nil
}

// BusFinish: see storage.BusStore. Each result is fenced by reading its
// execution's token first, so a lost one writes nothing.
func (s *Store) BusFinish(ctx context.Context, p *storage.BusFinishParams) ([]error, error) {
	if p == nil {
		return nil, backend.NilParams("sqlite: finish attempts")
	}
	if err := backend.CheckBusFinish(p); err != nil {
		return nil, fmt.Errorf("sqlite: finish attempts: %w", err)
	}
	args := make([]finishArgs, len(p.Results))
	for i := range p.Results {
		a, err := encodeResult(i, &p.Results[i])
		if err != nil {
			return nil, fmt.Errorf("sqlite: finish attempts: %w", err)
		}
		args[i] = a
	}
	now := backend.NowOr(p.Now).UnixNano()
	errs := make([]error, len(p.Results))
	if len(p.Results) == 0 {
		return errs, nil
	}
	err := s.write(ctx, func(w *wtx) error {
		clear(errs)
		fq := newFairQueue(w, p.Tenant)
		retried := false
		for i := range p.Results {
			r := &p.Results[i]
			ok, err := finishOne(w, fq, p.Tenant, r, args[i], now)
			if err != nil {
				return fmt.Errorf("execution %d: %w", r.Execution, err)
			}
			if !ok {
				errs[i] = fmt.Errorf("sqlite: finish execution %d: %w", r.Execution, heraldtype.ErrLeaseLost)
				continue
			}
			retried = retried || r.Outcome == storage.BusRetry || r.Outcome == storage.BusReleased
		}
		if err := fq.save(); err != nil {
			return err
		}
		if retried {
			w.signalKinds(p.Tenant, storage.WorkBus)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("sqlite: finish attempts: %w", err)
	}
	return errs, nil
}

// finishOne ends one attempt; ok is false, with nothing written, if r's
// token does not own its execution. The common outcomes fence with the
// statement that writes: a success is one UPDATE … RETURNING and the
// attempt's INSERT; a dead letter one INSERT … SELECT (from the execution,
// fenced, and its event), the execution's UPDATE and the attempt's INSERT.
func finishOne(w *wtx, fq *fairQueue, tenant string, r *storage.BusResult, a finishArgs, now int64) (ok bool, err error) {
	if r.LockToken == "" {
		return false, nil // no claim's token: it owns nothing
	}
	switch r.Outcome {
	case storage.BusSucceeded:
		return finishSucceeded(w, tenant, r, a, now)
	case storage.BusDeadLetter:
		return finishDeadLetter(w, tenant, r, a, now)
	}
	var (
		status, eventID, sub string
		token                sql.NullString
	)
	err = w.queryRow(`SELECT status, lock_token, event_id, subscription FROM bus_routes
		WHERE id = ? AND tenant = ?`, r.Execution, tenant).Scan(&status, &token, &eventID, &sub)
	if errors.Is(err, sql.ErrNoRows) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("load execution: %w", err)
	}
	if status != string(heraldtype.ExecRunning) || !token.Valid || token.String != r.LockToken {
		return false, nil
	}
	if r.Outcome == storage.BusReleased {
		// Back to where the claim found it, no record, its fair-queueing
		// number kept (it stays at the front); an attempt that started is
		// not counted (busReleaseSQL).
		due := backend.Nanos(r.RetryAt)
		if due == 0 {
			due = now
		}
		if _, err := w.exec(busReleaseSQL, due, now, r.Execution); err != nil {
			return false, fmt.Errorf("release execution: %w", err)
		}
		return true, nil
	}
	// BusRetry.
	if err := insertAttempt(w, tenant, r, a, eventID, sub); err != nil {
		return false, err
	}
	n, err := fq.next(sub)
	if err != nil {
		return false, err
	}
	due := backend.Nanos(r.RetryAt)
	if due == 0 {
		due = now
	}
	if _, err := w.exec(`UPDATE bus_routes SET status = 'retrying', due_at = ?, fq = ?, last_error = ?, lock_token = NULL,
		lease_until = 0, attempts = max(attempts, ?), updated_at = ? WHERE id = ?`,
		due, n, r.Attempt.Error, r.Attempt.Number, now, r.Execution); err != nil {
		return false, fmt.Errorf("update execution: %w", err)
	}
	return true, nil
}

// finishSucceeded ends a succeeded attempt: the fenced UPDATE, then the
// attempt's record.
func finishSucceeded(w *wtx, tenant string, r *storage.BusResult, a finishArgs, now int64) (bool, error) {
	var eventID, sub string
	err := w.queryRow(`UPDATE bus_routes SET status = 'succeeded', result = ?, lock_token = NULL, lease_until = 0,
		attempts = max(attempts, ?), updated_at = ? WHERE id = ? AND tenant = ? AND status = 'running' AND lock_token = ?
		RETURNING event_id, subscription`, backend.RawArg(r.Attempt.Result), r.Attempt.Number, now, r.Execution, tenant, r.LockToken).
		Scan(&eventID, &sub)
	if errors.Is(err, sql.ErrNoRows) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("update execution: %w", err)
	}
	return true, insertAttempt(w, tenant, r, a, eventID, sub)
}

// finishDeadLetter ends an attempt with a dead letter: the letter is
// inserted from the execution (fenced by its token) and its event, then
// the execution moves to dead_lettered and the attempt is recorded.
func finishDeadLetter(w *wtx, tenant string, r *storage.BusResult, a finishArgs, now int64) (bool, error) {
	var (
		id           int64
		eventID, sub string
	)
	dl := r.DeadLetter
	err := w.queryRow(`INSERT INTO bus_dead_letters (tenant, execution, event_id, subscription, target, event_type,
		event_data, error_kind, error, stack, attempts, failed_at, created_at)
		SELECT x.tenant, x.id, x.event_id, x.subscription, ?, e.type, e.data, ?, ?, ?, max(x.attempts, ?), ?, ?
		FROM bus_routes x JOIN bus_events e ON e.seq = x.event_seq
		WHERE x.id = ? AND x.tenant = ? AND x.status = 'running' AND x.lock_token = ?
		RETURNING id, event_id, subscription`,
		a.target, string(dl.ErrorKind), dl.Error, dl.Stack, r.Attempt.Number, backend.Nanos(dl.FailedAt), now,
		r.Execution, tenant, r.LockToken).Scan(&id, &eventID, &sub)
	if errors.Is(err, sql.ErrNoRows) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("store dead letter: %w", err)
	}
	if _, err := w.exec(`UPDATE bus_routes SET status = 'dead_lettered', dead_letter = ?, last_error = ?, lock_token = NULL,
		lease_until = 0, attempts = max(attempts, ?), updated_at = ? WHERE id = ?`,
		id, r.Attempt.Error, r.Attempt.Number, now, r.Execution); err != nil {
		return false, fmt.Errorf("update execution: %w", err)
	}
	return true, insertAttempt(w, tenant, r, a, eventID, sub)
}

// insertAttempt records r's attempt of the execution of event eventID for
// subscription sub.
func insertAttempt(w *wtx, tenant string, r *storage.BusResult, a finishArgs, eventID, sub string) error {
	at := &r.Attempt
	if _, err := w.exec(`INSERT INTO bus_attempts (tenant, execution, event_id, subscription, number, succeeded, started_at,
		duration, result, error_kind, error, stack, logs) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
		tenant, r.Execution, eventID, sub, at.Number, at.Succeeded, backend.Nanos(at.StartedAt), int64(at.Duration),
		backend.RawArg(at.Result), string(at.ErrorKind), at.Error, at.Stack, a.logs); err != nil {
		return fmt.Errorf("store attempt: %w", err)
	}
	return nil
}

// busReleaseSQL releases execution ?3 at ?2, due at ?1: back to queued, or
// retrying if attempts had started before this claim's; the count of this
// claim's attempt, if it started, is taken back (storage.BusReleased).
const busReleaseSQL = `UPDATE bus_routes SET
	status = CASE WHEN attempts - started > 0 THEN 'retrying' ELSE 'queued' END,
	attempts = attempts - started, started = 0, due_at = ?1, lock_token = NULL, lease_until = 0, updated_at = ?2
	WHERE id = ?3`

// busHeartbeatSQL moves the lease of tenant ?4's execution ?3 to ?1 if
// token ?5 owns it; with ?2 (Start) it also starts the attempt: counted
// once, however often the start is written.
const busHeartbeatSQL = `UPDATE bus_routes SET lease_until = ?1,
	attempts = attempts + (?2 AND NOT started), started = (started OR ?2)
	WHERE id = ?3 AND tenant = ?4 AND status = 'running' AND lock_token = ?5`

// BusHeartbeat: see storage.BusStore.
func (s *Store) BusHeartbeat(ctx context.Context, p *storage.BusHeartbeatParams) error {
	if p == nil {
		return backend.NilParams("sqlite: execution heartbeat")
	}
	if err := backend.CheckBusHeartbeat(p); err != nil {
		return fmt.Errorf("sqlite: execution heartbeat: %w", err)
	}
	err := s.write(ctx, func(w *wtx) error {
		res, err := w.exec(busHeartbeatSQL, p.LeaseUntil.UnixNano(), p.Start, p.Execution, p.Tenant, p.LockToken)
		if err != nil {
			return fmt.Errorf("extend lease: %w", err)
		}
		if n, err := res.RowsAffected(); err != nil {
			return fmt.Errorf("extend lease: %w", err)
		} else if n == 0 {
			return heraldtype.ErrLeaseLost
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("sqlite: execution heartbeat %d: %w", p.Execution, err)
	}
	return nil
}

// ---- subscriptions ----

const subCols = `id, pattern, filter, target, enabled, max_retries, timeout, version, created_at, updated_at`

func scanSub(sc scanner) (*heraldtype.Subscription, error) {
	var (
		sub              heraldtype.Subscription
		filter, target   []byte
		maxRetries       sql.NullInt64
		timeout          int64
		created, updated int64
	)
	if err := sc.Scan(&sub.ID, &sub.Pattern, &filter, &target, &sub.Enabled, &maxRetries, &timeout, &sub.Version,
		&created, &updated); err != nil {
		return nil, err
	}
	sub.Filter = backend.RawOf(filter)
	if err := json.Unmarshal(target, &sub.Target); err != nil {
		return nil, fmt.Errorf("subscription %q: decode target: %v: %w", sub.ID, err, heraldtype.ErrCorrupt)
	}
	if maxRetries.Valid {
		n := int(maxRetries.Int64)
		sub.MaxRetries = &n
	}
	sub.Timeout = heraldtype.Duration(timeout)
	sub.CreatedAt, sub.UpdatedAt = backend.FromNanos(created), backend.FromNanos(updated)
	return &sub, nil
}

// bumpGeneration changes the tenant's subscription generation. It counts
// as a definition write (wtx.defs), so that BusSubscriptionGeneration
// waits for the fsync of such transactions only.
func bumpGeneration(w *wtx, tenant string) error {
	w.defs = true
	if _, err := w.exec(`INSERT INTO bus_tenants (tenant, sub_generation) VALUES (?, 1)
		ON CONFLICT (tenant) DO UPDATE SET sub_generation = sub_generation + 1`, tenant); err != nil {
		return fmt.Errorf("change the subscription generation: %w", err)
	}
	return nil
}

// retireSubscription is the first step of a put or delete of subscription
// id: it returns the change's position in the publish order (the highest
// event seq given: writes are serial, so every event published after the
// change has a higher one) and, if the tenant has unrouted events (all
// published before the change), keeps the subscription's current version,
// if any, for routing them (migration 0015).
func retireSubscription(w *wtx, tenant, id string) (int64, error) {
	var (
		pos  int64
		keep bool
	)
	if err := w.queryRow(`SELECT COALESCE((SELECT max(seq) FROM bus_events), 0),
		EXISTS (SELECT 1 FROM bus_events WHERE tenant = ? AND routed_at = 0)`, tenant).Scan(&pos, &keep); err != nil {
		return 0, fmt.Errorf("read the publish position: %w", err)
	}
	if keep {
		if _, err := w.exec(`INSERT INTO bus_subscription_versions (tenant, id, version, pattern, filter, target, enabled,
				max_retries, timeout, created_at, updated_at, since, until)
			SELECT tenant, id, version, pattern, filter, target, enabled, max_retries, timeout, created_at, updated_at, since, ?
			FROM bus_subscriptions WHERE tenant = ? AND id = ?`, pos, tenant, id); err != nil {
			return 0, fmt.Errorf("keep the replaced version: %w", err)
		}
	}
	return pos, nil
}

// BusSubscriptionPut: see storage.BusStore.
func (s *Store) BusSubscriptionPut(ctx context.Context, p *storage.BusSubscriptionPutParams) (*heraldtype.Subscription, error) {
	if p == nil {
		return nil, backend.NilParams("sqlite: put subscription")
	}
	sub := &p.Subscription
	if err := backend.CheckBusSubscription(p.Tenant, sub); err != nil {
		return nil, fmt.Errorf("sqlite: put subscription %.64q: %w", sub.ID, err)
	}
	target, err := json.Marshal(sub.Target)
	if err != nil {
		return nil, fmt.Errorf("sqlite: put subscription %q: encode target: %w", sub.ID, err)
	}
	var maxRetries any
	if sub.MaxRetries != nil {
		maxRetries = int64(*sub.MaxRetries)
	}
	now := backend.NowOr(p.Now).UnixNano()
	var got *heraldtype.Subscription
	err = s.write(ctx, func(w *wtx) error {
		pos, err := retireSubscription(w, p.Tenant, sub.ID)
		if err != nil {
			return err
		}
		got, err = scanSub(w.queryRow(`INSERT INTO bus_subscriptions (tenant, id, pattern, filter, target, enabled,
				max_retries, timeout, version, created_at, updated_at, since) VALUES (?, ?, ?, ?, ?, ?, ?, ?, 1, ?, ?, ?)
			ON CONFLICT (tenant, id) DO UPDATE SET pattern = excluded.pattern, filter = excluded.filter,
				target = excluded.target, enabled = excluded.enabled, max_retries = excluded.max_retries,
				timeout = excluded.timeout, version = version + 1, updated_at = excluded.updated_at, since = excluded.since
			RETURNING `+subCols, p.Tenant, sub.ID, sub.Pattern, backend.RawArg(sub.Filter), string(target), sub.Enabled,
			maxRetries, int64(sub.Timeout), now, now, pos))
		if err != nil {
			return fmt.Errorf("store: %w", err)
		}
		return bumpGeneration(w, p.Tenant)
	})
	if err != nil {
		return nil, fmt.Errorf("sqlite: put subscription %q: %w", sub.ID, err)
	}
	return got, nil
}

// BusSubscriptionGet: see storage.BusStore.
func (s *Store) BusSubscriptionGet(ctx context.Context, p *storage.BusSubscriptionGetParams) (_ *heraldtype.Subscription, err error) {
	defer s.afterRead(ctx, &err)
	if p == nil {
		return nil, backend.NilParams("sqlite: get subscription")
	}
	if err := backend.CheckBusID(p.Tenant, "subscription id", p.ID); err != nil {
		return nil, fmt.Errorf("sqlite: get subscription: %w", err)
	}
	if s.closed.Load() {
		return nil, heraldtype.ErrClosed
	}
	sub, err := scanSub(s.reader(nil).QueryRowContext(ctx, `SELECT `+subCols+` FROM bus_subscriptions WHERE tenant = ? AND id = ?`,
		p.Tenant, p.ID))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("sqlite: get subscription %q: %w", p.ID, heraldtype.ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("sqlite: get subscription %q: %w", p.ID, s.readErr(err))
	}
	return sub, nil
}

// BusSubscriptionList: see storage.BusStore. One read transaction for the
// list and the generation.
func (s *Store) BusSubscriptionList(ctx context.Context, p *storage.BusTenantParams) (_ []*heraldtype.Subscription, _ int64, err error) {
	defer s.afterRead(ctx, &err)
	if p == nil {
		return nil, 0, backend.NilParams("sqlite: list subscriptions")
	}
	if err := backend.CheckBusTenant(p.Tenant); err != nil {
		return nil, 0, fmt.Errorf("sqlite: list subscriptions: %w", err)
	}
	if s.closed.Load() {
		return nil, 0, heraldtype.ErrClosed
	}
	tx, err := s.rdb.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		return nil, 0, fmt.Errorf("sqlite: list subscriptions: %w", s.readErr(err))
	}
	defer tx.Rollback()
	r := s.reader(tx)
	gen, err := readGeneration(ctx, r, p.Tenant)
	if err != nil {
		return nil, 0, fmt.Errorf("sqlite: list subscriptions: %w", s.readErr(err))
	}
	rows, err := r.QueryContext(ctx, `SELECT `+subCols+` FROM bus_subscriptions WHERE tenant = ? ORDER BY id`, p.Tenant)
	if err != nil {
		return nil, 0, fmt.Errorf("sqlite: list subscriptions: %w", s.readErr(err))
	}
	defer rows.Close()
	var out []*heraldtype.Subscription
	for rows.Next() {
		sub, err := scanSub(rows)
		if err != nil {
			return nil, 0, fmt.Errorf("sqlite: list subscriptions: %w", err)
		}
		out = append(out, sub)
	}
	if err := rows.Err(); err != nil {
		return nil, 0, fmt.Errorf("sqlite: list subscriptions: %w", s.readErr(err))
	}
	return out, gen, nil
}

// busSubscriptionVersionsSQL reads tenant ?1's current subscriptions and
// kept versions (migration 0015), by id and since.
const busSubscriptionVersionsSQL = `SELECT ` + subCols + `, since, 0 FROM bus_subscriptions WHERE tenant = ?1
	UNION ALL SELECT ` + subCols + `, since, until FROM bus_subscription_versions WHERE tenant = ?1
	ORDER BY id, since`

// BusSubscriptionVersions: see storage.BusStore. One read transaction for
// the versions and the generation.
func (s *Store) BusSubscriptionVersions(ctx context.Context, p *storage.BusTenantParams) (_ []*storage.BusSubscriptionVersion, _ int64, err error) {
	defer s.afterRead(ctx, &err)
	if p == nil {
		return nil, 0, backend.NilParams("sqlite: subscription versions")
	}
	if err := backend.CheckBusTenant(p.Tenant); err != nil {
		return nil, 0, fmt.Errorf("sqlite: subscription versions: %w", err)
	}
	if s.closed.Load() {
		return nil, 0, heraldtype.ErrClosed
	}
	tx, err := s.rdb.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		return nil, 0, fmt.Errorf("sqlite: subscription versions: %w", s.readErr(err))
	}
	defer tx.Rollback()
	r := s.reader(tx)
	gen, err := readGeneration(ctx, r, p.Tenant)
	if err != nil {
		return nil, 0, fmt.Errorf("sqlite: subscription versions: %w", s.readErr(err))
	}
	rows, err := r.QueryContext(ctx, busSubscriptionVersionsSQL, p.Tenant)
	if err != nil {
		return nil, 0, fmt.Errorf("sqlite: subscription versions: %w", s.readErr(err))
	}
	defer rows.Close()
	var out []*storage.BusSubscriptionVersion
	for rows.Next() {
		v := &storage.BusSubscriptionVersion{}
		if v.Subscription, err = scanSub(extraScan{rows, []any{&v.Since, &v.Until}}); err != nil {
			return nil, 0, fmt.Errorf("sqlite: subscription versions: %w", err)
		}
		out = append(out, v)
	}
	if err := rows.Err(); err != nil {
		return nil, 0, fmt.Errorf("sqlite: subscription versions: %w", s.readErr(err))
	}
	return out, gen, nil
}

// extraScan scans a row's first columns with the scan it is handed and the
// rest into extra.
type extraScan struct {
	sc    scanner
	extra []any
}

func (e extraScan) Scan(dest ...any) error { return e.sc.Scan(append(dest, e.extra...)...) }

func readGeneration(ctx context.Context, q querier, tenant string) (int64, error) {
	var gen int64
	err := q.QueryRowContext(ctx, `SELECT sub_generation FROM bus_tenants WHERE tenant = ?`, tenant).Scan(&gen)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, nil
	}
	return gen, err
}

// BusSubscriptionDelete: see storage.BusStore. The subscription's
// fair-queueing number goes with it.
func (s *Store) BusSubscriptionDelete(ctx context.Context, p *storage.BusSubscriptionGetParams) error {
	if p == nil {
		return backend.NilParams("sqlite: delete subscription")
	}
	if err := backend.CheckBusID(p.Tenant, "subscription id", p.ID); err != nil {
		return fmt.Errorf("sqlite: delete subscription: %w", err)
	}
	err := s.write(ctx, func(w *wtx) error {
		if _, err := retireSubscription(w, p.Tenant, p.ID); err != nil {
			return err
		}
		res, err := w.exec(`DELETE FROM bus_subscriptions WHERE tenant = ? AND id = ?`, p.Tenant, p.ID)
		if err != nil {
			return err
		}
		if n, err := res.RowsAffected(); err != nil {
			return err
		} else if n == 0 {
			return heraldtype.ErrNotFound
		}
		if _, err := w.exec(`DELETE FROM bus_fair_queue WHERE tenant = ? AND subscription = ?`, p.Tenant, p.ID); err != nil {
			return fmt.Errorf("delete the fair-queueing number: %w", err)
		}
		return bumpGeneration(w, p.Tenant)
	})
	if err != nil {
		return fmt.Errorf("sqlite: delete subscription %q: %w", p.ID, err)
	}
	return nil
}

// BusSubscriptionGeneration: see storage.BusStore.
// It waits only for the transactions that changed a generation (as event
// definition reads do), not for the fsync of everything in flight: the
// runtime reads it before every claim and every routing batch.
func (s *Store) BusSubscriptionGeneration(ctx context.Context, p *storage.BusTenantParams) (_ int64, err error) {
	defer s.afterDefinitionRead(ctx, &err)
	if p == nil {
		return 0, backend.NilParams("sqlite: subscription generation")
	}
	if err := backend.CheckBusTenant(p.Tenant); err != nil {
		return 0, fmt.Errorf("sqlite: subscription generation: %w", err)
	}
	if s.closed.Load() {
		return 0, heraldtype.ErrClosed
	}
	gen, err := readGeneration(ctx, s.reader(nil), p.Tenant)
	if err != nil {
		return 0, fmt.Errorf("sqlite: subscription generation: %w", s.readErr(err))
	}
	return gen, nil
}

// ---- scripts ----

// BusScriptPut: see storage.BusStore.
func (s *Store) BusScriptPut(ctx context.Context, p *storage.BusScriptPutParams) (*heraldtype.Script, error) {
	if p == nil {
		return nil, backend.NilParams("sqlite: put script")
	}
	if err := backend.CheckBusScriptPut(p); err != nil {
		return nil, fmt.Errorf("sqlite: put script %.64q: %w", p.ID, err)
	}
	now := backend.NowOr(p.Now).UnixNano()
	var got *heraldtype.Script
	err := s.write(ctx, func(w *wtx) error {
		var (
			version      int
			created      int64
			deleted      bool
			versionAfter int
		)
		err := w.queryRow(`SELECT version, created_at, deleted FROM bus_script_heads WHERE tenant = ? AND id = ?`,
			p.Tenant, p.ID).Scan(&version, &created, &deleted)
		switch {
		case errors.Is(err, sql.ErrNoRows):
			versionAfter, created = 1, now
		case err != nil:
			return fmt.Errorf("read the script's head: %w", err)
		case deleted:
			versionAfter, created = version+1, now
		default:
			versionAfter = version + 1
		}
		if _, err := w.exec(`INSERT INTO bus_script_heads (tenant, id, version, created_at, deleted) VALUES (?, ?, ?, ?, 0)
			ON CONFLICT (tenant, id) DO UPDATE SET version = excluded.version, created_at = excluded.created_at, deleted = 0`,
			p.Tenant, p.ID, versionAfter, created); err != nil {
			return fmt.Errorf("store the script's head: %w", err)
		}
		if _, err := w.exec(`INSERT INTO bus_scripts (tenant, id, version, source, created_at) VALUES (?, ?, ?, ?, ?)`,
			p.Tenant, p.ID, versionAfter, p.Source, now); err != nil {
			return fmt.Errorf("store version %d: %w", versionAfter, err)
		}
		if err := bumpGeneration(w, p.Tenant); err != nil { // the runtimes' script caches check it
			return err
		}
		got = &heraldtype.Script{ID: p.ID, Version: versionAfter, Source: p.Source,
			CreatedAt: backend.FromNanos(created), UpdatedAt: backend.FromNanos(now)}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("sqlite: put script %q: %w", p.ID, err)
	}
	return got, nil
}

const scriptCols = `h.id, s.version, s.source, h.created_at, s.created_at`

func scanScript(sc scanner) (*heraldtype.Script, error) {
	var (
		sc2              heraldtype.Script
		created, updated int64
	)
	if err := sc.Scan(&sc2.ID, &sc2.Version, &sc2.Source, &created, &updated); err != nil {
		return nil, err
	}
	sc2.CreatedAt, sc2.UpdatedAt = backend.FromNanos(created), backend.FromNanos(updated)
	return &sc2, nil
}

// BusScriptGet: see storage.BusStore.
func (s *Store) BusScriptGet(ctx context.Context, p *storage.BusScriptGetParams) (_ *heraldtype.Script, err error) {
	defer s.afterRead(ctx, &err)
	if p == nil {
		return nil, backend.NilParams("sqlite: get script")
	}
	if err := backend.CheckBusScriptGet(p); err != nil {
		return nil, fmt.Errorf("sqlite: get script: %w", err)
	}
	if s.closed.Load() {
		return nil, heraldtype.ErrClosed
	}
	sc, err := scanScript(s.reader(nil).QueryRowContext(ctx, `SELECT `+scriptCols+` FROM bus_script_heads h
		JOIN bus_scripts s ON s.tenant = h.tenant AND s.id = h.id AND s.version = CASE WHEN ?3 = 0 THEN h.version ELSE ?3 END
		WHERE h.tenant = ?1 AND h.id = ?2 AND h.deleted = 0`, p.Tenant, p.ID, p.Version))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("sqlite: get script %q version %d: %w", p.ID, p.Version, heraldtype.ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("sqlite: get script %q: %w", p.ID, s.readErr(err))
	}
	return sc, nil
}

// BusScriptList: see storage.BusStore.
func (s *Store) BusScriptList(ctx context.Context, p *storage.BusTenantParams) (_ []*heraldtype.Script, err error) {
	defer s.afterRead(ctx, &err)
	if p == nil {
		return nil, backend.NilParams("sqlite: list scripts")
	}
	if err := backend.CheckBusTenant(p.Tenant); err != nil {
		return nil, fmt.Errorf("sqlite: list scripts: %w", err)
	}
	if s.closed.Load() {
		return nil, heraldtype.ErrClosed
	}
	rows, err := s.reader(nil).QueryContext(ctx, `SELECT `+scriptCols+` FROM bus_script_heads h
		JOIN bus_scripts s ON s.tenant = h.tenant AND s.id = h.id AND s.version = h.version
		WHERE h.tenant = ? AND h.deleted = 0 ORDER BY h.id`, p.Tenant)
	if err != nil {
		return nil, fmt.Errorf("sqlite: list scripts: %w", s.readErr(err))
	}
	defer rows.Close()
	var out []*heraldtype.Script
	for rows.Next() {
		sc, err := scanScript(rows)
		if err != nil {
			return nil, fmt.Errorf("sqlite: list scripts: %w", err)
		}
		out = append(out, sc)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("sqlite: list scripts: %w", s.readErr(err))
	}
	return out, nil
}

// BusScriptDelete: see storage.BusStore. The head stays, marked deleted.
func (s *Store) BusScriptDelete(ctx context.Context, p *storage.BusScriptGetParams) error {
	if p == nil {
		return backend.NilParams("sqlite: delete script")
	}
	if err := backend.CheckBusID(p.Tenant, "script id", p.ID); err != nil {
		return fmt.Errorf("sqlite: delete script: %w", err)
	}
	err := s.write(ctx, func(w *wtx) error {
		res, err := w.exec(`UPDATE bus_script_heads SET deleted = 1 WHERE tenant = ? AND id = ? AND deleted = 0`, p.Tenant, p.ID)
		if err != nil {
			return err
		}
		if n, err := res.RowsAffected(); err != nil {
			return err
		} else if n == 0 {
			return heraldtype.ErrNotFound
		}
		if _, err = w.exec(`DELETE FROM bus_scripts WHERE tenant = ? AND id = ?`, p.Tenant, p.ID); err != nil {
			return err
		}
		return bumpGeneration(w, p.Tenant) // the runtimes' script caches check it
	})
	if err != nil {
		return fmt.Errorf("sqlite: delete script %q: %w", p.ID, err)
	}
	return nil
}

// ---- dead letters ----

const deadLetterCols = `id, execution, event_id, subscription, target, event_type, event_data, error_kind, error, stack,
	attempts, failed_at, created_at, reprocessed_at`

func scanDeadLetter(sc scanner) (*heraldtype.DeadLetter, error) {
	var (
		dl                           heraldtype.DeadLetter
		target, data                 []byte
		kind                         string
		failed, created, reprocessed int64
	)
	if err := sc.Scan(&dl.ID, &dl.Execution, &dl.EventID, &dl.Subscription, &target, &dl.EventType, &data, &kind,
		&dl.Error, &dl.Stack, &dl.Attempts, &failed, &created, &reprocessed); err != nil {
		return nil, err
	}
	if err := json.Unmarshal(target, &dl.Target); err != nil {
		return nil, fmt.Errorf("dead letter %d: decode target: %v: %w", dl.ID, err, heraldtype.ErrCorrupt)
	}
	dl.EventData, dl.ErrorKind = json.RawMessage(data), heraldtype.ErrorKind(kind)
	dl.FailedAt, dl.CreatedAt, dl.ReprocessedAt = backend.FromNanos(failed), backend.FromNanos(created), backend.FromNanos(reprocessed)
	return &dl, nil
}

// letterFilter returns the WHERE terms (on table alias d) and arguments of
// a dead-letter filter checked by backend.CheckBusLetterFilter, after the
// tenant's; none is true when the filter matches nothing (an empty id
// list).
func letterFilter(tenant string, f *storage.BusDeadLetterFilter) (where []string, args []any, none bool, err error) {
	where, args = []string{"d.tenant = ?"}, []any{tenant}
	if f.Subscription != "" {
		where, args = append(where, "d.subscription = ?"), append(args, f.Subscription)
	}
	if f.EventType != "" {
		where, args = append(where, "d.event_type = ?"), append(args, f.EventType)
	}
	if f.ErrorKind != "" {
		where, args = append(where, "d.error_kind = ?"), append(args, string(f.ErrorKind))
	}
	if f.Reprocessed != nil {
		if *f.Reprocessed {
			where = append(where, "d.reprocessed_at > 0")
		} else {
			where = append(where, "d.reprocessed_at = 0")
		}
	}
	if f.Through > 0 {
		where, args = append(where, "d.id <= ?"), append(args, f.Through)
	}
	if f.IDs != nil {
		if len(f.IDs) == 0 {
			return nil, nil, true, nil
		}
		ids, err := json.Marshal(f.IDs)
		if err != nil {
			return nil, nil, false, err
		}
		where, args = append(where, "d.id IN (SELECT value FROM json_each(?))"), append(args, string(ids))
	}
	return where, args, false, nil
}

// letterListSQL is a page of dead letters matching where, newest first.
func letterListSQL(where []string) string {
	return `SELECT ` + deadLetterCols + ` FROM bus_dead_letters d
		WHERE ` + strings.Join(where, " AND ") + ` ORDER BY d.id DESC LIMIT +?`
}

// BusDeadLetterList: see storage.BusStore. A page reads one more letter
// than it returns, so that its cursor is 0 when it is the last.
func (s *Store) BusDeadLetterList(ctx context.Context, p *storage.BusDeadLetterListParams) (_ []*heraldtype.DeadLetter, _ int64, err error) {
	defer s.afterRead(ctx, &err)
	if p == nil {
		return nil, 0, backend.NilParams("sqlite: list dead letters")
	}
	limit, err := backend.BusLetterListArgs(p)
	if err != nil {
		return nil, 0, fmt.Errorf("sqlite: list dead letters: %w", err)
	}
	where, args, none, err := letterFilter(p.Tenant, &p.Filter)
	if err != nil {
		return nil, 0, fmt.Errorf("sqlite: list dead letters: %w", err)
	}
	if s.closed.Load() {
		return nil, 0, heraldtype.ErrClosed
	}
	if none {
		return nil, 0, nil
	}
	if p.Before > 0 {
		where, args = append(where, "d.id < ?"), append(args, p.Before)
	}
	return queryPage(ctx, s, "list dead letters", letterListSQL(where), args, limit, scanDeadLetter,
		func(d *heraldtype.DeadLetter) int64 { return d.ID })
}

// queryPage runs a page query (whose last argument is the row limit,
// limit+1 so that a further page shows) and returns the page and the
// cursor of the next one (0 when this one is the last).
func queryPage[T any](ctx context.Context, s *Store, what, query string, args []any, limit int,
	scan func(scanner) (T, error), id func(T) int64) ([]T, int64, error) {
	rows, err := s.reader(nil).QueryContext(ctx, query, append(args, limit+1)...)
	if err != nil {
		return nil, 0, fmt.Errorf("sqlite: %s: %w", what, s.readErr(err))
	}
	defer rows.Close()
	var out []T
	for rows.Next() {
		v, err := scan(rows)
		if err != nil {
			return nil, 0, fmt.Errorf("sqlite: %s: %w", what, err)
		}
		out = append(out, v)
	}
	if err := rows.Err(); err != nil {
		return nil, 0, fmt.Errorf("sqlite: %s: %w", what, s.readErr(err))
	}
	if len(out) > limit {
		out = out[:limit]
		return out, id(out[limit-1]), nil
	}
	return out, 0, nil
}

// BusDeadLetterGet: see storage.BusStore.
func (s *Store) BusDeadLetterGet(ctx context.Context, p *storage.BusDeadLetterGetParams) (_ *heraldtype.DeadLetter, err error) {
	defer s.afterRead(ctx, &err)
	if p == nil {
		return nil, backend.NilParams("sqlite: get dead letter")
	}
	if err := backend.CheckBusTenant(p.Tenant); err != nil {
		return nil, fmt.Errorf("sqlite: get dead letter: %w", err)
	}
	if s.closed.Load() {
		return nil, heraldtype.ErrClosed
	}
	dl, err := scanDeadLetter(s.reader(nil).QueryRowContext(ctx, `SELECT `+deadLetterCols+` FROM bus_dead_letters
		WHERE id = ? AND tenant = ?`, p.ID, p.Tenant))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("sqlite: get dead letter %d: %w", p.ID, heraldtype.ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("sqlite: get dead letter %d: %w", p.ID, s.readErr(err))
	}
	return dl, nil
}

// BusDeadLetterReprocess: see storage.BusStore. The oldest matching
// letters first; an execution is queued again only if it is still
// dead-lettered when its letter's turn comes.
func (s *Store) BusDeadLetterReprocess(ctx context.Context, p *storage.BusDeadLetterOpParams) (int, error) {
	if p == nil {
		return 0, backend.NilParams("sqlite: reprocess dead letters")
	}
	limit, err := backend.BusLetterOpArgs(p)
	if err != nil {
		return 0, fmt.Errorf("sqlite: reprocess dead letters: %w", err)
	}
	where, args, none, err := letterFilter(p.Tenant, &p.Filter)
	if err != nil {
		return 0, fmt.Errorf("sqlite: reprocess dead letters: %w", err)
	}
	if none {
		return 0, nil
	}
	now := backend.NowOr(p.Now).UnixNano()
	var count int
	err = s.write(ctx, func(w *wtx) error {
		count = 0
		rows, err := w.query(`SELECT d.id, d.execution, r.subscription FROM bus_dead_letters d
			JOIN bus_routes r ON r.id = d.execution AND r.tenant = d.tenant
			WHERE `+strings.Join(where, " AND ")+` AND d.reprocessed_at = 0 AND r.status = 'dead_lettered'
			ORDER BY d.id LIMIT +?`, append(args, limit)...)
		if err != nil {
			return fmt.Errorf("find letters: %w", err)
		}
		type letter struct {
			id, execution int64
			sub           string
		}
		var ls []letter
		for rows.Next() {
			var l letter
			if err := rows.Scan(&l.id, &l.execution, &l.sub); err != nil {
				return fmt.Errorf("find letters: %w", err)
			}
			ls = append(ls, l)
		}
		fq := newFairQueue(w, p.Tenant)
		for _, l := range ls {
			n, err := fq.next(l.sub)
			if err != nil {
				return err
			}
			res, err := w.exec(`UPDATE bus_routes SET status = 'queued', attempts = 0, reprocessed = reprocessed + 1, due_at = ?,
				fq = ?, lock_token = NULL, lease_until = 0, updated_at = ? WHERE id = ? AND tenant = ? AND status = 'dead_lettered'`,
				now, n, now, l.execution, p.Tenant)
			if err != nil {
				return fmt.Errorf("queue execution %d: %w", l.execution, err)
			}
			if n, err := res.RowsAffected(); err != nil {
				return fmt.Errorf("queue execution %d: %w", l.execution, err)
			} else if n == 0 {
				continue // queued by an earlier letter of this call
			}
			if _, err := w.exec(`UPDATE bus_dead_letters SET reprocessed_at = ? WHERE id = ?`, now, l.id); err != nil {
				return fmt.Errorf("mark letter %d: %w", l.id, err)
			}
			count++
		}
		if count == 0 {
			return nil
		}
		if err := fq.save(); err != nil {
			return err
		}
		w.signalKinds(p.Tenant, storage.WorkBus)
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("sqlite: reprocess dead letters: %w", err)
	}
	return count, nil
}

// BusDeadLetterDelete: see storage.BusStore.
func (s *Store) BusDeadLetterDelete(ctx context.Context, p *storage.BusDeadLetterOpParams) (int, error) {
	if p == nil {
		return 0, backend.NilParams("sqlite: delete dead letters")
	}
	limit, err := backend.BusLetterOpArgs(p)
	if err != nil {
		return 0, fmt.Errorf("sqlite: delete dead letters: %w", err)
	}
	where, args, none, err := letterFilter(p.Tenant, &p.Filter)
	if err != nil {
		return 0, fmt.Errorf("sqlite: delete dead letters: %w", err)
	}
	if none {
		return 0, nil
	}
	var count int
	err = s.write(ctx, func(w *wtx) error {
		res, err := w.exec(`DELETE FROM bus_dead_letters WHERE id IN (SELECT d.id FROM bus_dead_letters d
			WHERE `+strings.Join(where, " AND ")+` ORDER BY d.id LIMIT +?)`, append(args, limit)...)
		if err != nil {
			return err
		}
		n, err := res.RowsAffected()
		count = int(n)
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("sqlite: delete dead letters: %w", err)
	}
	return count, nil
}

// ---- reads ----

// BusEventGet: see storage.BusStore. The event and its routes in one read
// transaction.
func (s *Store) BusEventGet(ctx context.Context, p *storage.BusEventGetParams) (_ *heraldtype.PublishedEvent, err error) {
	defer s.afterRead(ctx, &err)
	if p == nil {
		return nil, backend.NilParams("sqlite: get published event")
	}
	if err := backend.CheckBusID(p.Tenant, "event id", p.ID); err != nil {
		return nil, fmt.Errorf("sqlite: get published event: %w", err)
	}
	if s.closed.Load() {
		return nil, heraldtype.ErrClosed
	}
	tx, err := s.rdb.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		return nil, fmt.Errorf("sqlite: get published event: %w", s.readErr(err))
	}
	defer tx.Rollback()
	r := s.reader(tx)
	var (
		ev       heraldtype.PublishedEvent
		seq      int64
		data     []byte
		pub, rtd int64
	)
	err = r.QueryRowContext(ctx, `SELECT seq, id, type, data, source, published_at, routed_at FROM bus_events
		WHERE tenant = ? AND id = ?`, p.Tenant, p.ID).Scan(&seq, &ev.ID, &ev.Type, &data, &ev.Source, &pub, &rtd)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("sqlite: get published event %q: %w", p.ID, heraldtype.ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("sqlite: get published event %q: %w", p.ID, s.readErr(err))
	}
	ev.Data, ev.PublishedAt, ev.RoutedAt = json.RawMessage(data), backend.FromNanos(pub), backend.FromNanos(rtd)
	rows, err := r.QueryContext(ctx, `SELECT `+execCols+`, matched, filtered_by FROM bus_routes
		WHERE tenant = ? AND event_seq = ? ORDER BY id`, p.Tenant, seq)
	if err != nil {
		return nil, fmt.Errorf("sqlite: get published event %q: %w", p.ID, s.readErr(err))
	}
	defer rows.Close()
	for rows.Next() {
		var rt heraldtype.Route
		x, err := scanExec(rows, &rt.Matched, &rt.FilteredBy)
		if err != nil {
			return nil, fmt.Errorf("sqlite: get published event %q: %w", p.ID, err)
		}
		rt.Subscription = x.Subscription
		if rt.Matched {
			rt.FilteredBy, rt.Execution = "", x
		}
		ev.Routes = append(ev.Routes, &rt)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("sqlite: get published event %q: %w", p.ID, s.readErr(err))
	}
	return &ev, nil
}

const attemptCols = `id, execution, event_id, subscription, number, succeeded, started_at, duration, result, error_kind, error, stack, logs`

func scanAttempt(sc scanner) (*heraldtype.Attempt, error) {
	var (
		a                 heraldtype.Attempt
		started, duration int64
		result, logs      []byte
		kind              string
	)
	if err := sc.Scan(&a.ID, &a.Execution, &a.EventID, &a.Subscription, &a.Number, &a.Succeeded, &started, &duration,
		&result, &kind, &a.Error, &a.Stack, &logs); err != nil {
		return nil, err
	}
	a.StartedAt, a.Duration, a.Result, a.ErrorKind = backend.FromNanos(started), heraldtype.Duration(duration), backend.RawOf(result), heraldtype.ErrorKind(kind)
	if len(logs) > 0 {
		if err := json.Unmarshal(logs, &a.Logs); err != nil {
			return nil, fmt.Errorf("attempt %d: decode logs: %v: %w", a.ID, err, heraldtype.ErrCorrupt)
		}
	}
	return &a, nil
}

// attemptListSQL is a page of attempt records matching where, oldest
// first.
func attemptListSQL(where []string) string {
	return `SELECT ` + attemptCols + ` FROM bus_attempts
		WHERE ` + strings.Join(where, " AND ") + ` ORDER BY id LIMIT +?`
}

// BusAttemptList: see storage.BusStore. A page reads one more record than
// it returns, so that its cursor is 0 when it is the last.
func (s *Store) BusAttemptList(ctx context.Context, p *storage.BusAttemptListParams) (_ []*heraldtype.Attempt, _ int64, err error) {
	defer s.afterRead(ctx, &err)
	if p == nil {
		return nil, 0, backend.NilParams("sqlite: list attempts")
	}
	limit, err := backend.BusAttemptListArgs(p)
	if err != nil {
		return nil, 0, fmt.Errorf("sqlite: list attempts: %w", err)
	}
	if s.closed.Load() {
		return nil, 0, heraldtype.ErrClosed
	}
	where, args := []string{"tenant = ?", "id > ?"}, []any{p.Tenant, p.After}
	if p.Execution != 0 {
		where, args = append(where, "execution = ?"), append(args, p.Execution)
	}
	if p.EventID != "" {
		where, args = append(where, "event_id = ?"), append(args, p.EventID)
	}
	if p.Subscription != "" {
		where, args = append(where, "subscription = ?"), append(args, p.Subscription)
	}
	return queryPage(ctx, s, "list attempts", attemptListSQL(where), args, limit, scanAttempt,
		func(a *heraldtype.Attempt) int64 { return a.ID })
}

// ---- maintenance ----

// busPrunableSQL finds up to ?3 events of tenant ?1 routed before ?2
// whose executions have all ended, oldest routed first.
const busPrunableSQL = `SELECT seq FROM bus_events e WHERE tenant = ?1 AND routed_at > 0 AND routed_at < ?2
	AND NOT EXISTS (SELECT 1 FROM bus_routes r WHERE r.tenant = ?1 AND r.event_seq = e.seq
		AND r.status IN ('queued', 'running', 'retrying'))
	ORDER BY routed_at LIMIT +?3`

// busVersionsPruneSQL deletes tenant ?1's kept subscription versions that
// no unrouted event needs: none is at or before the version's end.
const busVersionsPruneSQL = `DELETE FROM bus_subscription_versions WHERE tenant = ?1 AND NOT EXISTS (
	SELECT 1 FROM bus_events e WHERE e.tenant = ?1 AND e.routed_at = 0 AND e.seq <= bus_subscription_versions.until)`

// BusPrune: see storage.BusStore. The oldest routed events first
// (bus_events_routed), skipping those with an execution that has not
// ended.
func (s *Store) BusPrune(ctx context.Context, p *storage.BusPruneParams) (int, error) {
	if p == nil {
		return 0, backend.NilParams("sqlite: prune")
	}
	limit, err := backend.BusPruneArgs(p)
	if err != nil {
		return 0, fmt.Errorf("sqlite: prune: %w", err)
	}
	before := backend.Nanos(p.Before)
	if before <= 0 {
		return 0, nil // nothing was routed before the epoch
	}
	var count int
	err = s.write(ctx, func(w *wtx) error {
		count = 0
		rows, err := w.query(busPrunableSQL, p.Tenant, before, limit)
		if err != nil {
			return fmt.Errorf("find ended events: %w", err)
		}
		var seqs []int64
		for rows.Next() {
			var seq int64
			if err := rows.Scan(&seq); err != nil {
				return fmt.Errorf("find ended events: %w", err)
			}
			seqs = append(seqs, seq)
		}
		for _, seq := range seqs {
			if _, err := w.exec(`DELETE FROM bus_attempts WHERE tenant = ?1 AND execution IN
				(SELECT id FROM bus_routes WHERE tenant = ?1 AND event_seq = ?2)`, p.Tenant, seq); err != nil {
				return fmt.Errorf("delete attempts: %w", err)
			}
			if _, err := w.exec(`DELETE FROM bus_routes WHERE tenant = ? AND event_seq = ?`, p.Tenant, seq); err != nil {
				return fmt.Errorf("delete routes: %w", err)
			}
			if _, err := w.exec(`DELETE FROM bus_events WHERE seq = ? AND tenant = ?`, seq, p.Tenant); err != nil {
				return fmt.Errorf("delete event: %w", err)
			}
		}
		count = len(seqs)
		if _, err := w.exec(busVersionsPruneSQL, p.Tenant); err != nil {
			return fmt.Errorf("delete subscription versions: %w", err)
		}
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("sqlite: prune: %w", err)
	}
	return count, nil
}

// busBacklogSQL counts tenant ?1's unrouted events and executions that have
// not ended, at most ?2 (-1: all), each from its partial index.
const busBacklogSQL = `SELECT COUNT(*) FROM (
		SELECT 1 FROM bus_events WHERE tenant = ?1 AND routed_at = 0
		UNION ALL SELECT 1 FROM bus_routes WHERE tenant = ?1 AND status = 'queued'
		UNION ALL SELECT 1 FROM bus_routes WHERE tenant = ?1 AND status = 'retrying'
		UNION ALL SELECT 1 FROM bus_routes WHERE tenant = ?1 AND status = 'running'
		LIMIT +?2)`

// BusBacklog: see storage.BusStore. Like NextWake it does not wait for
// what it read to be durable: it is a gauge for back-pressure.
func (s *Store) BusBacklog(ctx context.Context, p *storage.BusBacklogParams) (int, error) {
	if p == nil {
		return 0, backend.NilParams("sqlite: bus backlog")
	}
	if err := backend.CheckBusBacklog(p); err != nil {
		return 0, fmt.Errorf("sqlite: bus backlog: %w", err)
	}
	if s.closed.Load() {
		return 0, heraldtype.ErrClosed
	}
	limit := p.Limit
	if limit == 0 {
		limit = -1
	}
	var n int
	if err := s.reader(nil).QueryRowContext(ctx, busBacklogSQL, p.Tenant, limit).Scan(&n); err != nil {
		return 0, fmt.Errorf("sqlite: bus backlog: %w", s.readErr(err))
	}
	return n, nil
}
