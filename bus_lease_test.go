package herald_test

// The bus's attempts and leases (docs/bus.md, "Attempts and leases"): an
// attempt is counted when it starts; an execution waiting in its node's
// dispatch queue keeps its lease; a Stop that cannot wait releases what
// runs; a takeover that runs nothing counts nothing; an attempt's end is
// recorded as it was, even when its first write fails.

import (
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/heraldwf/herald"
	"github.com/heraldwf/herald/clock"
	"github.com/heraldwf/herald/storage"
)

// busLeaseClock is the engine clock of these tests: the leases run out
// only when a test moves it.
func busLeaseClock() *clock.Virtual {
	return clock.NewVirtual(time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC))
}

// busClaimRounds counts the bus claim loop's claims.
type busClaimRounds struct {
	*countingObserver
	n atomic.Int64
}

func (o *busClaimRounds) Claimed(r herald.ClaimReport) {
	o.countingObserver.Claimed(r)
	if r.Kind == herald.ClaimBus {
		o.n.Add(1)
	}
}

// TestBus_QueuedExecutionKeepsItsLease: an execution that waits in its
// node's dispatch queue for longer than the lease is not taken over by
// the node's own claim loop (which used to count a second attempt and,
// with max_retries 0, dead-letter it unrun as if its node had stopped):
// it runs once, as attempt 1.
func TestBus_QueuedExecutionKeepsItsLease(t *testing.T) {
	t.Parallel()
	vc := busLeaseClock()
	g := newGate()
	obs := &busClaimRounds{countingObserver: newCountingObserver()}
	var quickRuns atomic.Int64
	st := &leaseWatch{Store: testStore(t)}
	b := setupOn(t, st, &herald.Config{Bus: herald.BusConfig{Workers: 1},
		ClientConfig: herald.ClientConfig{Clock: vc, Observer: obs}}, func(rt *herald.Runtime) {
		herald.RegisterBusHandler(rt, "hold", func(ctx context.Context, ev herald.BusEvent) (any, error) {
			g.run(ev)
			return "held", nil
		})
		herald.RegisterBusHandler(rt, "quick", func(ctx context.Context, ev herald.BusEvent) (any, error) {
			quickRuns.Add(1)
			return "quick", nil
		})
	})
	t.Cleanup(g.open) // before the runtime's Stop
	b.handlerSub("hold", "hold", "hold", intp(5))
	b.handlerSub("quick", "quick", "quick", intp(0))
	b.publish("hold", nil, "e-hold")
	g.waitStarted(t, 1) // the only worker is busy
	b.publish("quick", nil, "e-quick")
	quick := b.waitExecution("e-quick", "quick", "claimed", statusIs(herald.ExecRunning))
	b.waitFor("both claims reported", func() bool { return obs.n.Load() >= 2 })
	rounds := obs.n.Load()
	vc.Advance(3 * herald.DefaultBusLease) // the queued execution's claim lease is long over
	// Either the claim loop looks again (the lease that ran out makes the
	// tenant ready: the round in which it used to take its own queued
	// execution over), or the node renews the queued execution's lease
	// first, after which no claim can take it. Which comes first is the
	// scheduler's; either is the moment the old code lost it.
	now := vc.Now()
	b.waitFor("a claim round, or the queued lease renewed, after the lease ran out", func() bool {
		return obs.n.Load() > rounds || st.renewedPast(quick.ID, now)
	})
	g.open()
	b.wantSucceededAtFirst(t, "e-quick", "quick")
	if n := quickRuns.Load(); n != 1 {
		t.Fatalf("the handler ran %d times, want 1", n)
	}
}

// leaseWatch is a store that remembers the furthest lease each execution
// was renewed to.
type leaseWatch struct {
	storage.Store
	mu    sync.Mutex
	until map[int64]time.Time
}

func (s *leaseWatch) BusHeartbeat(ctx context.Context, p *storage.BusHeartbeatParams) error {
	err := s.Store.BusHeartbeat(ctx, p)
	if err == nil {
		s.mu.Lock()
		if s.until == nil {
			s.until = map[int64]time.Time{}
		}
		if p.LeaseUntil.After(s.until[p.Execution]) {
			s.until[p.Execution] = p.LeaseUntil
		}
		s.mu.Unlock()
	}
	return err
}

// renewedPast reports whether the execution's lease was renewed to after t.
func (s *leaseWatch) renewedPast(execution int64, t time.Time) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.until[execution].After(t)
}

