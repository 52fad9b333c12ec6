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
// have room for per tenant (busTenantRoom), and busClaimBatch more for the
// other tenants.
//
// Script executions and the rest (Go handlers, workflow and lane targets)
// have workers of their own: pop(ctx, true) takes only script jobs,
// pop(ctx, false) only the others, so a script, however long it runs,
// never holds a worker a handler or lane execution needs. Script jobs are
// handed out only as fast as script child processes free up: at most
// scriptSlots (Bus.ScriptProcesses) of them are taken at once, and at most
// tenantSlots (Bus.TenantScriptProcesses) of one tenant's, each until its
// script has run (busItem.freeSlot). A script queue that may not run now
// (every slot taken, or its tenant's share) is passed over and keeps its
// place at the front, so it is the first served when a slot frees; a
// tenant's runaway scripts therefore hold at most its share, and the other
// tenants' scripts run in the slots left. A worker never holds a script
// execution while it waits for a child: the wait is spent here, queued,
// and an attempt's duration is the script's run.
type busQueue struct {
	mu sync.Mutex
	// tenants with queued jobs, in the order they are served: the first
	// one with a job that may run gives it and moves to the back.
	tenants []*busTenantQ
	byName  map[string]*busTenantQ
	n       int // queued jobs
	scriptN int // queued script jobs
	// scriptSlots is how many script jobs may be out of the queue at
	// once (0: no limit), tenantSlots how many of one tenant's (0: no
	// limit); scriptBusy how many are, held how many per tenant.
	scriptSlots, tenantSlots, scriptBusy int
	held                                 map[string]int
	// idle workers waiting in pop, and their wake-ups (buffered(1): a job
	// may be taken), of the script pool [1] and of the other [0].
	idle [2]int
	wake [2]chan struct{}
	// report receives the depth after every change, under mu, so that
	// reports arrive in the order of the changes (a gauge set from racing
	// goroutines could otherwise end on a stale value).
	report func(depth int)
}

type busTenantQ struct {
	name    string
	subs    []*busSubQ // subscriptions with queued jobs, in serving order as tenants
	bySub   map[string]*busSubQ
	scriptN int // its queued script jobs
}

type busSubQ struct {
	name string
	jobs []*busJob
}

// busJob is a claimed execution on its way through the queue.
type busJob struct {
	it     *busItem
	script bool          // its target is a script: it needs a script slot
	done   chan struct{} // closed when a worker has finished with it
}

// newBusQueue returns a queue that lets at most scriptSlots script jobs
// out at once, and at most tenantSlots of one tenant's (0: no limit).
func newBusQueue(scriptSlots, tenantSlots int, report func(depth int)) *busQueue {
	return &busQueue{byName: map[string]*busTenantQ{}, held: map[string]int{},
		wake: [2]chan struct{}{make(chan struct{}, 1), make(chan struct{}, 1)}, scriptSlots: scriptSlots,
		tenantSlots: tenantSlots, report: report}
}

func pool(script bool) int {
	if script {
		return 1
	}
	return 0
}

// runnableLocked is the number of queued jobs a worker of the pool could
// take now.
func (q *busQueue) runnableLocked(script bool) int {
	if !script {
		return q.n - q.scriptN
	}
	n := 0
	if q.tenantSlots <= 0 {
		n = q.scriptN
	} else {
		for _, tq := range q.tenants {
			n += min(tq.scriptN, max(q.tenantSlots-q.held[tq.name], 0))
		}
	}
	if q.scriptSlots > 0 {
		n = min(n, max(q.scriptSlots-q.scriptBusy, 0))
	}
	return n
}

// depthLocked is the number of queued jobs no idle worker is about to take.
func (q *busQueue) depthLocked() int {
	return q.n - min(q.idle[0], q.runnableLocked(false)) - min(q.idle[1], q.runnableLocked(true))
}

func (q *busQueue) signal(script bool) {
	select {
	case q.wake[pool(script)] <- struct{}{}:
	default:
	}
}

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
	if j.script {
		q.scriptN++
		tq.scriptN++
	}
	q.report(q.depthLocked())
	q.mu.Unlock()
	q.signal(j.script)
}

