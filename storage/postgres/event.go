package postgres

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/heraldwf/herald/heraldtype"
	"github.com/heraldwf/herald/storage"
	"github.com/heraldwf/herald/storage/internal/backend"
)

// raiseSQL is EventRaise's common case in one statement: lock the instance
// row, and if the instance is pending or running, the definition check
// passes and the event id is new, add the ledger row and the inbox message
// and lower ready_at. $1 tenant, $2 instance, $3 event id, $4 lane, $5
// name, $6 payload, $7 latest, $8 now, $9 trace, $10 the definition version
// the raise is conditional on (EventRaiseParams.DefinitionVersion; -1:
// unchecked, see raiseDefinitionCheck). It returns the instance's status
// (NULL: no instance) and whether the event was stored; when it was not,
// EventRaise takes the general path, which tells a duplicate, a changed
// definition and an ended or missing instance apart.
const raiseSQL = `WITH inst AS MATERIALIZED (
	SELECT status FROM instances WHERE tenant = $1 AND id = $2 FOR NO KEY UPDATE
` + raiseStoreCTEs + `
	UPDATE instances SET ready_at = LEAST(COALESCE(ready_at, $8), $8)
	WHERE tenant = $1 AND id = $2 AND EXISTS (SELECT 1 FROM msg)
)
SELECT (SELECT status FROM inst), EXISTS (SELECT 1 FROM msg)`

// raiseStoreCTEs are the CTEs of raiseSQL and raiseClaimSQL that store the
// event (ev: the ledger row, msg: the inbox message) once the instance is
// locked (inst), and open the CTE that follows them.
const raiseStoreCTEs = `), ev AS (
	INSERT INTO events (tenant, event_id, instance_id, lane, name, fate, received_at, updated_at)
	SELECT $1, $3, $2, $4, $5, 'pending', $8, $8 FROM inst WHERE inst.status IN ` + nonTerminal + `
		AND ` + raiseDefinitionCheck + `
	ON CONFLICT (tenant, event_id) DO NOTHING
	RETURNING event_id
), msg AS (
	INSERT INTO inbox (tenant, instance_id, kind, lane, event_id, name, payload, latest, visible_at, created_at, trace)
	SELECT $1, $2, 'event', $4, ev.event_id, $5, $6, $7, $8, $8, $9 FROM ev
	RETURNING id
), ready AS (`

// raiseDefinitionCheck is the condition of a raise conditional on its
// definition ($10 >= 0, see storage.EventRaiseParams.CheckDefinition): the
// current version of the definition of ($1 tenant, $5 name), 0 for none, is
// $10. It is read in the raise's own statement.
const raiseDefinitionCheck = `($10::bigint < 0 OR $10::bigint = COALESCE((SELECT d.version FROM event_definitions d
		WHERE d.tenant = $1 AND d.name = $5 AND NOT d.deleted), 0))`

