package postgres

import (
	"context"
	"slices"
	"sync"
)

// combiner runs calls of one kind in batches, group-commit style: a call
// that finds no batch in flight runs at once, as the leader of a batch of
// itself and whatever calls queued meanwhile; a call that finds one queues,
// and when a leader is done it hands the next batch to the first queued
// call. A call that comes alone is never delayed (no timer, no handoff to
// another goroutine); under load, calls made while a batch runs share the
// next one. See TurnCommit for why.
//
// A further batch (up to maxLeaders at a time) starts only when a full
// batch's worth of calls waits: until then one batch in flight keeps up,
// and fewer, bigger batches cost the server less per call, which matters
// when the server's CPU is the limit (bench/results.md, round 2, fourth
// pass, against starting a batch for any call that finds a slot free).
type combiner[T any] struct {
	maxLeaders int // batches in flight at most
	maxBatch   int // calls per batch at most
	// run runs a batch and sets each call's outcome; it may reorder the
	// slice.
	run func(calls []*combined[T])

	mu      sync.Mutex
	queue   []*combined[T]
	leaders int
}

// combined is one call in a combiner.
type combined[T any] struct {
	call T
	// wake tells a queued call that its batch ran (false) or that it leads
	// the next batch (true).
	wake chan bool
}

// do runs call, alone or in a batch, and returns once its batch has run:
// nil. If ctx ends while the call waits in the queue, it is withdrawn
// without running: ctx.Err(). (Once in a batch, a call waits for the
// batch.)
func (cb *combiner[T]) do(ctx context.Context, call T) error {
	c := &combined[T]{call: call}
	cb.mu.Lock()
	if cb.leaders == 0 || (cb.leaders < cb.maxLeaders && len(cb.queue)+1 >= cb.maxBatch) {
		cb.leaders++
		cb.mu.Unlock()
		cb.lead(c)
		return nil
	}
	c.wake = make(chan bool, 1)
	cb.queue = append(cb.queue, c)
	cb.mu.Unlock()
	var lead bool
	select {
	case lead = <-c.wake:
	case <-ctx.Done():
		cb.mu.Lock()
		if i := slices.Index(cb.queue, c); i >= 0 {
			cb.queue = slices.Delete(cb.queue, i, i+1)
			cb.mu.Unlock()
			return ctx.Err()
		}
		cb.mu.Unlock()
		lead = <-c.wake // taken meanwhile: into a batch, or to lead one
	}
	if lead {
		cb.lead(c)
	}
	return nil
}

// lead runs a batch of first and the queued calls, then hands the slot to
// the next queued call, if any.
func (cb *combiner[T]) lead(first *combined[T]) {
	cb.mu.Lock()
	n := min(len(cb.queue), cb.maxBatch-1)
	calls := make([]*combined[T], 0, n+1)
	calls = append(calls, first)
	calls = append(calls, cb.queue[:n]...)
	cb.queue = append(cb.queue[:0:0], cb.queue[n:]...)
	cb.mu.Unlock()

	cb.run(slices.Clone(calls)) // run may reorder its slice
	for _, c := range calls[1:] {
		c.wake <- false
	}

	cb.mu.Lock()
	if len(cb.queue) == 0 {
		cb.leaders--
		cb.mu.Unlock()
		return
	}
	next := cb.queue[0]
	cb.queue = cb.queue[1:]
	cb.mu.Unlock()
	next.wake <- true
}
