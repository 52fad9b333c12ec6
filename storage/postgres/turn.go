package postgres

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/heraldwf/herald/heraldtype"
	"github.com/heraldwf/herald/history"
	"github.com/heraldwf/herald/storage"
	"github.com/heraldwf/herald/storage/internal/backend"
)

// claimTurnsSQL leases up to $3 claimable instances of tenant $1 at $2 until
// $4 with fresh random tokens. Unleased instances come from the
// instances_ready index in ready order, those whose lease ran out from
// instances_leased; both skip rows other transactions hold, so concurrent
// claims never wait for each other and never overlap. The claimed ids go to
// the transaction-local setting herald.claimed (a text[] literal), from
// which the statements that follow in the claim's batch read them.
const claimTurnsSQL = `WITH ready AS MATERIALIZED (
	SELECT ctid, ready_at, rid FROM instances
	WHERE tenant = $1 AND lock_token IS NULL AND ready_at <= $2 AND not_before <= $2
	  AND status IN ` + nonTerminal + `
	ORDER BY ready_at, rid
	LIMIT $3
	FOR UPDATE SKIP LOCKED
), expired AS MATERIALIZED (
	SELECT ctid, ready_at, rid FROM instances
	WHERE tenant = $1 AND lock_token IS NOT NULL AND lease_until < $2 AND ready_at <= $2 AND not_before <= $2
	  AND status IN ` + nonTerminal + `
	ORDER BY lease_until
	LIMIT $3
	FOR UPDATE SKIP LOCKED
), pick AS MATERIALIZED (
	SELECT ctid FROM (SELECT * FROM ready UNION ALL SELECT * FROM expired) u
	ORDER BY ready_at, rid
	LIMIT $3
), claimed AS (
	UPDATE instances i SET lock_token = replace(gen_random_uuid()::text, '-', ''), lease_until = $4, not_before = 0
	WHERE i.ctid = ANY(ARRAY(SELECT ctid FROM pick))
	RETURNING ` + instanceColsI + `, i.ready_at, i.rid, i.has_markers, i.has_tasks, i.history_seq
)
SELECT c.*, s.ids FROM claimed c
CROSS JOIN (SELECT set_config('herald.claimed', (SELECT array_agg(id)::text FROM claimed), true) AS ids) s`

const instanceColsI = `i.tenant, i.id, i.workflow, i.status, i.execution, i.input, i.output, i.failure, i.created_at, i.updated_at, i.blocked, i.parent_id, i.has_children, i.lock_token, i.lease_until`

// claimedIDs is the SQL of the ids the claim statement before it in the
// same transaction claimed (none if it claimed none: the setting is then
// unset, or empty once a transaction that set it has ended).
const claimedIDs = `unnest(COALESCE(NULLIF(current_setting('herald.claimed', true), ''), '{}')::text[])`

// claimHistorySQL reads the current execution's history of the instances
// claimed by the statement before it, of tenant $1: of an instance named in
// $2 whose execution is the one in $3 at the same place, only the events
// after the Seq in $4 there (the history cache holds those before, see
// claimLoad.known). It runs after the claim in the claim's transaction,
// with a snapshot taken after the claim locked the instances: every commit
// to their histories is in it, and none can come until the leases are
// released. The lateral subqueries (kept from being flattened by OFFSET 0)
// make it one primary-key lookup and one primary-key range scan per
// instance, whatever the statistics say: a generic plan made while the
// table was small would otherwise hash-join the tenant's whole history (or,
// joined with instances, scan the tenant's instances).
const claimHistorySQL = `SELECT c.id, h.event
	FROM ` + claimedIDs + ` AS c(id)
	CROSS JOIN LATERAL (SELECT execution FROM instances WHERE tenant = $1 AND id = c.id OFFSET 0) i
	CROSS JOIN LATERAL (
		SELECT seq, event FROM history
		WHERE tenant = $1 AND instance_id = c.id AND execution = i.execution
		  AND seq > COALESCE((SELECT k.after FROM unnest($2::text[], $3::bigint[], $4::bigint[]) AS k(id, execution, after)
			WHERE k.id = c.id AND k.execution = i.execution), 0)
		OFFSET 0
	) h
	ORDER BY c.id, h.seq`

// claimMessagesSQL reads up to $3 messages of each instance claimed by the
// statement before it, of tenant $1, in id order: timers visible at $2,
// every other message as soon as it is committed (a claim's $2 may predate
// a raise that committed before the claim read; a first turn must see every
// event raised before start).
const claimMessagesSQL = `SELECT c.id, ` + messageColsM + `
	FROM ` + claimedIDs + ` AS c(id)
	CROSS JOIN LATERAL (
		SELECT * FROM inbox m
		WHERE m.tenant = $1 AND m.instance_id = c.id AND (m.visible_at <= $2 OR m.kind <> 'timer_fired')
		ORDER BY m.id
		LIMIT $3
	) m
	ORDER BY c.id, m.id`

const messageColsM = `m.id, m.kind, m.execution, m.task_seq, m.lane, m.event_id, m.name, m.key, m.payload, m.latest, m.result, m.failure, m.visible_at, m.created_at, m.trace`