// raiseClaimSQL is raiseSQL with a direct hand-off (EventRaiseParams.Claim):
// when it stores the event and the instance is neither leased (or its
// lease ran out) nor held back, the same update leases the instance with
// token $11 until $12, as claimTurnsSQL would, returns the leased row
// (instanceColsI; NULLs when it leased nothing), and adds its id to
// herald.claimed for the loading statements that may follow in its batch
// (claimLoad), which may hold other raises that hand off (raiseBatch).
// After the instance come the instance's status and whether the event was
// stored; then what the loading statements would otherwise read of the
// instance (migration 0017): whether it may have markers and tasks, the
// Seq that ends its history, whether its inbox was empty before this
// event (alone) and the new message's id; then that setting,
// synchronous_commit (off once a raise that may defer its flush, $13, has
// leased its instance: see walmark.go) and the plan settings of a claim's
// loading statements (scanPlans), set for the rest of the transaction.
// Without them each hand-off that loads planned its loading statements
// anew: PostgreSQL's estimate of their generic plans is worse than that of
// the custom ones, and planning on every hand-off is server CPU spent on
// the hot path for nothing.
//
// The row comes from the statement's lock of it (inst, and the update's
// RETURNING): a commit that the lock waited for is in it, where a
// subquery of the same statement, which reads the snapshot taken before
// the wait, would miss it. So the flags, history_seq and alone are those
// of the instance as the lease found it.
const raiseClaimSQL = `WITH inst AS MATERIALIZED (
	SELECT status, (lock_token IS NULL OR lease_until < $8) AND not_before <= $8 AS take, ready_at IS NULL AS alone
	FROM instances WHERE tenant = $1 AND id = $2 FOR NO KEY UPDATE
` + raiseStoreCTEs + `
	UPDATE instances SET ready_at = LEAST(COALESCE(ready_at, $8), $8),
		lock_token = CASE WHEN (SELECT take FROM inst) THEN $11::text ELSE lock_token END,
		lease_until = CASE WHEN (SELECT take FROM inst) THEN $12::bigint ELSE lease_until END,
		not_before = CASE WHEN (SELECT take FROM inst) THEN 0 ELSE not_before END
	WHERE tenant = $1 AND id = $2 AND EXISTS (SELECT 1 FROM msg)
	RETURNING lock_token = $11::text AS claimed, ` + instanceCols + `, has_markers, has_tasks, history_seq
)
SELECT ` + instanceColsI + `, (SELECT status FROM inst), EXISTS (SELECT 1 FROM msg),
	i.has_markers, i.has_tasks, i.history_seq, (SELECT alone FROM inst), (SELECT id FROM msg),
	set_config('herald.claimed', CASE WHEN i.claimed
		THEN array_append(COALESCE(NULLIF(current_setting('herald.claimed', true), ''), '{}')::text[], $2::text)::text
		ELSE COALESCE(current_setting('herald.claimed', true), '') END, true),
	set_config('synchronous_commit', CASE WHEN i.claimed AND $13::boolean
		THEN 'off' ELSE current_setting('synchronous_commit') END, true),
	` + scanPlans + `
FROM (SELECT 1) one LEFT JOIN ready i ON i.claimed`

// instanceColCount is the number of columns of instanceCols;
// raiseClaimSettings is the number of settings raiseClaimSQL returns last
// (herald.claimed and scanPlans's), which nobody reads.
var (
	instanceColCount   = strings.Count(instanceCols, ",") + 1
	raiseClaimSettings = 2 + strings.Count(scanPlans, "set_config(")
)

// raiseFast is the fast path's guard: raiseSQL handles these fields of
// EventRaiseParams (ExpiresAt and StartIfAbsent matter only for an instance
// that does not exist, which raiseSQL leaves to the general path; Claim and
// OnClaimed are raiseClaimSQL's);
// CheckDefinition and DefinitionVersion are raiseDefinitionCheck's, and a
// raise it refuses takes the general path); a raise that sets any other
// field takes the general path.
var raiseFast = backend.NewFieldGuard[storage.EventRaiseParams](
	"Tenant", "InstanceID", "EventID", "Lane", "Name", "Payload", "Now", "Latest", "ExpiresAt", "StartIfAbsent", "TraceParent", "Claim", "OnClaimed",
	"CheckDefinition", "DefinitionVersion")

// EventRaise: see storage.EventStore. An event for a pending or running
// instance takes one statement (raiseSQL, in a batch shared with concurrent
// raises, see raiseBatch) unless a field raiseFast does not list is set;
// the other cases run a second transaction.
func (s *Store) EventRaise(ctx context.Context, p *storage.EventRaiseParams) (*storage.EventRaiseResult, error) {
	if p == nil {
		return nil, backend.NilParams("postgres: raise event")
	}
	if err := backend.ValidateRaise(p); err != nil {
		return nil, fmt.Errorf("postgres: raise event: %w", err)
	}
	start, err := backend.StartIfAbsent(p)
	if err != nil {
		return nil, fmt.Errorf("postgres: raise event %q: start if absent: %w", p.EventID, err)
	}
	c := &raiseCall{ctx: ctx, p: p, start: start, now: backend.NowOr(p.Now)}
	if !raiseFast.Only(p) {
		c.err = s.do(ctx, func(ctx context.Context) error {
			var err error
			c.res, c.stored, err = s.raiseSlow(ctx, c.p, c.start, c.now.UnixNano())
			return err
		})
	} else if s.closed.Load() {
		c.err = s.raiseOne(ctx, c)
	} else if err := s.raises.do(ctx, c); err != nil {
		c.err = err
	}
	if c.err != nil {
		return nil, fmt.Errorf("postgres: raise event %q: %w", p.EventID, c.err)
	}
	if c.stored {
		s.warm.note()
		if c.res.Turn == nil {
			s.signal(p.Tenant, storage.WorkTurns)
		}
	}
	if c.deferred {
		// The raise's transaction committed without waiting for the WAL
		// flush: hand the turn over, then wait until a commit has flushed
		// the raise too (walmark.go).
		if c.res.Turn != nil && p.OnClaimed != nil {
			t := c.res.Turn
			c.res.Turn = nil
			p.OnClaimed(t)
		}
		s.deferred.RLock()
		err := s.awaitDurable(ctx, c.need)
		s.deferred.RUnlock()
		if err != nil {
			return nil, fmt.Errorf("postgres: raise event %q: committed, but not known to be durable: %w", p.EventID, err)
		}
	}
	return c.res, nil
}

