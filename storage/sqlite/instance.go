package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"

	"github.com/heraldwf/herald/heraldtype"
	"github.com/heraldwf/herald/history"
	"github.com/heraldwf/herald/storage"
	"github.com/heraldwf/herald/storage/internal/backend"
)

// InstanceCreate: see storage.InstanceStore.
func (s *Store) InstanceCreate(ctx context.Context, p *storage.InstanceCreateParams) (*storage.Instance, error) {
	if p == nil {
		return nil, backend.NilParams("sqlite: create instance")
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
		p.Tenant, p.ID, p.Workflow, string(heraldtype.StatusPending), backend.RawArg(p.Input), now.UnixNano())
	if err != nil {
		return nil, fmt.Errorf("insert instance: %w", err)
	}
	if n, err := res.RowsAffected(); err != nil {
		return nil, fmt.Errorf("insert instance: %w", err)
	} else if n == 0 {
		return nil, heraldtype.ErrInstanceExists
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
	if err := insertMessage(w, p.Tenant, p.ID, &storage.Message{Kind: storage.MsgKick, Execution: 1, VisibleAt: now,
		TraceParent: p.TraceParent}, now.UnixNano()); err != nil {
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
		Status:    heraldtype.StatusPending,
		Execution: 1,
		Input:     backend.RawOf(p.Input),
		CreatedAt: now,
		UpdatedAt: now,
	}, nil
}

// InstanceGet: see storage.InstanceStore.
func (s *Store) InstanceGet(ctx context.Context, p *storage.InstanceGetParams) (_ *storage.Instance, err error) {
	defer s.afterRead(ctx, &err)
	if p == nil {
		return nil, backend.NilParams("sqlite: get instance")
	}
	if s.closed.Load() {
		return nil, heraldtype.ErrClosed
	}
	r, err := scanShown(s.reader(nil).QueryRowContext(ctx,
		`SELECT `+shownCols+` FROM instances WHERE tenant = ? AND id = ?`, p.Tenant, p.ID))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("sqlite: get instance: instance %q: %w", p.ID, heraldtype.ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("sqlite: get instance: load instance %q: %w", p.ID, s.readErr(err))
	}
	return &r.Instance, nil
}

// InstanceList: see storage.InstanceStore. A page is one range scan of the
// instances_created index.
func (s *Store) InstanceList(ctx context.Context, p *storage.InstanceListParams) (_ []*storage.Instance, _ string, err error) {
	defer s.afterRead(ctx, &err)
	if p == nil {
		return nil, "", backend.NilParams("sqlite: list instances")
	}
	createdAt, afterID, paged, err := backend.ListCursor(p.After)
	if err != nil {
		return nil, "", fmt.Errorf("sqlite: list instances: %w", err)
	}
	if s.closed.Load() {
		return nil, "", heraldtype.ErrClosed
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
	if !p.CreatedAfter.IsZero() {
		where = append(where, "created_at >= ?")
		args = append(args, p.CreatedAfter.UnixNano())
	}
	if !p.CreatedBefore.IsZero() {
		where = append(where, "created_at < ?")
		args = append(args, p.CreatedBefore.UnixNano())
	}
	if err := backend.ValidateAttributes(p.Attributes, false); err != nil {
		return nil, "", fmt.Errorf("sqlite: list instances: %w", err)
	}
	if paged {
		where = append(where, "(created_at, id) < (?, ?)")
		args = append(args, createdAt, afterID)
	}
	limit := backend.ListLimit(p.Limit)
	args = append(args, limit+1)
	q := `SELECT ` + shownCols + ` FROM instances
		WHERE ` + strings.Join(where, " AND ") + `
		ORDER BY created_at DESC, id DESC LIMIT +?`
	if len(p.Attributes) > 0 {
		q, args = attributeQuery(p, createdAt, afterID, paged, limit)
	}
	rows, err := s.reader(nil).QueryContext(ctx, q, args...)
	if err != nil {
		return nil, "", fmt.Errorf("sqlite: list instances: %w", s.readErr(err))
	}
	defer rows.Close()
	var out []*storage.Instance
	for rows.Next() {
		r, err := scanShown(rows)
		if err != nil {
			return nil, "", fmt.Errorf("sqlite: list instances: %w", err)
		}
		out = append(out, &r.Instance)
	}
	if err := rows.Err(); err != nil {
		return nil, "", fmt.Errorf("sqlite: list instances: %w", s.readErr(err))
	}
	page, next := backend.ListPage(out, limit)
	return page, next, nil
}

// InstanceTerminate: see storage.InstanceStore.
func (s *Store) InstanceTerminate(ctx context.Context, p *storage.InstanceTerminateParams) ([]history.Event, error) {
	if p == nil {
		return nil, backend.NilParams("sqlite: terminate instance")
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
			return fmt.Errorf("instance is %s: %w", inst.Status, heraldtype.ErrInstanceNotRunning)
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
		if dropped, err = endInstance(w, p.Tenant, p.ID, inst.Execution, now.UnixNano(), true, true); err != nil {
			return err
		}
		if _, err := w.exec(`UPDATE instances SET status = ?, failure = ?, updated_at = ?,
			lock_token = NULL, lease_until = 0, not_before = 0, ready_at = NULL
			WHERE tenant = ? AND id = ?`,
			string(status), f, now.UnixNano(), p.Tenant, p.ID); err != nil {
			return fmt.Errorf("update instance: %w", err)
		}
		if err := familyEnd(w, p.Tenant, p.ID, status, nil, failure, now.UnixNano()); err != nil {
			return err
		}
		w.signal(p.Tenant)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("sqlite: terminate instance %q: %w", p.ID, err)
	}
	s.hist.Drop(p.Tenant, p.ID) // an ended instance runs no more turns
	return dropped, nil
}

// endInstance does what every terminal transition does after the final
// history event: the instance's undelivered events are dropped as
// backend.EndInstance says, and the inbox, activity tasks (unless tasks
// says it has none) and correlation markers (unless markers says so) are
// deleted. The caller updates the instance row (its ready_at becomes
// NULL).
func endInstance(w *wtx, tenant, id string, execution int, now int64, tasks, markers bool) ([]history.Event, error) {
	dropped, err := backend.EndInstance(&laneTx{w: w, tenant: tenant, id: id, now: now}, execution, backend.FromNanos(now))
	if err != nil {
		return nil, err
	}
	if _, err := w.exec(`DELETE FROM inbox WHERE tenant = ? AND instance_id = ?`, tenant, id); err != nil {
		return nil, fmt.Errorf("clear inbox: %w", err)
	}
	if tasks {
		if _, err := w.exec(`DELETE FROM activities WHERE tenant = ? AND instance_id = ?`, tenant, id); err != nil {
			return nil, fmt.Errorf("clear activities: %w", err)
		}
	}
	if markers {
		if err := deleteMarkers(w, tenant, id); err != nil {
			return nil, err
		}
	}
	return dropped, nil
}

// laneTx is the primitives of the lane rules of package backend (EndTx,
// HandOnTx) in a write transaction, for one instance of a tenant at now
// (unix nanoseconds).
type laneTx struct {
	w          *wtx
	tenant, id string
	now        int64
}

func (t *laneTx) Undelivered(execution int) ([]backend.Undelivered, int, error) {
	rows, err := t.w.query(`SELECT event_id, lane, name FROM events
		WHERE tenant = ? AND instance_id = ? AND fate IN (?, ?)
		ORDER BY rid`, t.tenant, t.id, string(history.FatePending), string(history.FateBuffered))
	if err != nil {
		return nil, 0, err
	}
	var evs []backend.Undelivered
	for rows.Next() {
		var (
			e    backend.Undelivered
			lane string
		)
		if err := rows.Scan(&e.EventID, &lane, &e.Name); err != nil {
			rows.Close()
			return nil, 0, err
		}
		e.Lane = history.Lane(lane)
		evs = append(evs, e)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, 0, err
	}
	if len(evs) == 0 {
		return nil, 0, nil
	}
	seq, err := lastSeq(t.w, t.tenant, t.id, execution)
	return evs, seq, err
}

func (t *laneTx) AppendHistory(execution int, evs []history.Event) error {
	return appendHistory(t.w, t.tenant, t.id, execution, evs)
}

func (t *laneTx) DropEvents(ids []string, reason history.DropReason, execution int) error {
	for _, eid := range ids {
		if _, err := t.w.exec(`UPDATE events SET fate = ?, reason = ?,
			execution = CASE WHEN execution = 0 THEN ? ELSE execution END, updated_at = ?
			WHERE tenant = ? AND event_id = ? AND instance_id = ?`,
			string(history.FateDropped), string(reason), execution, t.now, t.tenant, eid, t.id); err != nil {
			return fmt.Errorf("drop event %q: %w", eid, err)
		}
	}
	return nil
}

// HistoryList: see storage.InstanceStore.
func (s *Store) HistoryList(ctx context.Context, p *storage.HistoryListParams) (_ []history.Event, err error) {
	defer s.afterRead(ctx, &err)
	if p == nil {
		return nil, backend.NilParams("sqlite: list history")
	}
	if s.closed.Load() {
		return nil, heraldtype.ErrClosed
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