// TurnClaim: see storage.TurnStore. Instances another transaction holds at
// that moment (a concurrent claim, a commit, a raise) are skipped. The
// whole claim is one round trip: one transaction, committed without waiting
// for a disk flush (see the package comment), that leases the instances and
// then reads their histories and messages.
func (s *Store) TurnClaim(ctx context.Context, p *storage.TurnClaimParams) ([]*storage.Turn, error) {
	if p == nil {
		return nil, backend.NilParams("postgres: claim turns")
	}
	now := backend.NowOr(p.Now)
	max := backend.ClaimMax(p.Max)
	lease := backend.Lease(p.Lease)
	maxMessages := backend.MaxMessages(p.MaxMessages)
	leaseUntil := now.Add(lease)
	type claimed struct {
		turn    *storage.Turn
		readyAt int64
		rid     int64
		st      backend.ClaimState
		held    []history.Event // what the cache holds of the history
		whole   bool            // and that is all of it (backend.EndsAt)
	}
	var turns []*storage.Turn
	err := s.do(ctx, func(ctx context.Context) error {
		turns = nil
		var (
			cs   []claimed
			byID map[string]*claimed // into cs, while the batch runs (cs is sorted after)
			b    batch
			ld   claimLoad
		)
		// Whether to read the histories in the claim's batch (see
		// claimsCold).
		cold := s.claimsCold.Load()
		b.exec("", claimSettings)
		b.query("lease instances", func(rows pgx.Rows) error {
			for rows.Next() {
				var (
					c       claimed
					histSeq *int32
					ids     *string
				)
				r, err := scanInstance(rows, &c.readyAt, &c.rid, &c.st.Markers, &c.st.Tasks, &histSeq, &ids)
				if err != nil && (r == nil || !errors.Is(err, heraldtype.ErrCorrupt)) {
					return err
				}
				c.turn = &storage.Turn{Instance: r.Instance, LockToken: *r.lockToken, LeaseUntil: leaseUntil, Err: err}
				if err == nil {
					c.held, _ = s.hist.Get(p.Tenant, r.ID, r.Execution)
					c.whole = backend.EndsAt(c.held, seqOrUnknown(histSeq))
				}
				cs = append(cs, c)
			}
			byID = make(map[string]*claimed, len(cs))
			for i := range cs {
				byID[cs[i].turn.Instance.ID] = &cs[i]
			}
			return nil
		}, claimTurnsSQL, p.Tenant, now.UnixNano(), max, leaseUntil.UnixNano())
		// The batch's history statement, if any, reads every claimed
		// history whole; the rows of those the cache holds are skipped.
		ld.byID = func(id string) *storage.Turn {
			if c := byID[id]; c != nil {
				return c.turn
			}
			return nil
		}
		ld.skip = func(id string) bool { c := byID[id]; return c != nil && c.whole }
		if cold {
			ld.queueHistory(&b, p.Tenant)
		}
		ld.queueMessages(&b, p.Tenant, now.UnixNano(), maxMessages)
		release := func() {
			// The transaction may have committed before a row failed to
			// decode, or before what follows failed.
			if len(cs) > 0 {
				ts := make([]*storage.Turn, len(cs))
				for i, c := range cs {
					ts[i] = c.turn
				}
				s.releaseClaims(p.Tenant, ts)
			}
		}
		if err := b.send(ctx, s.pool); err != nil {
			release()
			return err
		}
		// The histories: what the cache holds of each, if the row says
		// that is all of it (history_seq, migration 0017); the others were
		// read whole in the batch (cold), or are read now, after the
		// claim, from what the cache holds of them on, in one statement,
		// under the leases.
		var reads []historyRead
		missed := 0
		for i := range cs {
			c := &cs[i]
			if c.turn.Err != nil || c.whole {
				continue
			}
			missed++
			if cold {
				c.held = nil // the batch read all of it
				continue
			}
			reads = append(reads, historyRead{turn: c.turn, after: len(c.held)})
		}
		if len(cs) > 0 {
			s.claimsCold.Store(missed*2 > len(cs))
		}
		if len(reads) > 0 {
			if err := s.readHistories(ctx, p.Tenant, reads); err != nil {
				release()
				return err
			}
		}
		for _, c := range cs {
			attachHistory(s.hist, c.turn, c.held)
		}
		slices.SortFunc(cs, func(a, b claimed) int {
			if a.readyAt != b.readyAt {
				return cmp.Compare(a.readyAt, b.readyAt)
			}
			return cmp.Compare(a.rid, b.rid)
		})
		for _, c := range cs {
			turns = append(turns, c.turn)
			s.claims.Note(c.turn, maxMessages, c.st)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("postgres: claim turns: %w", err)
	}
	return turns, nil
}

// seqOrUnknown is a nullable history_seq as backend.EndsAt takes it.
func seqOrUnknown(seq *int32) int {
	if seq == nil {
		return -1
	}
	return int(*seq)
}

// historyRead is a turn whose history's events after Seq after are to be
// read (readHistories) into its History.
type historyRead struct {
	turn  *storage.Turn
	after int
}

// readHistoriesSQL reads, of tenant $1, the events of each instance $2[i]'s
// execution $3[i] after Seq $4[i], in Seq order. The lateral subquery
// (kept from being flattened by OFFSET 0) makes it a primary-key range scan
// per instance, whatever the statistics say.
const readHistoriesSQL = `SELECT k.id, h.event
	FROM unnest($2::text[], $3::bigint[], $4::bigint[]) AS k(id, execution, after)
	CROSS JOIN LATERAL (
		SELECT seq, event FROM history
		WHERE tenant = $1 AND instance_id = k.id AND execution = k.execution AND seq > k.after
		OFFSET 0
	) h
	ORDER BY k.id, h.seq`

// readHistories reads the events rs name in one statement, by each
// instance's key, and appends them, decoded, to each turn's History; a
// document that does not decode fails its own turn (Turn.Err). The turns
// must be leased by the caller: their histories then cannot grow.
func (s *Store) readHistories(ctx context.Context, tenant string, rs []historyRead) error {
	ids, executions, afters := make([]string, len(rs)), make([]int64, len(rs)), make([]int64, len(rs))
	byID := make(map[string]*storage.Turn, len(rs))
	for i, r := range rs {
		ids[i], executions[i], afters[i] = r.turn.Instance.ID, int64(r.turn.Instance.Execution), int64(r.after)
		byID[r.turn.Instance.ID] = r.turn
		r.turn.History = nil
	}
	rows, err := s.pool.Query(ctx, readHistoriesSQL, tenant, ids, executions, afters)
	if err != nil {
		return fmt.Errorf("load histories: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var (
			id  string
			doc []byte
		)
		if err := rows.Scan(&id, &doc); err != nil {
			return fmt.Errorf("load histories: %w", err)
		}
		if t := byID[id]; t != nil {
			appendHistoryDoc(t, doc)
		}
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("load histories: %w", err)
	}
	return nil
}

// claimLoad reads, in the batch of a claim (TurnClaim, or a raise that
// hands off its instance), the histories and messages of the instances the
// claim's statement named in herald.claimed. (Whether they have markers or
// tasks, the claim's statement returns: has_markers, has_tasks.)
type claimLoad struct {
	byID func(id string) *storage.Turn // nil: not claimed
	// skip, if set, names the claimed instances whose history rows are
	// not wanted (the cache holds all of it).
	skip func(id string) bool
	// known is what the history cache held, when the batch was made, of
	// instances the batch may claim: their histories are read from the
	// event after it on (claimHistorySQL), and attach puts it in front.
	known map[string]knownHistory
}

// knownHistory is what the history cache held of an instance: the events
// of an execution up to Seq after.
type knownHistory struct {
	execution, after int
	events           []history.Event
}

// know notes what the cache holds of the instances ids of tenant.
func (ld *claimLoad) know(cache *backend.HistoryCache, tenant string, ids []string) {
	for _, id := range ids {
		execution, evs, after := cache.Latest(tenant, id)
		if after == 0 {
			continue
		}
		if ld.known == nil {
			ld.known = make(map[string]knownHistory)
		}
		ld.known[id] = knownHistory{execution: execution, after: after, events: evs}
	}
}

// attach puts in front of t's history (the events the batch read) what the
// cache held of it, if that is of t's execution, and records the whole
// history in the cache.
func (ld *claimLoad) attach(cache *backend.HistoryCache, t *storage.Turn) {
	attachHistory(cache, t, ld.held(t))
}

// held is what the history cache held of t's execution when the batch was
// made (nil: nothing).
func (ld *claimLoad) held(t *storage.Turn) []history.Event {
	if k, ok := ld.known[t.Instance.ID]; ok && k.execution == t.Instance.Execution {
		return k.events
	}
	return nil
}

// attachHistory puts held, what the history cache held of t's execution,
// in front of the events read into t.History; a failed turn gets no
// history.
func attachHistory(cache *backend.HistoryCache, t *storage.Turn, held []history.Event) {
	if t.Err != nil {
		t.History = nil
		return
	}
	in := &t.Instance
	t.History = cache.Attach(in.Tenant, in.ID, in.Execution, held, t.History)
}

// queueHistory adds to b the statement that reads the histories of
// tenant's claimed instances (of those ld.known names, the events after
// what the cache holds).
func (ld *claimLoad) queueHistory(b *batch, tenant string) {
	ids := make([]string, 0, len(ld.known))
	executions, afters := make([]int64, 0, len(ld.known)), make([]int64, 0, len(ld.known))
	for id, k := range ld.known {
		ids, executions, afters = append(ids, id), append(executions, int64(k.execution)), append(afters, int64(k.after))
	}
	b.query("load history", func(rows pgx.Rows) error {
		for rows.Next() {
			var (
				id  string
				doc []byte
			)
			if err := rows.Scan(&id, &doc); err != nil {
				return err
			}
			t := ld.byID(id)
			if t == nil {
				return fmt.Errorf("history of %q, which was not claimed", id)
			}
			if ld.skip == nil || !ld.skip(id) {
				appendHistoryDoc(t, doc)
			}
		}
		return nil
	}, claimHistorySQL, tenant, ids, executions, afters)
}

// queueMessages adds to b the statement that reads the messages of
// tenant's claimed instances visible at now (unix nanos), at most
// maxMessages each.
func (ld *claimLoad) queueMessages(b *batch, tenant string, now int64, maxMessages int) {
	b.query("load messages", func(rows pgx.Rows) error {
		for rows.Next() {
			var id string
			m, err := scanMessage(rows, &id)
			t := ld.byID(id)
			if t == nil {
				if err != nil {
					return err
				}
				return fmt.Errorf("message of %q, which was not claimed", id)
			}
			if err := appendMessage(t, m, err); err != nil {
				return err
			}
		}
		return nil
	}, claimMessagesSQL, tenant, now, maxMessages)
}

// appendHistoryDoc decodes a history document of t's and appends the event
// to t.History; a document that does not decode fails its own turn
// (t.Err), not the read. A failed turn's documents are skipped.
func appendHistoryDoc(t *storage.Turn, doc []byte) {
	if t.Err != nil {
		return
	}
	ev, err := backend.DecodeHistoryEvent(doc)
	if err != nil {
		t.History, t.Err = nil, fmt.Errorf("instance %q: %w", t.Instance.ID, err)
		return
	}
	t.History = append(t.History, ev)
}

// appendMessage appends m, a message of t's as scanMessage returned it
// (err), to t.Messages; a message that does not decode fails its own turn
// (t.Err), not the read. It returns any other scan error.
func appendMessage(t *storage.Turn, m storage.Message, err error) error {
	if err != nil {
		if !errors.Is(err, heraldtype.ErrCorrupt) {
			return err
		}
		if t.Err == nil {
			t.Err = fmt.Errorf("instance %q: message %d: %w", t.Instance.ID, m.ID, err)
		}
		return nil
	}
	t.Messages = append(t.Messages, m)
	return nil
}

// releaseClaims gives back, as far as it can, leases whose turns could not
// be loaded, so the instances do not wait for the leases to run out.
func (s *Store) releaseClaims(tenant string, turns []*storage.Turn) {
	ids, tokens := make([]string, len(turns)), make([]string, len(turns))
	for i, t := range turns {
		ids[i], tokens[i] = t.Instance.ID, t.LockToken
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_, _ = s.pool.Exec(ctx, `UPDATE instances i SET lock_token = NULL, lease_until = 0
		FROM unnest($2::text[], $3::text[]) AS t(id, token)
		WHERE i.tenant = $1 AND i.id = t.id AND i.lock_token = t.token`, tenant, ids, tokens)
}

// TurnCommit: see storage.TurnStore. Most commits are one batch (a
// transaction that the commits of concurrent turns may share, see
// commitBatch; the outcome is this turn's alone), and the common one a
// single herald_commit call (simpleCommit). A commit that must hand on a
// correlated delivery, or that ends an instance with events to drop (which
// herald_end refuses with codeEndDrops), runs in an interactive
// transaction that applies package backend's rules (laneTx).
//
// A commit with correlated waits first takes the advisory locks of their
// (tenant, definition, key), as CorrelatedPut does, so that a put and the
// waits on its key are serialised across nodes. A commit that withdraws
// waits (or ends the execution) first reads, without locks, the keys of
// those waits' markers and deliveries (findWithdrawn) and takes their locks
// too, in the same ascending order, before its fence; it skips that read
// (a round trip) when this store claimed the turn and the instance then had
// no correlation marker and no correlated event in its inbox (backend.ClaimNotes).
func (s *Store) TurnCommit(ctx context.Context, p *storage.TurnCommitParams) ([]history.Event, error) {
	if p == nil {
		return nil, backend.NilParams("postgres: commit turn")
	}
	c, err := s.newCommitCall(ctx, p)
	if err != nil {
		return nil, fmt.Errorf("postgres: commit turn of %q: %w", p.InstanceID, err)
	}
	// A commit writes (it updates the instance row at least) and waits for
	// its WAL flush: once it has committed, so is every raise that had
	// committed without waiting before it began (walmark.go).
	n := s.wal.begin()
	if c.batchable() && !s.closed.Load() {
		if err := s.commits.do(ctx, c); err != nil {
			c.err = err
		}
	} else {
		c.err = s.commitOne(ctx, c)
	}
	s.hist.Committed(p, c.newEvents.docs, c.err == nil)
	s.wal.end(n, c.err == nil)
	if c.err != nil {
		return nil, fmt.Errorf("postgres: commit turn of %q: %w", p.InstanceID, c.err)
	}
	// A hint for the instance's next hand-off (handOffs.queueLoad).
	s.hist.NoteInbox(p.Tenant, p.InstanceID, c.res.ready == nil)
	s.warm.note()
	if len(p.Publish) > 0 {
		s.warmBus.note()
	}
	// Wake idle workers if the instance has work left (messages that arrived
	// during the turn, a kick) or the turn added work (activities, timers:
	// a new timer can be earlier than the NextWake a worker sleeps on).
	var kinds storage.WorkKind
	if len(p.Activities) > 0 {
		kinds |= storage.WorkActivities
	}
	if len(p.Timers) > 0 || (c.res.ready != nil && *c.res.ready <= c.now.UnixNano()) {
		kinds |= storage.WorkTurns
	}
	if len(p.Publish) > 0 {
		kinds |= storage.WorkBus
	}
	if len(p.Sends) > 0 {
		kinds |= storage.WorkTurns
	}
	if len(p.StartChildren) > 0 || len(p.CancelChildren) > 0 || (p.Family && c.status.Terminal()) {
		kinds |= storage.WorkTurns // children started, or messages for a parent or children
	}
	if kinds != 0 {
		s.signal(p.Tenant, kinds)
	}
	return c.res.dropped, nil
}

// newCommitCall checks p and makes its commitCall, with what this store's
// claim of the turn saw.
func (s *Store) newCommitCall(ctx context.Context, p *storage.TurnCommitParams) (*commitCall, error) {
	status, err := backend.CommitStatus(p)
	if err != nil {
		return nil, err
	}
	if err := checkTurnPublish(p); err != nil {
		return nil, err
	}
	if err := backend.ValidateSends(p.Sends); err != nil {
		return nil, err
	}
	if err := backend.ValidateAttributes(p.Attributes, true); err != nil {
		return nil, err
	}
	// The new events are encoded once, before any batch: each attempt of
	// the commit and the history cache use the same documents.
	newEvents, err := historyArgs(p.NewEvents)
	if err != nil {
		return nil, err
	}
	return &commitCall{ctx: ctx, p: p, newEvents: newEvents, status: status, now: backend.NowOr(p.Now), seen: s.claims.Take(p.LockToken)}, nil
}

// commitCall is one TurnCommit.
type commitCall struct {
	ctx       context.Context
	p         *storage.TurnCommitParams
	newEvents encodedHistory // p.NewEvents, encoded
	status    heraldtype.Status
	now       time.Time
	seen      backend.ClaimState

	res *commitResult
	err error
}

// ending reports whether the commit ends the execution.
func (c *commitCall) ending() bool { return c.status.Terminal() || c.p.ContinueAsNew != nil }

// batchableFields are the fields of TurnCommitParams a commit may set and
// still share a transaction with others: all but those that make it take
// advisory locks (correlated waits made, withdrawn or given back). A field
// added after this list was written makes a commit run on its own.
var batchableFields = backend.NewFieldGuard[storage.TurnCommitParams](
	"Tenant", "InstanceID", "LockToken", "Execution", "Now",
	"NewEvents", "ConsumedMessages", "Activities", "Timers", "CancelTimers", "CancelActivities", "Fates",
	"Status", "Output", "Failure", "ContinueAsNew", "Publish")

// batchable reports whether the commit takes no advisory lock: it
// registers no correlated wait, withdraws none, returns no correlated
// event, and cannot have to hand on a delivery (its claim saw no marker and
// no correlated event, or it ends nothing). Those commits may share a
// transaction (see commitBatch).
func (c *commitCall) batchable() bool {
	if !batchableFields.Only(c.p) {
		return false
	}
	if c.ending() {
		return !c.seen.Markers && !c.seen.Deliveries
	}
	return true
}

// commitOne commits c in a transaction of its own, retried on serialization
// failures and deadlocks.
func (s *Store) commitOne(ctx context.Context, c *commitCall) error {
	return s.do(ctx, func(ctx context.Context) error {
		var (
			b   batch
			err error
		)
		// The withdrawn waits a put may have delivered to, read before the
		// commit takes any lock, to learn which keys to lock; none if the
		// instance had no correlated-lane state when the turn was claimed.
		var gone []withdrawnWait
		if c.seen.Markers || c.seen.Deliveries {
			if gone, err = s.findWithdrawn(ctx, c.p, c.ending()); err != nil {
				return err
			}
		}
		// One batch, unless a delivery is to be handed on; and if the
		// instance ends with events to drop (herald_end says so), again in
		// an interactive transaction.
		if len(gone) == 0 && len(c.p.ReturnedCorrelated) == 0 && !(s.cfg.goCorrelated && !c.ending() && len(backend.Waits(c.p)) > 0) {
			if c.res, err = s.queueCommit(&b, c, nil, nil); err != nil {
				return err
			}
			if err = b.send(ctx, s.pool); pgCode(err) != codeEndDrops {
				return commitErr(err)
			}
		}
		return pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
			lt := newLaneTx(ctx, tx, c.p.Tenant, c.p.InstanceID, c.now)
			if c.res, err = s.queueCommit(lt.b, c, gone, lt); err != nil {
				return commitErr(err)
			}
			return commitErr(lt.flush())
		})
	})
}

// Commit batches. The commits of concurrent turns share a transaction, in
// one round trip, when they can: under load, the per-transaction and
// per-round-trip work (commit, WAL flush, wake-ups of the client and of the
// backend, system calls) was most of a commit's cost, and a transaction
// of many commits pays it once. Only commits that take no
// advisory lock are batched, since those locks must come before any row
// lock; the batch fences its instances in (tenant, id) order, as every
// transaction that locks several instances does, so batches do not
// deadlock one another. If a batch fails (a lost lease aborts it like any
// other error), nothing of it was written and each of its commits runs
// again on its own, so a commit's outcome never depends on the others'.
const (
	maxCommitBatches = 4  // batches in flight
	maxCommitBatch   = 32 // commits per batch
)

// batchTimeout bounds a batch of commits or raises, which no caller's
// context does.
const batchTimeout = time.Minute

// commitBatch runs a batch of commits.
func (s *Store) commitBatch(calls []*combined[*commitCall]) {
	if len(calls) == 1 {
		c := calls[0].call
		c.err = s.commitOne(c.ctx, c)
		return
	}
	slices.SortFunc(calls, func(a, b *combined[*commitCall]) int {
		if c := cmp.Compare(a.call.p.Tenant, b.call.p.Tenant); c != 0 {
			return c
		}
		return cmp.Compare(a.call.p.InstanceID, b.call.p.InstanceID)
	})
	var (
		b   batch
		err error
	)
	if allSimple(calls) {
		err = s.queueSimpleCommits(&b, calls)
	} else {
		for _, cc := range calls {
			c := cc.call
			if c.res, err = s.queueCommit(&b, c, nil, nil); err != nil {
				break
			}
		}
	}
	if err == nil {
		ctx, cancel := context.WithTimeout(context.Background(), batchTimeout)
		err = b.send(ctx, s.pool)
		cancel()
	}
	if err != nil {
		for _, cc := range calls {
			c := cc.call
			c.res = nil
			c.err = s.commitOne(c.ctx, c)
		}
	}
}

// allSimple reports whether every commit of a batch is simple
// (simpleCommit), so that one herald_commit_many call does them all.
func allSimple(calls []*combined[*commitCall]) bool {
	for _, cc := range calls {
		if !simpleCommit(cc.call.p, nil) {
			return false
		}
	}
	return true
}

// commitResult is what a commit's batch reports once it has run.
type commitResult struct {
	added   bool   // the turn scheduled activities or timers
	ready   *int64 // the instance's ready_at after the commit
	dropped []history.Event
}

// commitErr maps the fence's SQLSTATEs and duplicate keys of a commit.
func commitErr(err error) error {
	if err == nil {
		return nil
	}
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		switch {
		case pe.Code == codeLeaseLost:
			return fmt.Errorf("%s: %w", pe.Message, heraldtype.ErrLeaseLost)
		case pe.Code == codeWrongExecution:
			return errors.New(pe.Message)
		case pe.Code == codeSendConflict:
			return fmt.Errorf("%s: %w", pe.Message, heraldtype.ErrEventIDConflict)
		case pe.ConstraintName == "activities_pkey":
			return fmt.Errorf("an activity seq is already scheduled: %w", err)
		}
	}
	return err
}