// raiseCall is one EventRaise.
type raiseCall struct {
	ctx   context.Context
	p     *storage.EventRaiseParams
	start *storage.InstanceCreateParams
	now   time.Time

	res    *storage.EventRaiseResult
	stored bool
	err    error

	// A raise that hands off (handOffs): its lease's token and end, and
	// the turn it claimed (nil: none).
	token      string
	leaseUntil time.Time
	turn       *storage.Turn

	// What raiseClaimSQL returned besides the row of the instance it
	// leased (leased): its flags, the end of its history (nil: unknown),
	// whether its inbox was empty before the raise, and the message's id.
	leased  bool
	seen    backend.ClaimState
	histEnd int // -1: not known
	alone   bool
	msgID   int64
	// Of a turn handed off: what the batch did not load and must be read
	// after it (noteHandOffs).
	lateHistory, lateMessages bool

	// deferred: the raise's transaction committed without waiting for the
	// WAL flush; it is durable once the store's walMark reaches need.
	deferred bool
	need     int64
}

// defers reports whether c may commit without waiting for the WAL flush
// when it hands its instance off: the caller takes the turn at commit
// (OnClaimed), and its commit will flush the raise (walmark.go).
func (c *raiseCall) defers() bool { return c.p.Claim != nil && c.p.OnClaimed != nil }

// noteDeferred marks the stored raises of a batch whose transaction just
// committed as deferred if it committed without waiting for the WAL flush:
// if one of its raises that defers leased its instance.
func (s *Store) noteDeferred(calls []*raiseCall) {
	async := false
	for _, c := range calls {
		async = async || (c.leased && c.defers())
	}
	if !async {
		return
	}
	need := s.wal.next()
	for _, c := range calls {
		if c.stored {
			c.deferred, c.need = true, need
		}
	}
}

// raiseArgs are raiseSQL's arguments for c.
func (c *raiseCall) raiseArgs() []any {
	p := c.p
	version := int64(-1) // unchecked
	if p.CheckDefinition {
		version = p.DefinitionVersion // not negative: ValidateRaise
	}
	return []any{p.Tenant, p.InstanceID, p.EventID, string(p.Lane), p.Name, backend.RawArg(p.Payload), p.Latest, c.now.UnixNano(),
		p.TraceParent, version}
}

// raiseOne raises c in a transaction of its own (two for the general path),
// retried on serialization failures and deadlocks. It hands the instance
// off when c asks for it.
func (s *Store) raiseOne(ctx context.Context, c *raiseCall) error {
	return s.do(ctx, func(ctx context.Context) error {
		c.deferred, c.need = false, 0
		var (
			status *string
			turn   *storage.Turn
		)
		if c.p.Claim != nil {
			var err error
			if turn, err = s.raiseHandOff(ctx, c); err != nil {
				return err
			}
		} else if err := s.pool.QueryRow(ctx, raiseSQL, c.raiseArgs()...).Scan(&status, &c.stored); err != nil {
			return err
		}
		if c.stored {
			c.res = &storage.EventRaiseResult{EventID: c.p.EventID, ReceivedAt: c.now, Turn: turn}
			return nil
		}
		var err error
		c.res, c.stored, err = s.raiseSlow(ctx, c.p, c.start, c.now.UnixNano())
		return err
	})
}

