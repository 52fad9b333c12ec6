package herald

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/heraldwf/herald/heraldtype"
	"github.com/heraldwf/herald/storage"
)

// queueJob is a job of tenant's subscription sub, named by its event id.
func queueJob(tenant, sub, id string, script bool) *busJob {
	return &busJob{script: script, done: make(chan struct{}), it: &busItem{tenant: tenant,
		BusClaimed: &storage.BusClaimed{Execution: heraldtype.Execution{Subscription: sub, EventID: id}}}}
}

// takeNow takes the next job of the script pool (script) or the other
// that may run, or "" if none may.
func takeNow(q *busQueue, script bool) (*busJob, string) {
	q.mu.Lock()
	defer q.mu.Unlock()
	j := q.take(script)
	if j == nil {
		return nil, ""
	}
	return j, j.it.Execution.EventID
}

// TestBusQueue_ScriptSlots: with its one script slot taken, the script
// pool takes nothing while the other pool takes the handler jobs, round
// robin over tenants; the script queue keeps its place and is served first
// once the slot is free again, and only one script job is out at a time.
func TestBusQueue_ScriptSlots(t *testing.T) {
	var depths []int
	q := newBusQueue(1, 0, func(d int) { depths = append(depths, d) })
	q.push(queueJob("a", "script", "s0", true))
	if _, got := takeNow(q, false); got != "" {
		t.Fatalf("the handler pool took %q, a script job", got)
	}
	s0, got := takeNow(q, true)
	if got != "s0" || q.scriptBusy != 1 {
		t.Fatalf("first take: %q (script slots taken %d), want s0 holding the slot", got, q.scriptBusy)
	}
	for _, j := range []*busJob{queueJob("a", "script", "s1", true), queueJob("a", "script", "s2", true),
		queueJob("b", "h", "h1", false), queueJob("b", "h", "h2", false), queueJob("c", "h", "c1", false)} {
		q.push(j)
	}
	if d := depths[len(depths)-1]; d != 5 {
		t.Fatalf("depth %d after 5 pushes, want 5", d)
	}
	if _, got := takeNow(q, true); got != "" {
		t.Fatalf("the script pool took %q while s0 holds the only slot", got)
	}
	var order []string
	for {
		_, id := takeNow(q, false)
		if id == "" {
			break
		}
		order = append(order, id)
	}
	if want := []string{"h1", "c1", "h2"}; !slices.Equal(order, want) {
		t.Fatalf("the handler pool took %v, want %v (the handler jobs, round robin)", order, want)
	}
	if q.n != 2 || q.scriptN != 2 {
		t.Fatalf("queued %d (scripts %d), want the 2 script jobs", q.n, q.scriptN)
	}
	s0.it.freeSlot()
	s0.it.freeSlot() // a second call gives nothing back
	if q.scriptBusy != 0 || len(q.held) != 0 {
		t.Fatalf("script slots taken %d (per tenant %v) after s0 freed its slot, want 0", q.scriptBusy, q.held)
	}
	q.push(queueJob("d", "h", "d1", false)) // behind tenant a, which kept its turn
	s1, got := takeNow(q, true)
	if got != "s1" {
		t.Fatalf("after the slot was freed took %q, want s1 (its queue kept its turn)", got)
	}
	if _, got := takeNow(q, false); got != "d1" {
		t.Fatalf("took %q while s1 holds the slot, want d1", got)
	}
	if _, got := takeNow(q, true); got != "" {
		t.Fatalf("took %q while s1 holds the only slot, want nothing", got)
	}
	s1.it.freeSlot()
	if _, got := takeNow(q, true); got != "s2" {
		t.Fatalf("took %q, want s2", got)
	}
	if q.n != 0 || len(q.tenants) != 0 || len(q.byName) != 0 {
		t.Fatalf("queue not empty: n %d, tenants %d, byName %d", q.n, len(q.tenants), len(q.byName))
	}
}