// TestBus_StopReleasesAttemptsInFlight: a graceful Stop whose context ends
// before an attempt does cancels it and releases it: the next runtime runs
// it at once, as the same attempt (max_retries 0: the only one), instead of
// taking it over after the lease and dead-lettering it unrun.
func TestBus_StopReleasesAttemptsInFlight(t *testing.T) {
	t.Parallel()
	vc := busLeaseClock()
	st := testStore(t)
	stuck := newGate() // the first runtime's handler outlives its Stop
	var cancelled atomic.Bool
	first := setupOn(t, st, &herald.Config{ClientConfig: herald.ClientConfig{Clock: vc}}, func(rt *herald.Runtime) {
		herald.RegisterBusHandler(rt, "h", func(ctx context.Context, ev herald.BusEvent) (any, error) {
			stuck.started <- ev.ID
			select {
			case <-ctx.Done():
				cancelled.Store(true)
			case <-stuck.release:
			}
			<-stuck.release // and it does not stop when told
			return "first", nil
		})
	})
	t.Cleanup(stuck.open) // before the runtime's Stop
	first.handlerSub("s", "job", "h", intp(0))
	first.publish("job", nil, "e1")
	stuck.waitStarted(t, 1)
	expired, cancel := context.WithCancel(context.Background())
	cancel() // the deploy's grace period is over
	if err := first.rt.Stop(expired); !errors.Is(err, context.Canceled) {
		t.Fatalf("Stop: %v, want context.Canceled (it could not wait)", err)
	}
	first.waitFor("the attempt the Stop could not wait for cancelled", cancelled.Load)

	var runs atomic.Int64
	next := setupOn(t, st, &herald.Config{ClientConfig: herald.ClientConfig{Clock: vc}}, func(rt *herald.Runtime) {
		herald.RegisterBusHandler(rt, "h", func(ctx context.Context, ev herald.BusEvent) (any, error) {
			runs.Add(1)
			return "next", nil
		})
	})
	vc.Advance(3 * herald.DefaultBusLease) // a lease the Stop left would have run out
	next.wantSucceededAtFirst(t, "e1", "s")
	if runs.Load() != 1 {
		t.Fatalf("the next runtime ran the handler %d times, want 1", runs.Load())
	}
}

// crashingStore is a node's store that stops answering the bus when the
// node dies (kill): the node's process is gone, so it renews, records and
// releases nothing more.
type crashingStore struct {
	storage.Store
	dead atomic.Bool
}

var errNodeDead = errors.New("the node died")

func (s *crashingStore) kill() { s.dead.Store(true) }

func (s *crashingStore) BusClaim(ctx context.Context, p *storage.BusClaimParams) ([]*storage.BusClaimed, error) {
	if s.dead.Load() {
		return nil, errNodeDead
	}
	return s.Store.BusClaim(ctx, p)
}

func (s *crashingStore) BusHeartbeat(ctx context.Context, p *storage.BusHeartbeatParams) error {
	if s.dead.Load() {
		return errNodeDead
	}
	return s.Store.BusHeartbeat(ctx, p)
}

func (s *crashingStore) BusFinish(ctx context.Context, p *storage.BusFinishParams) ([]error, error) {
	if s.dead.Load() {
		return nil, errNodeDead
	}
	return s.Store.BusFinish(ctx, p)
}

// TestBus_CrashingHandlerCountsItsAttempts: a handler whose process dies
// during every attempt (max_retries 3: four attempts) is attempted four
// times, one node after another; the node that takes over the fourth
// dead-letters the execution without running it, and the record says 4
// attempts, not 5 (the takeover ran nothing and counts nothing).
func TestBus_CrashingHandlerCountsItsAttempts(t *testing.T) {
	t.Parallel()
	vc := busLeaseClock()
	st := testStore(t)
	g := newGate()
	cfg := func() *herald.Config { return &herald.Config{ClientConfig: herald.ClientConfig{Clock: vc}} }
	crash := func(rt *herald.Runtime) {
		herald.RegisterBusHandler(rt, "h", func(ctx context.Context, ev herald.BusEvent) (any, error) {
			g.run(ev) // runs until its process dies
			return nil, errors.New("unreachable")
		})
	}
	var first *bundle
	for n := 1; n <= 4; n++ {
		cs := &crashingStore{Store: st}
		node := setupOn(t, cs, cfg(), crash)
		t.Cleanup(g.open) // before the runtime's Stop
		if n == 1 {
			first = node
			node.handlerSub("s", "job", "h", intp(3))
			node.publish("job", nil, "e1")
		}
		g.waitStarted(t, 1)
		cs.kill()
		dead, cancel := context.WithCancel(context.Background())
		cancel()
		_ = node.rt.Stop(dead) // what is left of it writes nothing
		vc.Advance(3 * herald.DefaultBusLease)
	}
	// A healthy node takes the fourth attempt over.
	var runs atomic.Int64
	healthy := setupOn(t, st, cfg(), func(rt *herald.Runtime) {
		herald.RegisterBusHandler(rt, "h", func(ctx context.Context, ev herald.BusEvent) (any, error) {
			runs.Add(1)
			return "ran", nil
		})
	})
	x := healthy.waitExecution("e1", "s", "dead-lettered", statusIs(herald.ExecDeadLettered))
	if x.Attempts != 4 {
		t.Fatalf("Attempts %d, want 4 (the takeover that ran nothing counts nothing)", x.Attempts)
	}
	dl, err := first.client.DeadLetterByID(first.ctx, x.DeadLetter)
	if err != nil {
		t.Fatal(err)
	}
	if dl.Attempts != 4 || !strings.Contains(dl.Error, "lease of the final attempt ran out") {
		t.Fatalf("dead letter: %d attempts, %q; want 4 and the lost final attempt", dl.Attempts, dl.Error)
	}
	if runs.Load() != 0 {
		t.Fatalf("the handler ran %d times past its last attempt", runs.Load())
	}
}