// raiseHandOff runs raiseClaimSQL for c and, in the same batch (one round
// trip, one transaction), loads what it must of the instance it leased
// (handOffs.queueLoad). It sets c.stored and returns the claimed turn, or
// nil when the raise did not lease the instance.
func (s *Store) raiseHandOff(ctx context.Context, c *raiseCall) (*storage.Turn, error) {
	var (
		b batch
		h handOffs
	)
	h.queueRaise(&b, c)
	h.queueLoad(&b, s.hist)
	if err := b.send(ctx, s.pool); err != nil {
		s.releaseHandOffs(&h)
		return nil, err
	}
	s.noteDeferred([]*raiseCall{c})
	s.noteHandOffs(ctx, &h)
	return c.turn, nil
}

// handOffs are the raises of one batch that hand their instances off, all
// of one tenant: each runs raiseClaimSQL with a token of its own, and a
// claim's loading statements (claimLoad) after them load, of every
// instance they leased, what the raises' own rows do not tell
// (queueLoad).
type handOffs struct {
	tenant      string
	maxMessages int
	now         time.Time // the earliest Now of the raises: the loads' (see queueLoad)
	calls       []*raiseCall
	ld          claimLoad
	// The loading statements queued: of the histories, of the messages.
	history, messages bool
}

// accepts reports whether c can hand off in this batch: it asks for a
// hand-off, and is of the tenant and loads as many messages as the raises
// queued before it.
func (h *handOffs) accepts(c *raiseCall) bool {
	return c.p.Claim != nil && (len(h.calls) == 0 ||
		(c.p.Tenant == h.tenant && backend.MaxMessages(c.p.Claim.MaxMessages) == h.maxMessages))
}

// queueRaise adds c's raiseClaimSQL to b; c.accepts(c) holds.
func (h *handOffs) queueRaise(b *batch, c *raiseCall) {
	if len(h.calls) == 0 || c.now.Before(h.now) {
		h.now = c.now
	}
	h.tenant, h.maxMessages = c.p.Tenant, backend.MaxMessages(c.p.Claim.MaxMessages)
	h.calls = append(h.calls, c)
	c.token, c.leaseUntil, c.turn = backend.NewToken(), c.now.Add(backend.Lease(c.p.Claim.Lease)), nil
	c.leased, c.seen, c.histEnd, c.alone, c.msgID = false, backend.ClaimState{}, -1, false, 0
	b.query("", func(rows pgx.Rows) error {
		for rows.Next() {
			var (
				status         *string
				markers, tasks *bool
				histSeq        *int32
				alone          *bool
				msgID          *int64
			)
			tail := append([]any{&status, &c.stored, &markers, &tasks, &histSeq, &alone, &msgID},
				make([]any, raiseClaimSettings)...)
			if rows.RawValues()[1] == nil { // the id: it leased nothing
				if err := rows.Scan(append(make([]any, instanceColCount), tail...)...); err != nil {
					return err
				}
				continue
			}
			r, err := scanInstance(rows, tail...)
			if err != nil && (r == nil || !errors.Is(err, heraldtype.ErrCorrupt)) {
				return err
			}
			c.leased = true
			c.seen = backend.ClaimState{Markers: markers == nil || *markers, Tasks: tasks == nil || *tasks}
			c.histEnd = seqOrUnknown(histSeq)
			c.alone = alone != nil && *alone
			if msgID != nil {
				c.msgID = *msgID
			}
			c.turn = &storage.Turn{Instance: r.Instance, LockToken: c.token, LeaseUntil: c.leaseUntil, Err: err}
		}
		return nil
	}, raiseClaimSQL, append(c.raiseArgs(), c.token, c.leaseUntil.UnixNano(), c.defers())...)
}

