package postgres

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/heraldwf/herald/heraldtype"
	"github.com/heraldwf/herald/history"
	"github.com/heraldwf/herald/internal/testdb"
	"github.com/heraldwf/herald/storage"
)

// barrierCounter counts the flush barriers (flushWAL, and the one a
// duplicate's receipt takes) run on a store's connections.
type barrierCounter struct{ n atomic.Int64 }

func (c *barrierCounter) TraceQueryStart(ctx context.Context, _ *pgx.Conn, d pgx.TraceQueryStartData) context.Context {
	if strings.Contains(d.SQL, "pg_current_xact_id") {
		c.n.Add(1)
	}
	return ctx
}

func (c *barrierCounter) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

// deferredStore opens a store whose deferred raises wait linger for a
// commit, counting its flush barriers, with instance "i" parked.
func deferredStore(t *testing.T, linger time.Duration) (context.Context, *Store, *barrierCounter) {
	t.Helper()
	bc := &barrierCounter{}
	ctx, s, _, _ := openInSchema(t, time.Minute, WithPoolConfig(func(c *pgxpool.Config) { c.ConnConfig.Tracer = bc }))
	s.cfg.raiseLinger = linger
	if _, err := s.InstanceCreate(ctx, &storage.InstanceCreateParams{Tenant: "t", ID: "i", Workflow: "wf"}); err != nil {
		t.Fatal(err)
	}
	turns, err := s.TurnClaim(ctx, &storage.TurnClaimParams{Tenant: "t", Lease: time.Minute})
	if err != nil || len(turns) != 1 {
		t.Fatalf("claim the first turn: %v, %d turns", err, len(turns))
	}
	if _, err := s.TurnCommit(ctx, &storage.TurnCommitParams{Tenant: "t", InstanceID: "i", LockToken: turns[0].LockToken,
		Execution: 1, Status: heraldtype.StatusRunning, ConsumedMessages: []int64{turns[0].Messages[0].ID},
		NewEvents: []history.Event{{Seq: 2, Kind: history.EventSubscribed, Name: "go", Time: time.Now()}}}); err != nil {
		t.Fatal(err)
	}
	return ctx, s, bc
}

// raiseDeferred raises event id to "i" with a hand-off and OnClaimed in a
// goroutine; it returns the turn OnClaimed got and a channel that yields
// EventRaise's error.
func raiseDeferred(ctx context.Context, t *testing.T, s *Store, id string) (*storage.Turn, <-chan error) {
	t.Helper()
	claimed := make(chan *storage.Turn, 1)
	done := make(chan error, 1)
	go func() {
		_, err := s.EventRaise(ctx, &storage.EventRaiseParams{Tenant: "t", InstanceID: "i", EventID: id,
			Lane: history.LanePositional, Name: "go", Claim: &storage.TurnClaimParams{Lease: time.Minute},
			OnClaimed: func(t *storage.Turn) { claimed <- t }})
		done <- err
	}()
	select {
	case turn := <-claimed:
		return turn, done
	case err := <-done:
		t.Fatalf("EventRaise returned %v before it handed the turn over", err)
	case <-time.After(10 * time.Second):
		t.Fatal("no turn handed over")
	}
	return nil, nil
}

// waitWaiting waits until a raise waits on s's mark.
func waitWaiting(t *testing.T, s *Store) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		s.wal.mu.Lock()
		n := len(s.wal.waiters)
		s.wal.mu.Unlock()
		if n > 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("no raise waits for its flush")
		}
		time.Sleep(time.Millisecond)
	}
}

func wantReturned(t *testing.T, what string, done <-chan error, want error) {
	t.Helper()
	select {
	case err := <-done:
		if (want == nil) != (err == nil) || (want != nil && !errors.Is(err, want)) {
			t.Fatalf("%s: EventRaise returned %v, want %v", what, err, want)
		}
	case <-time.After(10 * time.Second):
		t.Fatalf("%s: EventRaise has not returned", what)
	}
}