// queueCommit queues TurnCommit's statements; res is filled in as the batch
// runs.
//
// With lt (an interactive transaction; b is then lt.b) it also runs the
// rules that read as they go (backend.HandOnWithdrawn, HandOnReturned,
// EndInstance); without, the commit is one batch and its caller has made
// sure no delivery is to be handed on (gone and ReturnedCorrelated empty).
func (s *Store) queueCommit(b *batch, c *commitCall, gone []withdrawnWait, lt *laneTx) (res *commitResult, err error) {
	p, status, seen, now := c.p, c.status, c.seen, c.now
	tenant, id, execution, nowN := p.Tenant, p.InstanceID, p.Execution, now.UnixNano()
	res = &commitResult{added: len(p.Activities) > 0 || len(p.Timers) > 0}

	// Correlated waits take their keys' advisory locks before anything else
	// (see queueCorrelatedLocks); then the fence locks the instance row and
	// aborts the batch unless the token owns it.
	var waits []storage.CorrelatedWait
	ending := status.Terminal() || p.ContinueAsNew != nil
	if !ending {
		waits = backend.Waits(p)
	}
	if lt == nil && simpleCommit(p, gone) {
		if err := s.queueSimpleCommit(b, res, c); err != nil {
			return nil, err
		}
		queueSimpleTail(b, c)
		return res, nil
	}
	s.queueCorrelatedLocks(b, tenant, waits, gone, p.ReturnedCorrelated)
	s.queueChildLocks(b, tenant, p.StartChildren)
	s.queueSendLocks(b, tenant, id, p.Sends)
	b.exec("", `SELECT herald_fence($1, $2, $3, $4)`, tenant, id, p.LockToken, execution)
	if err := queueStartChildren(b, tenant, id, execution, p.StartChildren, now); err != nil {
		return nil, err
	}
	queueCancelChildren(b, tenant, id, p.CancelChildren, nowN)

	if len(p.NewEvents) > 0 {
		b.queueEncodedHistory("append history", tenant, id, execution, c.newEvents)
	}
	b.queueAttributes(tenant, id, p.Attributes)
	// A terminal commit deletes the whole inbox (queueClear); the consumed
	// messages go first only if a withdrawn wait's delivery must be told
	// from them (the hand-on).
	if len(p.ConsumedMessages) > 0 && (!status.Terminal() || len(gone) > 0) {
		b.exec("delete consumed messages", `DELETE FROM inbox WHERE tenant = $1 AND instance_id = $2 AND id = ANY($3::bigint[])`,
			tenant, id, p.ConsumedMessages)
	}
	if len(p.Activities) > 0 {
		var (
			execs, seqs         = make([]int32, len(p.Activities)), make([]int32, len(p.Activities))
			names, inputs, pols = make([]string, len(p.Activities)), make([]*string, len(p.Activities)), make([]string, len(p.Activities))
			traces              = make([]string, len(p.Activities))
		)
		for i := range p.Activities {
			a := &p.Activities[i]
			exec := a.Execution
			if exec == 0 {
				exec = execution
			}
			retry, err := jsonArg(a.Retry)
			if err != nil {
				return nil, fmt.Errorf("activity seq %d: %w", a.TaskSeq, err)
			}
			execs[i], seqs[i], names[i], pols[i], traces[i] = int32(exec), int32(a.TaskSeq), a.Name, retry, a.TraceParent
			if len(a.Input) > 0 {
				in := string(a.Input)
				inputs[i] = &in
			}
		}
		b.exec("schedule activities", `INSERT INTO activities
			(tenant, instance_id, execution, task_seq, name, input, attempt, retry, visible_at, created_at, trace)
			SELECT $1, $2, t.execution, t.task_seq, t.name, t.input, 1, t.retry, $8, $8, t.trace
			FROM unnest($3::integer[], $4::integer[], $5::text[], $6::text[], $7::text[], $9::text[]) AS t(execution, task_seq, name, input, retry, trace)`,
			tenant, id, execs, seqs, names, inputs, pols, nowN, traces)
	}
	if len(p.Timers) > 0 {
		seqs, fireAt := make([]int32, len(p.Timers)), make([]int64, len(p.Timers))
		for i, t := range p.Timers {
			seqs[i], fireAt[i] = int32(t.TaskSeq), backend.Nanos(t.FireAt)
		}
		b.exec("schedule timers", `INSERT INTO inbox (tenant, instance_id, kind, execution, task_seq, visible_at, created_at)
			SELECT $1, $2, 'timer_fired', $3, t.task_seq, t.fire_at, $6
			FROM unnest($4::integer[], $5::bigint[]) AS t(task_seq, fire_at)`,
			tenant, id, execution, seqs, fireAt, nowN)
	}
	if len(p.CancelTimers) > 0 {
		b.exec("cancel timers", `DELETE FROM inbox WHERE tenant = $1 AND instance_id = $2
			AND kind = 'timer_fired' AND execution = $3 AND task_seq = ANY($4::integer[])`,
			tenant, id, execution, p.CancelTimers)
	}
	if len(p.CancelActivities) > 0 {
		// An unleased task has lease_until 0: "lease_until < now" is "unleased
		// or expired" (and names no partial index).
		b.exec("cancel activities", `WITH gone AS (
				DELETE FROM activities WHERE tenant = $1 AND instance_id = $2 AND execution = $3 AND task_seq = ANY($4::integer[])
				  AND lease_until < $5
			)
			UPDATE activities SET cancel_requested = true
			WHERE tenant = $1 AND instance_id = $2 AND execution = $3 AND task_seq = ANY($4::integer[])
			  AND lease_until >= $5`,
			tenant, id, execution, p.CancelActivities, nowN)
	}
	b.queuePublish(tenant, p.Publish, nowN)
	s.queueSends(b, tenant, id, p.Sends, nowN)
	if len(p.Fates) > 0 {
		// The last update of an event id wins, as if applied in order. One
		// statement per event: a primary-key lookup whatever the plan (a
		// join with an array of ids may scan the tenant's ledger, see
		// migration 0003); a turn rarely updates more than one.
		last := make(map[string]int, len(p.Fates))
		for i, f := range p.Fates {
			last[f.EventID] = i
		}
		for i, f := range p.Fates {
			if last[f.EventID] != i {
				continue
			}
			b.exec("update fate", `UPDATE events SET fate = $4, reason = $5, execution = $6,
					origin_execution = $7, wait_number = $8, updated_at = $9
				WHERE tenant = $1 AND event_id = $3 AND instance_id = $2`,
				tenant, id, f.EventID, string(f.Fate), string(f.Reason), f.Execution, f.OriginExecution, f.WaitNumber, nowN)
		}
	}

	// Correlated-lane work, in order: the withdrawn waits' markers go and
	// the deliveries a put made to them are handed on (with ending, those
	// of every wait of the execution), the new waits are registered, and
	// the returned events are handed on (a wait of this very turn can
	// receive one). The hand-on reads, so it runs only in an interactive
	// transaction (lt); without one the caller has made sure there is
	// nothing to hand on.
	if !ending && len(p.CancelCorrelatedWaits) > 0 {
		b.exec("cancel correlated waits", `DELETE FROM correlated_waits
			WHERE tenant = $1 AND instance_id = $2 AND execution = $3 AND task_seq = ANY($4::integer[])`,
			tenant, id, execution, p.CancelCorrelatedWaits)
	}
	if lt != nil {
		if len(gone) > 0 {
			if err := backend.HandOnWithdrawn(lt, execution, p.CancelCorrelatedWaits, ending, now); err != nil {
				return nil, err
			}
		}
	} else if len(gone) > 0 || len(p.ReturnedCorrelated) > 0 {
		return nil, errors.New("postgres: a commit that hands on correlated events needs a transaction")
	}
	if s.cfg.goCorrelated && len(waits) > 0 {
		// The reference rule (tests only; see commitWaitSQL).
		if lt == nil {
			return nil, errors.New("postgres: the Go correlated rules need a transaction")
		}
		if err := backend.RegisterWaits(lt, p); err != nil {
			return nil, err
		}
	} else {
		queueCorrelatedWaits(b, p, waits, nowN)
	}
	if lt != nil {
		if err := backend.HandOnReturned(lt, p.ReturnedCorrelated, ending, now); err != nil {
			return nil, err
		}
	}

	if status.Terminal() {
		// Tasks scheduled by this very commit are deleted with the others.
		// Without a transaction to drop undelivered events in, herald_end
		// refuses an instance that has some (codeEndDrops) and the commit
		// runs again in one.
		if lt != nil {
			if res.dropped, err = backend.EndInstance(lt, execution, now); err != nil {
				return nil, err
			}
		}
		b.queueClear(tenant, id, seen.Tasks || len(p.Activities) > 0, seen.Markers, lt == nil)
	}

	next := execution
	if can := p.ContinueAsNew; can != nil {
		next = execution + 1
		if err := b.queueHistory("continue as new: start history", tenant, id, next, can.StartEvents); err != nil {
			return nil, fmt.Errorf("continue as new: %w", err)
		}
		// The old executions' timers and activity results can never be used;
		// their unleased tasks go, leased ones are asked to stop.
		b.exec("continue as new", `WITH old_messages AS (
				DELETE FROM inbox WHERE tenant = $1 AND instance_id = $2 AND execution < $3
				  AND kind IN ('timer_fired', 'activity_completed', 'activity_failed')
			), old_tasks AS (
				DELETE FROM activities WHERE tenant = $1 AND instance_id = $2 AND execution < $3
				  AND lease_until < $4
			), cancelled AS (
				UPDATE activities SET cancel_requested = true
				WHERE tenant = $1 AND instance_id = $2 AND execution < $3
				  AND lease_until >= $4
			), markers_gone AS (
				DELETE FROM correlated_waits WHERE tenant = $1 AND instance_id = $2
			)
			INSERT INTO inbox (tenant, instance_id, kind, execution, visible_at, created_at)
			VALUES ($1, $2, 'kick', $3, $4, $4)`, tenant, id, next, nowN)
	}

	// Status, output, failure, the next execution, the lease released and
	// ready_at recomputed, in one statement.
	failure, err := failureArg(p.Failure)
	if err != nil {
		return nil, err
	}
	var input any
	// The history's end (history_seq, migration 0017): the last new event,
	// or the start events of the next execution; nil keeps it.
	var last *int32
	evs := p.NewEvents
	if p.ContinueAsNew != nil {
		input = backend.RawArg(p.ContinueAsNew.Input)
		evs = p.ContinueAsNew.StartEvents
	}
	for i := range evs {
		if seq := int32(evs[i].Seq); last == nil || seq > *last {
			last = &seq
		}
	}
	b.queryRow("update instance", func(row pgx.Row) error {
		return row.Scan(&res.ready)
	}, `UPDATE instances SET status = $3, output = $4, failure = $5, updated_at = $6,
			execution = $7, input = CASE WHEN $8 THEN $9 ELSE input END,
			lock_token = NULL, lease_until = 0, not_before = 0, blocked = '', ready_at = `+readyAtSQL+`,
			history_seq = CASE WHEN $8 THEN $10::integer ELSE COALESCE($10::integer, history_seq) END,
			has_tasks = has_tasks OR $11, has_markers = has_markers OR $12
		WHERE tenant = $1 AND id = $2
		RETURNING ready_at`,
		tenant, id, string(status), backend.RawArg(p.Output), failure, nowN, next, p.ContinueAsNew != nil, input,
		last, len(p.Activities) > 0, len(waits) > 0)
	if status.Terminal() && p.Family {
		if err := queueFamilyEnd(b, tenant, id, status, p.Output, p.Failure, now); err != nil {
			return nil, err
		}
	}

	return res, nil
}

