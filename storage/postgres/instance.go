package postgres

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/heraldwf/herald/history"
	"github.com/heraldwf/herald/storage"
	"github.com/heraldwf/herald/storage/internal/backend"
)

// InstanceCreate creates an instance (status pending, execution 1) with its
// ExecutionStarted event (seq 1) and a kick message visible at p.Now, in one
// transaction. Events raised for the id before it existed stay in its inbox
// (and no longer expire: see EventExpire). It returns
// storage.ErrInstanceExists if (tenant, id) is taken.
func (s *Store) InstanceCreate(ctx context.Context, p *storage.InstanceCreateParams) (*storage.Instance, error) {
	if p == nil {
		return nil, errors.New("postgres: create instance: nil params")
	}
	if err := backend.ValidateCreate(p); err != nil {
		return nil, fmt.Errorf("postgres: create instance: %w", err)
	}
	var inst *storage.Instance
	err := s.do(ctx, func(ctx context.Context) error {
		var b batch
		var err error
		if inst, err = s.queueCreate(&b, p); err != nil {
			return err
		}
		return createErr(b.send(ctx, s.pool))
	})
	if err != nil {
		return nil, fmt.Errorf("postgres: create instance %q: %w", p.ID, err)
	}
	s.warm.note()
	s.signal(p.Tenant, storage.WorkTurns)
	return inst, nil
}

// createErr maps the duplicate key of an instance to ErrInstanceExists.
func createErr(err error) error {
	if pgConstraint(err) == "instances_pkey" {
		return storage.ErrInstanceExists
	}
	return err
}

// createInstanceSQL inserts the instance row, its ExecutionStarted event
// and its kick, and stops the events kept for the id from expiring: $1
// tenant, $2 id, $3 workflow, $4 input, $5 now, $6 the ExecutionStarted
// JSON. ready_at: the kick, or an event kept for the id earlier. A taken id
// fails on instances_pkey (the other inserts wait for that one) and writes
// nothing.
const createInstanceSQL = `WITH inst AS (
	INSERT INTO instances (tenant, id, workflow, status, execution, input, created_at, updated_at, ready_at)
	VALUES ($1, $2, $3, 'pending', 1, $4, $5, $5, LEAST($5, ` + readyAtSQL + `))
	RETURNING id
), started AS (
	INSERT INTO history (tenant, instance_id, execution, seq, kind, event)
	SELECT $1, $2, 1, 1, 'ExecutionStarted', $6 FROM inst
), kick AS (
	INSERT INTO inbox (tenant, instance_id, kind, execution, visible_at, created_at)
	SELECT $1, $2, 'kick', 1, $5, $5 FROM inst
)
UPDATE inbox SET expires_at = 0 WHERE tenant = $1 AND instance_id = $2 AND expires_at > 0`

