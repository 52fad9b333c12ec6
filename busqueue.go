package herald

import (
	"context"
	"sync"
)

// busQueue is a runtime's dispatch queue of the event bus: the claimed
// executions waiting for a worker. Workers take from it fairly, round
// robin over tenants and, within a tenant, over subscriptions, so an
// execution claimed behind another tenant's (or subscription's) burst
// waits for at most one execution of each other queue ahead of it, not
// for the whole burst. Each queue is FIFO. Its size is bounded by the
// claim loop, which claims only what Bus.Workers + Bus.QueueSize slots
// have room for.
type busQueue struct {
	mu      sync.Mutex
	tenants []*busTenantQ // ring of tenants with queued jobs
	byName  map[string]*busTenantQ
	pos     int
	n       int
	idle    int           // workers waiting in pop
	wake    chan struct{} // buffered(1): a job was pushed
	// report receives the depth after every change, under mu, so that
	// reports arrive in the order of the changes (a gauge set from racing
	// goroutines could otherwise end on a stale value).
	report func(depth int)
}

type busTenantQ struct {
	name  string
	subs  []*busSubQ // ring of subscriptions with queued jobs
	bySub map[string]*busSubQ
	pos   int
}

type busSubQ struct {
	name string
	jobs []*busJob
}

// busJob is a claimed execution on its way through the queue.
type busJob struct {
	it   *busItem
	done chan struct{} // closed when a worker has finished with it
}

func newBusQueue(report func(depth int)) *busQueue {
	return &busQueue{byName: map[string]*busTenantQ{}, wake: make(chan struct{}, 1), report: report}
}

// depthLocked is the number of queued jobs no idle worker is about to take.
func (q *busQueue) depthLocked() int { return max(q.n-q.idle, 0) }

// push queues a job.
func (q *busQueue) push(j *busJob) {
	q.mu.Lock()
	tq := q.byName[j.it.tenant]
	if tq == nil {
		tq = &busTenantQ{name: j.it.tenant, bySub: map[string]*busSubQ{}}
		q.byName[tq.name] = tq
		q.tenants = append(q.tenants, tq)
	}
	sub := j.it.Execution.Subscription
	sq := tq.bySub[sub]
	if sq == nil {
		sq = &busSubQ{name: sub}
		tq.bySub[sub] = sq
		tq.subs = append(tq.subs, sq)
	}
	sq.jobs = append(sq.jobs, j)
	q.n++
	q.report(q.depthLocked())
	q.mu.Unlock()
	select {
	case q.wake <- struct{}{}:
	default:
	}
}

// pop takes the next job, fairly, waiting for one until ctx ends (then it
// returns nil).
func (q *busQueue) pop(ctx context.Context) *busJob {
	for {
		if ctx.Err() != nil {
			return nil // stopping: start nothing more
		}
		q.mu.Lock()
		if q.n > 0 {
			j := q.take()
			more := q.n > 0
			q.report(q.depthLocked())
			q.mu.Unlock()
			if more {
				// Pass the wake-up on: another worker may take the next.
				select {
				case q.wake <- struct{}{}:
				default:
				}
			}
			return j
		}
		q.idle++
		q.mu.Unlock()
		select {
		case <-ctx.Done():
		case <-q.wake:
		}
		q.mu.Lock()
		q.idle--
		q.mu.Unlock()
	}
}

// take removes the next job in round-robin order. q.mu is held; q.n > 0.
func (q *busQueue) take() *busJob {
	q.pos %= len(q.tenants)
	tq := q.tenants[q.pos]
	tq.pos %= len(tq.subs)
	sq := tq.subs[tq.pos]
	j := sq.jobs[0]
	sq.jobs[0] = nil
	sq.jobs = sq.jobs[1:]
	q.n--
	if len(sq.jobs) == 0 {
		delete(tq.bySub, sq.name)
		tq.subs = append(tq.subs[:tq.pos], tq.subs[tq.pos+1:]...) // the next one moves into tq.pos
	} else {
		tq.pos++
	}
	if len(tq.subs) == 0 {
		delete(q.byName, tq.name)
		q.tenants = append(q.tenants[:q.pos], q.tenants[q.pos+1:]...)
	} else {
		q.pos++
	}
	return j
}

// remove takes j out of the queue if no worker has taken it yet, and
// reports whether it did.
func (q *busQueue) remove(j *busJob) bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	tq := q.byName[j.it.tenant]
	if tq == nil {
		return false
	}
	sq := tq.bySub[j.it.Execution.Subscription]
	if sq == nil {
		return false
	}
	for i, x := range sq.jobs {
		if x != j {
			continue
		}
		sq.jobs = append(sq.jobs[:i], sq.jobs[i+1:]...)
		q.n--
		q.report(q.depthLocked())
		if len(sq.jobs) == 0 {
			k := indexOf(tq.subs, sq)
			delete(tq.bySub, sq.name)
			tq.subs = append(tq.subs[:k], tq.subs[k+1:]...)
			if k < tq.pos {
				tq.pos--
			}
			if len(tq.subs) == 0 {
				k := indexOf(q.tenants, tq)
				delete(q.byName, tq.name)
				q.tenants = append(q.tenants[:k], q.tenants[k+1:]...)
				if k < q.pos {
					q.pos--
				}
			}
		}
		return true
	}
	return false
}

func indexOf[T comparable](s []T, v T) int {
	for i, x := range s {
		if x == v {
			return i
		}
	}
	return -1
}
