package postgres

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/heraldwf/herald/heraldtype"
	"github.com/heraldwf/herald/storage"
	"github.com/heraldwf/herald/storage/internal/backend"
)

const activityColsA = `a.tenant, a.instance_id, a.execution, a.task_seq, a.name, a.input, a.attempt, a.retry, a.lock_token, a.lease_until, a.cancel_requested, a.trace`

// scanActivity scans activityColsA, then extra.
func scanActivity(row pgx.Row, extra ...any) (*storage.ActivityTask, error) {
	var (
		a            storage.ActivityTask
		input, retry []byte
		token        *string
		leaseUntil   int64
	)
	dest := append([]any{&a.Tenant, &a.InstanceID, &a.Execution, &a.TaskSeq, &a.Name, &input, &a.Attempt,
		&retry, &token, &leaseUntil, &a.CancelRequested, &a.TraceParent}, extra...)
	if err := row.Scan(dest...); err != nil {
		return nil, err
	}
	a.Input = backend.RawOf(input)
	if len(retry) > 0 {
		if err := json.Unmarshal(retry, &a.Retry); err != nil {
			return nil, fmt.Errorf("decode retry policy: %w", err)
		}
	}
	if token != nil {
		a.LockToken = *token
	}
	a.LeaseUntil = backend.FromNanos(leaseUntil)
	return &a, nil
}

// claimActivitiesSQL leases up to $3 tasks of tenant $1 visible at $2 until
// $4, as claimTurnsSQL does for instances. Taking over a lease that ran out
// counts the lost attempt. It also deletes the cancelled tasks whose lease
// ran out (their workers are gone; nobody wants them).
const claimActivitiesSQL = `WITH abandoned AS (
	DELETE FROM activities WHERE ctid = ANY(ARRAY(
		SELECT ctid FROM activities
		WHERE tenant = $1 AND lock_token IS NOT NULL AND lease_until < $2 AND cancel_requested
		FOR UPDATE SKIP LOCKED))
), ready AS MATERIALIZED (
	SELECT ctid, visible_at, rid FROM activities
	WHERE tenant = $1 AND lock_token IS NULL AND visible_at <= $2
	ORDER BY visible_at, rid
	LIMIT $3
	FOR UPDATE SKIP LOCKED
), expired AS MATERIALIZED (
	SELECT ctid, visible_at, rid FROM activities
	WHERE tenant = $1 AND lock_token IS NOT NULL AND lease_until < $2 AND visible_at <= $2 AND NOT cancel_requested
	ORDER BY lease_until
	LIMIT $3
	FOR UPDATE SKIP LOCKED
), pick AS MATERIALIZED (
	SELECT ctid FROM (SELECT * FROM ready UNION ALL SELECT * FROM expired) u
	ORDER BY visible_at, rid
	LIMIT $3
)
UPDATE activities a SET lock_token = replace(gen_random_uuid()::text, '-', ''), lease_until = $4,
	attempt = a.attempt + CASE WHEN a.lock_token IS NULL THEN 0 ELSE 1 END
WHERE a.ctid = ANY(ARRAY(SELECT ctid FROM pick))
RETURNING ` + activityColsA + `, a.visible_at, a.rid`