// simpleFields are the fields of TurnCommitParams the simple commit
// handles: herald_commit appends history, consumes messages, updates fates
// and sets the status, and a statement after it in the same batch stores
// the published events. A commit that sets any other field (an
// activity, a timer, a cancellation, continue-as-new, correlated-lane work,
// or a field added after this list was written) takes the general path.
var simpleFields = backend.NewFieldGuard[storage.TurnCommitParams](
	"Tenant", "InstanceID", "LockToken", "Execution", "Now",
	"NewEvents", "ConsumedMessages", "Fates", "Status", "Output", "Failure", "Publish")

// simpleCommit reports whether herald_commit can do p's commit (see
// simpleFields) and no withdrawn wait needs its delivery handed on.
func simpleCommit(p *storage.TurnCommitParams, gone []withdrawnWait) bool {
	return simpleFields.Only(p) && len(gone) == 0
}

// commitFuncSQL calls herald_commit (migration 0016).
const commitFuncSQL = `SELECT herald_commit($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18, $19, $20)`

// lastFates returns the fate updates that win: the last of each event id,
// as if applied in order.
func lastFates(fs []storage.FateUpdate) []storage.FateUpdate {
	if len(fs) < 2 {
		return fs
	}
	last := make(map[string]int, len(fs))
	for i, f := range fs {
		last[f.EventID] = i
	}
	out := make([]storage.FateUpdate, 0, len(last))
	for i, f := range fs {
		if last[f.EventID] == i {
			out = append(out, f)
		}
	}
	return out
}

