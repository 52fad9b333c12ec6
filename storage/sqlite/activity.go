package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/heraldwf/herald/heraldtype"
	"github.com/heraldwf/herald/storage"
	"github.com/heraldwf/herald/storage/internal/backend"
)

const activityCols = `tenant, instance_id, execution, task_seq, name, input, attempt, retry, lock_token, lease_until, cancel_requested, trace`

func scanActivity(sc scanner) (*storage.ActivityTask, error) {
	var (
		a            storage.ActivityTask
		input, retry []byte
		token        sql.NullString
		leaseUntil   int64
	)
	if err := sc.Scan(&a.Tenant, &a.InstanceID, &a.Execution, &a.TaskSeq, &a.Name, &input, &a.Attempt,
		&retry, &token, &leaseUntil, &a.CancelRequested, &a.TraceParent); err != nil {
		return nil, err
	}
	a.Input = backend.RawOf(input)
	if len(retry) > 0 {
		if err := json.Unmarshal(retry, &a.Retry); err != nil {
			return nil, fmt.Errorf("decode retry policy: %w", err)
		}
	}
	a.LockToken = token.String
	a.LeaseUntil = backend.FromNanos(leaseUntil)
	return &a, nil
}

// ActivityClaim: see storage.ActivityStore. The single writer serialises
// claims, so none can overlap.
func (s *Store) ActivityClaim(ctx context.Context, p *storage.ActivityClaimParams) ([]*storage.ActivityTask, error) {
	if p == nil {
		return nil, backend.NilParams("sqlite: claim activities")
	}
	now := backend.NowOr(p.Now)
	max := backend.ClaimMax(p.Max)
	lease := backend.Lease(p.Lease)
	leaseUntil := now.Add(lease).UnixNano()
	var tasks []*storage.ActivityTask
	err := s.write(ctx, func(w *wtx) error {
		tasks = nil
		nowN := now.UnixNano()
		// A task is cancel_requested only while leased (an unleased one is
		// deleted instead).
		if _, err := w.exec(`DELETE FROM activities WHERE tenant = ? AND lock_token IS NOT NULL AND lease_until < ?
			AND cancel_requested = 1`, p.Tenant, nowN); err != nil {
			return fmt.Errorf("delete cancelled tasks: %w", err)
		}
		rows, err := w.query(`SELECT instance_id, execution, task_seq, visible_at, r FROM (
			SELECT * FROM (SELECT instance_id, execution, task_seq, visible_at, rowid AS r FROM activities
				WHERE tenant = ?1 AND lock_token IS NULL AND visible_at <= ?2
				ORDER BY visible_at, rowid LIMIT +?3)
			UNION ALL
			SELECT * FROM (SELECT instance_id, execution, task_seq, visible_at, rowid AS r FROM activities
				WHERE tenant = ?1 AND lock_token IS NOT NULL AND lease_until < ?2 AND visible_at <= ?2
				ORDER BY visible_at, rowid LIMIT +?3)
		) ORDER BY visible_at, r LIMIT +?3`, p.Tenant, nowN, max)
		if err != nil {
			return fmt.Errorf("find tasks: %w", err)
		}
		type key struct {
			id        string
			exec, seq int
		}
		var keys []key
		for rows.Next() {
			var (
				k          key
				visible, r int64
			)
			if err := rows.Scan(&k.id, &k.exec, &k.seq, &visible, &r); err != nil {
				rows.Close()
				return fmt.Errorf("find tasks: %w", err)
			}
			keys = append(keys, k)
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return fmt.Errorf("find tasks: %w", err)
		}
		for _, k := range keys {
			// Taking over an expired lease means the attempt that held it was
			// lost (its worker died): that counts as an attempt.
			t, err := scanActivity(w.queryRow(`UPDATE activities SET lock_token = ?, lease_until = ?,
				attempt = attempt + (CASE WHEN lock_token IS NULL THEN 0 ELSE 1 END)
				WHERE tenant = ? AND instance_id = ? AND execution = ? AND task_seq = ?
				RETURNING `+activityCols, backend.NewToken(), leaseUntil, p.Tenant, k.id, k.exec, k.seq))
			if err != nil {
				return fmt.Errorf("lease task %s/%d/%d: %w", k.id, k.exec, k.seq, err)
			}
			tasks = append(tasks, t)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("sqlite: claim activities: %w", err)
	}
	return tasks, nil
}

// taskLease checks that token owns the task and returns its
// cancel_requested flag, name and trace; heraldtype.ErrLeaseLost if the
// task is gone or leased by another token.
func taskLease(w *wtx, tenant, id string, execution, seq int, token string) (cancel bool, name, trace string, err error) {
	var cur sql.NullString
	err = w.queryRow(`SELECT lock_token, cancel_requested, name, trace FROM activities
		WHERE tenant = ? AND instance_id = ? AND execution = ? AND task_seq = ?`,
		tenant, id, execution, seq).Scan(&cur, &cancel, &name, &trace)
	if errors.Is(err, sql.ErrNoRows) {
		return false, "", "", fmt.Errorf("task is gone: %w", heraldtype.ErrLeaseLost)
	}
	if err != nil {
		return false, "", "", fmt.Errorf("load task: %w", err)
	}
	if token == "" || !cur.Valid || cur.String != token {
		return false, "", "", heraldtype.ErrLeaseLost
	}
	return cancel, name, trace, nil
}

func taskName(p string, execution, seq int) string {
	return fmt.Sprintf("%s/%d/%d", p, execution, seq)
}

// ActivityComplete: see storage.ActivityStore.
func (s *Store) ActivityComplete(ctx context.Context, p *storage.ActivityCompleteParams) error {
	if p == nil {
		return backend.NilParams("sqlite: complete activity")
	}
	now := backend.NowOr(p.Now)
	err := s.writeUntilRoom(ctx, func(w *wtx) error {
		cancel, name, trace, err := taskLease(w, p.Tenant, p.InstanceID, p.Execution, p.TaskSeq, p.LockToken)
		if err != nil {
			return err
		}
		if _, err := w.exec(`DELETE FROM activities WHERE tenant = ? AND instance_id = ? AND execution = ? AND task_seq = ?`,
			p.Tenant, p.InstanceID, p.Execution, p.TaskSeq); err != nil {
			return fmt.Errorf("delete task: %w", err)
		}
		if cancel {
			return nil
		}
		var (
			status    string
			execution int
		)
		err = w.queryRow(`SELECT status, execution FROM instances WHERE tenant = ? AND id = ?`,
			p.Tenant, p.InstanceID).Scan(&status, &execution)
		if errors.Is(err, sql.ErrNoRows) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("load instance: %w", err)
		}
		if heraldtype.Status(status).Terminal() || execution != p.Execution {
			return nil
		}
		m := &storage.Message{
			Kind:        storage.MsgActivityCompleted,
			Execution:   p.Execution,
			TaskSeq:     p.TaskSeq,
			Name:        name,
			Result:      p.Result,
			TraceParent: trace,
			VisibleAt:   now,
		}
		if p.Failure != nil {
			m.Kind = storage.MsgActivityFailed
			m.Failure = p.Failure
		}
		if err := insertMessage(w, p.Tenant, p.InstanceID, m, now.UnixNano()); err != nil {
			return err
		}
		if err := lowerReady(w, p.Tenant, p.InstanceID, now.UnixNano()); err != nil {
			return err
		}
		w.signalKinds(p.Tenant, storage.WorkTurns)
		return nil
	})
	if err != nil {
		return fmt.Errorf("sqlite: complete activity %s: %w", taskName(p.InstanceID, p.Execution, p.TaskSeq), err)
	}
	return nil
}

// ActivityRetry: see storage.ActivityStore.
func (s *Store) ActivityRetry(ctx context.Context, p *storage.ActivityRetryParams) error {
	if p == nil {
		return backend.NilParams("sqlite: retry activity")
	}
	err := s.writeUntilRoom(ctx, func(w *wtx) error {
		cancel, _, _, err := taskLease(w, p.Tenant, p.InstanceID, p.Execution, p.TaskSeq, p.LockToken)
		if err != nil {
			return err
		}
		if cancel {
			if _, err := w.exec(`DELETE FROM activities WHERE tenant = ? AND instance_id = ? AND execution = ? AND task_seq = ?`,
				p.Tenant, p.InstanceID, p.Execution, p.TaskSeq); err != nil {
				return fmt.Errorf("delete cancelled task: %w", err)
			}
			return nil
		}
		if _, err := w.exec(`UPDATE activities SET attempt = attempt + CASE WHEN ? = '' THEN 1 ELSE 0 END, visible_at = ?, lock_token = NULL,
			lease_until = 0, blocked = ? WHERE tenant = ? AND instance_id = ? AND execution = ? AND task_seq = ?`,
			p.Blocked, backend.Nanos(p.RetryAt), p.Blocked, p.Tenant, p.InstanceID, p.Execution, p.TaskSeq); err != nil {
			return fmt.Errorf("reschedule task: %w", err)
		}
		w.signalKinds(p.Tenant, storage.WorkActivities)
		return nil
	})
	if err != nil {
		return fmt.Errorf("sqlite: retry activity %s: %w", taskName(p.InstanceID, p.Execution, p.TaskSeq), err)
	}
	return nil
}

// ActivityHeartbeat: see storage.ActivityStore.
func (s *Store) ActivityHeartbeat(ctx context.Context, p *storage.ActivityHeartbeatParams) (bool, error) {
	if p == nil {
		return false, backend.NilParams("sqlite: activity heartbeat")
	}
	var cancelRequested bool
	err := s.write(ctx, func(w *wtx) error {
		cancel, _, _, err := taskLease(w, p.Tenant, p.InstanceID, p.Execution, p.TaskSeq, p.LockToken)
		if err != nil {
			return err
		}
		cancelRequested = cancel
		if p.LeaseUntil.IsZero() {
			return nil
		}
		if _, err := w.exec(`UPDATE activities SET lease_until = ?
			WHERE tenant = ? AND instance_id = ? AND execution = ? AND task_seq = ?`,
			p.LeaseUntil.UnixNano(), p.Tenant, p.InstanceID, p.Execution, p.TaskSeq); err != nil {
			return fmt.Errorf("extend lease: %w", err)
		}
		return nil
	})
	if err != nil {
		return false, fmt.Errorf("sqlite: activity heartbeat %s: %w", taskName(p.InstanceID, p.Execution, p.TaskSeq), err)
	}
	return cancelRequested, nil
}
