package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"

	"modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"

	"github.com/heraldwf/herald/heraldtype"
	"github.com/heraldwf/herald/history"
	"github.com/heraldwf/herald/storage"
	"github.com/heraldwf/herald/storage/internal/backend"
)

// querier is what the helpers need from the writer's transaction (wtx) or
// the read pool (reader).
type querier interface {
	QueryContext(ctx context.Context, query string, args ...any) (rowsIter, error)
	QueryRowContext(ctx context.Context, query string, args ...any) scanner
}

// rowsIter is a query's rows: *sql.Rows on the read pool, *wrows in the
// writer.
type rowsIter interface {
	Next() bool
	Scan(dest ...any) error
	Err() error
	Close() error
}

// nonTerminal is the SQL list of statuses that can still run.
const nonTerminal = `('pending', 'running')`

// jsonArg stores v as JSON TEXT.
func jsonArg(v any) (any, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("encode %T: %w", v, err)
	}
	return string(b), nil
}

func failureArg(f *history.Failure) (any, error) {
	if f == nil {
		return nil, nil
	}
	b, err := json.Marshal(f)
	if err != nil {
		return nil, fmt.Errorf("encode failure: %w", err)
	}
	return string(b), nil
}

// isConstraint reports whether err is a SQLite constraint violation.
func isConstraint(err error) bool {
	var se *sqlite.Error
	return errors.As(err, &se) && se.Code()&0xff == sqlite3.SQLITE_CONSTRAINT
}

// reader runs a read: one statement on the raw read pool (rpool), or,
// inside tx, through statements prepared on the database/sql read pool
// (reads that need one snapshot for several statements).
type reader struct {
	s  *Store
	tx *sql.Tx
}

func (s *Store) reader(tx *sql.Tx) reader { return reader{s: s, tx: tx} }

// txStmt returns q prepared on the read pool and bound to r.tx, or nil if
// it does not prepare (the unprepared query then reports the error).
func (r reader) txStmt(ctx context.Context, q string) *sql.Stmt {
	v, ok := r.s.rstmts.Load(q)
	if !ok {
		prepared, err := r.s.rdb.PrepareContext(ctx, q)
		if err != nil {
			return nil
		}
		if v, ok = r.s.rstmts.LoadOrStore(q, prepared); ok {
			prepared.Close()
		} else {
			v = prepared
		}
	}
	return r.tx.StmtContext(ctx, v.(*sql.Stmt))
}

func (r reader) QueryContext(ctx context.Context, q string, args ...any) (rowsIter, error) {
	if r.tx == nil {
		rows, err := r.s.rpool.query(ctx, q, args)
		if err != nil {
			return nil, err
		}
		return rows, nil
	}
	if st := r.txStmt(ctx, q); st != nil {
		return st.QueryContext(ctx, args...)
	}
	return r.tx.QueryContext(ctx, q, args...)
}

func (r reader) QueryRowContext(ctx context.Context, q string, args ...any) scanner {
	if r.tx == nil {
		rows, err := r.s.rpool.query(ctx, q, args)
		return wrow{rows: rows, err: err}
	}
	if st := r.txStmt(ctx, q); st != nil {
		return st.QueryRowContext(ctx, args...)
	}
	return r.tx.QueryRowContext(ctx, q, args...)
}

// readErr wraps the error of a read, mapping a closed store to ErrClosed.
func (s *Store) readErr(err error) error {
	if s.closed.Load() && !errors.Is(err, heraldtype.ErrClosed) {
		return fmt.Errorf("%w (%v)", heraldtype.ErrClosed, err)
	}
	return err
}

// ---- instances ----

// instanceRow is an instance with its lease.
type instanceRow struct {
	storage.Instance
	lockToken  sql.NullString
	leaseUntil int64
}

const instanceCols = `tenant, id, workflow, status, execution, input, output, failure, created_at, updated_at, blocked, parent_id, has_children, lock_token, lease_until`

type scanner interface{ Scan(dest ...any) error }

func scanInstance(sc scanner) (*instanceRow, error) {
	var (
		r   instanceRow
		row backend.InstanceRow
	)
	if err := sc.Scan(append(row.Dest(), &r.lockToken, &r.leaseUntil)...); err != nil {
		return nil, err
	}
	inst, err := row.Instance()
	if err != nil {
		return nil, err
	}
	r.Instance = inst
	return &r, nil
}

