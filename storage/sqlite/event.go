package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/heraldwf/herald/heraldtype"
	"github.com/heraldwf/herald/history"
	"github.com/heraldwf/herald/storage"
	"github.com/heraldwf/herald/storage/internal/backend"
)

// EventRaise: see storage.EventStore.
func (s *Store) EventRaise(ctx context.Context, p *storage.EventRaiseParams) (*storage.EventRaiseResult, error) {
	if p == nil {
		return nil, backend.NilParams("sqlite: raise event")
	}
	if err := backend.ValidateRaise(p); err != nil {
		return nil, fmt.Errorf("sqlite: raise event: %w", err)
	}
	start, err := backend.StartIfAbsent(p)
	if err != nil {
		return nil, fmt.Errorf("sqlite: raise event %q: start if absent: %w", p.EventID, err)
	}
	now := backend.NowOr(p.Now)
	var (
		res         *storage.EventRaiseResult
		handOff     *storage.Turn // the instance's row as the raise leased it (see raiseLease)
		handOffDocs [][][]byte    // its history documents
		prefix      string
		untilN      int64
	)
	if p.Claim != nil {
		prefix = backend.NewToken() + ":"
		untilN = now.Add(backend.Lease(p.Claim.Lease)).UnixNano()
	}
	req := &writeReq{ctx: ctx, done: make(chan error, 1)}
	var delivered chan struct{} // closed once OnClaimed has returned
	if p.Claim != nil && p.OnClaimed != nil && s.syncq != nil {
		// Hand the turn over at commit, before the flush (see linger.go),
		// decoded off the writer.
		onClaimed := p.OnClaimed
		req.committed = func(seq int64) {
			if handOff == nil {
				return
			}
			t, docs := handOff, handOffDocs
			handOff, handOffDocs = nil, nil
			s.handedOff(t.LockToken, seq)
			delivered = make(chan struct{})
			go func() {
				defer close(delivered)
				s.decodeClaimed([]*storage.Turn{t}, docs)
				onClaimed(t)
			}()
		}
	}
	req.fn = func(w *wtx) error {
		res, handOff, handOffDocs = nil, nil, nil
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
		if p.CheckDefinition {
			// In the raise's transaction, on the single writer: no
			// definition changes until it commits.
			var version int64
			if err := w.queryRow(definitionVersionQuery, p.Tenant, p.Name).Scan(&version); err != nil {
				return fmt.Errorf("check event definition: %w", err)
			}
			if version != p.DefinitionVersion {
				return fmt.Errorf("definition of %q is at version %d, not %d: %w",
					p.Name, version, p.DefinitionVersion, storage.ErrDefinitionChanged)
			}
		}

		// The instance's status, and its ready time lowered for the message
		// added below, in one statement; with a hand-off, its lease too.
		started := false
		var status string
		var alone bool              // the inbox held nothing before this raise
		histEnd := -1               // the Seq that ends the instance's history (raiseLease)
		var seen backend.ClaimState // what the hand-off saw of the instance
		if p.Claim != nil {
			handOff, alone, seen, histEnd, err = raiseLease(w, p, now, prefix, untilN)
			if handOff != nil {
				status = string(handOff.Instance.Status)
			}
		} else {
			err = w.queryRow(`UPDATE instances SET ready_at = MIN(COALESCE(ready_at, ?3), ?3)
				WHERE tenant = ?1 AND id = ?2 RETURNING status`, p.Tenant, p.InstanceID, now.UnixNano()).Scan(&status)
		}
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
		msg := backend.RaisedMessage(p, now)
		if msg.ID, err = insertExpiringMessage(w, p.Tenant, p.InstanceID, &msg, expiresAt, now.UnixNano()); err != nil {
			return err
		}
		if started {
			if err := lowerReady(w, p.Tenant, p.InstanceID, now.UnixNano()); err != nil {
				return err
			}
		}
		if handOff != nil && handOff.LockToken == "" {
			handOff = nil // the instance is leased or held back
		}
		if handOff != nil {
			// The turn is read in the raise's own transaction, on the
			// writer: a read-pool round trip after the commit would cost
			// the hand-off more than the few rows read here cost the
			// writer (hand-offs happen only while the runtime is half idle).
			if alone {
				// The turn's one message is the one just inserted: it is
				// not read back, but given as a read would return it.
				var docs [][]byte
				if docs, err = s.loadOneHistory(ctx, w, handOff, p.Tenant, histEnd); err != nil {
					return fmt.Errorf("load the handed-off turn: %w", err)
				}
				handOffDocs = [][][]byte{docs}
				handOff.Messages = []storage.Message{backend.StoredMessage(&msg, now)}
			} else {
				turns := []*storage.Turn{handOff}
				handOffDocs, err = s.loadClaimed(ctx, w, turns, p.Tenant, untilN, prefix, now.UnixNano(), backend.MaxMessages(p.Claim.MaxMessages))
				if err != nil {
					return fmt.Errorf("load the handed-off turn: %w", err)
				}
			}
			s.claims.Note(handOff, backend.MaxMessages(p.Claim.MaxMessages), seen)
		}
		if handOff == nil {
			w.signalKinds(p.Tenant, storage.WorkTurns)
		}
		res = &storage.EventRaiseResult{EventID: p.EventID, ReceivedAt: now, Started: started}
		return nil
	}
	err = s.submit(ctx, req)
	if delivered != nil {
		<-delivered // OnClaimed is called before EventRaise returns
	}
	if err != nil {
		return nil, fmt.Errorf("sqlite: raise event %q: %w", p.EventID, err)
	}
	if handOff != nil {
		s.decodeClaimed([]*storage.Turn{handOff}, handOffDocs)
		res.Turn = handOff
	}
	return res, nil
}