// TestBusQueue_TenantScriptShare: four script slots, at most two of one
// tenant's. Tenant a's backlog of scripts takes its two; tenant b's
// scripts, queued after all of a's, take the other two at once; while a
// holds its share it gets no third slot, even with slots free, and the
// depth counts its queued scripts as waiting. When one of a's slots frees,
// a's next script takes it.
func TestBusQueue_TenantScriptShare(t *testing.T) {
	var depth int
	q := newBusQueue(4, 2, func(d int) { depth = d })
	for i := range 5 {
		q.push(queueJob("a", fmt.Sprint("run", i%2), fmt.Sprint("a", i), true))
	}
	var a []*busJob
	for _, want := range []string{"a0", "a1"} {
		j, got := takeNow(q, true)
		if got != want {
			t.Fatalf("took %q, want %q", got, want)
		}
		a = append(a, j)
	}
	if _, got := takeNow(q, true); got != "" {
		t.Fatalf("took %q with tenant a holding its share of 2 (2 slots free, no other tenant waiting)", got)
	}
	q.mu.Lock()
	if n := q.runnableLocked(true); n != 0 {
		t.Errorf("runnable scripts %d with only tenant a's queued, want 0", n)
	}
	q.mu.Unlock()
	q.push(queueJob("b", "s", "b0", true))
	q.push(queueJob("b", "s", "b1", true))
	q.push(queueJob("b", "s", "b2", true))
	if depth != 6 {
		t.Fatalf("depth %d, want 6 (a's 3 and b's 3 queued)", depth)
	}
	for _, want := range []string{"b0", "b1"} {
		if _, got := takeNow(q, true); got != want {
			t.Fatalf("took %q, want %q: tenant b's scripts take the slots a cannot", got, want)
		}
	}
	if _, got := takeNow(q, true); got != "" {
		t.Fatalf("took %q with every slot taken", got)
	}
	if q.held["a"] != 2 || q.held["b"] != 2 || q.scriptBusy != 4 {
		t.Fatalf("held %v (busy %d), want a 2 and b 2", q.held, q.scriptBusy)
	}
	a[0].it.freeSlot()
	if _, got := takeNow(q, true); got != "a2" {
		t.Fatalf("after one of a's slots freed took %q, want a2", got)
	}
	if _, got := takeNow(q, true); got != "" {
		t.Fatalf("took %q with every slot taken", got)
	}
}

// TestBusQueue_PoolsApart: a worker of the handler pool waiting in pop is
// not given a script job, and a script worker is not given a handler job.
func TestBusQueue_PoolsApart(t *testing.T) {
	q := newBusQueue(0, 0, func(int) {})
	q.push(queueJob("a", "s", "s0", true))
	q.push(queueJob("a", "h", "h0", false))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if j := q.pop(ctx, false); j == nil || j.it.Execution.EventID != "h0" {
		t.Fatalf("handler pool popped %v, want h0", j)
	}
	if _, got := takeNow(q, false); got != "" {
		t.Fatalf("handler pool took %q, a script job", got)
	}
	if j := q.pop(ctx, true); j == nil || j.it.Execution.EventID != "s0" {
		t.Fatalf("script pool popped %v, want s0", j)
	}
}

// TestBusQueue_PopWaitsForScriptSlot: a worker waiting in pop while the only
// script job left cannot run (its slot is taken) is woken when the slot is
// freed, and the depth counts that job as waiting meanwhile.
func TestBusQueue_PopWaitsForScriptSlot(t *testing.T) {
	depth := make(chan int, 100)
	q := newBusQueue(1, 0, func(d int) { depth <- d })
	q.push(queueJob("a", "s", "s0", true))
	q.push(queueJob("a", "s", "s1", true))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	s0 := q.pop(ctx, true)
	if s0 == nil || s0.it.Execution.EventID != "s0" {
		t.Fatalf("pop: %v, want s0", s0)
	}
	got := make(chan *busJob, 1)
	go func() { got <- q.pop(ctx, true) }()
	// The waiting worker does not take s1: the depth stays 1.
	for {
		q.mu.Lock()
		idle, d := q.idle[1], q.depthLocked()
		q.mu.Unlock()
		if idle == 1 {
			if d != 1 {
				t.Fatalf("depth %d with a worker idle and s1 waiting for a script slot, want 1", d)
			}
			break
		}
		select {
		case j := <-got:
			t.Fatalf("pop returned %v while the only script slot is taken", j)
		case <-ctx.Done():
			t.Fatal("the second pop never waited")
		default:
		}
		time.Sleep(time.Millisecond) // polling the worker's state, not driving time
	}
	s0.it.freeSlot()
	select {
	case j := <-got:
		if j == nil || j.it.Execution.EventID != "s1" {
			t.Fatalf("pop after the slot was freed: %v, want s1", j)
		}
	case <-ctx.Done():
		t.Fatal("the waiting pop was not woken when the script slot was freed")
	}
}

// TestBusQueue_NoScriptLimit: with no script limit (0), script jobs are
// handed out like any other.
func TestBusQueue_NoScriptLimit(t *testing.T) {
	q := newBusQueue(0, 0, func(int) {})
	for _, id := range []string{"s0", "s1", "s2"} {
		q.push(queueJob("a", "s", id, true))
	}
	for _, want := range []string{"s0", "s1", "s2"} {
		if _, got := takeNow(q, true); got != want {
			t.Fatalf("took %q, want %q", got, want)
		}
	}
}
