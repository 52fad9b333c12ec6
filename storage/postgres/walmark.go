package postgres

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/heraldwf/herald/heraldtype"
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
// there). If no such commit succeeds within raiseLinger (the turn failed,
// or is slow), the raise makes one itself: a transaction that takes a
// transaction id and commits synchronously, whose commit record is flushed
// with everything before it (flushWAL).
//
// What a raise wrote is visible to other transactions from its commit on,
// before it is durable: a read may see the event pending a few
// milliseconds before EventRaise returns, as with any asynchronous commit.
// The one answer that vouches for a raise, the receipt of a duplicate,
// waits for the flush (raiseSlow).

// raiseLinger is how long a raise whose commit was deferred waits for a
// synchronous commit of this store to make it durable before it flushes
// the WAL itself.
const raiseLinger = 2 * time.Millisecond

// walMark tracks which of this store's synchronous write transactions have
// committed. Each takes a number when it begins (begin); once it has
// committed, done raises the mark to its number. A commit that returned
// before number n was taken is durable once the mark reaches n.
type walMark struct {
	mu      sync.Mutex
	begun   int64 // numbers taken
	mark    int64 // the highest number of a committed transaction
	waiters []walWaiter

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

// begin numbers a synchronous write transaction about to begin.
func (m *walMark) begin() int64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.begun++
	return m.begun
}

// next is the number the next transaction to begin will take: a commit
// that has returned is durable once the mark reaches it.
func (m *walMark) next() int64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.begun + 1
}

// done records that transaction n committed synchronously (it wrote WAL,
// and its commit record was flushed), and wakes the waiters it covers.
func (m *walMark) done(n int64) {
	m.mu.Lock()
	defer m.mu.Unlock()
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
// else when a synchronous commit of this store reaches it within
// raiseLinger, else after a flush barrier (flushWAL). It returns the
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
	select {
	case <-ch:
		return nil
	case <-t.C:
	case <-s.closing: // no turn of this store will commit: flush now
	case <-ctx.Done():
		return ctx.Err()
	}
	return s.flushWAL(ctx, need)
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
		m.begun++
		f = &walFlush{n: m.begun, done: make(chan struct{})}
		m.flushing = f
		m.mu.Unlock()
		// The barrier does not end with the caller's context: others may
		// wait for it. It changes nothing, so any failure (a connection
		// killed under it, say) is tried again, as often as a transaction.
		bctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), batchTimeout)
		for attempt := 0; ; attempt++ {
			if _, f.err = s.pool.Exec(bctx, `SELECT pg_current_xact_id()`); f.err == nil || attempt >= s.cfg.maxRetries || bctx.Err() != nil {
				break
			}
			t := time.NewTimer(time.Duration(attempt+1) * time.Millisecond)
			select {
			case <-bctx.Done():
			case <-t.C:
			}
			t.Stop()
		}
		cancel()
		if f.err != nil && connectionLost(f.err) && !errors.Is(f.err, heraldtype.ErrUnavailable) {
			f.err = fmt.Errorf("%w: %w", heraldtype.ErrUnavailable, f.err)
		}
		if f.err == nil {
			m.done(f.n)
		}
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
