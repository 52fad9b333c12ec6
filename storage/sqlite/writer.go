package sqlite

import (
	"context"
	"database/sql"
	"fmt"

	"github.com/heraldwf/herald/storage"
)

// writeReq is one write call queued to the writer goroutine. fn runs inside
// a transaction (possibly shared with other calls, inside its own savepoint)
// and must only read and write through the wtx it is given. fn may run more
// than once (if a shared transaction fails, each call is re-run alone), so it
// must assign its results rather than accumulate them.
type writeReq struct {
	ctx  context.Context
	fn   func(*wtx) error
	done chan error // buffered(1): the writer never blocks on it

	finished bool // writer-owned: done has been sent
	notify   []string
}

// wtx is the writer's view of the transaction a request runs in.
type wtx struct {
	tx     *sql.Tx
	ctx    context.Context
	stmts  *writerStmts
	notify []string // tenants to signal once the transaction commits
}

// writerStmts caches the writer connection's prepared statements. It is
// used by the writer goroutine only. A query seen for the first time runs
// unprepared and is prepared after the batch, when the connection is free.
type writerStmts struct {
	db      *sql.DB
	stmts   map[string]*sql.Stmt
	pending map[string]struct{}
}

func newWriterStmts(db *sql.DB) *writerStmts {
	return &writerStmts{db: db, stmts: make(map[string]*sql.Stmt), pending: make(map[string]struct{})}
}

// get returns q's statement bound to tx, or nil if q is not prepared yet.
func (c *writerStmts) get(ctx context.Context, tx *sql.Tx, q string) *sql.Stmt {
	if st, ok := c.stmts[q]; ok {
		return tx.StmtContext(ctx, st)
	}
	c.pending[q] = struct{}{}
	return nil
}

// prepare prepares the queries seen since the last call. Failures are
// ignored: the query keeps running unprepared and reports its own errors.
func (c *writerStmts) prepare() {
	for q := range c.pending {
		if st, err := c.db.PrepareContext(context.Background(), q); err == nil {
			c.stmts[q] = st
		}
		delete(c.pending, q)
	}
}

func (c *writerStmts) close() {
	for q, st := range c.stmts {
		st.Close()
		delete(c.stmts, q)
	}
}

func (w *wtx) exec(q string, args ...any) (sql.Result, error) {
	if st := w.stmts.get(w.ctx, w.tx, q); st != nil {
		return st.ExecContext(w.ctx, args...)
	}
	return w.tx.ExecContext(w.ctx, q, args...)
}

func (w *wtx) query(q string, args ...any) (*sql.Rows, error) {
	return w.QueryContext(w.ctx, q, args...)
}

func (w *wtx) queryRow(q string, args ...any) *sql.Row {
	return w.QueryRowContext(w.ctx, q, args...)
}

// QueryContext makes wtx a querier. ctx is ignored: statements of a write
// run under the writer's context (the caller's was checked before fn ran).
func (w *wtx) QueryContext(_ context.Context, q string, args ...any) (*sql.Rows, error) {
	if st := w.stmts.get(w.ctx, w.tx, q); st != nil {
		return st.QueryContext(w.ctx, args...)
	}
	return w.tx.QueryContext(w.ctx, q, args...)
}

// QueryRowContext makes wtx a querier; see QueryContext.
func (w *wtx) QueryRowContext(_ context.Context, q string, args ...any) *sql.Row {
	if st := w.stmts.get(w.ctx, w.tx, q); st != nil {
		return st.QueryRowContext(w.ctx, args...)
	}
	return w.tx.QueryRowContext(w.ctx, q, args...)
}

// signal schedules a Subscribe notification for tenant after commit.
func (w *wtx) signal(tenant string) {
	for _, t := range w.notify {
		if t == tenant {
			return
		}
	}
	w.notify = append(w.notify, tenant)
}