// getInstance loads an instance; heraldtype.ErrNotFound if it does not exist.
func getInstance(ctx context.Context, q querier, tenant, id string) (*instanceRow, error) {
	r, err := scanInstance(q.QueryRowContext(ctx,
		`SELECT `+instanceCols+` FROM instances WHERE tenant = ? AND id = ?`, tenant, id))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("instance %q: %w", id, heraldtype.ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("load instance %q: %w", id, err)
	}
	return r, nil
}

// ---- history ----

func loadHistory(ctx context.Context, q querier, tenant, id string, execution, afterSeq, limit int) ([]history.Event, error) {
	docs, err := loadHistoryDocs(ctx, q, tenant, id, execution, afterSeq, limit)
	if err != nil {
		return nil, err
	}
	return decodeHistory(docs)
}

func decodeHistory(docs [][]byte) ([]history.Event, error) {
	if len(docs) == 0 {
		return nil, nil
	}
	evs := make([]history.Event, len(docs))
	for i, b := range docs {
		ev, err := backend.DecodeHistoryEvent(b)
		if err != nil {
			return nil, err
		}
		evs[i] = ev
	}
	return evs, nil
}

// loadHistoryDocs reads an execution's history documents, undecoded.
func loadHistoryDocs(ctx context.Context, q querier, tenant, id string, execution, afterSeq, limit int) ([][]byte, error) {
	if limit <= 0 {
		limit = -1 // SQLite: no limit
	}
	rows, err := q.QueryContext(ctx, `SELECT event FROM history
		WHERE tenant = ? AND instance_id = ? AND execution = ? AND seq > ?
		ORDER BY seq LIMIT +?`, tenant, id, execution, afterSeq, limit)
	if err != nil {
		return nil, fmt.Errorf("load history: %w", err)
	}
	defer rows.Close()
	var docs [][]byte
	for rows.Next() {
		var b []byte
		if err := rows.Scan(&b); err != nil {
			return nil, fmt.Errorf("load history: %w", err)
		}
		docs = append(docs, b)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("load history: %w", err)
	}
	return docs, nil
}

// appendHistory inserts events into an execution's history. Their Seq must
// be set and not taken: a duplicate fails on the primary key.
func appendHistory(w *wtx, tenant, id string, execution int, evs []history.Event) error {
	docs, err := encodeHistory(evs)
	if err != nil {
		return err
	}
	return appendEncoded(w, tenant, id, execution, evs, docs)
}

// encodeHistory encodes events for appendEncoded. TurnCommit calls it before
// handing the write to the writer goroutine, which is the bottleneck.
func encodeHistory(evs []history.Event) ([]string, error) {
	docs := make([]string, len(evs))
	for i := range evs {
		doc, err := backend.EncodeHistoryEvent(i, &evs[i])
		if err != nil {
			return nil, err
		}
		docs[i] = doc
	}
	return docs, nil
}

// appendEncoded is appendHistory with the documents encodeHistory made.
func appendEncoded(w *wtx, tenant, id string, execution int, evs []history.Event, docs []string) error {
	for i := range evs {
		ev, doc := &evs[i], docs[i]
		if _, err := w.exec(`INSERT INTO history (tenant, instance_id, execution, seq, kind, event)
			VALUES (?, ?, ?, ?, ?, ?)`, tenant, id, execution, ev.Seq, string(ev.Kind), doc); err != nil {
			if isConstraint(err) {
				return fmt.Errorf("append history: execution %d already has seq %d (%s)", execution, ev.Seq, ev.Kind)
			}
			return fmt.Errorf("append history seq %d: %w", ev.Seq, err)
		}
	}
	return nil
}

func lastSeq(w *wtx, tenant, id string, execution int) (int, error) {
	var n int
	if err := w.queryRow(`SELECT COALESCE(MAX(seq), 0) FROM history
		WHERE tenant = ? AND instance_id = ? AND execution = ?`, tenant, id, execution).Scan(&n); err != nil {
		return 0, fmt.Errorf("read last seq: %w", err)
	}
	return n, nil
}

