package herald

import (
	"context"
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

// takeNow takes the next job that may run, or "" if none may.
func takeNow(q *busQueue) (*busJob, string) {
	q.mu.Lock()
	defer q.mu.Unlock()
	j := q.take()
	if j == nil {
		return nil, ""
	}
	return j, j.it.Execution.EventID
}

// TestBusQueue_ScriptSlots: with its one script slot taken, the queue hands
// out the other tenants' handler jobs round robin and passes over the
// script queue, which keeps its place: it is served first once the slot is
// free again, and only one script job is out at a time.
func TestBusQueue_ScriptSlots(t *testing.T) {
	var depths []int
	q := newBusQueue(1, func(d int) { depths = append(depths, d) })
	q.push(queueJob("a", "script", "s0", true))
	s0, got := takeNow(q)
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
	var order []string
	for {
		_, id := takeNow(q)
		if id == "" {
			break
		}
		order = append(order, id)
	}
	if want := []string{"h1", "c1", "h2"}; !slices.Equal(order, want) {
		t.Fatalf("with the script slot taken, took %v, want %v (the handler jobs, round robin)", order, want)
	}
	if q.n != 2 || q.scriptN != 2 {
		t.Fatalf("queued %d (scripts %d), want the 2 script jobs", q.n, q.scriptN)
	}
	s0.it.freeSlot()
	s0.it.freeSlot() // a second call gives nothing back
	if q.scriptBusy != 0 {
		t.Fatalf("script slots taken %d after s0 freed its slot, want 0", q.scriptBusy)
	}
	q.push(queueJob("d", "h", "d1", false)) // behind tenant a, which kept its turn
	s1, got := takeNow(q)
	if got != "s1" {
		t.Fatalf("after the slot was freed took %q, want s1 (its queue kept its turn)", got)
	}
	if _, got := takeNow(q); got != "d1" {
		t.Fatalf("took %q while s1 holds the slot, want d1", got)
	}
	if _, got := takeNow(q); got != "" {
		t.Fatalf("took %q while s1 holds the only slot, want nothing", got)
	}
	s1.it.freeSlot()
	if _, got := takeNow(q); got != "s2" {
		t.Fatalf("took %q, want s2", got)
	}
	if q.n != 0 || len(q.tenants) != 0 || len(q.byName) != 0 {
		t.Fatalf("queue not empty: n %d, tenants %d, byName %d", q.n, len(q.tenants), len(q.byName))
	}
}

// TestBusQueue_PopWaitsForScriptSlot: a worker waiting in pop while the only
// script job left cannot run (its slot is taken) is woken when the slot is
// freed, and the depth counts that job as waiting meanwhile.
func TestBusQueue_PopWaitsForScriptSlot(t *testing.T) {
	depth := make(chan int, 100)
	q := newBusQueue(1, func(d int) { depth <- d })
	q.push(queueJob("a", "s", "s0", true))
	q.push(queueJob("a", "s", "s1", true))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	s0 := q.pop(ctx)
	if s0 == nil || s0.it.Execution.EventID != "s0" {
		t.Fatalf("pop: %v, want s0", s0)
	}
	got := make(chan *busJob, 1)
	go func() { got <- q.pop(ctx) }()
	// The waiting worker does not take s1: the depth stays 1.
	for {
		q.mu.Lock()
		idle, d := q.idle, q.depthLocked()
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
	q := newBusQueue(0, func(int) {})
	for _, id := range []string{"s0", "s1", "s2"} {
		q.push(queueJob("a", "s", id, true))
	}
	for _, want := range []string{"s0", "s1", "s2"} {
		if _, got := takeNow(q); got != want {
			t.Fatalf("took %q, want %q", got, want)
		}
	}
}