// queueLoad adds to b, after the last raise, the loading statements of the
// instances the raises will lease that their own rows will not do without.
// The batch is sent before anyone knows, so it bets on what the store
// knows of each instance: a history the cache holds is whole (the row's
// history_seq says whether it is), and an inbox this store's last commit
// of the instance left empty is empty still but for the raise's message
// (the row's alone says whether it was). A statement is queued if one of
// the raises cannot bet; a bet the rows lose is settled by a read after
// the batch (noteHandOffs). The messages are those visible at the
// earliest Now of the raises (a timer another raise's later Now would show
// stays in the inbox for the next turn: it never fires early).
func (h *handOffs) queueLoad(b *batch, cache *backend.HistoryCache) {
	if len(h.calls) == 0 {
		return
	}
	h.ld = claimLoad{byID: func(id string) *storage.Turn {
		for _, c := range h.calls {
			if c.turn != nil && c.turn.Instance.ID == id {
				return c.turn
			}
		}
		return nil
	}}
	ids := make([]string, len(h.calls))
	for i, c := range h.calls {
		ids[i] = c.p.InstanceID
		h.messages = h.messages || !cache.InboxEmpty(h.tenant, c.p.InstanceID)
	}
	h.ld.know(cache, h.tenant, ids)
	h.history = len(h.ld.known) < len(h.calls)
	if h.history {
		h.ld.queueHistory(b, h.tenant)
	}
	if h.messages {
		h.ld.queueMessages(b, h.tenant, h.now.UnixNano(), h.maxMessages)
	}
}

// releaseHandOffs gives back the leases of h's raises after their batch
// failed: its transaction may have committed (a row failed to decode, ctx
// ended while the answer was on its way), and the instances must not wait
// for the leases to run out.
func (s *Store) releaseHandOffs(h *handOffs) {
	if len(h.calls) == 0 {
		return
	}
	ts := make([]*storage.Turn, len(h.calls))
	for i, c := range h.calls {
		ts[i] = &storage.Turn{Instance: storage.Instance{ID: c.p.InstanceID}, LockToken: c.token}
		c.turn = nil
	}
	s.releaseClaims(h.tenant, ts)
	s.signal(h.tenant, storage.WorkTurns)
}

// noteHandOffs completes the turn of each instance h's raises leased, from
// what the batch read and what the raises' rows said (queueLoad), and
// notes what the hand-off saw of it. A turn whose rows lost queueLoad's
// bet is read now, after the batch, by the instance's key (the lease keeps
// its history as it is); if that read fails, its lease is given back and
// the raise hands nothing off.
func (s *Store) noteHandOffs(ctx context.Context, h *handOffs) {
	var late []*raiseCall
	for _, c := range h.calls {
		t := c.turn
		if t == nil {
			continue
		}
		c.lateHistory, c.lateMessages = false, false
		if t.Err == nil {
			if !h.history {
				k := h.ld.known[t.Instance.ID]
				c.lateHistory = k.execution != t.Instance.Execution || !backend.EndsAt(k.events, c.histEnd)
			}
			if !h.messages {
				if c.alone {
					m := backend.RaisedMessage(c.p, c.now)
					m.ID = c.msgID
					t.Messages = []storage.Message{backend.StoredMessage(&m, c.now)}
				} else {
					c.lateMessages = true
				}
			}
		}
		if c.lateHistory || c.lateMessages {
			late = append(late, c)
			continue
		}
		h.ld.attach(s.hist, t)
		s.claims.Note(t, h.maxMessages, c.seen)
	}
	if len(late) > 0 {
		s.loadLate(ctx, h, late)
	}
}

// lateMessagesSQL reads the messages of tenant $1's instance $2 visible at
// $3, at most $4, as claimMessagesSQL does for a claim.
const lateMessagesSQL = `SELECT ` + messageCols + ` FROM inbox WHERE tenant = $1 AND instance_id = $2
	AND (visible_at <= $3 OR kind <> 'timer_fired') ORDER BY id LIMIT $4`