// ---- inbox ----

const messageCols = `id, kind, execution, task_seq, lane, event_id, name, key, payload, latest, result, failure, visible_at, created_at, trace`

// loadMessages reads an instance's messages for a turn, at most limit.
// Only timers wait for their time: every other message is returned as soon
// as it is committed, whatever now says, so a claim whose now was taken
// before a concurrent raise committed still sees every message that
// precedes the ones it returns (a first turn must see every event raised
// before start). A message that does not decode is left out and reported
// as bad (it fails the turn, not the read).
func loadMessages(ctx context.Context, q querier, tenant, id string, now int64, limit int) (ms []storage.Message, bad, err error) {
	rows, err := q.QueryContext(ctx, `SELECT `+messageCols+` FROM inbox
		WHERE tenant = ? AND instance_id = ? AND (visible_at <= ? OR kind <> 'timer_fired')
		ORDER BY id LIMIT +?`, tenant, id, now, limit)
	if err != nil {
		return nil, nil, fmt.Errorf("load messages: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var r backend.MessageRow
		if err := rows.Scan(r.Dest()...); err != nil {
			return nil, nil, fmt.Errorf("load messages: %w", err)
		}
		m, err := r.Message()
		if err != nil {
			if bad == nil {
				bad = fmt.Errorf("message %d: %w", m.ID, err)
			}
			continue
		}
		ms = append(ms, m)
	}
	if err := rows.Err(); err != nil {
		return nil, nil, fmt.Errorf("load messages: %w", err)
	}
	return ms, bad, nil
}

// insertMessage adds a message to an instance's inbox.
func insertMessage(w *wtx, tenant, id string, m *storage.Message, now int64) error {
	_, err := insertExpiringMessage(w, tenant, id, m, 0, now)
	return err
}

// insertExpiringMessage adds a message to an instance's inbox with an
// expiry time (unix nanoseconds, 0: never; see EventExpire), and returns
// its id. Only event messages kept for an instance that does not exist yet
// get an expiry time.
func insertExpiringMessage(w *wtx, tenant, id string, m *storage.Message, expiresAt, now int64) (int64, error) {
	f, err := failureArg(m.Failure)
	if err != nil {
		return 0, err
	}
	res, err := w.exec(`INSERT INTO inbox
		(tenant, instance_id, kind, execution, task_seq, lane, event_id, name, key, payload, latest, result, failure, visible_at, created_at, expires_at, trace)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
		tenant, id, string(m.Kind), m.Execution, m.TaskSeq, string(m.Lane), m.EventID, m.Name, m.Key,
		backend.RawArg(m.Payload), m.Latest, backend.RawArg(m.Result), f, backend.Nanos(m.VisibleAt), now, expiresAt, m.TraceParent)
	if err != nil {
		return 0, fmt.Errorf("insert %s message: %w", m.Kind, err)
	}
	mid, err := res.LastInsertId()
	if err != nil {
		return 0, fmt.Errorf("insert %s message: %w", m.Kind, err)
	}
	return mid, nil
}

// readyAt is the SQL expression of an instance's ready_at (the earliest
// visible_at of its inbox) for ?1 = tenant, ?2 = instance id.
const readyAt = `(SELECT MIN(visible_at) FROM inbox WHERE tenant = ?1 AND instance_id = ?2)`

// lowerReady updates an instance's ready_at after a message visible at
// visibleAt was added to its inbox. A missing instance is left alone.
func lowerReady(w *wtx, tenant, id string, visibleAt int64) error {
	if _, err := w.exec(`UPDATE instances SET ready_at = MIN(COALESCE(ready_at, ?3), ?3)
		WHERE tenant = ?1 AND id = ?2`, tenant, id, visibleAt); err != nil {
		return fmt.Errorf("update ready time: %w", err)
	}
	return nil
}

// ---- events ----

const eventCols = `tenant, event_id, instance_id, lane, name, fate, reason, execution, origin_execution, wait_number, key, received_at, updated_at, sender`

func scanEvent(sc scanner) (*heraldtype.EventRecord, error) {
	var r backend.EventRow
	if err := sc.Scan(r.Dest()...); err != nil {
		return nil, err
	}
	return r.Event(), nil
}
