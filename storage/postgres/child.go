package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/heraldwf/herald/heraldtype"
	"github.com/heraldwf/herald/history"
	"github.com/heraldwf/herald/storage"
	"github.com/heraldwf/herald/storage/internal/backend"
)

// Child workflows and cancellation (storage.ChildStart, InstanceCancel).
// Each rule is one statement queued in a commit's batch: it reads nothing
// into Go, so a commit that starts, cancels or ends children still costs
// the round trips it did.

// startChildSQL creates the child $2 of parent $8 (execution $9, seq $10,
// close policy $11) as createInstanceSQL creates an instance; if $2 is
// taken it creates nothing and adds a child_failed message ($12, the
// failure) to the parent's inbox instead. The parent is marked
// has_children. $1 tenant, $3 workflow, $4 input, $5 now, $6 the
// ExecutionStarted JSON.
const startChildSQL = `WITH inst AS (
	INSERT INTO instances (tenant, id, workflow, status, execution, input, created_at, updated_at, ready_at,
		parent_id, parent_execution, parent_seq, parent_close, history_seq)
	VALUES ($1, $2, $3, 'pending', 1, $4, $5, $5, LEAST($5, ` + readyAtSQL + `), $8, $9, $10, $11, 1)
	ON CONFLICT (tenant, id) DO NOTHING
	RETURNING id
), started AS (
	INSERT INTO history (tenant, instance_id, execution, seq, kind, event)
	SELECT $1, $2, 1, 1, 'ExecutionStarted', $6 FROM inst
), kick AS (
	INSERT INTO inbox (tenant, instance_id, kind, execution, visible_at, created_at, trace)
	SELECT $1, $2, 'kick', 1, $5, $5, $7 FROM inst
), keep AS (
	UPDATE inbox SET expires_at = 0 WHERE tenant = $1 AND instance_id = $2 AND expires_at > 0
	  AND EXISTS (SELECT 1 FROM inst)
), taken AS (
	INSERT INTO inbox (tenant, instance_id, kind, execution, task_seq, name, failure, visible_at, created_at)
	SELECT $1, $8, 'child_failed', $9, $10, $2, $12, $5, $5 WHERE NOT EXISTS (SELECT 1 FROM inst)
)
UPDATE instances SET has_children = true WHERE tenant = $1 AND id = $8`

// queueChildLocks takes the advisory locks of the children's ids (as
// InstanceCreate does), before the commit's fence.
func (s *Store) queueChildLocks(b *batch, tenant string, children []storage.ChildStart) {
	for _, c := range children {
		b.exec("lock child id", `SELECT pg_advisory_xact_lock($1)`, s.instanceLockKey(tenant, c.ID))
	}
}

// queueStartChildren queues startChildSQL for each child of parent.
func queueStartChildren(b *batch, tenant, parent string, execution int, children []storage.ChildStart, now time.Time) error {
	for _, c := range children {
		if err := backend.ValidateCreate(&storage.InstanceCreateParams{Tenant: tenant, ID: c.ID, Workflow: c.Workflow}); err != nil {
			return fmt.Errorf("start child %q: %w", c.ID, err)
		}
		started, err := jsonArg(history.Event{Seq: 1, Time: now, Kind: history.ExecutionStarted, Workflow: c.Workflow,
			Input: backend.RawOf(c.Input), Execution: 1})
		if err != nil {
			return fmt.Errorf("start child %q: %w", c.ID, err)
		}
		taken, err := failureArg(backend.ChildIDTaken(c.ID))
		if err != nil {
			return err
		}
		b.exec("start child", startChildSQL, tenant, c.ID, c.Workflow, backend.RawArg(c.Input), now.UnixNano(), started, "",
			parent, execution, c.TaskSeq, string(backend.ClosePolicy(c.ClosePolicy)), taken)
	}
	return nil
}

// requestCancelSQL asks instance $2 to cancel (reason $4, at $5) unless it
// has ended or was asked already; with $3 <> ” only if it is a child of
// $3. It returns the instance's status and whether it had been asked, or
// no row if there is no such instance.
const requestCancelSQL = `WITH target AS (
	SELECT id, status, cancel_requested FROM instances
	WHERE tenant = $1 AND id = $2 AND ($3 = '' OR parent_id = $3)
	FOR NO KEY UPDATE
), asked AS (
	UPDATE instances i SET cancel_requested = true, ready_at = LEAST(COALESCE(i.ready_at, $5), $5)
	FROM target t
	WHERE i.tenant = $1 AND i.id = t.id AND t.status IN ` + nonTerminal + ` AND NOT t.cancel_requested
	RETURNING i.id
), msg AS (
	INSERT INTO inbox (tenant, instance_id, kind, name, visible_at, created_at)
	SELECT $1, id, 'cancel', $4, $5, $5 FROM asked
)
SELECT status, cancel_requested FROM target`

