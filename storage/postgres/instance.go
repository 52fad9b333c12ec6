package postgres

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/heraldwf/herald/heraldtype"
	"github.com/heraldwf/herald/history"
	"github.com/heraldwf/herald/storage"
	"github.com/heraldwf/herald/storage/internal/backend"
)

// InstanceCreate: see storage.InstanceStore.
func (s *Store) InstanceCreate(ctx context.Context, p *storage.InstanceCreateParams) (*storage.Instance, error) {
	if p == nil {
		return nil, backend.NilParams("postgres: create instance")
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
		return heraldtype.ErrInstanceExists
	}
	return err
}

// createInstanceSQL inserts the instance row, its ExecutionStarted event
// and its kick, and stops the events kept for the id from expiring: $1
// tenant, $2 id, $3 workflow, $4 input, $5 now, $6 the ExecutionStarted
// JSON, $7 the kick's trace. ready_at: the kick, or an event kept for the id earlier. A taken id
// fails on instances_pkey (the other inserts wait for that one) and writes
// nothing.
const createInstanceSQL = `WITH inst AS (
	INSERT INTO instances (tenant, id, workflow, status, execution, input, created_at, updated_at, ready_at, history_seq)
	VALUES ($1, $2, $3, 'pending', 1, $4, $5, $5, LEAST($5, ` + readyAtSQL + `), 1)
	RETURNING id
), started AS (
	INSERT INTO history (tenant, instance_id, execution, seq, kind, event)
	SELECT $1, $2, 1, 1, 'ExecutionStarted', $6 FROM inst
), kick AS (
	INSERT INTO inbox (tenant, instance_id, kind, execution, visible_at, created_at, trace)
	SELECT $1, $2, 'kick', 1, $5, $5, $7 FROM inst
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
	b.exec("", createInstanceSQL, p.Tenant, p.ID, p.Workflow, backend.RawArg(p.Input), now.UnixNano(), started, p.TraceParent)
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
func (s *Store) InstanceGet(ctx context.Context, p *storage.InstanceGetParams) (*storage.Instance, error) {
	if p == nil {
		return nil, backend.NilParams("postgres: get instance")
	}
	var r *instanceRow
	err := s.do(ctx, func(ctx context.Context) error {
		var err error
		r, err = scanShown(s.pool.QueryRow(ctx,
			`SELECT `+shownCols+` FROM instances WHERE tenant = $1 AND id = $2`, p.Tenant, p.ID))
		if errors.Is(err, pgx.ErrNoRows) {
			return fmt.Errorf("instance %q: %w", p.ID, heraldtype.ErrNotFound)
		}
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("postgres: get instance: %w", err)
	}
	return &r.Instance, nil
}

// InstanceList: see storage.InstanceStore. A page is one range scan of the
// instances_created index (migration 0006).
func (s *Store) InstanceList(ctx context.Context, p *storage.InstanceListParams) ([]*storage.Instance, string, error) {
	if p == nil {
		return nil, "", backend.NilParams("postgres: list instances")
	}
	createdAt, afterID, paged, err := backend.ListCursor(p.After)
	if err != nil {
		return nil, "", fmt.Errorf("postgres: list instances: %w", err)
	}
	// rid > 0 (always true) names the partial index instances_created.
	where := []string{"tenant = $1", "rid > 0"}
	args := []any{p.Tenant}
	arg := func(v any) string {
		args = append(args, v)
		return "$" + strconv.Itoa(len(args))
	}
	if p.Workflow != "" {
		where = append(where, "workflow = "+arg(p.Workflow))
	}
	if p.Status != "" {
		where = append(where, "status = "+arg(string(p.Status)))
	}
	if !p.CreatedAfter.IsZero() {
		where = append(where, "created_at >= "+arg(p.CreatedAfter.UnixNano()))
	}
	if !p.CreatedBefore.IsZero() {
		where = append(where, "created_at < "+arg(p.CreatedBefore.UnixNano()))
	}
	if err := backend.ValidateAttributes(p.Attributes, false); err != nil {
		return nil, "", fmt.Errorf("postgres: list instances: %w", err)
	}
	if paged {
		where = append(where, `(created_at, id COLLATE "C") < (`+arg(createdAt)+`, `+arg(afterID)+`)`)
	}
	limit := backend.ListLimit(p.Limit)
	q := `SELECT ` + shownCols + ` FROM instances WHERE ` + strings.Join(where, " AND ") +
		` ORDER BY created_at DESC, id COLLATE "C" DESC LIMIT ` + arg(limit+1)
	if len(p.Attributes) > 0 {
		args = args[:0]
		q = attributeQuery(p, arg, createdAt, afterID, paged, limit)
	}
	var out []*storage.Instance
	err = s.do(ctx, func(ctx context.Context) error {
		out = nil
		// With the plan settings of the claims: a plan made while the
		// table looked small would sort a bitmap scan of the tenant's
		// whole index instead of walking it backward from the cursor.
		var b batch
		b.exec("", scanSettings)
		b.query("", func(rows pgx.Rows) error {
			for rows.Next() {
				r, err := scanShown(rows)
				if err != nil {
					return err
				}
				out = append(out, &r.Instance)
			}
			return nil
		}, q, args...)
		return b.send(ctx, s.pool)
	})
	if err != nil {
		return nil, "", fmt.Errorf("postgres: list instances: %w", err)
	}
	page, next := backend.ListPage(out, limit)
	return page, next, nil
}

// InstanceTerminate: see storage.InstanceStore.
func (s *Store) InstanceTerminate(ctx context.Context, p *storage.InstanceTerminateParams) ([]history.Event, error) {
	if p == nil {
		return nil, backend.NilParams("postgres: terminate instance")
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
			// Lock the instance first and read its history's end in a
			// later statement: a statement that waited for the lock (a
			// turn was committing) sees the locked row's new version but
			// keeps its own snapshot for everything else, so a history
			// read in the same statement would miss the turn it waited for.
			err := tx.QueryRow(ctx, `SELECT status, execution FROM instances WHERE tenant = $1 AND id = $2
				FOR NO KEY UPDATE`, p.Tenant, p.ID).Scan(&status, &execution)
			if errors.Is(err, pgx.ErrNoRows) {
				return fmt.Errorf("instance %q: %w", p.ID, heraldtype.ErrNotFound)
			}
			if err != nil {
				return fmt.Errorf("load instance: %w", err)
			}
			if heraldtype.Status(status).Terminal() {
				return fmt.Errorf("instance is %s: %w", status, heraldtype.ErrInstanceNotRunning)
			}
			if err := tx.QueryRow(ctx, `SELECT COALESCE(MAX(seq), 0) FROM history
				WHERE tenant = $1 AND instance_id = $2 AND execution = $3`, p.Tenant, p.ID, execution).Scan(&seq); err != nil {
				return fmt.Errorf("load history end: %w", err)
			}
			lt := newLaneTx(ctx, tx, p.Tenant, p.ID, now)
			ev := history.Event{Seq: seq + 1, Time: now, Kind: kind, Failure: failure}
			if err := lt.b.queueHistory("append history", p.Tenant, p.ID, execution, []history.Event{ev}); err != nil {
				return err
			}
			if dropped, err = backend.EndInstance(lt, execution, now); err != nil {
				return err
			}
			lt.b.queueClear(p.Tenant, p.ID, true, true, false)
			lt.b.exec("update instance", `UPDATE instances SET status = $5, failure = $3, updated_at = $4,
				lock_token = NULL, lease_until = 0, not_before = 0, ready_at = NULL
				WHERE tenant = $1 AND id = $2`, p.Tenant, p.ID, f, now.UnixNano(), string(endStatus))
			if err := queueFamilyEnd(lt.b, p.Tenant, p.ID, endStatus, nil, failure, now); err != nil {
				return err
			}
			return lt.flush()
		})
	})
	if err != nil {
		return nil, fmt.Errorf("postgres: terminate instance %q: %w", p.ID, err)
	}
	s.signal(p.Tenant, storage.WorkAll)
	return dropped, nil
}

// HistoryList: see storage.InstanceStore.
func (s *Store) HistoryList(ctx context.Context, p *storage.HistoryListParams) ([]history.Event, error) {
	if p == nil {
		return nil, backend.NilParams("postgres: list history")
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
			return fmt.Errorf("instance %q: %w", p.InstanceID, heraldtype.ErrNotFound)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("postgres: list history: %w", err)
	}
	return evs, nil
}

// laneTx is the primitives of the lane rules of package backend (EndTx,
// HandOnTx) in a transaction, for one instance of a tenant at now. Writes
// are queued in b and sent with the next read (or flush), so a rule costs
// a round trip per read it makes, not per statement.
type laneTx struct {
	ctx        context.Context
	tx         pgx.Tx
	b          *batch
	tenant, id string
	now        time.Time

	delivered bool // Produce was called
}

func newLaneTx(ctx context.Context, tx pgx.Tx, tenant, id string, now time.Time) *laneTx {
	return &laneTx{ctx: ctx, tx: tx, b: &batch{}, tenant: tenant, id: id, now: now}
}

// flush sends the queued statements.
func (t *laneTx) flush() error {
	if len(t.b.steps) == 0 {
		return nil
	}
	err := t.b.send(t.ctx, t.tx)
	*t.b = batch{}
	return err
}

func (t *laneTx) Undelivered(execution int) ([]backend.Undelivered, int, error) {
	var (
		evs     []backend.Undelivered
		lastSeq int
	)
	// events_instance in rid order (see herald_end).
	t.b.query("load undelivered events", func(rows pgx.Rows) error {
		for rows.Next() {
			var (
				e    backend.Undelivered
				lane string
			)
			if err := rows.Scan(&e.EventID, &lane, &e.Name); err != nil {
				return err
			}
			e.Lane = history.Lane(lane)
			evs = append(evs, e)
		}
		return nil
	}, `SELECT event_id, lane, name FROM events
		WHERE tenant = $1 AND instance_id = $2 AND fate IN ('pending', 'buffered') ORDER BY rid`, t.tenant, t.id)
	t.b.queryRow("load last seq", func(row pgx.Row) error { return row.Scan(&lastSeq) },
		`SELECT COALESCE(MAX(seq), 0) FROM history WHERE tenant = $1 AND instance_id = $2 AND execution = $3`,
		t.tenant, t.id, execution)
	if err := t.flush(); err != nil {
		return nil, 0, err
	}
	return evs, lastSeq, nil
}

func (t *laneTx) AppendHistory(execution int, evs []history.Event) error {
	return t.b.queueHistory("append history", t.tenant, t.id, execution, evs)
}

func (t *laneTx) DropEvents(ids []string, reason history.DropReason, execution int) error {
	// One statement per event: a primary-key lookup whatever the plan.
	for _, eid := range ids {
		t.b.exec("drop event", `UPDATE events SET fate = 'dropped', reason = $4,
				execution = CASE WHEN execution = 0 THEN $5 ELSE execution END, updated_at = $6
			WHERE tenant = $1 AND event_id = $3 AND instance_id = $2`,
			t.tenant, t.id, eid, string(reason), execution, t.now.UnixNano())
	}
	return nil
}