// loadLate reads the turns of the raises in late whose history (the
// events after what the cache holds of it) or messages the batch did not
// load, by each instance's key (the leases keep the histories as they
// are), and notes them; if a read fails, their leases are given back and
// the raises hand nothing off.
func (s *Store) loadLate(ctx context.Context, h *handOffs, late []*raiseCall) {
	var (
		reads []historyRead
		b     batch
	)
	for _, c := range late {
		t := c.turn
		id := t.Instance.ID
		if c.lateHistory {
			reads = append(reads, historyRead{turn: t, after: len(h.ld.held(t))})
		}
		if c.lateMessages {
			t.Messages = nil
			b.query("load messages", func(rows pgx.Rows) error {
				for rows.Next() {
					m, err := scanMessage(rows)
					if err := appendMessage(t, m, err); err != nil {
						return err
					}
				}
				return nil
			}, lateMessagesSQL, h.tenant, id, h.now.UnixNano(), h.maxMessages)
		}
	}
	lctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), batchTimeout)
	defer cancel()
	var err error
	if len(reads) > 0 {
		err = s.readHistories(lctx, h.tenant, reads)
	}
	if err == nil && len(b.steps) > 0 {
		err = b.send(lctx, s.pool)
	}
	if err != nil {
		ts := make([]*storage.Turn, len(late))
		for i, c := range late {
			ts[i] = c.turn
			c.turn = nil
		}
		s.releaseClaims(h.tenant, ts)
		s.signal(h.tenant, storage.WorkTurns)
		return
	}
	for _, c := range late {
		h.ld.attach(s.hist, c.turn)
		s.claims.Note(c.turn, h.maxMessages, c.seen)
	}
}

// Raise batches: concurrent raises share a transaction, in one round trip,
// as commits do (see commitBatch and the package comment). A batch runs
// raiseSQL for each raise, in (tenant, instance id) order, or raiseClaimSQL
// for a raise that asks for a hand-off (all of one tenant: those of
// another tenant run raiseSQL), followed by one set of a claim's loading
// statements for every instance the batch leased (handOffs). Under load a
// batch thus hands its instances off as one claim would, instead of
// leaving them to a claim (a transaction of its own) after a wake-up. A
// raise the batch did not store (the instance does not exist or ended, the
// event id was seen) then takes the general path on its own, and if the
// batch fails its leases are given back and each raise runs again on its
// own.
const (
	maxRaiseBatches = 4  // batches in flight
	maxRaiseBatch   = 32 // raises per batch
)

// raiseBatch runs a batch of raises.
func (s *Store) raiseBatch(calls []*combined[*raiseCall]) {
	if len(calls) == 1 {
		c := calls[0].call
		c.err = s.raiseOne(c.ctx, c)
		return
	}
	slices.SortStableFunc(calls, func(a, b *combined[*raiseCall]) int {
		if c := cmp.Compare(a.call.p.Tenant, b.call.p.Tenant); c != 0 {
			return c
		}
		return cmp.Compare(a.call.p.InstanceID, b.call.p.InstanceID)
	})
	var (
		b batch
		h handOffs
	)
	for _, cc := range calls {
		c := cc.call
		if h.accepts(c) {
			h.queueRaise(&b, c)
			continue
		}
		b.queryRow("", func(row pgx.Row) error {
			var status *string
			return row.Scan(&status, &c.stored)
		}, raiseSQL, c.raiseArgs()...)
	}
	h.queueLoad(&b, s.hist)
	ctx, cancel := context.WithTimeout(context.Background(), batchTimeout)
	err := b.send(ctx, s.pool)
	cancel()
	if err != nil {
		s.releaseHandOffs(&h)
	} else {
		stored := make([]*raiseCall, 0, len(calls))
		for _, cc := range calls {
			if cc.call.stored {
				stored = append(stored, cc.call)
			}
		}
		s.noteDeferred(stored)
		ctx, cancel := context.WithTimeout(context.Background(), batchTimeout)
		s.noteHandOffs(ctx, &h)
		cancel()
	}
	for _, cc := range calls {
		c := cc.call
		switch {
		case err == nil && c.stored:
			c.res = &storage.EventRaiseResult{EventID: c.p.EventID, ReceivedAt: c.now, Turn: c.turn}
		default:
			c.stored, c.turn = false, nil
			c.err = s.raiseOne(c.ctx, c)
		}
	}
}

