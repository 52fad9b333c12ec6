package sqlite

import (
	"cmp"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/heraldwf/herald/heraldtype"
	"github.com/heraldwf/herald/history"

	"github.com/heraldwf/herald/storage"
	"github.com/heraldwf/herald/storage/internal/backend"
)

// TurnClaim: see storage.TurnStore. Each turn's lock token is a random
// prefix shared by the claim and the instance's row id; histories and
// messages are read on the read pool, beside the writer.
func (s *Store) TurnClaim(ctx context.Context, p *storage.TurnClaimParams) ([]*storage.Turn, error) {
	if p == nil {
		return nil, backend.NilParams("sqlite: claim turns")
	}
	now := backend.NowOr(p.Now)
	max := backend.ClaimMax(p.Max)
	lease := backend.Lease(p.Lease)
	maxMessages := backend.MaxMessages(p.MaxMessages)
	leaseUntil := now.Add(lease)
	var (
		turns  []*storage.Turn
		docs   [][][]byte           // each turn's history documents, decoded outside the writer
		states []backend.ClaimState // what the claim saw of each turn's instance
	)
	// One random prefix per claim; each instance's token is the prefix and
	// its row id, so that turns never share a token and the claim's rows are
	// found again by lease_until (indexed) and the prefix.
	prefix := backend.NewToken() + ":"
	nowN, untilN := now.UnixNano(), leaseUntil.UnixNano()
	err := s.writeEarly(ctx, func(w *wtx) error {
		turns, docs = nil, nil
		// Find and lease in one statement. Unleased instances come from the
		// instances_ready index in ready order; those whose lease ran out
		// from instances_leased.
		rows, err := w.query(`UPDATE instances SET lock_token = ?4 || rid, lease_until = ?5, not_before = 0
			WHERE rid IN (SELECT rid FROM (
				SELECT * FROM (SELECT ready_at, rid FROM instances
					WHERE tenant = ?1 AND lock_token IS NULL AND ready_at <= ?2
					  AND not_before <= ?2 AND status IN `+nonTerminal+`
					ORDER BY ready_at, rid LIMIT +?3)
				UNION ALL
				SELECT * FROM (SELECT ready_at, rid FROM instances
					WHERE tenant = ?1 AND lock_token IS NOT NULL AND lease_until < ?2 AND ready_at <= ?2
					  AND not_before <= ?2 AND status IN `+nonTerminal+`
					ORDER BY ready_at, rid LIMIT +?3)
			) ORDER BY ready_at, rid LIMIT +?3)
			RETURNING `+instanceCols+`, ready_at, rid, `+claimFlags, p.Tenant, nowN, max, prefix, untilN)
		if err != nil {
			return fmt.Errorf("lease instances: %w", err)
		}
		type leased struct {
			inst         *instanceRow
			readyAt, rid int64
			st           backend.ClaimState
			err          error // the row did not decode
		}
		var ls []leased
		for rows.Next() {
			var (
				l   leased
				row backend.InstanceRow
				r   instanceRow
			)
			if err := rows.Scan(append(row.Dest(), &r.lockToken, &r.leaseUntil, &l.readyAt, &l.rid, &l.st.Markers, &l.st.Tasks)...); err != nil {
				return fmt.Errorf("lease instances: %w", err)
			}
			if r.Instance, l.err = row.Instance(); l.err != nil {
				l.err = fmt.Errorf("instance %q: %w", r.Instance.ID, l.err)
			}
			l.inst = &r
			ls = append(ls, l)
		}
		if len(ls) == 0 {
			return nil
		}
		slices.SortFunc(ls, func(a, b leased) int {
			if c := cmp.Compare(a.readyAt, b.readyAt); c != 0 {
				return c
			}
			return cmp.Compare(a.rid, b.rid)
		})
		states = states[:0]
		for _, l := range ls {
			states = append(states, l.st)
			turns = append(turns, &storage.Turn{
				Instance:   l.inst.Instance,
				LockToken:  l.inst.lockToken.String,
				LeaseUntil: leaseUntil,
				Err:        l.err,
			})
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("sqlite: claim turns: %w", err)
	}
	if len(turns) == 0 {
		return nil, nil
	}
	// The claimed instances' histories and messages are read on the read
	// pool, beside the writer (the store's bottleneck): the claim has
	// committed, so a reader sees it, and while the leases are held nobody
	// else changes the histories; a message that arrives after this read
	// waits for the next turn.
	docs, err = s.loadClaimed(ctx, s.reader(nil), turns, p.Tenant, untilN, prefix, nowN, maxMessages)
	if err != nil {
		err = fmt.Errorf("sqlite: claim turns: %w", err)
		return nil, errors.Join(err, s.releaseClaimed(ctx, p.Tenant, turns))
	}
	// Decoding runs on the caller's goroutine: the writer is the store's
	// bottleneck, the callers are many. A document that does not decode
	// fails its own turn (Turn.Err), not the claim.
	s.decodeClaimed(turns, docs)
	for i, t := range turns {
		s.claims.Note(t, maxMessages, states[i])
	}
	return turns, nil
}

// claimFlags are the columns a claim's RETURNING adds for its ClaimState
// (see backend.ClaimNotes): whether the instance may have correlation
// markers, and activity tasks (migration 0013).
const claimFlags = `has_markers, has_tasks`

// decodeClaimed decodes each claimed turn's history documents (docs[i] are
// turns[i]'s, as loadClaimed returns them) after the events the history
// cache gave it (see loadClaimed), and records the whole history in the
// cache; a document that does not decode fails its own turn (Turn.Err).
func (s *Store) decodeClaimed(turns []*storage.Turn, docs [][][]byte) {
	for i, t := range turns {
		if t.Err != nil {
			t.History = nil
			continue
		}
		tail, err := decodeHistory(docs[i])
		if err != nil {
			t.History = nil
			t.Err = fmt.Errorf("instance %q: %w", t.Instance.ID, err)
			continue
		}
		in := &t.Instance
		t.History = s.hist.Attach(in.Tenant, in.ID, in.Execution, t.History, tail)
	}
}

// claimedRows is the condition on instances i of the rows a claim of
// tenant ?1 leased until ?2 with tokens that start with ?3 (of length ?4).
const claimedRows = `i.tenant = ?1 AND i.lease_until = ?2 AND i.lock_token IS NOT NULL
		AND substr(i.lock_token, 1, ?4) = ?3`

// claimHistoriesSQL reads the current execution's history of each instance
// a claim leased (claimedRows), from the event after the Seq the JSON
// object ?5 gives for the instance's id on (from the first, for an id it
// does not name).
const claimHistoriesSQL = `SELECT h.instance_id, h.event FROM instances i
		CROSS JOIN history h ON h.tenant = i.tenant AND h.instance_id = i.id AND h.execution = i.execution
		  AND h.seq > COALESCE((SELECT k.value FROM json_each(?5) k WHERE k.key = i.id), 0)
		WHERE ` + claimedRows + ` ORDER BY i.rid, h.seq`

// loadClaimed reads through r (the read pool, or the writer's transaction
// for a raise that hands off) the histories (current execution) and visible
// messages of a claim's instances, each in one statement for the whole claim; the
// claim's rows are found by their lease_until (indexed) and token prefix.
// It fills each turn's Messages, sets its History to the events the history
// cache holds of it (see backend.HistoryCache), and returns the documents of
// the events after those (the whole history of an instance the cache does
// not hold).
func (s *Store) loadClaimed(ctx context.Context, r querier, turns []*storage.Turn, tenant string, untilN int64, prefix string,
	nowN int64, maxMessages int) ([][][]byte, error) {
	if len(turns) == 1 {
		docs, err := s.loadOne(ctx, r, turns[0], tenant, nowN, maxMessages)
		return [][][]byte{docs}, err
	}
	at := make(map[string]int, len(turns))
	for i, t := range turns {
		at[t.Instance.ID] = i
	}
	docs := make([][][]byte, len(turns))
	// Of an instance whose history the cache holds, only the events after
	// it are read: the statement gets a JSON object of instance ids and
	// Seqs.
	after := map[string]int{}
	for _, t := range turns {
		if t.Err != nil {
			continue
		}
		if evs, seq := s.hist.Get(tenant, t.Instance.ID, t.Instance.Execution); seq > 0 {
			t.History, after[t.Instance.ID] = evs, seq
		}
	}
	known, err := jsonArg(after)
	if err != nil {
		return nil, err
	}
	hrows, err := r.QueryContext(ctx, claimHistoriesSQL, tenant, untilN, prefix, len(prefix), known)
	if err != nil {
		return nil, fmt.Errorf("load histories: %w", s.readErr(err))
	}
	defer hrows.Close()
	for hrows.Next() {
		var (
			id  string
			doc []byte
		)
		if err := hrows.Scan(&id, &doc); err != nil {
			return nil, fmt.Errorf("load histories: %w", err)
		}
		if i, ok := at[id]; ok {
			docs[i] = append(docs[i], doc)
		}
	}
	if err := hrows.Err(); err != nil {
		return nil, fmt.Errorf("load histories: %w", s.readErr(err))
	}
	// The per-instance limit is applied while reading the rows: a window
	// function makes SQLite scan the tenant's whole inbox.
	mrows, err := r.QueryContext(ctx, `SELECT m.instance_id, m.id, m.kind, m.execution, m.task_seq, m.lane, m.event_id,
			m.name, m.key, m.payload, m.latest, m.result, m.failure, m.visible_at, m.created_at, m.trace
		FROM instances i CROSS JOIN inbox m ON m.tenant = i.tenant AND m.instance_id = i.id
		WHERE `+claimedRows+` AND (m.visible_at <= ?5 OR m.kind <> 'timer_fired')
		ORDER BY i.rid, m.id`, tenant, untilN, prefix, len(prefix), nowN)
	if err != nil {
		return nil, fmt.Errorf("load messages: %w", s.readErr(err))
	}
	defer mrows.Close()
	for mrows.Next() {
		var (
			id string
			mr backend.MessageRow
		)
		if err := mrows.Scan(append([]any{&id}, mr.Dest()...)...); err != nil {
			return nil, fmt.Errorf("load messages: %w", err)
		}
		i, ok := at[id]
		if !ok || len(turns[i].Messages) >= maxMessages {
			continue
		}
		m, err := mr.Message()
		if err != nil {
			if turns[i].Err == nil {
				turns[i].Err = fmt.Errorf("instance %q: message %d: %w", id, m.ID, err)
			}
			continue
		}
		turns[i].Messages = append(turns[i].Messages, m)
	}
	if err := mrows.Err(); err != nil {
		return nil, fmt.Errorf("load messages: %w", s.readErr(err))
	}
	return docs, nil
}

// loadOne is loadClaimed for one turn (a hand-off, a claim of one): its
// rows are read by the instance's key, in its primary-key order, rather
// than found again through the lease: the key's index reads them in
// place, where the joins through the lease cost the single writer more.
func (s *Store) loadOne(ctx context.Context, r querier, t *storage.Turn, tenant string, nowN int64, maxMessages int) ([][]byte, error) {
	docs, err := s.loadOneHistory(ctx, r, t, tenant, -1)
	if err != nil {
		return nil, err
	}
	id := t.Instance.ID
	ms, bad, err := loadMessages(ctx, r, tenant, id, nowN, maxMessages)
	if err != nil {
		return nil, s.readErr(err)
	}
	t.Messages = append(t.Messages, ms...)
	if bad != nil && t.Err == nil {
		t.Err = fmt.Errorf("instance %q: %w", id, bad)
	}
	return docs, nil
}

// loadOneHistory is loadOne's history part: it sets t.History to what the
// history cache holds of t's execution and returns the documents of the
// events after those. end, if not negative, is the Seq that ends the
// history, as r's transaction sees it: the cache's events that end there
// are all of it, and nothing is read.
func (s *Store) loadOneHistory(ctx context.Context, r querier, t *storage.Turn, tenant string, end int) ([][]byte, error) {
	var (
		evs   []history.Event
		after int
	)
	if t.Err == nil {
		evs, after = s.hist.Get(tenant, t.Instance.ID, t.Instance.Execution)
	}
	if backend.EndsAt(evs, end) {
		t.History = evs
		return nil, nil
	}
	docs, err := loadHistoryDocs(ctx, r, tenant, t.Instance.ID, t.Instance.Execution, after, 0)
	if err != nil {
		return nil, s.readErr(err)
	}
	t.History = evs
	return docs, nil
}

// releaseClaimed gives up the leases of a claim that could not be handed
// out, as if it had failed.
func (s *Store) releaseClaimed(ctx context.Context, tenant string, turns []*storage.Turn) error {
	var errs []error
	for _, t := range turns {
		if err := s.TurnAbandon(context.WithoutCancel(ctx), &storage.TurnAbandonParams{Tenant: tenant,
			InstanceID: t.Instance.ID, LockToken: t.LockToken}); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// TurnCommit: see storage.TurnStore. The commit is one write transaction
// of the single writer, which serialises it with puts; the lane rules it
// applies (the hand-on, the instance-end drops) are package backend's.
func (s *Store) TurnCommit(ctx context.Context, p *storage.TurnCommitParams) ([]history.Event, error) {
	if p == nil {
		return nil, backend.NilParams("sqlite: commit turn")
	}
	status, err := backend.CommitStatus(p)
	if err != nil {
		return nil, fmt.Errorf("sqlite: commit turn of %q: %w", p.InstanceID, err)
	}
	if err := checkTurnPublish(p.Publish); err != nil {
		return nil, fmt.Errorf("sqlite: commit turn of %q: %w", p.InstanceID, err)
	}
	if err := backend.ValidateSends(p.Sends); err != nil {
		return nil, fmt.Errorf("sqlite: commit turn of %q: %w", p.InstanceID, err)
	}
	if err := backend.ValidateAttributes(p.Attributes, true); err != nil {
		return nil, fmt.Errorf("sqlite: commit turn of %q: %w", p.InstanceID, err)
	}
	now := backend.NowOr(p.Now)
	docs, err := encodeTurn(p)
	if err != nil {
		return nil, fmt.Errorf("sqlite: commit turn of %q: %w", p.InstanceID, err)
	}
	var dropped []history.Event
	seen := s.claims.Take(p.LockToken)
	err = s.write(ctx, func(w *wtx) error {
		dropped = nil
		s.turnBack(p.LockToken)
		return commitTurn(w, p, docs, status, now, seen, &dropped)
	})
	s.hist.Committed(p, docs.newEvents, err == nil)
	if err != nil {
		return nil, fmt.Errorf("sqlite: commit turn of %q: %w", p.InstanceID, err)
	}
	return dropped, nil
}

// turnDocs are a turn's history events, encoded before the write.
type turnDocs struct {
	newEvents, startEvents []string
}

func encodeTurn(p *storage.TurnCommitParams) (*turnDocs, error) {
	var d turnDocs
	var err error
	if d.newEvents, err = encodeHistory(p.NewEvents); err != nil {
		return nil, err
	}
	if p.ContinueAsNew != nil {
		if d.startEvents, err = encodeHistory(p.ContinueAsNew.StartEvents); err != nil {
			return nil, fmt.Errorf("continue as new: %w", err)
		}
	}
	return &d, nil
}

// commitTurn writes one turn; the instance_terminal drop breadcrumbs it adds
// go to *dropped.
//
// The lease is checked last, by the update of the instance row, whose
// WHERE names the lock token, the execution and a running status: the
// common commit saves a read of the row. When that update finds no row, or
// any statement before it fails, turnFence says what the row says, and a
// lost lease is the error, before any other; the caller's savepoint (or
// transaction) undoes what the commit wrote.
func commitTurn(w *wtx, p *storage.TurnCommitParams, docs *turnDocs, status heraldtype.Status, now time.Time,
	seen backend.ClaimState, dropped *[]history.Event) error {
	err := commitTurnFenced(w, p, docs, status, now, seen, dropped)
	if err == nil {
		return nil
	}
	if ferr := turnFence(w, p); ferr != nil {
		return ferr
	}
	if errors.Is(err, errNotFenced) {
		return fmt.Errorf("update instance: no row for the lock token, yet the instance holds it")
	}
	return err
}

// errNotFenced is commitTurnFenced's error when the instance update found
// no row with the turn's token, execution and a running status.
var errNotFenced = errors.New("the instance row is not the turn's")

// turnFence checks that p's lock token holds the instance, that the
// instance is not ended and is on p's execution: nil if so, else why not.
func turnFence(w *wtx, p *storage.TurnCommitParams) error {
	var (
		token     sql.NullString
		curStatus string
		execution int
	)
	err := w.queryRow(`SELECT lock_token, status, execution FROM instances WHERE tenant = ? AND id = ?`,
		p.Tenant, p.InstanceID).Scan(&token, &curStatus, &execution)
	if errors.Is(err, sql.ErrNoRows) {
		return fmt.Errorf("instance does not exist: %w", heraldtype.ErrLeaseLost)
	}
	if err != nil {
		return fmt.Errorf("load instance: %w", err)
	}
	if !token.Valid || token.String != p.LockToken {
		return heraldtype.ErrLeaseLost
	}
	if heraldtype.Status(curStatus).Terminal() {
		return fmt.Errorf("instance is %s: %w", curStatus, heraldtype.ErrLeaseLost)
	}
	if p.Execution != execution {
		return fmt.Errorf("turn ran on execution %d but the instance is on execution %d", p.Execution, execution)
	}
	return nil
}

// commitTurnFenced is commitTurn without the explanation of a failure. An
// ending commit skips the statements that would find nothing, by what the
// claim saw (seen, see backend.ClaimNotes): the withdrawn waits'
// deliveries without markers or a correlated event, the deletes of
// activity tasks and markers without them.
func commitTurnFenced(w *wtx, p *storage.TurnCommitParams, docs *turnDocs, status heraldtype.Status, now time.Time,
	seen backend.ClaimState, dropped *[]history.Event) error {
	tenant, id, nowN := p.Tenant, p.InstanceID, now.UnixNano()
	execution := p.Execution

	if err := appendEncoded(w, tenant, id, execution, p.NewEvents, docs.newEvents); err != nil {
		return err
	}
	if err := publishTurn(w, tenant, p.Publish, nowN); err != nil {
		return err
	}
	if err := applyAttributes(w, tenant, id, p.Attributes); err != nil {
		return err
	}
	if err := sendTurn(w, tenant, id, p.Sends, nowN); err != nil {
		return err
	}
	if err := startChildren(w, tenant, id, execution, p.StartChildren, nowN); err != nil {
		return err
	}
	for _, c := range p.CancelChildren {
		if _, _, _, err := requestCancel(w, tenant, c, id, backend.ParentCanceledReason(id), nowN); err != nil {
			return err
		}
	}
	// A turn that ends the instance clears its whole inbox (endInstance).
	// The consumed messages go first all the same when a hand-on may read
	// the inbox before that: it must not take a consumed delivery for one
	// still waiting to be handed on.
	handOn := seen.Markers || seen.Deliveries || len(p.ReturnedCorrelated) > 0
	if !status.Terminal() || handOn {
		for _, mid := range p.ConsumedMessages {
			if _, err := w.exec(`DELETE FROM inbox WHERE id = ? AND tenant = ? AND instance_id = ?`, mid, tenant, id); err != nil {
				return fmt.Errorf("delete consumed message %d: %w", mid, err)
			}
		}
	}
	for i := range p.Activities {
		a := &p.Activities[i]
		exec := a.Execution
		if exec == 0 {
			exec = execution
		}
		retry, err := jsonArg(a.Retry)
		if err != nil {
			return fmt.Errorf("activity seq %d: %w", a.TaskSeq, err)
		}
		if _, err := w.exec(`INSERT INTO activities
			(tenant, instance_id, execution, task_seq, name, input, attempt, retry, visible_at, created_at, trace)
			VALUES (?, ?, ?, ?, ?, ?, 1, ?, ?, ?, ?)`,
			tenant, id, exec, a.TaskSeq, a.Name, backend.RawArg(a.Input), retry, nowN, nowN, a.TraceParent); err != nil {
			if isConstraint(err) {
				return fmt.Errorf("activity seq %d of execution %d is already scheduled", a.TaskSeq, exec)
			}
			return fmt.Errorf("schedule activity seq %d: %w", a.TaskSeq, err)
		}
	}
	for _, t := range p.Timers {
		if err := insertMessage(w, tenant, id, &storage.Message{
			Kind: storage.MsgTimerFired, Execution: execution, TaskSeq: t.TaskSeq, VisibleAt: t.FireAt,
		}, nowN); err != nil {
			return err
		}
	}
	for _, seq := range p.CancelTimers {
		if _, err := w.exec(`DELETE FROM inbox WHERE tenant = ? AND instance_id = ? AND kind = ? AND execution = ? AND task_seq = ?`,
			tenant, id, string(storage.MsgTimerFired), execution, seq); err != nil {
			return fmt.Errorf("cancel timer seq %d: %w", seq, err)
		}
	}
	for _, seq := range p.CancelActivities {
		if _, err := w.exec(`DELETE FROM activities
			WHERE tenant = ? AND instance_id = ? AND execution = ? AND task_seq = ?
			  AND (lock_token IS NULL OR lease_until < ?)`, tenant, id, execution, seq, nowN); err != nil {
			return fmt.Errorf("cancel activity seq %d: %w", seq, err)
		}
		if _, err := w.exec(`UPDATE activities SET cancel_requested = 1
			WHERE tenant = ? AND instance_id = ? AND execution = ? AND task_seq = ?`, tenant, id, execution, seq); err != nil {
			return fmt.Errorf("cancel activity seq %d: %w", seq, err)
		}
	}
	for _, f := range p.Fates {
		if _, err := w.exec(`UPDATE events SET fate = ?, reason = ?, execution = ?, origin_execution = ?, wait_number = ?, updated_at = ?
			WHERE tenant = ? AND event_id = ? AND instance_id = ?`,
			string(f.Fate), string(f.Reason), f.Execution, f.OriginExecution, f.WaitNumber, nowN,
			tenant, f.EventID, id); err != nil {
			return fmt.Errorf("update fate of event %q: %w", f.EventID, err)
		}
	}

	// Correlated-lane waits: a turn that ends the execution registers none
	// (endInstance and continue-as-new delete all the markers), and every
	// wait of the execution is withdrawn.
	ending := status.Terminal() || p.ContinueAsNew != nil
	lt := &laneTx{w: w, tenant: tenant, id: id, now: nowN}
	if !ending {
		if err := commitCorrelated(lt, p, execution); err != nil {
			return err
		}
	} else if seen.Markers || seen.Deliveries {
		if err := backend.HandOnWithdrawn(lt, execution, nil, true, now); err != nil {
			return err
		}
	}
	if err := backend.HandOnReturned(lt, p.ReturnedCorrelated, ending, now); err != nil {
		return err
	}

	if status.Terminal() {
		d, err := endInstance(w, tenant, id, execution, nowN, seen.Tasks || len(p.Activities) > 0, seen.Markers)
		if err != nil {
			return err
		}
		*dropped = d
	}

	next, input := execution, any(nil)
	if can := p.ContinueAsNew; can != nil {
		next, input = execution+1, backend.RawArg(can.Input)
		if err := appendEncoded(w, tenant, id, next, can.StartEvents, docs.startEvents); err != nil {
			return fmt.Errorf("continue as new: %w", err)
		}
		// The old executions' timers and activity results can never be used.
		if _, err := w.exec(`DELETE FROM inbox WHERE tenant = ? AND instance_id = ? AND execution < ? AND kind IN (?, ?, ?)`,
			tenant, id, next, string(storage.MsgTimerFired), string(storage.MsgActivityCompleted), string(storage.MsgActivityFailed)); err != nil {
			return fmt.Errorf("continue as new: delete old timers: %w", err)
		}
		if _, err := w.exec(`DELETE FROM activities WHERE tenant = ? AND instance_id = ? AND execution < ?
			AND (lock_token IS NULL OR lease_until < ?)`, tenant, id, next, nowN); err != nil {
			return fmt.Errorf("continue as new: delete old activities: %w", err)
		}
		if _, err := w.exec(`UPDATE activities SET cancel_requested = 1 WHERE tenant = ? AND instance_id = ? AND execution < ?`,
			tenant, id, next); err != nil {
			return fmt.Errorf("continue as new: cancel old activities: %w", err)
		}
		if err := deleteMarkers(w, tenant, id); err != nil {
			return fmt.Errorf("continue as new: %w", err)
		}
		if err := insertMessage(w, tenant, id, &storage.Message{Kind: storage.MsgKick, Execution: next, VisibleAt: now}, nowN); err != nil {
			return fmt.Errorf("continue as new: %w", err)
		}
	}

	// Status, output, failure, the next execution, the lease released,
	// ready_at recomputed and the flags of the tasks and markers the commit
	// made (see claimFlags), in one statement.
	failure, err := failureArg(p.Failure)
	if err != nil {
		return err
	}
	var ready sql.NullInt64
	err = w.queryRow(`UPDATE instances SET status = ?3, output = ?4, failure = ?5, updated_at = ?6,
		execution = ?7, input = CASE WHEN ?8 THEN ?9 ELSE input END,
		lock_token = NULL, lease_until = 0, not_before = 0, blocked = '', ready_at = `+readyAt+`,
		has_tasks = has_tasks OR ?12, has_markers = has_markers OR ?13
		WHERE tenant = ?1 AND id = ?2 AND lock_token = ?10 AND execution = ?11 AND status IN `+nonTerminal+`
		RETURNING ready_at`,
		tenant, id, string(status), backend.RawArg(p.Output), failure, nowN,
		next, p.ContinueAsNew != nil, input, p.LockToken, execution,
		len(p.Activities) > 0, !ending && len(backend.Waits(p)) > 0).Scan(&ready)
	if errors.Is(err, sql.ErrNoRows) {
		return errNotFenced
	}
	if err != nil {
		return fmt.Errorf("update instance: %w", err)
	}
	if status.Terminal() && p.Family {
		if err := familyEnd(w, tenant, id, status, p.Output, p.Failure, nowN); err != nil {
			return err
		}
	}

	// Wake idle workers if the instance has work left (messages that arrived
	// during the turn, a kick) or the turn added work (activities, timers:
	// a new timer can be earlier than the NextWake a worker sleeps on).
	if len(p.Activities) > 0 {
		w.signalKinds(tenant, storage.WorkActivities)
	}
	if len(p.Timers) > 0 || (ready.Valid && ready.Int64 <= nowN) {
		w.signalKinds(tenant, storage.WorkTurns)
	}
	return nil
}

// TurnAbandon: see storage.TurnStore.
func (s *Store) TurnAbandon(ctx context.Context, p *storage.TurnAbandonParams) error {
	if p == nil {
		return backend.NilParams("sqlite: abandon turn")
	}
	if p.LockToken == "" {
		return fmt.Errorf("sqlite: abandon turn of %q: empty lock token: %w", p.InstanceID, heraldtype.ErrLeaseLost)
	}
	s.claims.Take(p.LockToken)
	err := s.writeUntilRoom(ctx, func(w *wtx) error {
		s.turnBack(p.LockToken)
		res, err := w.exec(`UPDATE instances SET lock_token = NULL, lease_until = 0, not_before = ?, blocked = ?
			WHERE tenant = ? AND id = ? AND lock_token = ?`, backend.Nanos(p.RetryAt), p.Blocked, p.Tenant, p.InstanceID, p.LockToken)
		if err != nil {
			return fmt.Errorf("release lease: %w", err)
		}
		if n, err := res.RowsAffected(); err != nil {
			return fmt.Errorf("release lease: %w", err)
		} else if n == 0 {
			return heraldtype.ErrLeaseLost
		}
		w.signalKinds(p.Tenant, storage.WorkTurns)
		return nil
	})
	if err != nil {
		return fmt.Errorf("sqlite: abandon turn of %q: %w", p.InstanceID, err)
	}
	return nil
}

// NextWake: see storage.Notifier. It leaves out no time another process
// on the file may need. An unleased instance's messages count by the
// earliest (its ready_at, which every writer of its inbox keeps); a leased
// instance's wait for the end of its lease. A lease that ran out never
// hides a later message: a claim leases only an instance whose ready_at
// has passed, and only a commit, which ends the lease, moves it later.
func (s *Store) NextWake(ctx context.Context, p *storage.NextWakeParams) (time.Time, bool, error) {
	if p == nil {
		return time.Time{}, false, backend.NilParams("sqlite: next wake")
	}
	if s.closed.Load() {
		return time.Time{}, false, heraldtype.ErrClosed
	}
	now := backend.NowOr(p.Now).UnixNano()
	if p.AllTenants {
		at, err := s.nextWakeAll(ctx, now)
		if err != nil || at == nil {
			return time.Time{}, false, wrapNextWake(s, err)
		}
		return backend.FromNanos(*at), true, nil
	}
	var at sql.NullInt64
	err := s.reader(nil).QueryRowContext(ctx, nextWakeSQL, p.Tenant, now).Scan(&at)
	if err != nil {
		return time.Time{}, false, fmt.Errorf("sqlite: next wake: %w", s.readErr(err))
	}
	if !at.Valid {
		return time.Time{}, false, nil
	}
	return backend.FromNanos(at.Int64), true, nil
}

// nextWakeSQL is NextWake for tenant ?1 at ?2.
const nextWakeSQL = `SELECT MIN(t) FROM (
		SELECT (SELECT ready_at FROM instances
		  WHERE tenant = ?1 AND lock_token IS NULL AND ready_at IS NOT NULL AND ready_at > ?2 AND status IN ` + nonTerminal + `
		  ORDER BY ready_at LIMIT 1) AS t
		UNION ALL
		SELECT MIN(visible_at) FROM activities
		  WHERE tenant = ?1 AND lock_token IS NULL AND visible_at > ?2
		UNION ALL
		SELECT MIN(i.not_before) FROM instances i
		  WHERE i.tenant = ?1 AND i.not_before > 0 AND i.not_before > ?2 AND i.status IN ` + nonTerminal + `
		  AND EXISTS (SELECT 1 FROM inbox m WHERE m.tenant = i.tenant AND m.instance_id = i.id)
		UNION ALL
		SELECT MIN(i.lease_until) FROM instances i
		  WHERE i.tenant = ?1 AND i.lock_token IS NOT NULL AND i.lease_until > ?2 AND i.status IN ` + nonTerminal + `
		  AND EXISTS (SELECT 1 FROM inbox m WHERE m.tenant = i.tenant AND m.instance_id = i.id)
		UNION ALL
		SELECT MIN(lease_until) FROM activities
		  WHERE tenant = ?1 AND lock_token IS NOT NULL AND lease_until > ?2 AND cancel_requested = 0
		UNION ALL
		SELECT MIN(due_at) FROM bus_routes WHERE tenant = ?1 AND status = 'queued' AND due_at > ?2
		UNION ALL
		SELECT MIN(due_at) FROM bus_routes WHERE tenant = ?1 AND status = 'retrying' AND due_at > ?2
		UNION ALL
		SELECT MIN(lease_until) FROM bus_routes WHERE tenant = ?1 AND status = 'running' AND lease_until > ?2
	)`