// refusesDeadLetterOnce is a store whose first BusFinish of a dead letter
// fails (a connection lost, a full disk), as a store error.
type refusesDeadLetterOnce struct {
	storage.Store
	once    sync.Once
	refused atomic.Bool
}

func (s *refusesDeadLetterOnce) BusFinish(ctx context.Context, p *storage.BusFinishParams) ([]error, error) {
	for _, r := range p.Results {
		if r.Outcome == storage.BusDeadLetter {
			refuse := false
			s.once.Do(func() { refuse = true })
			if refuse {
				s.refused.Store(true)
				return nil, errors.New("connection reset by peer")
			}
		}
	}
	return s.Store.BusFinish(ctx, p)
}

// TestBus_DeadLetterWriteRetriedKeepsTheError: when the write of a last
// attempt's dead letter fails, the letter finally written is the
// attempt's own — the handler's error, kind and stack — not "the lease of
// the final attempt ran out", and the attempt is counted once.
func TestBus_DeadLetterWriteRetriedKeepsTheError(t *testing.T) {
	t.Parallel()
	vc := busLeaseClock()
	st := &refusesDeadLetterOnce{Store: testStore(t)}
	b := setupOn(t, st, &herald.Config{ClientConfig: herald.ClientConfig{Clock: vc}}, func(rt *herald.Runtime) {
		herald.RegisterBusHandler(rt, "h", func(ctx context.Context, ev herald.BusEvent) (any, error) {
			panic("the real cause")
		})
	})
	b.handlerSub("s", "job", "h", intp(0))
	b.publish("job", nil, "e1")
	b.waitFor("the dead letter's write refused", st.refused.Load)
	x := b.waitExecution("e1", "s", "dead-lettered", statusIs(herald.ExecDeadLettered))
	dl, err := b.client.DeadLetterByID(b.ctx, x.DeadLetter)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(dl.Error, "the real cause") || dl.ErrorKind != herald.ErrorRuntime || !strings.Contains(dl.Stack, "goroutine") {
		t.Fatalf("dead letter %q (kind %s, stack %d bytes), want the handler's panic with its stack", dl.Error, dl.ErrorKind, len(dl.Stack))
	}
	if x.Attempts != 1 || dl.Attempts != 1 {
		t.Fatalf("attempts: execution %d, letter %d; want 1", x.Attempts, dl.Attempts)
	}
}

// wantSucceededAtFirst waits for event id's execution for sub to end and
// fails unless it succeeded at attempt 1, with that attempt's record the
// only one.
func (b *bundle) wantSucceededAtFirst(t *testing.T, id, sub string) {
	t.Helper()
	x := b.waitExecution(id, sub, "ended", func(x *herald.Execution) bool {
		return x.Status == herald.ExecSucceeded || x.Status == herald.ExecDeadLettered
	})
	if x.Status != herald.ExecSucceeded || x.Attempts != 1 {
		t.Fatalf("%s: %s after %d attempts (%s), want succeeded at attempt 1", id, x.Status, x.Attempts, x.LastError)
	}
	if as := b.attempts(id); len(as) != 1 || as[0].Number != 1 || !as[0].Succeeded {
		t.Fatalf("%s: attempt records %+v, want one: attempt 1, succeeded", id, as)
	}
}
