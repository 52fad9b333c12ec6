package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/heraldwf/herald/heraldtype"
	"github.com/heraldwf/herald/history"
	"github.com/heraldwf/herald/storage"
	"github.com/heraldwf/herald/storage/internal/backend"
)

// Child workflows and cancellation (storage.ChildStart, InstanceCancel),
// inside the single writer's transactions.

// startChildren creates the children a turn of parent (on execution)
// starts; a taken id gets the parent a child_failed message instead.
func startChildren(w *wtx, tenant, parent string, execution int, children []storage.ChildStart, nowN int64) error {
	if len(children) == 0 {
		return nil
	}
	now := backend.FromNanos(nowN)
	for _, c := range children {
		p := &storage.InstanceCreateParams{Tenant: tenant, ID: c.ID, Workflow: c.Workflow, Input: c.Input, Now: now}
		if err := backend.ValidateCreate(p); err != nil {
			return fmt.Errorf("start child %q: %w", c.ID, err)
		}
		_, err := createInstance(w, p)
		if errors.Is(err, heraldtype.ErrInstanceExists) {
			if err := insertMessage(w, tenant, parent, &storage.Message{Kind: storage.MsgChildFailed, Execution: execution,
				TaskSeq: c.TaskSeq, Name: c.ID, VisibleAt: now, Failure: backend.ChildIDTaken(c.ID)}, nowN); err != nil {
				return fmt.Errorf("start child %q: %w", c.ID, err)
			}
			continue
		}
		if err != nil {
			return fmt.Errorf("start child %q: %w", c.ID, err)
		}
		if _, err := w.exec(`UPDATE instances SET parent_id = ?, parent_execution = ?, parent_seq = ?, parent_close = ?
			WHERE tenant = ? AND id = ?`, parent, execution, c.TaskSeq, string(backend.ClosePolicy(c.ClosePolicy)),
			tenant, c.ID); err != nil {
			return fmt.Errorf("start child %q: %w", c.ID, err)
		}
	}
	if _, err := w.exec(`UPDATE instances SET has_children = 1 WHERE tenant = ? AND id = ?`, tenant, parent); err != nil {
		return fmt.Errorf("start children: %w", err)
	}
	return nil
}

// requestCancel asks instance id to cancel unless it has ended or was
// asked already (with parent set, only if it is a child of parent). It
// reports whether the instance exists (as a child of parent), whether it
// was asked already, and its status.
func requestCancel(w *wtx, tenant, id, parent, reason string, nowN int64) (found, already bool, status heraldtype.Status, err error) {
	var (
		st        string
		requested bool
	)
	err = w.queryRow(`SELECT status, cancel_requested FROM instances WHERE tenant = ? AND id = ? AND (? = '' OR parent_id = ?)`,
		tenant, id, parent, parent).Scan(&st, &requested)
	if errors.Is(err, sql.ErrNoRows) {
		return false, false, "", nil
	}
	if err != nil {
		return false, false, "", fmt.Errorf("load instance %q: %w", id, err)
	}
	status = heraldtype.Status(st)
	if status.Terminal() || requested {
		return true, requested, status, nil
	}
	if _, err := w.exec(`UPDATE instances SET cancel_requested = 1 WHERE tenant = ? AND id = ?`, tenant, id); err != nil {
		return true, false, status, fmt.Errorf("cancel %q: %w", id, err)
	}
	if err := addMessage(w, tenant, id, &storage.Message{Kind: storage.MsgCancel, Name: reason, VisibleAt: backend.FromNanos(nowN)}, nowN); err != nil {
		return true, false, status, fmt.Errorf("cancel %q: %w", id, err)
	}
	return true, false, status, nil
}

// addMessage adds a message to another instance's inbox and lowers its
// ready time.
func addMessage(w *wtx, tenant, id string, m *storage.Message, nowN int64) error {
	if err := insertMessage(w, tenant, id, m, nowN); err != nil {
		return err
	}
	if err := lowerReady(w, tenant, id, backend.Nanos(m.VisibleAt)); err != nil {
		return err
	}
	w.signalKinds(tenant, storage.WorkTurns)
	return nil
}

// familyEnd applies the family rules (storage.ChildStart) to instance id,
// which has just ended with status, output and failure.
func familyEnd(w *wtx, tenant, id string, status heraldtype.Status, output []byte, failure *history.Failure, nowN int64) error {
	now := backend.FromNanos(nowN)
	var (
		parent          string
		pExec, pSeq     int
		parentStatus    sql.NullString
		parentExecution sql.NullInt64
	)
	if err := w.queryRow(`SELECT c.parent_id, c.parent_execution, c.parent_seq, p.status, p.execution
		FROM instances c LEFT JOIN instances p ON p.tenant = c.tenant AND p.id = c.parent_id
		WHERE c.tenant = ? AND c.id = ?`, tenant, id).Scan(&parent, &pExec, &pSeq, &parentStatus, &parentExecution); err != nil {
		return fmt.Errorf("load parent: %w", err)
	}
	if parent != "" && parentStatus.Valid && !heraldtype.Status(parentStatus.String).Terminal() &&
		int(parentExecution.Int64) == pExec {
		m := backend.ChildEndMessage(id, pExec, pSeq, status, output, failure, now)
		if err := addMessage(w, tenant, parent, m, nowN); err != nil {
			return fmt.Errorf("tell parent %q: %w", parent, err)
		}
	}
	rows, err := w.query(`SELECT id, parent_close FROM instances
		WHERE tenant = ? AND parent_id = ? AND parent_id <> '' AND status IN `+nonTerminal+` ORDER BY rid`, tenant, id)
	if err != nil {
		return fmt.Errorf("find children: %w", err)
	}
	type kid struct{ id, policy string }
	var kids []kid
	for rows.Next() {
		var k kid
		if err := rows.Scan(&k.id, &k.policy); err != nil {
			rows.Close()
			return fmt.Errorf("find children: %w", err)
		}
		kids = append(kids, k)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return fmt.Errorf("find children: %w", err)
	}
	reason := backend.ParentEndedReason(id, status)
	for _, k := range kids {
		switch storage.ParentClosePolicy(k.policy) {
		case storage.ParentCloseAbandon:
		case storage.ParentCloseRequestCancel:
			if _, _, _, err := requestCancel(w, tenant, k.id, id, reason, nowN); err != nil {
				return fmt.Errorf("close child %q: %w", k.id, err)
			}
		default:
			if err := addMessage(w, tenant, k.id, &storage.Message{Kind: storage.MsgTerminate, Name: reason, VisibleAt: now}, nowN); err != nil {
				return fmt.Errorf("close child %q: %w", k.id, err)
			}
		}
	}
	return nil
}

// InstanceCancel: see storage.InstanceStore.
func (s *Store) InstanceCancel(ctx context.Context, p *storage.InstanceCancelParams) (bool, error) {
	if p == nil {
		return false, backend.NilParams("sqlite: cancel instance")
	}
	nowN := backend.NowOr(p.Now).UnixNano()
	var already bool
	err := s.write(ctx, func(w *wtx) error {
		found, asked, status, err := requestCancel(w, p.Tenant, p.ID, "", p.Reason, nowN)
		switch {
		case err != nil:
			return err
		case !found:
			return fmt.Errorf("instance %q: %w", p.ID, heraldtype.ErrNotFound)
		case status.Terminal():
			return fmt.Errorf("instance is %s: %w", status, heraldtype.ErrInstanceNotRunning)
		}
		already = asked
		return nil
	})
	if err != nil {
		return false, fmt.Errorf("sqlite: cancel instance %q: %w", p.ID, err)
	}
	return already, nil
}