// A raise that hands its turn over (OnClaimed) commits without waiting for
// the WAL flush and returns once the turn's commit, a synchronous commit
// begun after it, has flushed it; it runs no barrier of its own.
func TestDeferredRaiseReturnsWithTheTurnsCommit(t *testing.T) {
	ctx, s, bc := deferredStore(t, time.Hour)
	turn, done := raiseDeferred(ctx, t, s, "e1")
	waitWaiting(t, s)
	select {
	case err := <-done:
		t.Fatalf("EventRaise returned (%v) before any commit flushed it", err)
	default:
	}
	if _, err := s.TurnCommit(ctx, &storage.TurnCommitParams{Tenant: "t", InstanceID: "i", LockToken: turn.LockToken,
		Execution: 1, Status: heraldtype.StatusRunning, ConsumedMessages: []int64{turn.Messages[0].ID},
		NewEvents: []history.Event{{Seq: 3, Kind: history.EventRaised, EventID: "e1", Name: "go", Time: time.Now()}}}); err != nil {
		t.Fatal(err)
	}
	wantReturned(t, "after the turn's commit", done, nil)
	if n := bc.n.Load(); n != 0 {
		t.Fatalf("%d flush barriers, want none", n)
	}
}

// Without a commit within the linger, the raise flushes the WAL itself.
func TestDeferredRaiseFlushesAlone(t *testing.T) {
	ctx, s, bc := deferredStore(t, 0)
	_, done := raiseDeferred(ctx, t, s, "e1")
	wantReturned(t, "alone", done, nil)
	if n := bc.n.Load(); n != 1 {
		t.Fatalf("%d flush barriers, want 1", n)
	}
	s.wal.mu.Lock()
	mark, begun := s.wal.mark, s.wal.begun
	s.wal.mu.Unlock()
	if mark != begun {
		t.Fatalf("mark %d after the barrier, want %d", mark, begun)
	}
	// The receipt of a duplicate vouches for the first raise: it flushes
	// too.
	res, err := s.EventRaise(ctx, &storage.EventRaiseParams{Tenant: "t", InstanceID: "i", EventID: "e1",
		Lane: history.LanePositional, Name: "go"})
	if err != nil || !res.Duplicate {
		t.Fatalf("raise of e1 again: %+v, %v; want a duplicate", res, err)
	}
	if n := bc.n.Load(); n != 2 {
		t.Fatalf("%d flush barriers after a duplicate, want 2", n)
	}
}

// A raise that hands off without OnClaimed gets the turn in its result and
// commits synchronously: it neither waits nor flushes.
func TestHandOffWithoutOnClaimedDoesNotDefer(t *testing.T) {
	ctx, s, bc := deferredStore(t, time.Hour)
	res, err := s.EventRaise(ctx, &storage.EventRaiseParams{Tenant: "t", InstanceID: "i", EventID: "e1",
		Lane: history.LanePositional, Name: "go", Claim: &storage.TurnClaimParams{Lease: time.Minute}})
	if err != nil || res.Turn == nil {
		t.Fatalf("raise: %+v, %v; want a handed-off turn", res, err)
	}
	if n := bc.n.Load(); n != 0 {
		t.Fatalf("%d flush barriers, want none", n)
	}
}

// A deferred raise whose context ends while it waits returns the
// context's error: it committed, but is not known to be durable.
func TestDeferredRaiseContextEnds(t *testing.T) {
	ctx, s, _ := deferredStore(t, time.Hour)
	rctx, cancel := context.WithCancel(ctx)
	_, done := raiseDeferred(rctx, t, s, "e1")
	waitWaiting(t, s)
	cancel()
	wantReturned(t, "after its context ended", done, context.Canceled)
}

// Close lets a deferred raise that waits finish: it flushes at once, and
// Close returns after it.
func TestCloseFlushesDeferredRaises(t *testing.T) {
	ctx, s, bc := deferredStore(t, time.Hour)
	_, done := raiseDeferred(ctx, t, s, "e1")
	waitWaiting(t, s)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	wantReturned(t, "on Close", done, nil)
	if n := bc.n.Load(); n != 1 {
		t.Fatalf("%d flush barriers, want 1", n)
	}
}

