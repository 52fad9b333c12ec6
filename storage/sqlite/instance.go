package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"

	"github.com/heraldwf/herald/history"
	"github.com/heraldwf/herald/storage"
	"github.com/heraldwf/herald/storage/internal/backend"
)

// InstanceCreate creates an instance (status pending, execution 1) with its
// ExecutionStarted event (seq 1) and a kick message visible at p.Now. Events
// raised for the id before it existed stay in its inbox (and no longer
// expire: see EventExpire). It returns
// storage.ErrInstanceExists if (tenant, id) is taken.
func (s *Store) InstanceCreate(ctx context.Context, p *storage.InstanceCreateParams) (*storage.Instance, error) {
	if p == nil {
		return nil, errors.New("sqlite: create instance: nil params")
	}
	if err := backend.ValidateCreate(p); err != nil {
		return nil, fmt.Errorf("sqlite: create instance: %w", err)
	}
	var inst *storage.Instance
	err := s.write(ctx, func(w *wtx) error {
		var err error
		inst, err = createInstance(w, p)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("sqlite: create instance %q: %w", p.ID, err)
	}
	return inst, nil
}

// createInstance is InstanceCreate inside a write transaction.
func createInstance(w *wtx, p *storage.InstanceCreateParams) (*storage.Instance, error) {
	now := backend.NowOr(p.Now)
	// ready_at: the kick added below, or an event kept for the id earlier.
	res, err := w.exec(`INSERT INTO instances (tenant, id, workflow, status, execution, input, created_at, updated_at, ready_at)
		VALUES (?1, ?2, ?3, ?4, 1, ?5, ?6, ?6,
			MIN(?6, COALESCE((SELECT MIN(visible_at) FROM inbox WHERE tenant = ?1 AND instance_id = ?2), ?6)))
		ON CONFLICT (tenant, id) DO NOTHING`,
		p.Tenant, p.ID, p.Workflow, string(storage.StatusPending), backend.RawArg(p.Input), now.UnixNano())
	if err != nil {
		return nil, fmt.Errorf("insert instance: %w", err)
	}
	if n, err := res.RowsAffected(); err != nil {
		return nil, fmt.Errorf("insert instance: %w", err)
	} else if n == 0 {
		return nil, storage.ErrInstanceExists
	}
	started := history.Event{
		Seq:       1,
		Time:      now,
		Kind:      history.ExecutionStarted,
		Workflow:  p.Workflow,
		Input:     backend.RawOf(p.Input),
		Execution: 1,
	}
	if err := appendHistory(w, p.Tenant, p.ID, 1, []history.Event{started}); err != nil {
		return nil, err
	}
	if err := insertMessage(w, p.Tenant, p.ID, &storage.Message{Kind: storage.MsgKick, Execution: 1, VisibleAt: now}, now.UnixNano()); err != nil {
		return nil, err
	}
	// The events kept for the id no longer expire: the instance exists.
	if _, err := w.exec(`UPDATE inbox SET expires_at = 0 WHERE tenant = ? AND instance_id = ? AND expires_at > 0`,
		p.Tenant, p.ID); err != nil {
		return nil, fmt.Errorf("keep waiting events: %w", err)
	}
	w.signalKinds(p.Tenant, storage.WorkTurns)
	return &storage.Instance{
		Tenant:    p.Tenant,
		ID:        p.ID,
		Workflow:  p.Workflow,
		Status:    storage.StatusPending,
		Execution: 1,
		Input:     backend.RawOf(p.Input),
		CreatedAt: now,
		UpdatedAt: now,
	}, nil
}

// InstanceGet returns storage.ErrNotFound if the instance does not exist.
func (s *Store) InstanceGet(ctx context.Context, p *storage.InstanceGetParams) (_ *storage.Instance, err error) {
	defer s.afterRead(ctx, &err)
	if p == nil {
		return nil, errors.New("sqlite: get instance: nil params")
	}
	if s.closed.Load() {
		return nil, storage.ErrClosed
	}
	r, err := getInstance(ctx, s.reader(nil), p.Tenant, p.ID)
	if err != nil {
		return nil, fmt.Errorf("sqlite: get instance: %w", s.readErr(err))
	}
	return &r.Instance, nil
}

// InstanceList returns the tenant's instances, newest first, filtered by
// workflow and status when set, at most p.Limit (default 100).
func (s *Store) InstanceList(ctx context.Context, p *storage.InstanceListParams) (_ []*storage.Instance, err error) {
	defer s.afterRead(ctx, &err)
	if p == nil {
		return nil, errors.New("sqlite: list instances: nil params")
	}
	if s.closed.Load() {
		return nil, storage.ErrClosed
	}
	var (
		where = []string{"tenant = ?"}
		args  = []any{p.Tenant}
	)
	if p.Workflow != "" {
		where = append(where, "workflow = ?")
		args = append(args, p.Workflow)
	}
	if p.Status != "" {
		where = append(where, "status = ?")
		args = append(args, string(p.Status))
	}
	limit := backend.ListLimit(p.Limit)
	args = append(args, limit)
	rows, err := s.reader(nil).QueryContext(ctx, `SELECT `+instanceCols+` FROM instances
		WHERE `+strings.Join(where, " AND ")+`
		ORDER BY created_at DESC, rid DESC LIMIT ?`, args...)
	if err != nil {
		return nil, fmt.Errorf("sqlite: list instances: %w", s.readErr(err))
	}
	defer rows.Close()
	var out []*storage.Instance
	for rows.Next() {
		r, err := scanInstance(rows)
		if err != nil {
			return nil, fmt.Errorf("sqlite: list instances: %w", err)
		}
		out = append(out, &r.Instance)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("sqlite: list instances: %w", s.readErr(err))
	}
	return out, nil
}

// InstanceTerminate ends a pending or running instance: status terminated
// with failure {Kind: "terminated", Message: p.Reason}, ExecutionTerminated
// (with p.Failure: status failed, ExecutionFailed) appended to the current execution's history, every pending or buffered
// event dropped (instance_terminal) with an EventDropped breadcrumb, its
// inbox, activity tasks and correlation markers deleted and its lease
// cleared, so an in-flight
// turn's commit fails with ErrLeaseLost. It returns storage.ErrNotFound, or
// storage.ErrInstanceNotRunning if the instance already ended.
func (s *Store) InstanceTerminate(ctx context.Context, p *storage.InstanceTerminateParams) ([]history.Event, error) {
	if p == nil {
		return nil, errors.New("sqlite: terminate instance: nil params")
	}
	now := backend.NowOr(p.Now)
	var dropped []history.Event
	err := s.write(ctx, func(w *wtx) error {
		dropped = nil
		inst, err := getInstance(w.ctx, w, p.Tenant, p.ID)
		if err != nil {
			return err
		}
		if inst.Status.Terminal() {
			return fmt.Errorf("instance is %s: %w", inst.Status, storage.ErrInstanceNotRunning)
		}
		status, kind, failure := backend.TerminateEnd(p)
		f, err := failureArg(failure)
		if err != nil {
			return err
		}
		seq, err := lastSeq(w, p.Tenant, p.ID, inst.Execution)
		if err != nil {
			return err
		}
		ev := history.Event{Seq: seq + 1, Time: now, Kind: kind, Failure: failure}
		if err := appendHistory(w, p.Tenant, p.ID, inst.Execution, []history.Event{ev}); err != nil {
			return err
		}
		if dropped, err = endInstance(w, p.Tenant, p.ID, inst.Execution, now.UnixNano()); err != nil {
			return err
		}
		if _, err := w.exec(`UPDATE instances SET status = ?, failure = ?, updated_at = ?,
			lock_token = NULL, lease_until = 0, not_before = 0, ready_at = NULL
			WHERE tenant = ? AND id = ?`,
			string(status), f, now.UnixNano(), p.Tenant, p.ID); err != nil {
			return fmt.Errorf("update instance: %w", err)
		}
		w.signal(p.Tenant)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("sqlite: terminate instance %q: %w", p.ID, err)
	}
	return dropped, nil
}

// endInstance does what every terminal transition does after the final
// history event: every event still pending or buffered for the instance is
// dropped (instance_terminal) with an EventDropped breadcrumb appended to
// the execution's history, and the inbox, activity tasks and correlation
// markers are deleted. The caller updates the instance row (its ready_at
// becomes NULL).
func endInstance(w *wtx, tenant, id string, execution int, now int64) ([]history.Event, error) {
	rows, err := w.query(`SELECT rid, event_id, lane, name FROM events
		WHERE tenant = ? AND instance_id = ? AND fate IN (?, ?)
		ORDER BY rid`, tenant, id, string(history.FatePending), string(history.FateBuffered))
	if err != nil {
		return nil, fmt.Errorf("load undelivered events: %w", err)
	}
	type ev struct {
		rid            int64
		id, lane, name string
	}
	var evs []ev
	var dropped []history.Event
	for rows.Next() {
		var e ev
		if err := rows.Scan(&e.rid, &e.id, &e.lane, &e.name); err != nil {
			rows.Close()
			return nil, fmt.Errorf("load undelivered events: %w", err)
		}
		evs = append(evs, e)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("load undelivered events: %w", err)
	}
	if len(evs) > 0 {
		seq, err := lastSeq(w, tenant, id, execution)
		if err != nil {
			return nil, err
		}
		crumbs := make([]history.Event, len(evs))
		for i, e := range evs {
			if _, err := w.exec(`UPDATE events SET fate = ?, reason = ?,
				execution = CASE WHEN execution = 0 THEN ? ELSE execution END, updated_at = ?
				WHERE rid = ?`,
				string(history.FateDropped), string(history.DropInstanceTerminal), execution, now, e.rid); err != nil {
				return nil, fmt.Errorf("drop event %q: %w", e.id, err)
			}
			crumbs[i] = history.Event{
				Seq:     seq + 1 + i,
				Time:    backend.FromNanos(now),
				Kind:    history.EventDropped,
				Lane:    history.Lane(e.lane),
				EventID: e.id,
				Name:    e.name,
				Reason:  history.DropInstanceTerminal,
			}
		}
		if err := appendHistory(w, tenant, id, execution, crumbs); err != nil {
			return nil, err
		}
		dropped = crumbs
	}
	if _, err := w.exec(`DELETE FROM inbox WHERE tenant = ? AND instance_id = ?`, tenant, id); err != nil {
		return nil, fmt.Errorf("clear inbox: %w", err)
	}
	if _, err := w.exec(`DELETE FROM activities WHERE tenant = ? AND instance_id = ?`, tenant, id); err != nil {
		return nil, fmt.Errorf("clear activities: %w", err)
	}
	if err := deleteMarkers(w, tenant, id); err != nil {
		return nil, err
	}
	return dropped, nil
}

// HistoryList returns one execution's history (Execution 0: the current
// one) ordered by seq: the events after p.AfterSeq, at most p.Limit (0 =
// all). It returns storage.ErrNotFound if the instance does not exist.
func (s *Store) HistoryList(ctx context.Context, p *storage.HistoryListParams) (_ []history.Event, err error) {
	defer s.afterRead(ctx, &err)
	if p == nil {
		return nil, errors.New("sqlite: list history: nil params")
	}
	if s.closed.Load() {
		return nil, storage.ErrClosed
	}
	// One read transaction: the execution number and the events come from
	// the same snapshot.
	tx, err := s.rdb.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		return nil, fmt.Errorf("sqlite: list history: %w", s.readErr(err))
	}
	defer tx.Rollback()
	inst, err := getInstance(ctx, s.reader(tx), p.Tenant, p.InstanceID)
	if err != nil {
		return nil, fmt.Errorf("sqlite: list history: %w", s.readErr(err))
	}
	execution := p.Execution
	if execution == 0 {
		execution = inst.Execution
	}
	evs, err := loadHistory(ctx, s.reader(tx), p.Tenant, p.InstanceID, execution, p.AfterSeq, p.Limit)
	if err != nil {
		return nil, fmt.Errorf("sqlite: list history of %q: %w", p.InstanceID, s.readErr(err))
	}
	return evs, nil
}