// pop takes the next job of the script pool (script) or of the other,
// fairly, waiting for one that may run until ctx ends (then it returns
// nil). A script job holds a script slot until its item's freeSlot is
// called.
func (q *busQueue) pop(ctx context.Context, script bool) *busJob {
	p := pool(script)
	for {
		if ctx.Err() != nil {
			return nil // stopping: start nothing more
		}
		q.mu.Lock()
		if j := q.take(script); j != nil {
			more := q.runnableLocked(script) > 0
			q.report(q.depthLocked())
			q.mu.Unlock()
			if more {
				q.signal(script) // pass the wake-up on: another worker may take the next
			}
			return j
		}
		q.idle[p]++
		q.mu.Unlock()
		select {
		case <-ctx.Done():
		case <-q.wake[p]:
		}
		q.mu.Lock()
		q.idle[p]--
		q.mu.Unlock()
	}
}

// take removes the next job of the pool that may run, in round-robin
// order, or returns nil. q.mu is held.
func (q *busQueue) take(script bool) *busJob {
	if script && q.scriptSlots > 0 && q.scriptBusy >= q.scriptSlots {
		return nil
	}
	for ti, tq := range q.tenants {
		if script && (tq.scriptN == 0 || q.tenantSlots > 0 && q.held[tq.name] >= q.tenantSlots) {
			continue // keeps its place: first served when one of its slots frees
		}
		for si, sq := range tq.subs {
			j := sq.jobs[0]
			if j.script != script {
				continue // keeps its place
			}
			sq.jobs[0] = nil
			sq.jobs = sq.jobs[1:]
			q.n--
			if j.script {
				q.scriptN--
				tq.scriptN--
				q.scriptBusy++
				q.held[tq.name]++
				tenant := tq.name
				j.it.slotFree = func() { q.freeScriptSlot(tenant) }
			}
			tq.subs = append(tq.subs[:si], tq.subs[si+1:]...)
			if len(sq.jobs) > 0 {
				tq.subs = append(tq.subs, sq) // to the back of its tenant's order
			} else {
				delete(tq.bySub, sq.name)
			}
			q.tenants = append(q.tenants[:ti], q.tenants[ti+1:]...)
			if len(tq.subs) > 0 {
				q.tenants = append(q.tenants, tq) // to the back
			} else {
				delete(q.byName, tq.name)
			}
			return j
		}
	}
	return nil
}

// freeScriptSlot gives back the slot of a tenant's script job taken by pop.
func (q *busQueue) freeScriptSlot(tenant string) {
	q.mu.Lock()
	q.scriptBusy--
	if q.held[tenant]--; q.held[tenant] <= 0 {
		delete(q.held, tenant)
	}
	waiting := q.scriptN > 0
	q.report(q.depthLocked())
	q.mu.Unlock()
	if waiting {
		q.signal(true)
	}
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
		if j.script {
			q.scriptN--
			tq.scriptN--
		}
		q.report(q.depthLocked())
		if len(sq.jobs) == 0 {
			k := indexOf(tq.subs, sq)
			delete(tq.bySub, sq.name)
			tq.subs = append(tq.subs[:k], tq.subs[k+1:]...)
			if len(tq.subs) == 0 {
				k := indexOf(q.tenants, tq)
				delete(q.byName, tq.name)
				q.tenants = append(q.tenants[:k], q.tenants[k+1:]...)
			}
		}
		return true
	}
	return false
}

// queued returns the tenant's jobs waiting in the queue ("": every
// tenant's), whose leases queuedLeases renews.
func (q *busQueue) queued(tenant string) []*busJob {
	q.mu.Lock()
	defer q.mu.Unlock()
	var out []*busJob
	for _, tq := range q.tenants {
		if tenant != "" && tq.name != tenant {
			continue
		}
		for _, sq := range tq.subs {
			out = append(out, sq.jobs...)
		}
	}
	return out
}

func indexOf[T comparable](s []T, v T) int {
	for i, x := range s {
		if x == v {
			return i
		}
	}
	return -1
}