// The mark wakes exactly the waiters a committed number covers, and a
// waiter that withdraws is forgotten.
func TestWALMark(t *testing.T) {
	var m walMark
	a, b := m.begin(), m.begin()
	need := m.next()
	if a != 1 || b != 2 || need != 3 {
		t.Fatalf("numbers %d, %d, next %d; want 1, 2, 3", a, b, need)
	}
	ch, cancel := m.wait(need)
	if ch == nil {
		t.Fatal("wait for a number not begun returned at once")
	}
	defer cancel()
	ch2, cancel2 := m.wait(need + 1)
	if _, c := m.coming(a); !c {
		t.Fatal("coming: no transaction in flight for a number begun")
	}
	if _, c := m.coming(need); c {
		t.Fatal("coming: a transaction in flight for a number not yet taken")
	}
	m.end(a, false) // failed: moves nothing
	m.end(b, true)  // begun before need: does not cover it
	select {
	case <-ch:
		t.Fatal("woken by a transaction begun before the raise committed")
	default:
	}
	c := m.begin()
	if _, c := m.coming(need); !c {
		t.Fatal("coming: no transaction in flight for need, with one begun after it")
	}
	m.end(c, true)
	if r, c := m.coming(need); !r || c {
		t.Fatalf("coming after the one that covers need committed: reached %v, in flight %v; want true, false", r, c)
	}
	select {
	case <-ch:
	default:
		t.Fatal("not woken by a transaction begun after the raise committed")
	}
	cancel2()
	m.mu.Lock()
	n := len(m.waiters)
	m.mu.Unlock()
	if n != 0 {
		t.Fatalf("%d waiters left, want 0", n)
	}
	select {
	case <-ch2:
		t.Fatal("a withdrawn waiter was woken")
	default:
	}
	if ch, _ := m.wait(need); ch != nil {
		t.Fatal("wait for a number the mark has passed did not return at once")
	}
}

// A flush barrier whose connection was killed is tried again: it changes
// nothing, so it is always safe to.
func TestFlushBarrierRetriesKilledConnections(t *testing.T) {
	ctx, s, bc := deferredStore(t, time.Hour)
	_, done := raiseDeferred(ctx, t, s, "e1")
	waitWaiting(t, s)
	var app string
	if err := s.pool.QueryRow(ctx, `SELECT current_setting('application_name')`).Scan(&app); err != nil {
		t.Fatal(err)
	}
	// Kill every idle connection of the pool (by pid, from another
	// connection), so that the barrier meets a dead one first.
	conn, err := pgx.Connect(ctx, testdb.PostgresURL(t))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	pids := []uint32{}
	for _, c := range s.pool.AcquireAllIdle(ctx) {
		pids = append(pids, c.Conn().PgConn().PID())
		c.Release()
	}
	if len(pids) == 0 {
		t.Fatal("no idle connection to kill")
	}
	if _, err := conn.Exec(ctx, `SELECT pg_terminate_backend(pid) FROM unnest($1::int[]) AS pid`, pids); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil { // the waiting raise flushes now
		t.Fatal(err)
	}
	wantReturned(t, "after its connection was killed", done, nil)
	if n := bc.n.Load(); n < 2 {
		t.Fatalf("%d flush barriers, want a second after the first failed", n)
	}
}

// A deferred raise keeps waiting, past raiseLinger, for a commit that began
// after it and is still in flight, instead of flushing; once no such commit
// is in flight (it failed), it flushes.
func TestAwaitDurableWaitsForACommitInFlight(t *testing.T) {
	ctx, s, bc := deferredStore(t, time.Millisecond)
	for _, commits := range []bool{true, false} {
		before := bc.n.Load()
		need := s.wal.next()
		n := s.wal.begin() // a commit on its way
		done := make(chan error, 1)
		go func() { done <- s.awaitDurable(ctx, need) }()
		time.Sleep(20 * time.Millisecond) // many lingers
		select {
		case err := <-done:
			t.Fatalf("awaitDurable returned (%v) while a commit that covers it was in flight", err)
		default:
		}
		s.wal.end(n, commits)
		wantReturned(t, "after the commit in flight ended", done, nil)
		want := before
		if !commits {
			want++
		}
		if got := bc.n.Load(); got != want {
			t.Fatalf("commit succeeded %v: %d flush barriers, want %d", commits, got-before, want-before)
		}
	}
}