// fateArgs are fate updates as herald_commit's arrays.
type fateArgs struct {
	ids, fates, reasons   []string
	execs, origins, waits []int32
}

func (a *fateArgs) add(f storage.FateUpdate) {
	a.ids, a.fates, a.reasons = append(a.ids, f.EventID), append(a.fates, string(f.Fate)), append(a.reasons, string(f.Reason))
	a.execs, a.origins, a.waits = append(a.execs, int32(f.Execution)), append(a.origins, int32(f.OriginExecution)), append(a.waits, int32(f.WaitNumber))
}

// queueSimpleCommit queues a simple commit (simpleCommit) as one
// herald_commit call; res is filled in as the batch runs.
func (s *Store) queueSimpleCommit(b *batch, res *commitResult, c *commitCall) error {
	p, status, seen, now := c.p, c.status, c.seen, c.now
	seqs, kinds, docs := c.newEvents.seqs, c.newEvents.kinds, c.newEvents.docs
	var f fateArgs
	for _, fu := range lastFates(p.Fates) {
		f.add(fu)
	}
	failure, err := failureArg(p.Failure)
	if err != nil {
		return err
	}
	consumed := p.ConsumedMessages
	if consumed == nil {
		consumed = []int64{}
	}
	b.queryRow("commit", func(row pgx.Row) error {
		return row.Scan(&res.ready)
	}, commitFuncSQL, p.Tenant, p.InstanceID, p.LockToken, p.Execution, seqs, kinds, docs, consumed,
		f.ids, f.fates, f.reasons, f.execs, f.origins, f.waits,
		string(status), backend.RawArg(p.Output), failure, now.UnixNano(),
		seen.Tasks, seen.Markers)
	return nil
}

