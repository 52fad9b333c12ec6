package postgres

import (
	"context"
	"sync"
	"time"
)

// Deferred raise flushes.
//
// A raise that hands its instance off to a turn of this process
// (EventRaiseParams.OnClaimed) commits with synchronous_commit off: its
// transaction does not wait for the WAL flush. The turn it hands off
// starts at once, and EventRaise returns only once the raise is durable,
// which the turn's own commit makes it: PostgreSQL flushes the WAL in
// order, so a synchronous commit whose transaction began after the raise's
// commit returned has flushed the raise's commit record too. A round trip
// thus waits for one WAL flush instead of two, as on SQLite (linger.go
// there). If no such commit has begun within raiseLinger (the turn failed,
// or has not got to its commit), or none that began has succeeded within
// raiseLingerMax, the raise makes one itself: a transaction that takes a
// transaction id and commits synchronously, whose commit record is flushed
// with everything before it (flushWAL). Under load a commit often takes
// longer than raiseLinger, most of it queued behind the batch in flight:
// the raise then waits for the commit already on its way rather than add
// a transaction to the queue.
//
// What a raise wrote is visible to other transactions from its commit on,
// before it is durable: a read may see the event pending a few
// milliseconds before EventRaise returns, as with any asynchronous commit.
// The one answer that vouches for a raise, the receipt of a duplicate,
// waits for the flush (raiseSlow).

// raiseLinger is how long a raise whose commit was deferred waits for a
// synchronous commit of this store to make it durable, or to begin, before
// it flushes the WAL itself; raiseLingerMax bounds the wait for a commit
// that has begun.
const (
	raiseLinger    = 2 * time.Millisecond
	raiseLingerMax = 50 * time.Millisecond
)

// walMark tracks which of this store's synchronous write transactions have
// committed. Each takes a number when it begins (begin); once it has
// committed, done raises the mark to its number. A commit that returned
// before number n was taken is durable once the mark reaches n.
type walMark struct {
	mu      sync.Mutex
	begun   int64 // numbers taken
	mark    int64 // the highest number of a committed transaction
	waiters []walWaiter
	// inFlight are the numbers of the transactions begun and not yet
	// ended (end).
	inFlight map[int64]struct{}

	// The flush barrier in flight (flushWAL), if any.
	flushing *walFlush
}

type walWaiter struct {
	need int64
	ch   chan struct{}
}

// walFlush is a flush barrier: the transaction number it took, and its
// outcome once done is closed.
type walFlush struct {
	n    int64
	done chan struct{}
	err  error
}

// begin numbers a synchronous write transaction about to begin; the
// caller ends it with end.
func (m *walMark) begin() int64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.beginLocked()
}

func (m *walMark) beginLocked() int64 {
	m.begun++
	if m.inFlight == nil {
		m.inFlight = make(map[int64]struct{})
	}
	m.inFlight[m.begun] = struct{}{}
	return m.begun
}

// end records that transaction n ended: committed synchronously (it wrote
// WAL, and its commit record was flushed: done), or not.
func (m *walMark) end(n int64, committed bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	// In one critical section: a waiter that finds n no longer in flight
	// (coming) finds the mark moved too.
	delete(m.inFlight, n)
	if committed {
		m.doneLocked(n)
	}
}

// coming reports whether the mark has reached need, or else whether a
// transaction numbered need or more is in flight: one whose success will
// move the mark to need.
func (m *walMark) coming(need int64) (reached, coming bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.mark >= need {
		return true, false
	}
	for n := range m.inFlight {
		if n >= need {
			return false, true
		}
	}
	return false, false
}

// next is the number the next transaction to begin will take: a commit
// that has returned is durable once the mark reaches it.
func (m *walMark) next() int64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.begun + 1
}

// done raises the mark to n, a transaction that committed synchronously,
// and wakes the waiters it covers.
func (m *walMark) done(n int64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.doneLocked(n)
}

func (m *walMark) doneLocked(n int64) {
	if n <= m.mark {
		return
	}
	m.mark = n
	keep := m.waiters[:0]
	for _, w := range m.waiters {
		if w.need <= n {
			close(w.ch)
			continue
		}
		keep = append(keep, w)
	}
	clear(m.waiters[len(keep):])
	m.waiters = keep
}

// wait returns a channel closed once the mark reaches need (nil if it
// has), and a function that withdraws the wait.
func (m *walMark) wait(need int64) (<-chan struct{}, func()) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.mark >= need {
		return nil, func() {}
	}
	ch := make(chan struct{})
	m.waiters = append(m.waiters, walWaiter{need: need, ch: ch})
	return ch, func() {
		m.mu.Lock()
		defer m.mu.Unlock()
		for i, w := range m.waiters {
			if w.ch == ch {
				m.waiters = append(m.waiters[:i], m.waiters[i+1:]...)
				return
			}
		}
	}
}

// awaitDurable returns once the mark reaches need: at once if it has,
// else when a synchronous commit of this store reaches it (waiting
// raiseLinger at a time, for as long as one that would is in flight, up to
// raiseLingerMax), else after a flush barrier (flushWAL). It returns the
// barrier's error, or ctx's if ctx ends first; the raise was committed
// either way, and is durable at the latest once PostgreSQL's WAL writer has
// flushed it.
func (s *Store) awaitDurable(ctx context.Context, need int64) error {
	ch, cancel := s.wal.wait(need)
	if ch == nil {
		return nil
	}
	defer cancel()
	t := time.NewTimer(s.cfg.raiseLinger)
	defer t.Stop()
	for waited := s.cfg.raiseLinger; ; waited += s.cfg.raiseLinger {
		select {
		case <-ch:
			return nil
		case <-t.C:
		case <-s.closing: // no turn of this store will commit: flush now
			return s.flushWAL(ctx, need)
		case <-ctx.Done():
			return ctx.Err()
		}
		// Both channels may have been ready: the mark decides.
		reached, coming := s.wal.coming(need)
		if reached {
			return nil
		}
		if waited >= raiseLingerMax || !coming {
			return s.flushWAL(ctx, need)
		}
		t.Reset(s.cfg.raiseLinger)
	}
}

// flushWAL makes every transaction committed before a number of need or
// more was taken durable: it commits, synchronously, a transaction that
// takes a transaction id (so that its commit writes a commit record, whose
// flush flushes the WAL before it). Concurrent callers share one barrier
// when it began late enough for them.
func (s *Store) flushWAL(ctx context.Context, need int64) error {
	m := &s.wal
	m.mu.Lock()
	f := m.flushing
	if f == nil || f.n < need {
		f = &walFlush{n: m.beginLocked(), done: make(chan struct{})}
		m.flushing = f
		m.mu.Unlock()
		// The barrier does not end with the caller's context: others may
		// wait for it. It changes nothing, so any failure (a connection
		// killed under it, say) is tried again, as often as a transaction.
		bctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), batchTimeout)
		f.err = s.retry(bctx, func(ctx context.Context) error {
			_, err := s.pool.Exec(ctx, `SELECT pg_current_xact_id()`)
			return err
		}, func(err error) (error, bool) { return err, true })
		cancel()
		m.end(f.n, f.err == nil)
		m.mu.Lock()
		if m.flushing == f {
			m.flushing = nil
		}
		m.mu.Unlock()
		close(f.done)
		return f.err
	}
	m.mu.Unlock()
	select {
	case <-f.done:
		return f.err
	case <-ctx.Done():
		return ctx.Err()
	}
}
