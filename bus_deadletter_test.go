package herald_test

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/heraldwf/herald"
	"github.com/heraldwf/herald/storage"
)

// refailBetweenBatches lets the bus run between the batches of a bulk
// reprocess: after each batch it waits until the executions the batch
// queued have ended again (the tenant's backlog is empty), so that the
// letters of those that failed again exist when the next batch is chosen.
// It refuses to take more than maxCalls batches.
type refailBetweenBatches struct {
	storage.Store
	maxCalls int32
	calls    atomic.Int32
}

func (s *refailBetweenBatches) BusDeadLetterReprocess(ctx context.Context, p *storage.BusDeadLetterOpParams) (int, error) {
	if s.calls.Add(1) > s.maxCalls {
		return 0, errors.New("the reprocess took more batches than there were letters")
	}
	n, err := s.Store.BusDeadLetterReprocess(ctx, p)
	if err != nil || n == 0 {
		return n, err
	}
	for {
		left, err := s.Store.BusBacklog(ctx, &storage.BusBacklogParams{Tenant: p.Tenant})
		if err != nil || left == 0 {
			return n, err
		}
		select {
		case <-ctx.Done():
			return n, ctx.Err()
		case <-time.After(2 * time.Millisecond):
		}
	}
}

// Reprocessing every dead letter takes each letter waiting when the call
// starts once, and only those: an execution that fails again while the call
// runs writes a new letter, which the call's later batches do not take.
// Issue 32 item 4: reprocess-all of 3,000 letters of an always-failing
// script answered 3,002. Not parallel: it sets the package's batch size.
func TestReprocessAllTakesEachLetterOnce(t *testing.T) {
	defer herald.SetDeadLetterBatch(2)()
	st := testStore(t)
	rec := &refailBetweenBatches{Store: st, maxCalls: 10}
	b := setupOn(t, rec, nil, nil)
	b.script("bad", `throw new PermanentError("no");`)
	b.subscribe(herald.Subscription{ID: "s", Pattern: "job", Target: herald.Target{Kind: herald.TargetScript, Script: "bad"}})
	const n = 7 // four batches of 2, the last short
	for i := range n {
		b.publish("job", nil, fmt.Sprintf("e%d", i))
	}
	for i := range n {
		b.waitExecution(fmt.Sprintf("e%d", i), "s", "dead-lettered", statusIs(herald.ExecDeadLettered))
	}
	got, err := b.client.ReprocessDeadLetters(b.ctx, herald.DeadLetterFilter{})
	if err != nil || got != n {
		t.Fatalf("reprocess all: %d, %v; want %d", got, err, n)
	}
	for i := range n {
		id := fmt.Sprintf("e%d", i)
		x := b.waitExecution(id, "s", "dead-lettered again", func(x *herald.Execution) bool {
			return x.Status == herald.ExecDeadLettered && x.Reprocessed == 1
		})
		if as := b.attempts(id); len(as) != 2 || x.Attempts != 1 {
			t.Fatalf("%s: %d attempt records, execution attempts %d; want 2 records (one more for the reprocess), attempts 1",
				id, len(as), x.Attempts)
		}
	}
	waiting, err := b.client.DeadLetters(b.ctx, herald.DeadLetterFilter{})
	if err != nil || len(waiting.Letters) != n {
		t.Fatalf("letters waiting after the reprocess: %d, %v; want the %d new ones", len(waiting.Letters), err, n)
	}
	all, err := b.client.DeadLetters(b.ctx, herald.DeadLetterFilter{IncludeReprocessed: true})
	if err != nil || len(all.Letters) != 2*n {
		t.Fatalf("every letter: %d, %v; want %d", len(all.Letters), err, 2*n)
	}
}
