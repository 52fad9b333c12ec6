package herald

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"github.com/heraldwf/herald/heraldtype"
	"github.com/heraldwf/herald/internal/attempt"
	"github.com/heraldwf/herald/storage"
)

// The leases of a runtime's claimed bus executions (docs/bus.md, "Attempts
// and leases"). An attempt is counted when it starts, not when it is
// claimed: a claimed execution may wait in the dispatch queue, and one
// that never starts spends no attempt.
//
//   - A queued execution keeps its lease: the claim loop renews those of
//     the tenant it is about to claim for (renewQueued) before it claims,
//     so it never takes over an execution of its own queue, and a keeper
//     renews them all every third of the lease (keepQueuedLeases), for
//     the claim loop does not claim while its slots are all taken. One
//     whose lease another node took meanwhile (this one stalled) leaves
//     the queue unrun.
//   - A worker starts the attempt (startAttempt: the store counts it, and
//     marks it started) before it runs the target; a takeover after a
//     start is a takeover of an attempt that ran.
//   - Stop cancels the attempts it cannot wait for and releases them
//     (abandon): the next node runs them at once, without spending an
//     attempt.

// busAttempts is the set of a bus loop's attempts in flight, which a Stop
// that cannot wait for them cancels and releases.
type busAttempts struct {
	ctx    context.Context // the attempts' context: cancelled by abandon
	cancel context.CancelFunc
	mu     sync.Mutex
	// running holds the attempts whose ends are not handed to the
	// finisher yet; abandoned is set once abandon has taken them.
	running   map[*busItem]bool
	abandoned bool
}

// newBusAttempts returns an empty set whose attempts run on a context of
// parent's.
func newBusAttempts(parent context.Context) *busAttempts {
	ctx, cancel := context.WithCancel(parent)
	return &busAttempts{ctx: ctx, cancel: cancel, running: map[*busItem]bool{}}
}

// begin registers an attempt about to start; false if the loop's attempts
// were abandoned (it must not start).
func (a *busAttempts) begin(it *busItem) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.abandoned {
		return false
	}
	a.running[it] = true
	return true
}

// end takes the attempt out of the set before its end is recorded; false
// if abandon has released it (its end must not be recorded).
func (a *busAttempts) end(it *busItem) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	if !a.running[it] {
		return false
	}
	delete(a.running, it)
	return true
}

// abandon cancels every attempt in flight and returns those whose ends
// were not handed to the finisher: the caller releases them.
func (a *busAttempts) abandon() []*busItem {
	a.mu.Lock()
	a.abandoned = true
	its := make([]*busItem, 0, len(a.running))
	for it := range a.running {
		its = append(its, it)
	}
	clear(a.running)
	a.mu.Unlock()
	a.cancel()
	return its
}

// abandonBus is Stop's when its context ended before the bus loop did:
// the attempts still running are cancelled and released, so that the next
// node runs them at once, without spending an attempt (their targets may
// still be running here: at least once).
func (r *Runtime) abandonBus() {
	a := r.bus.attempts.Load()
	if a == nil {
		return
	}
	its := a.abandon()
	if len(its) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), busReleaseTimeout)
	defer cancel()
	for _, it := range its {
		r.releaseBus(ctx, it)
	}
}

// busReleaseTimeout bounds the releases of a Stop that gave up waiting.
const busReleaseTimeout = 5 * time.Second

// queuedLeases renews the leases of the executions waiting in a bus
// loop's dispatch queue.
type queuedLeases struct {
	r  *Runtime
	q  *busQueue
	mu sync.Mutex // one renewal at a time: it guards the items' renewed
}

// renew renews the leases of the tenant's executions waiting in the
// dispatch queue ("": every tenant's) whose lease was set Lease/3 ago or
// more. The claim loop calls it before each claim for the tenant (the loop
// looks at a tenant whose lease ran out at the latest then, so an
// execution queued here is renewed before this loop could claim it
// again). One whose lease was lost leaves the queue: another node has it.
func (l *queuedLeases) renew(ctx context.Context, tenant string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	r := l.r
	now := r.cfg.Clock.Now()
	for _, j := range l.q.queued(tenant) {
		it := j.it
		if now.Sub(it.renewed.load()) < r.cfg.Bus.Lease/3 {
			continue
		}
		err := r.store.BusHeartbeat(ctx, &storage.BusHeartbeatParams{Tenant: it.tenant, Execution: it.Execution.ID,
			LockToken: it.LockToken, LeaseUntil: now.Add(r.cfg.Bus.Lease)})
		switch {
		case err == nil:
			it.renewed.store(now)
		case errors.Is(err, heraldtype.ErrLeaseLost):
			if l.q.remove(j) {
				close(j.done)
			}
		default:
			if ctx.Err() == nil {
				r.logger.Warn("herald: renew the lease of a queued bus execution", "tenant", it.tenant,
					"execution", it.Execution.ID, "err", err)
			}
			return // the next renewal meets the same store
		}
	}
}