// raiseLease is the status update of a raise that hands off (see
// EventRaiseParams.Claim): it lowers the instance's ready time and, unless
// the instance is terminal, leased (with a lease that has not run out) or
// held back, leases it with token prefix+rid until untilN, as TurnClaim
// would. It returns the instance's row as a turn whose LockToken is empty
// when it did not lease it, whether the instance's inbox was empty
// (before the raise adds its message), whether the instance may have
// correlation markers and activity tasks (claimFlags), and the Seq that
// ends its current execution's history (-1 if it has none), which tells
// whether the history cache holds all of it (on the single writer nothing
// comes between this statement and the reads after it).
func raiseLease(w *wtx, p *storage.EventRaiseParams, now time.Time, prefix string, untilN int64) (*storage.Turn, bool, backend.ClaimState, int, error) {
	const take = `(lock_token IS NULL OR lease_until < ?3) AND not_before <= ?3 AND status IN ` + nonTerminal
	var (
		row            backend.InstanceRow
		r              instanceRow
		claimed, alone bool
		seen           backend.ClaimState
		end            sql.NullInt64
	)
	err := w.queryRow(`UPDATE instances SET ready_at = MIN(COALESCE(ready_at, ?3), ?3),
			lock_token = CASE WHEN `+take+` THEN ?4 || rid ELSE lock_token END,
			lease_until = CASE WHEN `+take+` THEN ?5 ELSE lease_until END,
			not_before = CASE WHEN `+take+` THEN 0 ELSE not_before END
		WHERE tenant = ?1 AND id = ?2
		RETURNING `+instanceCols+`, lease_until = ?5 AND substr(lock_token, 1, length(?4)) = ?4,
			NOT EXISTS (SELECT 1 FROM inbox WHERE tenant = ?1 AND instance_id = ?2), `+claimFlags+`,
			(SELECT MAX(seq) FROM history WHERE tenant = ?1 AND instance_id = ?2 AND execution = instances.execution)`,
		p.Tenant, p.InstanceID, now.UnixNano(), prefix, untilN).
		Scan(append(row.Dest(), &r.lockToken, &r.leaseUntil, &claimed, &alone, &seen.Markers, &seen.Tasks, &end)...)
	if err != nil {
		return nil, false, seen, -1, err
	}
	t := &storage.Turn{LeaseUntil: backend.FromNanos(untilN)}
	t.Instance, t.Err = row.Instance()
	if t.Err != nil {
		t.Err = fmt.Errorf("instance %q: %w", t.Instance.ID, t.Err)
	}
	if claimed {
		t.LockToken = r.lockToken.String
	}
	if !end.Valid {
		return t, alone, seen, -1, nil
	}
	return t, alone, seen, int(end.Int64), nil
}

// EventGet: see storage.EventStore.
func (s *Store) EventGet(ctx context.Context, p *storage.EventGetParams) (_ *heraldtype.EventRecord, err error) {
	defer s.afterRead(ctx, &err)
	if p == nil {
		return nil, backend.NilParams("sqlite: get event")
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
		return nil, backend.NilParams("sqlite: list events")
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
		WHERE `+strings.Join(where, " AND ")+` ORDER BY rid LIMIT +?`, args...)
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