// raiseSlow is EventRaise's general path, in one transaction. stored reports
// whether it wrote the event.
func (s *Store) raiseSlow(ctx context.Context, p *storage.EventRaiseParams, start *storage.InstanceCreateParams, now int64) (res *storage.EventRaiseResult, stored bool, err error) {
	err = pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		res, stored = nil, false
		if dup, err := ledgerReceipt(ctx, tx, p); dup != nil || err != nil {
			res = dup
			return err
		}
		if p.CheckDefinition {
			if err := checkDefinition(ctx, tx, p); err != nil {
				return err
			}
		}
		status, err := lockInstance(ctx, tx, p.Tenant, p.InstanceID)
		if err != nil {
			return err
		}
		if status == "" {
			// Serialize with InstanceCreate of the id, then look again.
			if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock($1)`, s.instanceLockKey(p.Tenant, p.InstanceID)); err != nil {
				return fmt.Errorf("lock instance id: %w", err)
			}
			if status, err = lockInstance(ctx, tx, p.Tenant, p.InstanceID); err != nil {
				return err
			}
		}
		started := false
		switch {
		case heraldtype.Status(status).Terminal():
			return fmt.Errorf("instance %q is %s: %w", p.InstanceID, status, heraldtype.ErrInstanceNotRunning)
		case status == "" && start != nil:
			var b batch
			if _, err := s.queueCreate(&b, start); err != nil {
				return fmt.Errorf("start instance: %w", err)
			}
			if err := b.send(ctx, tx); err != nil {
				return fmt.Errorf("start instance: %w", createErr(err))
			}
			started = true
		}
		exists := status != "" || started

		var inserted bool
		err = tx.QueryRow(ctx, `INSERT INTO events (tenant, event_id, instance_id, lane, name, fate, received_at, updated_at)
			VALUES ($1, $2, $3, $4, $5, 'pending', $6, $6)
			ON CONFLICT (tenant, event_id) DO NOTHING
			RETURNING true`, p.Tenant, p.EventID, p.InstanceID, string(p.Lane), p.Name, now).Scan(&inserted)
		if errors.Is(err, pgx.ErrNoRows) {
			// Raised concurrently since the ledger was read.
			dup, err := ledgerReceipt(ctx, tx, p)
			if err == nil && dup == nil {
				err = errors.New("event id vanished from the ledger")
			}
			res = dup
			return err
		}
		if err != nil {
			return fmt.Errorf("insert event: %w", err)
		}
		// Only an event kept for an instance that does not exist can expire:
		// once the instance exists its events are the engine's business.
		var expiresAt int64
		if !exists {
			expiresAt = backend.Nanos(p.ExpiresAt)
		}
		var b batch
		b.exec("insert event message", `INSERT INTO inbox
			(tenant, instance_id, kind, lane, event_id, name, payload, latest, visible_at, created_at, expires_at, trace)
			VALUES ($1, $2, 'event', $3, $4, $5, $6, $7, $8, $8, $9, $10)`,
			p.Tenant, p.InstanceID, string(p.Lane), p.EventID, p.Name, backend.RawArg(p.Payload), p.Latest, now, expiresAt, p.TraceParent)
		if exists {
			b.exec("update ready time", lowerReadySQL, p.Tenant, p.InstanceID, now)
		}
		if err := b.send(ctx, tx); err != nil {
			return err
		}
		res = &storage.EventRaiseResult{EventID: p.EventID, ReceivedAt: backend.FromNanos(now), Started: started}
		stored = true
		return nil
	})
	return res, stored, err
}

// ledgerReceipt returns the first receipt of p.EventID if the ledger has it
// for the same instance, lane and name, ErrEventIDConflict if it has it for
// another target, and nil, nil if it does not have it.
func ledgerReceipt(ctx context.Context, tx pgx.Tx, p *storage.EventRaiseParams) (*storage.EventRaiseResult, error) {
	var (
		instanceID, lane, name string
		receivedAt             int64
	)
	err := tx.QueryRow(ctx, `SELECT instance_id, lane, name, received_at FROM events WHERE tenant = $1 AND event_id = $2`,
		p.Tenant, p.EventID).Scan(&instanceID, &lane, &name, &receivedAt)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("check event id: %w", err)
	}
	if instanceID != p.InstanceID || lane != string(p.Lane) || name != p.Name {
		return nil, fmt.Errorf("first raised for instance %q, lane %q, name %q: %w",
			instanceID, lane, name, heraldtype.ErrEventIDConflict)
	}
	// The first raise may have committed without waiting for the WAL flush
	// (walmark.go) and be waiting for it still: the receipt vouches for the
	// event, so this transaction takes an id, and its commit then flushes
	// the WAL up to its own commit record, after the first raise's.
	if _, err := tx.Exec(ctx, `SELECT pg_current_xact_id()`); err != nil {
		return nil, fmt.Errorf("check event id: %w", err)
	}
	return &storage.EventRaiseResult{EventID: p.EventID, ReceivedAt: backend.FromNanos(receivedAt), Duplicate: true}, nil
}

// checkDefinition returns ErrDefinitionChanged if the definition of p's
// event is not at p.DefinitionVersion (0: none).
func checkDefinition(ctx context.Context, tx pgx.Tx, p *storage.EventRaiseParams) error {
	var version int64
	if err := tx.QueryRow(ctx, `SELECT COALESCE((SELECT version FROM event_definitions
		WHERE tenant = $1 AND name = $2 AND NOT deleted), 0)`, p.Tenant, p.Name).Scan(&version); err != nil {
		return fmt.Errorf("check event definition: %w", err)
	}
	if version != p.DefinitionVersion {
		return fmt.Errorf("definition of %q is at version %d, not %d: %w", p.Name, version, p.DefinitionVersion, storage.ErrDefinitionChanged)
	}
	return nil
}

// lockInstance locks an instance row and returns its status ("" if it does
// not exist).
func lockInstance(ctx context.Context, tx pgx.Tx, tenant, id string) (string, error) {
	var status string
	err := tx.QueryRow(ctx, `SELECT status FROM instances WHERE tenant = $1 AND id = $2 FOR NO KEY UPDATE`,
		tenant, id).Scan(&status)
	if errors.Is(err, pgx.ErrNoRows) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("load instance: %w", err)
	}
	return status, nil
}

// EventGet: see storage.EventStore.
func (s *Store) EventGet(ctx context.Context, p *storage.EventGetParams) (*heraldtype.EventRecord, error) {
	if p == nil {
		return nil, backend.NilParams("postgres: get event")
	}
	var e *heraldtype.EventRecord
	err := s.do(ctx, func(ctx context.Context) error {
		var err error
		e, err = scanEvent(s.pool.QueryRow(ctx, `SELECT `+eventCols+` FROM events WHERE tenant = $1 AND event_id = $2`,
			p.Tenant, p.EventID))
		if errors.Is(err, pgx.ErrNoRows) {
			return heraldtype.ErrNotFound
		}
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("postgres: get event %q: %w", p.EventID, err)
	}
	return e, nil
}

// EventList: see storage.EventStore.
func (s *Store) EventList(ctx context.Context, p *storage.EventListParams) ([]*heraldtype.EventRecord, error) {
	if p == nil {
		return nil, backend.NilParams("postgres: list events")
	}
	where := []string{"tenant = $1"}
	args := []any{p.Tenant}
	add := func(col, v string) {
		args = append(args, v)
		where = append(where, col+" = $"+strconv.Itoa(len(args)))
	}
	if p.InstanceID != "" {
		add("instance_id", p.InstanceID)
	}
	if p.Lane != "" {
		add("lane", string(p.Lane))
	}
	if p.Name != "" {
		add("name", p.Name)
	}
	if p.Fate != "" {
		add("fate", string(p.Fate))
	}
	limit := backend.EventLimit(p.Limit)
	args = append(args, limit)
	q := `SELECT ` + eventCols + ` FROM events WHERE ` + strings.Join(where, " AND ") +
		` ORDER BY rid LIMIT $` + strconv.Itoa(len(args))
	var out []*heraldtype.EventRecord
	err := s.do(ctx, func(ctx context.Context) error {
		out = nil
		rows, err := s.pool.Query(ctx, q, args...)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			e, err := scanEvent(rows)
			if err != nil {
				return err
			}
			out = append(out, e)
		}
		return rows.Err()
	})
	if err != nil {
		return nil, fmt.Errorf("postgres: list events: %w", err)
	}
	return out, nil
}