// keep renews every queued execution's lease every third of the lease
// until ctx ends.
func (l *queuedLeases) keep(ctx context.Context) {
	every := l.r.cfg.Bus.Lease / 3
	attempt.Keep(ctx, l.r.cfg.Clock, every, func() error {
		rctx, cancel := context.WithTimeout(ctx, every)
		defer cancel()
		l.renew(rctx, "")
		return nil // a lost lease takes one execution out of the queue, not the keeper
	}, nil).Wait()
}

// mustStart reports whether the attempt must be started (startAttempt)
// before its target runs, or may be counted by its end alone. A Go handler
// runs in this process and may crash it every time: only a start written
// before it runs bounds its attempts. A script (in a child process),
// workflow or lane target cannot take the process down with it, so its
// attempt is counted by its end's record (a node that dies while it runs
// leaves it unstarted: the takeover runs it again as the same attempt),
// unless its lease was renewed a third of the lease ago or more, when the
// start renews it and fences out a takeover. The start is a store write
// that an attempt waits for: skipping it where it buys nothing is what
// keeps script and lane attempts from waiting for the store twice
// (bench/results.md, issue 32).
func (r *Runtime) mustStart(it *busItem, target heraldtype.Target) bool {
	return target.Kind == heraldtype.TargetHandler || target.Kind == "" ||
		r.cfg.Clock.Now().Sub(it.renewed.load()) >= r.cfg.Bus.Lease/3
}

// startAttempt starts the claimed attempt: the store counts it and renews
// its lease. Counting it before the target runs is what bounds the
// attempts of a target that crashes its process every time.
func (r *Runtime) startAttempt(ctx context.Context, it *busItem) error {
	return r.store.BusHeartbeat(ctx, &storage.BusHeartbeatParams{Tenant: it.tenant, Execution: it.Execution.ID,
		LockToken: it.LockToken, LeaseUntil: r.cfg.Clock.Now().Add(r.cfg.Bus.Lease), Start: true})
}

// busFinishRetry is the first wait before an attempt's end whose write
// failed is written again (doubling up to busFinishRetryMax).
const (
	busFinishRetry    = 100 * time.Millisecond
	busFinishRetryMax = 5 * time.Second
)

// finishHeld records an attempt's end, writing it again while the write
// fails and the lease is held (the attempt's heartbeat goes on meanwhile),
// so that what is recorded is the attempt's own end — its error, kind and
// stack — and not, after the lease ran out, a takeover's guess. It gives
// up when the attempts are abandoned (a Stop that cannot wait).
func (r *Runtime) finishHeld(fin *busFinisher, atts *busAttempts, it *busItem, now time.Time, res storage.BusResult) error {
	wait := busFinishRetry
	for {
		err := fin.finish(it.tenant, now, res)
		if err == nil || errors.Is(err, heraldtype.ErrLeaseLost) || errors.Is(err, heraldtype.ErrInvalidArgument) {
			return err // written, someone else's, or refused whatever the try
		}
		r.logger.Error("herald: record a bus attempt (written again while its lease is held)", "tenant", it.tenant,
			"execution", it.Execution.ID, "err", err)
		// Wall-clock time: a store's recovery does not follow the engine's
		// clock.
		t := time.NewTimer(wait)
		select {
		case <-t.C:
		case <-atts.ctx.Done():
			t.Stop()
			return err
		}
		wait = min(2*wait, busFinishRetryMax)
	}
}

// atomicTime is a time that the lease keeper sets while a worker that has
// just taken the item from the queue reads it (mustStart).
type atomicTime struct{ ns atomic.Int64 }

func (t *atomicTime) store(v time.Time) { t.ns.Store(v.UnixNano()) }
func (t *atomicTime) load() time.Time   { return time.Unix(0, t.ns.Load()) }