// queueCancelChildren asks the children ids of parent to cancel.
func queueCancelChildren(b *batch, tenant, parent string, ids []string, nowN int64) {
	for _, id := range ids {
		b.exec("cancel child", requestCancelSQL, tenant, id, parent, backend.ParentCanceledReason(parent), nowN)
	}
}

// tellParentSQL adds the end of child $2 (message kind $3, result $4,
// failure $5, at $6) to its parent's inbox, if the parent is pending or
// running the execution that started the child.
const tellParentSQL = `WITH c AS (
	SELECT parent_id, parent_execution, parent_seq FROM instances WHERE tenant = $1 AND id = $2 AND parent_id <> ''
), p AS (
	SELECT i.id FROM instances i JOIN c ON i.tenant = $1 AND i.id = c.parent_id
	WHERE i.status IN ` + nonTerminal + ` AND i.execution = c.parent_execution
	FOR NO KEY UPDATE OF i
), msg AS (
	INSERT INTO inbox (tenant, instance_id, kind, execution, task_seq, name, result, failure, visible_at, created_at)
	SELECT $1, c.parent_id, $3, c.parent_execution, c.parent_seq, $2, $4, $5, $6, $6 FROM c JOIN p ON p.id = c.parent_id
	RETURNING instance_id
)
UPDATE instances SET ready_at = LEAST(COALESCE(ready_at, $6), $6)
WHERE tenant = $1 AND id IN (SELECT instance_id FROM msg)`

// closeChildrenSQL applies the close policy of every pending or running
// child of $2 (reason $3, at $4): a terminate message, or a cancel request
// unless one was made.
const closeChildrenSQL = `WITH kids AS (
	SELECT id, parent_close, cancel_requested FROM instances
	WHERE tenant = $1 AND parent_id = $2 AND parent_id <> '' AND status IN ` + nonTerminal + `
	  AND parent_close <> 'abandon'
	ORDER BY id
	FOR NO KEY UPDATE
), msg AS (
	INSERT INTO inbox (tenant, instance_id, kind, name, visible_at, created_at)
	SELECT $1, id, CASE WHEN parent_close = 'request_cancel' THEN 'cancel' ELSE 'terminate' END, $3, $4, $4
	FROM kids WHERE parent_close <> 'request_cancel' OR NOT cancel_requested
	RETURNING instance_id, kind
)
UPDATE instances i SET ready_at = LEAST(COALESCE(i.ready_at, $4), $4),
	cancel_requested = i.cancel_requested OR msg.kind = 'cancel'
FROM msg WHERE i.tenant = $1 AND i.id = msg.instance_id`

// queueFamilyEnd queues the family rules (storage.ChildStart) for instance
// id, which ends with status, output and failure.
func queueFamilyEnd(b *batch, tenant, id string, status heraldtype.Status, output []byte, failure *history.Failure, now time.Time) error {
	m := backend.ChildEndMessage(id, 0, 0, status, output, failure, now)
	f, err := failureArg(m.Failure)
	if err != nil {
		return err
	}
	nowN := now.UnixNano()
	b.exec("tell parent", tellParentSQL, tenant, id, string(m.Kind), backend.RawArg(m.Result), f, nowN)
	b.exec("close children", closeChildrenSQL, tenant, id, backend.ParentEndedReason(id, status), nowN)
	return nil
}

// InstanceCancel: see storage.InstanceStore.
func (s *Store) InstanceCancel(ctx context.Context, p *storage.InstanceCancelParams) (bool, error) {
	if p == nil {
		return false, backend.NilParams("postgres: cancel instance")
	}
	nowN := backend.NowOr(p.Now).UnixNano()
	var (
		status  string
		already bool
	)
	err := s.do(ctx, func(ctx context.Context) error {
		err := s.pool.QueryRow(ctx, requestCancelSQL, p.Tenant, p.ID, "", p.Reason, nowN).Scan(&status, &already)
		if errors.Is(err, pgx.ErrNoRows) {
			return fmt.Errorf("instance %q: %w", p.ID, heraldtype.ErrNotFound)
		}
		return err
	})
	if err != nil {
		return false, fmt.Errorf("postgres: cancel instance %q: %w", p.ID, err)
	}
	if heraldtype.Status(status).Terminal() {
		return false, fmt.Errorf("postgres: cancel instance %q: instance is %s: %w", p.ID, status, heraldtype.ErrInstanceNotRunning)
	}
	if !already {
		s.signal(p.Tenant, storage.WorkTurns)
	}
	return already, nil
}