// write runs fn in a write transaction on the writer goroutine and returns
// fn's error, or the transaction's. A nil error means fn's writes are
// committed; any error means none of them are. If ctx ends before the
// writer starts fn, fn does not run and ctx's error is returned.
func (s *Store) write(ctx context.Context, fn func(*wtx) error) error {
	if s.closed.Load() {
		return storage.ErrClosed
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	r := &writeReq{ctx: ctx, fn: fn, done: make(chan error, 1)}
	select {
	case s.reqs <- r:
	case <-s.closing:
		return storage.ErrClosed
	case <-ctx.Done():
		return ctx.Err()
	}
	// Handed over: the writer answers within the batch it is running, and
	// the answer says whether fn's writes committed, so wait for it even if
	// ctx ends meanwhile.
	return <-r.done
}

// writerLoop is the single writer goroutine: it takes one request, adds the
// requests already waiting (up to maxBatch) and runs them as one batch.
func (s *Store) writerLoop() {
	defer close(s.writerDone)
	defer s.wstmts.close()
	batch := make([]*writeReq, 0, s.cfg.maxBatch)
	for {
		select {
		case r := <-s.reqs:
			batch = append(batch[:0], r)
		case <-s.closing:
			return
		}
	fill:
		for len(batch) < s.cfg.maxBatch {
			select {
			case r := <-s.reqs:
				batch = append(batch, r)
			default:
				break fill
			}
		}
		s.runBatch(batch)
		clear(batch)
		s.wstmts.prepare()
	}
}

func (s *Store) runBatch(batch []*writeReq) {
	live := batch[:0]
	for _, r := range batch {
		if err := r.ctx.Err(); err != nil {
			r.done <- err
			continue
		}
		live = append(live, r)
	}
	switch len(live) {
	case 0:
		return
	case 1:
		s.runAlone(live[0])
		return
	}
	if s.runGroup(live) {
		return
	}
	// The shared transaction failed as a whole (begin, a savepoint or the
	// commit): nothing of it was written. Re-run each unanswered request in
	// a transaction of its own, so one bad request cannot fail the others.
	for _, r := range live {
		if !r.finished {
			s.runAlone(r)
		}
	}
}

// runAlone runs one request in its own transaction and answers it.
func (s *Store) runAlone(r *writeReq) {
	r.notify = nil
	err := s.runTx(func(tx *sql.Tx) error {
		w := &wtx{tx: tx, ctx: context.Background(), stmts: s.wstmts}
		if err := call(r, w); err != nil {
			return err
		}
		r.notify = w.notify
		return nil
	})
	if err == nil {
		s.commits.Add(1)
		s.writes.Add(1)
		s.signal(r.notify)
	}
	r.finished = true
	r.done <- err
}

func (s *Store) runTx(fn func(*sql.Tx) error) error {
	tx, err := s.wdb.BeginTx(context.Background(), nil)
	if err != nil {
		return s.txErr("begin", err)
	}
	if err := fn(tx); err != nil {
		tx.Rollback()
		return err
	}
	if err := tx.Commit(); err != nil {
		return s.txErr("commit", err)
	}
	return nil
}

// runGroup runs the requests in one transaction, each in a savepoint. A
// request whose fn fails is rolled back to its savepoint and answered at
// once; the others are answered after the commit. It returns false if the
// transaction itself failed, leaving the unanswered requests unanswered.
func (s *Store) runGroup(reqs []*writeReq) bool {
	bg := context.Background()
	tx, err := s.wdb.BeginTx(bg, nil)
	if err != nil {
		return false
	}
	ok := 0
	for _, r := range reqs {
		r.notify = nil
		if _, err := tx.ExecContext(bg, "SAVEPOINT herald_req"); err != nil {
			tx.Rollback()
			return false
		}
		w := &wtx{tx: tx, ctx: bg, stmts: s.wstmts}
		if err := call(r, w); err != nil {
			// Answer now: whatever happens to the batch, this request wrote
			// nothing. If SQLite already rolled the whole transaction back
			// (I/O error, full disk), ROLLBACK TO fails and the batch is lost.
			r.finished = true
			r.done <- err
			if _, rerr := tx.ExecContext(bg, "ROLLBACK TO herald_req"); rerr != nil {
				tx.Rollback()
				return false
			}
			if _, rerr := tx.ExecContext(bg, "RELEASE herald_req"); rerr != nil {
				tx.Rollback()
				return false
			}
			continue
		}
		if _, err := tx.ExecContext(bg, "RELEASE herald_req"); err != nil {
			tx.Rollback()
			return false
		}
		r.notify = w.notify
		ok++
	}
	if err := tx.Commit(); err != nil {
		return false
	}
	if ok > 0 {
		s.commits.Add(1)
		s.writes.Add(int64(ok))
	}
	for _, r := range reqs {
		if !r.finished {
			s.signal(r.notify)
			r.finished = true
			r.done <- nil
		}
	}
	return true
}

// call runs r.fn, turning a panic into an error so that a bug in one
// request cannot kill the writer goroutine (and with it every later write).
func call(r *writeReq, w *wtx) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("internal error: panic in write: %v", p)
		}
	}()
	return r.fn(w)
}

func (s *Store) signal(tenants []string) {
	for _, t := range tenants {
		s.hub.Notify(t)
	}
}

func (s *Store) txErr(op string, err error) error {
	if s.closed.Load() {
		return fmt.Errorf("%s: %w", op, storage.ErrClosed)
	}
	return fmt.Errorf("%s transaction: %w", op, err)
}