// queueCreate queues InstanceCreate's statements. They first take the
// instance id's advisory lock, which EventRaise also takes for an instance
// that does not exist, so that an event kept for the id is either seen here
// (ready_at) or sees the instance.
func (s *Store) queueCreate(b *batch, p *storage.InstanceCreateParams) (*storage.Instance, error) {
	now := backend.NowOr(p.Now)
	started, err := jsonArg(history.Event{
		Seq:       1,
		Time:      now,
		Kind:      history.ExecutionStarted,
		Workflow:  p.Workflow,
		Input:     backend.RawOf(p.Input),
		Execution: 1,
	})
	if err != nil {
		return nil, err
	}
	b.exec("lock instance id", `SELECT pg_advisory_xact_lock($1)`, s.instanceLockKey(p.Tenant, p.ID))
	b.exec("", createInstanceSQL, p.Tenant, p.ID, p.Workflow, backend.RawArg(p.Input), now.UnixNano(), started)
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
func (s *Store) InstanceGet(ctx context.Context, p *storage.InstanceGetParams) (*storage.Instance, error) {
	if p == nil {
		return nil, errors.New("postgres: get instance: nil params")
	}
	var r *instanceRow
	err := s.do(ctx, func(ctx context.Context) error {
		var err error
		r, err = scanInstance(s.pool.QueryRow(ctx,
			`SELECT `+instanceCols+` FROM instances WHERE tenant = $1 AND id = $2`, p.Tenant, p.ID))
		if errors.Is(err, pgx.ErrNoRows) {
			return fmt.Errorf("instance %q: %w", p.ID, storage.ErrNotFound)
		}
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("postgres: get instance: %w", err)
	}
	return &r.Instance, nil
}

// InstanceList returns the tenant's instances, newest first, filtered by
// workflow and status when set, at most p.Limit (default 100).
func (s *Store) InstanceList(ctx context.Context, p *storage.InstanceListParams) ([]*storage.Instance, error) {
	if p == nil {
		return nil, errors.New("postgres: list instances: nil params")
	}
	// rid > 0 (always true) names the partial index instances_created.
	where := []string{"tenant = $1", "rid > 0"}
	args := []any{p.Tenant}
	if p.Workflow != "" {
		args = append(args, p.Workflow)
		where = append(where, "workflow = $"+strconv.Itoa(len(args)))
	}
	if p.Status != "" {
		args = append(args, string(p.Status))
		where = append(where, "status = $"+strconv.Itoa(len(args)))
	}
	limit := backend.ListLimit(p.Limit)
	args = append(args, limit)
	q := `SELECT ` + instanceCols + ` FROM instances WHERE ` + strings.Join(where, " AND ") +
		` ORDER BY created_at DESC, rid DESC LIMIT $` + strconv.Itoa(len(args))
	var out []*storage.Instance
	err := s.do(ctx, func(ctx context.Context) error {
		out = nil
		rows, err := s.pool.Query(ctx, q, args...)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			r, err := scanInstance(rows)
			if err != nil {
				return err
			}
			out = append(out, &r.Instance)
		}
		return rows.Err()
	})
	if err != nil {
		return nil, fmt.Errorf("postgres: list instances: %w", err)
	}
	return out, nil
}

// InstanceTerminate ends a pending or running instance in one transaction,
// and returns the EventDropped breadcrumbs it appended:
// status terminated with failure {Kind: "terminated", Message: p.Reason},
// ExecutionTerminated (with p.Failure: status failed, ExecutionFailed) appended to the current execution's history, every
// pending or buffered event dropped (instance_terminal) with an EventDropped
// breadcrumb, its inbox and activity tasks deleted and its lease cleared, so
// an in-flight turn's commit fails with ErrLeaseLost. It returns
// storage.ErrNotFound, or storage.ErrInstanceNotRunning if the instance
// already ended.
func (s *Store) InstanceTerminate(ctx context.Context, p *storage.InstanceTerminateParams) ([]history.Event, error) {
	if p == nil {
		return nil, errors.New("postgres: terminate instance: nil params")
	}
	now := backend.NowOr(p.Now)
	endStatus, kind, failure := backend.TerminateEnd(p)
	f, err := failureArg(failure)
	if err != nil {
		return nil, fmt.Errorf("postgres: terminate instance %q: %w", p.ID, err)
	}
	var dropped []history.Event
	err = s.do(ctx, func(ctx context.Context) error {
		dropped = nil
		return pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
			var (
				status         string
				execution, seq int
			)
			err := tx.QueryRow(ctx, `SELECT i.status, i.execution,
					(SELECT COALESCE(MAX(h.seq), 0) FROM history h
					 WHERE h.tenant = i.tenant AND h.instance_id = i.id AND h.execution = i.execution)
				FROM instances i WHERE i.tenant = $1 AND i.id = $2
				FOR NO KEY UPDATE OF i`, p.Tenant, p.ID).Scan(&status, &execution, &seq)
			if errors.Is(err, pgx.ErrNoRows) {
				return fmt.Errorf("instance %q: %w", p.ID, storage.ErrNotFound)
			}
			if err != nil {
				return fmt.Errorf("load instance: %w", err)
			}
			if storage.Status(status).Terminal() {
				return fmt.Errorf("instance is %s: %w", status, storage.ErrInstanceNotRunning)
			}
			var b batch
			ev := history.Event{Seq: seq + 1, Time: now, Kind: kind, Failure: failure}
			if err := b.queueHistory("append history", p.Tenant, p.ID, execution, []history.Event{ev}); err != nil {
				return err
			}
			b.queueEnd(&dropped, p.Tenant, p.ID, execution, now, true, true)
			b.exec("update instance", `UPDATE instances SET status = $5, failure = $3, updated_at = $4,
				lock_token = NULL, lease_until = 0, not_before = 0, ready_at = NULL
				WHERE tenant = $1 AND id = $2`, p.Tenant, p.ID, f, now.UnixNano(), string(endStatus))
			return b.send(ctx, tx)
		})
	})
	if err != nil {
		return nil, fmt.Errorf("postgres: terminate instance %q: %w", p.ID, err)
	}
	s.signal(p.Tenant, storage.WorkAll)
	return dropped, nil
}

// HistoryList returns one execution's history (Execution 0: the current
// one) ordered by seq: the events after p.AfterSeq, at most p.Limit (0 =
// all). It returns storage.ErrNotFound if the instance does not exist. The
// execution number and the events are read in one statement (one snapshot).
func (s *Store) HistoryList(ctx context.Context, p *storage.HistoryListParams) ([]history.Event, error) {
	if p == nil {
		return nil, errors.New("postgres: list history: nil params")
	}
	var limit any // NULL: no limit
	if p.Limit > 0 {
		limit = int64(p.Limit)
	}
	var evs []history.Event
	err := s.do(ctx, func(ctx context.Context) error {
		evs = nil
		rows, err := s.pool.Query(ctx, `SELECT h.event FROM instances i
			LEFT JOIN history h ON h.tenant = i.tenant AND h.instance_id = i.id
				AND h.execution = CASE WHEN $3 = 0 THEN i.execution ELSE $3 END AND h.seq > $4
			WHERE i.tenant = $1 AND i.id = $2
			ORDER BY h.seq LIMIT $5::bigint`, p.Tenant, p.InstanceID, p.Execution, p.AfterSeq, limit)
		if err != nil {
			return err
		}
		defer rows.Close()
		found := false
		for rows.Next() {
			found = true
			var b []byte
			if err := rows.Scan(&b); err != nil {
				return err
			}
			if b == nil { // the instance exists, the page is empty
				continue
			}
			ev, err := backend.DecodeHistoryEvent(b)
			if err != nil {
				return err
			}
			evs = append(evs, ev)
		}
		if err := rows.Err(); err != nil {
			return err
		}
		if !found {
			return fmt.Errorf("instance %q: %w", p.InstanceID, storage.ErrNotFound)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("postgres: list history: %w", err)
	}
	return evs, nil
}
