package herald_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/heraldwf/herald"
	"github.com/heraldwf/herald/history"
	"github.com/heraldwf/herald/storage"
)

// counter waits for n "go" events and returns how many it got.
func registerGoCounter(rt *herald.Runtime) {
	herald.RegisterWorkflow(rt, "counter", func(ctx *herald.Context, n int) (int, error) {
		for i := range n {
			if err := ctx.WaitEvent("go").Get(nil); err != nil {
				return i, err
			}
		}
		return n, nil
	})
}

func (b *bundle) handOffs() int {
	b.obs.mu.Lock()
	defer b.obs.mu.Unlock()
	return b.obs.claims[herald.ClaimHandOff]
}

// A raise to an idle instance, with a turn worker free, runs the turn it
// makes runnable itself: the raise's transaction leases the instance and the
// turn starts on this runtime's worker, with no claim call.
func TestDirectHandOff(t *testing.T) {
	b := setup(t, nil, registerGoCounter)
	const n = 5
	b.start("counter", "c", n)
	b.waitHistory("c", history.EventSubscribed, "go", 1)
	for i := range n {
		id := fmt.Sprintf("go-%d", i)
		b.raise("c", "go", i, id)
		b.waitFate(id, history.FateDelivered)
		if i < n-1 {
			b.waitHistory("c", history.EventSubscribed, "go", i+2)
		}
	}
	if got := resultOf[int](b, "c"); got != n {
		t.Fatalf("result %d, want %d", got, n)
	}
	// Each raise found the instance idle (the turn before it had committed)
	// and a worker free.
	if got := b.handOffs(); got != n {
		t.Fatalf("%d hand-offs, want %d", got, n)
	}
}

// Hand-offs share the turn workers with the claim loop: with every worker
// busy a raise does not hand off, and its event waits for the claim loop.
func TestHandOffBoundedByWorkers(t *testing.T) {
	gate := make(chan struct{})
	b := setup(t, &herald.Config{TurnWorkers: 1}, func(rt *herald.Runtime) {
		registerGoCounter(rt)
		herald.RegisterWorkflow(rt, "blocker", func(ctx *herald.Context, _ int) (int, error) {
			if err := ctx.WaitEvent("block").Get(nil); err != nil {
				return 0, err
			}
			<-gate // holds the only turn worker (a test's trick, not a deterministic workflow)
			return 1, nil
		})
	})
	b.start("counter", "c", 1)
	b.start("blocker", "b", 0)
	b.waitHistory("c", history.EventSubscribed, "go", 1)
	b.waitHistory("b", history.EventSubscribed, "block", 1)
	before := b.handOffs()
	b.raise("b", "block", nil, "block-1") // handed off: its turn now holds the worker
	b.waitFor("the blocker's turn to take the worker", func() bool { return b.handOffs() == before+1 })

	b.raise("c", "go", nil, "go-1")
	if got := b.handOffs(); got != before+1 {
		t.Fatalf("a raise handed off while every worker was busy (%d hand-offs, want %d)", got, before+1)
	}
	if f := b.fate("go-1").Fate; f != history.FatePending {
		t.Fatalf("go-1 is %s while the only worker is held, want pending", f)
	}
	close(gate)
	b.waitFate("go-1", history.FateDelivered)
	if got := resultOf[int](b, "c"); got != 1 {
		t.Fatalf("result %d, want 1", got)
	}
}

// A stopped runtime's client still raises, without a hand-off; the event
// waits durably for the next start.
func TestNoHandOffWhenStopped(t *testing.T) {
	b := setup(t, nil, registerGoCounter)
	b.start("counter", "c", 1)
	b.waitHistory("c", history.EventSubscribed, "go", 1)
	stop, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := b.rt.Stop(stop); err != nil {
		t.Fatal(err)
	}
	before := b.handOffs()
	b.raise("c", "go", nil, "go-1")
	if got := b.handOffs(); got != before {
		t.Fatalf("a stopped runtime handed off (%d hand-offs, want %d)", got, before)
	}
	if f := b.fate("go-1").Fate; f != history.FatePending {
		t.Fatalf("go-1 is %s with the runtime stopped, want pending", f)
	}
	if err := b.rt.Start(b.ctx); err != nil {
		t.Fatal(err)
	}
	if got := resultOf[int](b, "c"); got != 1 {
		t.Fatalf("result %d, want 1", got)
	}
}

// abandons records the TurnAbandon calls made through it.
type abandons struct {
	storage.Store
	mu    sync.Mutex
	calls []storage.TurnAbandonParams
}

func (s *abandons) TurnAbandon(ctx context.Context, p *storage.TurnAbandonParams) error {
	s.mu.Lock()
	s.calls = append(s.calls, *p)
	s.mu.Unlock()
	return s.Store.TurnAbandon(ctx, p)
}

// A runtime that hands off a turn of a workflow it has not registered gives
// the turn back at once: not held back until a retry time and not marked
// blocked, as its claim loop would (a runtime that has the workflow may
// run it at once), so that a runtime that has the workflow runs it; with a
// 10-minute lease, a turn kept would hold the instance from B past the
// test's deadline.
func TestHandOffOfUnregisteredWorkflowGivenBack(t *testing.T) {
	st := testStore(t)
	cfg := func() *herald.Config { return &herald.Config{TurnLease: 10 * time.Minute} }
	b := setupOn(t, st, cfg(), registerGoCounter)
	rec := &abandons{Store: st}
	a := setupOn(t, rec, cfg(), nil) // knows no workflow
	b.start("counter", "c", 1)
	b.waitHistory("c", history.EventSubscribed, "go", 1)
	rec.mu.Lock()
	before := len(rec.calls) // A's claim loop may have taken the start's turn and given it back
	rec.mu.Unlock()
	a.raise("c", "go", nil, "go-1")
	if got := a.handOffs(); got != 1 {
		t.Fatalf("runtime A made %d hand-offs, want 1", got)
	}
	b.waitFate("go-1", history.FateDelivered)
	if got := resultOf[int](b, "c"); got != 1 {
		t.Fatalf("result %d, want 1", got)
	}
	// A held the lease until its first give-back after the raise: that one
	// is the hand-off's (A's claim loop could only claim the instance after
	// it).
	rec.mu.Lock()
	defer rec.mu.Unlock()
	if len(rec.calls) == before {
		t.Fatal("runtime A never gave the handed-off turn back")
	}
	if first := rec.calls[before]; first.InstanceID != "c" || !first.RetryAt.IsZero() || first.Blocked != "" {
		t.Fatalf("the hand-off's give-back: %+v, want instance c, no RetryAt, not blocked", first)
	}
}