// ActivityClaim: see storage.ActivityStore. One statement; tasks other
// transactions hold at that moment are skipped (SKIP LOCKED), so
// concurrent claims never wait for each other and never overlap.
func (s *Store) ActivityClaim(ctx context.Context, p *storage.ActivityClaimParams) ([]*storage.ActivityTask, error) {
	if p == nil {
		return nil, backend.NilParams("postgres: claim activities")
	}
	now := backend.NowOr(p.Now)
	max := backend.ClaimMax(p.Max)
	lease := backend.Lease(p.Lease)
	leaseUntil := now.Add(lease).UnixNano()
	type claimed struct {
		task         *storage.ActivityTask
		visible, rid int64
	}
	var tasks []*storage.ActivityTask
	err := s.do(ctx, func(ctx context.Context) error {
		var (
			cs []claimed
			b  batch
		)
		b.exec("", claimSettings)
		b.query("lease tasks", func(rows pgx.Rows) error {
			for rows.Next() {
				var c claimed
				t, err := scanActivity(rows, &c.visible, &c.rid)
				if err != nil {
					return err
				}
				c.task = t
				cs = append(cs, c)
			}
			return nil
		}, claimActivitiesSQL, p.Tenant, now.UnixNano(), max, leaseUntil)
		if err := b.send(ctx, s.pool); err != nil {
			return err
		}
		slices.SortFunc(cs, func(a, b claimed) int {
			if a.visible != b.visible {
				return cmp.Compare(a.visible, b.visible)
			}
			return cmp.Compare(a.rid, b.rid)
		})
		tasks = nil
		for _, c := range cs {
			tasks = append(tasks, c.task)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("postgres: claim activities: %w", err)
	}
	return tasks, nil
}

func taskName(id string, execution, seq int) string {
	return fmt.Sprintf("%s/%d/%d", id, execution, seq)
}

// completeSQL finishes a task for $1 tenant, $2 instance, $3 execution, $4
// task seq, $5 lock token, $6 message kind, $7 result, $8 failure, $9 now:
// the task is deleted and, unless it was cancelled or the instance is gone,
// terminal or on another execution, the result message (with the task's
// trace) is added and ready_at lowered. The caller has locked the instance
// row.
const completeSQL = `WITH task AS (
	DELETE FROM activities
	WHERE tenant = $1 AND instance_id = $2 AND execution = $3 AND task_seq = $4 AND lock_token = $5
	RETURNING name, cancel_requested, trace
), msg AS (
	INSERT INTO inbox (tenant, instance_id, kind, execution, task_seq, name, result, failure, visible_at, created_at, trace)
	SELECT $1, $2, $6, $3, $4, task.name, $7, $8, $9, $9, task.trace FROM task
	WHERE NOT task.cancel_requested
	  AND EXISTS (SELECT 1 FROM instances i WHERE i.tenant = $1 AND i.id = $2
		AND i.status IN ` + nonTerminal + ` AND i.execution = $3)
	RETURNING id
), ready AS (
	UPDATE instances SET ready_at = LEAST(COALESCE(ready_at, $9), $9)
	WHERE tenant = $1 AND id = $2 AND EXISTS (SELECT 1 FROM msg)
)
SELECT EXISTS (SELECT 1 FROM task), EXISTS (SELECT 1 FROM msg)`

// ActivityComplete: see storage.ActivityStore. One transaction, fenced by
// the task row's lock token.
func (s *Store) ActivityComplete(ctx context.Context, p *storage.ActivityCompleteParams) error {
	if p == nil {
		return backend.NilParams("postgres: complete activity")
	}
	now := backend.NowOr(p.Now).UnixNano()
	kind := storage.MsgActivityCompleted
	if p.Failure != nil {
		kind = storage.MsgActivityFailed
	}
	failure, err := failureArg(p.Failure)
	if err != nil {
		return fmt.Errorf("postgres: complete activity %s: %w", taskName(p.InstanceID, p.Execution, p.TaskSeq), err)
	}
	var found, delivered bool
	err = s.doUntilRoom(ctx, func(ctx context.Context) error {
		var b batch
		// The instance row first, as every writer locks it.
		b.exec("lock instance", `SELECT 1 FROM instances WHERE tenant = $1 AND id = $2 FOR NO KEY UPDATE`, p.Tenant, p.InstanceID)
		b.queryRow("complete task", func(row pgx.Row) error {
			return row.Scan(&found, &delivered)
		}, completeSQL, p.Tenant, p.InstanceID, p.Execution, p.TaskSeq, p.LockToken,
			string(kind), backend.RawArg(p.Result), failure, now)
		if err := b.send(ctx, s.pool); err != nil {
			return err
		}
		if !found {
			return heraldtype.ErrLeaseLost
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("postgres: complete activity %s: %w", taskName(p.InstanceID, p.Execution, p.TaskSeq), err)
	}
	if delivered {
		s.signal(p.Tenant, storage.WorkTurns)
	}
	return nil
}

// ActivityRetry: see storage.ActivityStore.
func (s *Store) ActivityRetry(ctx context.Context, p *storage.ActivityRetryParams) error {
	if p == nil {
		return backend.NilParams("postgres: retry activity")
	}
	var retried, deleted int64
	err := s.doUntilRoom(ctx, func(ctx context.Context) error {
		var b batch
		b.execTag("reschedule task", func(ct pgconn.CommandTag) error {
			retried = ct.RowsAffected()
			return nil
		}, `UPDATE activities SET attempt = attempt + CASE WHEN $7 = '' THEN 1 ELSE 0 END, visible_at = $6, lock_token = NULL, lease_until = 0, blocked = $7
			WHERE tenant = $1 AND instance_id = $2 AND execution = $3 AND task_seq = $4 AND lock_token = $5
			  AND NOT cancel_requested`,
			p.Tenant, p.InstanceID, p.Execution, p.TaskSeq, p.LockToken, backend.Nanos(p.RetryAt), p.Blocked)
		b.execTag("delete cancelled task", func(ct pgconn.CommandTag) error {
			deleted = ct.RowsAffected()
			return nil
		}, `DELETE FROM activities
			WHERE tenant = $1 AND instance_id = $2 AND execution = $3 AND task_seq = $4 AND lock_token = $5
			  AND cancel_requested`,
			p.Tenant, p.InstanceID, p.Execution, p.TaskSeq, p.LockToken)
		if err := b.send(ctx, s.pool); err != nil {
			return err
		}
		if retried+deleted == 0 {
			return heraldtype.ErrLeaseLost
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("postgres: retry activity %s: %w", taskName(p.InstanceID, p.Execution, p.TaskSeq), err)
	}
	if retried > 0 {
		s.signal(p.Tenant, storage.WorkActivities)
	}
	return nil
}

// ActivityHeartbeat: see storage.ActivityStore.
func (s *Store) ActivityHeartbeat(ctx context.Context, p *storage.ActivityHeartbeatParams) (bool, error) {
	if p == nil {
		return false, backend.NilParams("postgres: activity heartbeat")
	}
	q := `UPDATE activities SET lease_until = $6
		WHERE tenant = $1 AND instance_id = $2 AND execution = $3 AND task_seq = $4 AND lock_token = $5
		RETURNING cancel_requested`
	args := []any{p.Tenant, p.InstanceID, p.Execution, p.TaskSeq, p.LockToken, backend.Nanos(p.LeaseUntil)}
	if p.LeaseUntil.IsZero() {
		q = `SELECT cancel_requested FROM activities
			WHERE tenant = $1 AND instance_id = $2 AND execution = $3 AND task_seq = $4 AND lock_token = $5`
		args = args[:5]
	}
	var cancel bool
	err := s.do(ctx, func(ctx context.Context) error {
		err := s.pool.QueryRow(ctx, q, args...).Scan(&cancel)
		if errors.Is(err, pgx.ErrNoRows) {
			return heraldtype.ErrLeaseLost
		}
		return err
	})
	if err != nil {
		return false, fmt.Errorf("postgres: activity heartbeat %s: %w", taskName(p.InstanceID, p.Execution, p.TaskSeq), err)
	}
	return cancel, nil
}
