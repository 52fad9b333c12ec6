package postgres

import (
	"context"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// Every call runs exactly once, in a batch of at most maxBatch calls, with
// at most maxLeaders batches at a time, whatever order run leaves its slice
// in; a call alone runs at once.
func TestCombiner(t *testing.T) {
	type call struct {
		id   int
		runs atomic.Int32
	}
	var (
		inFlight, maxInFlight atomic.Int32
		batches, biggest      atomic.Int32
	)
	cb := &combiner[*call]{maxLeaders: 3, maxBatch: 5}
	cb.run = func(calls []*combined[*call]) {
		n := inFlight.Add(1)
		for {
			m := maxInFlight.Load()
			if n <= m || maxInFlight.CompareAndSwap(m, n) {
				break
			}
		}
		batches.Add(1)
		for {
			b := biggest.Load()
			if int32(len(calls)) <= b || biggest.CompareAndSwap(b, int32(len(calls))) {
				break
			}
		}
		slices.Reverse(calls) // run may reorder its slice
		for _, c := range calls {
			c.call.runs.Add(1)
		}
		time.Sleep(time.Millisecond)
		inFlight.Add(-1)
	}

	alone := &call{}
	cb.do(context.Background(), alone)
	if alone.runs.Load() != 1 || batches.Load() != 1 {
		t.Fatalf("a call alone: %d runs in %d batches", alone.runs.Load(), batches.Load())
	}

	calls := make([]*call, 500)
	var wg sync.WaitGroup
	for i := range calls {
		calls[i] = &call{id: i}
		wg.Add(1)
		go func() {
			defer wg.Done()
			cb.do(context.Background(), calls[i])
		}()
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("calls still waiting")
	}
	for _, c := range calls {
		if n := c.runs.Load(); n != 1 {
			t.Fatalf("call %d ran %d times", c.id, n)
		}
	}
	if m := maxInFlight.Load(); m > 3 {
		t.Errorf("%d batches at once, want at most 3", m)
	}
	if b := biggest.Load(); b > 5 {
		t.Errorf("a batch of %d calls, want at most 5", b)
	}
	if b := batches.Load(); b >= 500 {
		t.Errorf("%d batches for 501 calls: nothing was combined", b)
	}
	if cb.leaders != 0 || len(cb.queue) != 0 {
		t.Errorf("after the calls: %d leaders, %d queued", cb.leaders, len(cb.queue))
	}
}

// A queued call whose context ends is withdrawn without running; the others
// still run.
func TestCombinerWithdraw(t *testing.T) {
	release := make(chan struct{})
	var ran sync.Map
	cb := &combiner[int]{maxLeaders: 1, maxBatch: 10, run: func(calls []*combined[int]) {
		for _, c := range calls {
			ran.Store(c.call, true)
			if c.call == 0 {
				<-release
			}
		}
	}}
	go cb.do(context.Background(), 0) // leads, blocks in run
	for {
		cb.mu.Lock()
		busy := cb.leaders == 1
		cb.mu.Unlock()
		if busy {
			break
		}
		time.Sleep(time.Millisecond)
	}
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() { errc <- cb.do(ctx, 1) }()
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); cb.do(context.Background(), 2) }()
	for {
		cb.mu.Lock()
		n := len(cb.queue)
		cb.mu.Unlock()
		if n == 2 {
			break
		}
		time.Sleep(time.Millisecond)
	}
	cancel()
	if err := <-errc; err != context.Canceled {
		t.Fatalf("withdrawn call: %v, want context.Canceled", err)
	}
	close(release)
	wg.Wait()
	if _, ok := ran.Load(1); ok {
		t.Error("the withdrawn call ran")
	}
	if _, ok := ran.Load(2); !ok {
		t.Error("the other queued call did not run")
	}
}

// While a batch is in flight, calls queue for the next one until a full
// batch's worth waits; only then does a second batch start beside it.
func TestCombinerStartsAnotherBatchOnlyForAFullOne(t *testing.T) {
	release := make(chan struct{})
	cb := &combiner[int]{maxLeaders: 3, maxBatch: 4, run: func(calls []*combined[int]) {
		for _, c := range calls {
			if c.call == 0 {
				<-release
			}
		}
	}}
	state := func() (leaders, queued int) {
		cb.mu.Lock()
		defer cb.mu.Unlock()
		return cb.leaders, len(cb.queue)
	}
	waitFor := func(what string, ok func() bool) {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for !ok() {
			if time.Now().After(deadline) {
				l, q := state()
				t.Fatalf("waiting for %s: %d leaders, %d queued", what, l, q)
			}
			time.Sleep(time.Millisecond)
		}
	}
	go cb.do(context.Background(), 0) // leads, blocks in run
	waitFor("the first batch", func() bool { l, _ := state(); return l == 1 })
	var wg sync.WaitGroup
	for i := 1; i <= 3; i++ {
		wg.Add(1)
		go func() { defer wg.Done(); cb.do(context.Background(), i) }()
	}
	waitFor("three queued calls", func() bool { _, q := state(); return q == 3 })
	if l, _ := state(); l != 1 {
		t.Fatalf("%d batches in flight for 3 queued calls, want 1 (a batch holds 4)", l)
	}
	done := make(chan struct{})
	go func() { cb.do(context.Background(), 4); close(done) }()
	select {
	case <-done: // a second batch ran while the first is still in flight
	case <-time.After(10 * time.Second):
		l, q := state()
		t.Fatalf("the fourth call did not start a batch beside the first: %d leaders, %d queued", l, q)
	}
	wg.Wait()
	if l, q := state(); l != 1 || q != 0 {
		t.Errorf("after the second batch: %d leaders, %d queued, want 1 and 0", l, q)
	}
	close(release)
	waitFor("the first batch to end", func() bool { l, _ := state(); return l == 0 })
}
