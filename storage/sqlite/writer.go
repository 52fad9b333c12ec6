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
	c      *wconn
	ctx    context.Context
	notify []string // tenants to signal once the transaction commits
}

func (w *wtx) exec(q string, args ...any) (sql.Result, error) {
	return w.c.exec(q, args)
}

func (w *wtx) query(q string, args ...any) (rowsIter, error) {
	r, err := w.c.query(q, args)
	if err != nil {
		return nil, err
	}
	return r, nil
}

func (w *wtx) queryRow(q string, args ...any) scanner {
	r, err := w.c.query(q, args)
	return wrow{rows: r, err: err}
}

// QueryContext makes wtx a querier. ctx is ignored: statements of a write
// run to completion (the caller's context was checked before fn ran).
func (w *wtx) QueryContext(_ context.Context, q string, args ...any) (rowsIter, error) {
	return w.query(q, args...)
}

// QueryRowContext makes wtx a querier; see QueryContext.
func (w *wtx) QueryRowContext(_ context.Context, q string, args ...any) scanner {
	return w.queryRow(q, args...)
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
// requests already waiting (up to maxBatch) and runs them as one batch. It
// closes the writer connection when the store closes.
func (s *Store) writerLoop() {
	defer close(s.writerDone)
	defer func() { s.wcloseErr = s.wc.close() }()
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
	err := s.runTx(func() error {
		w := &wtx{c: s.wc, ctx: context.Background()}
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

// runTx runs fn in a transaction of its own and commits it; if anything
// fails, the transaction is rolled back.
func (s *Store) runTx(fn func() error) error {
	c := s.wc
	if err := c.run(c.begin); err != nil {
		return s.txErr("begin", err)
	}
	if err := fn(); err != nil {
		c.run(c.rollback)
		return err
	}
	if err := c.run(c.commit); err != nil {
		c.run(c.rollback) // a failed COMMIT can leave the transaction open
		return s.txErr("commit", err)
	}
	return nil
}

// runGroup runs the requests in one transaction, each in a savepoint. A
// request whose fn fails is rolled back to its savepoint and answered at
// once; the others are answered after the commit. It returns false if the
// transaction itself failed, leaving the unanswered requests unanswered.
func (s *Store) runGroup(reqs []*writeReq) bool {
	c := s.wc
	if err := c.run(c.begin); err != nil {
		return false
	}
	abort := func() bool {
		c.run(c.rollback) // may fail if SQLite already rolled back: nothing is left open either way
		return false
	}
	ok := 0
	for _, r := range reqs {
		r.notify = nil
		if err := c.run(c.savepoint); err != nil {
			return abort()
		}
		w := &wtx{c: c, ctx: context.Background()}
		if err := call(r, w); err != nil {
			// Answer now: whatever happens to the batch, this request wrote
			// nothing. If SQLite already rolled the whole transaction back
			// (I/O error, full disk), ROLLBACK TO fails and the batch is lost.
			r.finished = true
			r.done <- err
			if rerr := c.run(c.rollbackTo); rerr != nil {
				return abort()
			}
			if rerr := c.run(c.release); rerr != nil {
				return abort()
			}
			continue
		}
		if err := c.run(c.release); err != nil {
			return abort()
		}
		r.notify = w.notify
		ok++
	}
	if err := c.run(c.commit); err != nil {
		return abort()
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