// commitManySQL calls herald_commit_many (migration 0018).
const commitManySQL = `SELECT idx, ready FROM herald_commit_many($1, $2, $3, $4, $5, $6, $7, $8, $9, $10,
	$11, $12, $13, $14, $15, $16, $17, $18, $19, $20, $21, $22, $23)`

// queueSimpleCommits queues the simple commits of a batch (each
// simpleCommit, in (tenant, id) order) as one
// herald_commit_many call, which does for each what herald_commit does;
// the results are filled in as the batch runs. Each call's tail follows
// (queueSimpleTail).
func (s *Store) queueSimpleCommits(b *batch, calls []*combined[*commitCall]) error {
	n := len(calls)
	var (
		tenants, ids, tokens, statuses = make([]string, n), make([]string, n), make([]string, n), make([]string, n)
		outputs, failures              = make([]*string, n), make([]*string, n)
		executions                     = make([]int32, n)
		nows                           = make([]int64, n)
		tasks, markers                 = make([]bool, n), make([]bool, n)
		hIdx, hSeqs                    []int32
		hKinds, hDocs                  []string
		cIdx                           []int32
		cIDs                           []int64
		fIdx                           []int32
		f                              fateArgs
		results                        = make([]*commitResult, n)
	)
	for i, cc := range calls {
		c := cc.call
		p := c.p
		tenants[i], ids[i], tokens[i], statuses[i] = p.Tenant, p.InstanceID, p.LockToken, string(c.status)
		executions[i], tasks[i], markers[i], nows[i] = int32(p.Execution), c.seen.Tasks, c.seen.Markers, c.now.UnixNano()
		if len(p.Output) > 0 {
			o := string(p.Output)
			outputs[i] = &o
		}
		if p.Failure != nil {
			fa, err := jsonArg(p.Failure)
			if err != nil {
				return err
			}
			failures[i] = &fa
		}
		for range c.newEvents.seqs {
			hIdx = append(hIdx, int32(i+1))
		}
		hSeqs, hKinds, hDocs = append(hSeqs, c.newEvents.seqs...), append(hKinds, c.newEvents.kinds...), append(hDocs, c.newEvents.docs...)
		for _, m := range p.ConsumedMessages {
			cIdx, cIDs = append(cIdx, int32(i+1)), append(cIDs, m)
		}
		for _, fu := range lastFates(p.Fates) {
			fIdx = append(fIdx, int32(i+1))
			f.add(fu)
		}
		results[i] = &commitResult{}
	}
	b.query("commit", func(rows pgx.Rows) error {
		for rows.Next() {
			var (
				idx   int32
				ready *int64
			)
			if err := rows.Scan(&idx, &ready); err != nil {
				return err
			}
			if idx < 1 || int(idx) > n {
				return fmt.Errorf("herald_commit_many returned commit %d of %d", idx, n)
			}
			results[idx-1].ready = ready
		}
		return nil
	}, commitManySQL, tenants, ids, tokens, executions, statuses, outputs, failures, tasks, markers, nows,
		nonNil(hIdx), nonNil(hSeqs), nonNil(hKinds), nonNil(hDocs), nonNil(cIdx), nonNil(cIDs),
		nonNil(fIdx), nonNil(f.ids), nonNil(f.fates), nonNil(f.reasons), nonNil(f.execs), nonNil(f.origins), nonNil(f.waits))
	for i, cc := range calls {
		cc.call.res = results[i]
		queueSimpleTail(b, cc.call)
	}
	return nil
}

// queueSimpleTail queues what follows a simple commit's function call in
// its batch (after the fence, so that a lost lease aborts the batch
// first): the events the turn published, and the clearing of its
// instance's blocked flag.
func queueSimpleTail(b *batch, c *commitCall) {
	b.queuePublish(c.p.Tenant, c.p.Publish, c.now.UnixNano())
	if c.seen.Blocked {
		b.exec("clear blocked", unblockSQL, c.p.Tenant, c.p.InstanceID)
	}
}

// nonNil is s, or an empty slice for nil (an empty array, not NULL).
func nonNil[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}

// TurnAbandon: see storage.TurnStore.
func (s *Store) TurnAbandon(ctx context.Context, p *storage.TurnAbandonParams) error {
	if p == nil {
		return backend.NilParams("postgres: abandon turn")
	}
	if p.LockToken == "" {
		return fmt.Errorf("postgres: abandon turn of %q: empty lock token: %w", p.InstanceID, heraldtype.ErrLeaseLost)
	}
	s.claims.Take(p.LockToken)
	err := s.doUntilRoom(ctx, func(ctx context.Context) error {
		ct, err := s.pool.Exec(ctx, `UPDATE instances SET lock_token = NULL, lease_until = 0, not_before = $4, blocked = $5
			WHERE tenant = $1 AND id = $2 AND lock_token = $3`, p.Tenant, p.InstanceID, p.LockToken, backend.Nanos(p.RetryAt), p.Blocked)
		if err != nil {
			return fmt.Errorf("release lease: %w", err)
		}
		if ct.RowsAffected() == 0 {
			return heraldtype.ErrLeaseLost
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("postgres: abandon turn of %q: %w", p.InstanceID, err)
	}
	s.signal(p.Tenant, storage.WorkTurns)
	return nil
}

// nextWakeSQL is NextWake for $1 tenant, $2 now: the earliest of the times
// listed on NextWake, each found by an index scan that stops at its first
// row. An unleased instance's next message is its ready_at; a leased
// instance's messages wait for its lease anyway (the lease holder's commit
// recomputes ready_at and signals if the instance is ready).
const nextWakeSQL = `SELECT LEAST(
	(SELECT ready_at FROM instances
	 WHERE tenant = $1 AND lock_token IS NULL AND ready_at IS NOT NULL AND ready_at > $2 AND status IN ` + nonTerminal + `
	 ORDER BY ready_at LIMIT 1),
	(SELECT visible_at FROM activities
	 WHERE tenant = $1 AND lock_token IS NULL AND visible_at > $2
	 ORDER BY visible_at LIMIT 1),
	(SELECT not_before FROM instances
	 WHERE tenant = $1 AND not_before > 0 AND not_before > $2 AND ready_at IS NOT NULL AND status IN ` + nonTerminal + `
	 ORDER BY not_before LIMIT 1),
	(SELECT lease_until FROM instances
	 WHERE tenant = $1 AND lock_token IS NOT NULL AND lease_until > $2 AND ready_at IS NOT NULL AND status IN ` + nonTerminal + `
	 ORDER BY lease_until LIMIT 1),
	(SELECT lease_until FROM activities
	 WHERE tenant = $1 AND lock_token IS NOT NULL AND lease_until > $2 AND NOT cancel_requested
	 ORDER BY lease_until LIMIT 1),
	(SELECT due_at FROM bus_routes
	 WHERE tenant = $1 AND status IN ('queued', 'retrying') AND due_at > 0 AND due_at > $2
	 ORDER BY due_at LIMIT 1),
	(SELECT lease_until FROM bus_routes
	 WHERE tenant = $1 AND status = 'running' AND lease_until > $2
	 ORDER BY lease_until LIMIT 1)
)`

// NextWake: see storage.Notifier. It does not look behind an instance's
// earliest message: a later timer of an instance that is ready now or
// leased shows once its turn has committed (the committing worker signals
// or sees it), the time storage.Notifier lets a store leave out.
func (s *Store) NextWake(ctx context.Context, p *storage.NextWakeParams) (time.Time, bool, error) {
	if p == nil {
		return time.Time{}, false, backend.NilParams("postgres: next wake")
	}
	now := backend.NowOr(p.Now).UnixNano()
	var at *int64
	err := s.do(ctx, func(ctx context.Context) error {
		var b batch
		b.exec("", scanSettings)
		if p.AllTenants {
			b.queryRow("", func(row pgx.Row) error { return row.Scan(&at) }, nextWakeAllSQL, now)
		} else {
			b.queryRow("", func(row pgx.Row) error { return row.Scan(&at) }, nextWakeSQL, p.Tenant, now)
		}
		return b.send(ctx, s.pool)
	})
	if err != nil {
		return time.Time{}, false, fmt.Errorf("postgres: next wake: %w", err)
	}
	if at == nil {
		return time.Time{}, false, nil
	}
	return backend.FromNanos(*at), true, nil
}
