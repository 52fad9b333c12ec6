package herald

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"runtime/debug"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/heraldwf/herald/clock"
	"github.com/heraldwf/herald/heraldtype"
	"github.com/heraldwf/herald/history"
	"github.com/heraldwf/herald/internal/attempt"
	"github.com/heraldwf/herald/internal/replay"
	"github.com/heraldwf/herald/storage"
)

// claimTimeout bounds one claim call; it does not end with Stop.
const claimTimeout = 30 * time.Second

// waiter sleeps until the store signals new work of any tenant, the next
// known wake time of any tenant arrives on the engine's clock, the poll
// interval passes on the wall clock, or ctx ends.
//
// The poll stays on the wall clock: it is how work written by a process
// that cannot signal this one is found, and a virtual clock that nobody
// advances must not stop it. With the real clock both are one timer.
type waiter struct {
	r      *Runtime
	signal <-chan struct{}
	drain  func() []string
	poll   *time.Timer
	wake   clock.Timer // nil with the real clock

	// nextWake is the earliest wake time of any tenant the last wait
	// learnt (engine clock; zero: none). The claim loop looks for ready
	// tenants once it has passed, even when no wait has ended since.
	nextWake time.Time
}

func (r *Runtime) newWaiter(kinds storage.WorkKind) (*waiter, func()) {
	ch, drain, cancel := r.store.SubscribeAll(kinds)
	w := &waiter{r: r, signal: ch, drain: drain, poll: time.NewTimer(time.Hour)}
	w.poll.Stop()
	if !clock.IsReal(r.cfg.Clock) {
		w.wake = r.cfg.Clock.NewTimer(time.Hour)
		w.wake.Stop()
	}
	return w, func() {
		cancel()
		w.poll.Stop()
		if w.wake != nil {
			w.wake.Stop()
		}
	}
}

// wait sleeps; it reports whether a timer ended the sleep (the poll, or a
// wake time): work may then be claimable that no signal announced, and the
// caller asks the store which tenants have some.
func (w *waiter) wait(ctx context.Context) (timer bool) {
	d := w.r.cfg.PollInterval
	now := w.r.cfg.Clock.Now()
	var wake <-chan time.Time
	if at, ok, err := w.r.store.NextWake(ctx, &storage.NextWakeParams{AllTenants: true, Now: now}); err == nil && ok {
		w.nextWake = at
		until := at.Sub(now)
		switch {
		case w.wake != nil:
			w.armWake(at)
			wake = w.wake.C()
		case until < d:
			d = max(until, time.Millisecond)
		}
	}
	w.poll.Reset(d)
	select {
	case <-ctx.Done():
	case <-w.signal:
	case <-w.poll.C:
		timer = true
	case <-wake:
		timer = true
	}
	// Since Go 1.23 a stopped timer delivers no stale value: no drain.
	w.poll.Stop()
	if wake != nil {
		w.wake.Stop()
	}
	return timer
}

// armWake arms the wake timer of a clock that is not the wall clock to
// fire when the clock reaches at. A timer is armed relative to the clock's
// time when Reset runs, so a virtual clock's Advance between reading the
// time and arming would push the deadline past at and the wake would never
// come: arm again while the clock moved on by more than armSlack between
// the read and the arming. (A clock that runs with the wall clock, offset
// or scaled, moves a little between two reads; that is not a jump.)
func (w *waiter) armWake(at time.Time) {
	for range 8 {
		now := w.r.cfg.Clock.Now()
		w.wake.Reset(at.Sub(now))
		if w.r.cfg.Clock.Now().Sub(now) < armSlack {
			return
		}
	}
}

// lookRetry is how soon a claim loop asks TenantsReady again after the
// store failed to answer (or PollInterval, if that is sooner: the poll
// looks anyway).
const lookRetry = 50 * time.Millisecond

// armSlack is how far a clock may move between two reads around arming a
// timer without counting as a jump.
const armSlack = time.Millisecond

// readySet is the claim loop's set of tenants that may have work, in the
// order they were added.
type readySet struct {
	list []string
	in   map[string]bool
}

func (s *readySet) add(t string) {
	if !s.in[t] {
		s.in[t] = true
		s.list = append(s.list, t)
	}
}

func (s *readySet) remove(t string) {
	if s.in[t] {
		delete(s.in, t)
		s.list = slices.DeleteFunc(s.list, func(x string) bool { return x == t })
	}
}

// claimLoop claims work while worker slots are free and runs each item in
// its own goroutine, sleeping on the waiter when there is none. It is the
// loop of both the turn and the activity workers, for every tenant the
// runtime serves.
//
// It keeps the set of tenants that may have work: those a signal named
// (drained from SubscribeAll, which costs no store call), those whose last
// claim came back full, and, after a timer or poll wake-up (or at start),
// those TenantsReady names. Each round shares the free slots among them,
// starting one further along the set each round, so a tenant with
// thousands of runnable instances cannot starve another's single one. With
// one busy tenant a round is one claim, as it would be without tenants.
//
// A loop that never sleeps still asks TenantsReady once a known wake time
// has passed and at least every PollInterval (wall clock), and asks again
// within lookRetry when the store failed to answer: work no signal
// announces (a timer coming due, work of a tenant whose claim failed,
// work written by a process that cannot signal this one) must not wait
// until the busy tenants run out of work.
//
// A claim is not cut off by Stop: a claim the database committed but the
// caller saw cancelled would strand its work until the lease ran out. What
// a claim returns is run, even when stopping; Stop waits for it.
//
// claim returns the items it claimed and whether the tenant may have more
// work right now (a claim that came back full says so; the bus's also
// when it routed a full batch of events).
func claimLoop[T any](ctx context.Context, r *Runtime, what string, kinds storage.WorkKind, workers int,
	claim func(ctx context.Context, tenant string, max int) ([]T, bool, error), run func(ctx context.Context, item T)) {
	claimLoopBatched(ctx, r, what, kinds, newWorkerPool(workers), 1, claim, run)
}

// workerPool is a claim loop's worker slots. The turn loop shares its pool
// with the raises of this runtime's clients that hand their instance off
// (Client.raise): a raise takes a free slot before it asks the store for the
// turn, so hand-offs and claims never run more turns than there are
// workers, and a raise hands off only while a slot is free (when every
// worker is busy, events wait for the claim loop, which shares the slots
// fairly among tenants).
type workerPool struct {
	slots chan struct{}
	freed chan struct{} // a slot was given back
	// starved is set while the claim loop waits for a slot to be given
	// back: the next free slot is then the loop's, so that raises handing
	// off cannot keep a busy runtime's slots away from work they did not
	// raise (another tenant's, a timer, an activity's result).
	starved atomic.Bool

	mu       sync.Mutex // orders tryTake's inflight.Add before close's Wait
	closed   bool
	inflight sync.WaitGroup
}

func newWorkerPool(workers int) *workerPool {
	return &workerPool{slots: make(chan struct{}, workers), freed: make(chan struct{}, 1)}
}

// free returns the number of free slots.
func (p *workerPool) free() int { return cap(p.slots) - len(p.slots) }

// take takes a slot for a claimed item, waiting for one if need be.
func (p *workerPool) take() {
	p.slots <- struct{}{}
	p.inflight.Add(1)
}

// tryTake takes a free slot without waiting, unless the pool is closed,
// its claim loop is waiting for a slot, or half its slots or more are
// taken. A hand-off holds its slot from the raise on, and saves a claim
// round trip that matters to an idle runtime's latency; a busy runtime's
// claims take many turns at once, and its slots are better spent on them.
func (p *workerPool) tryTake() bool {
	if p.starved.Load() || 2*p.free() <= cap(p.slots) {
		return false
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return false
	}
	select {
	case p.slots <- struct{}{}:
		p.inflight.Add(1)
		return true
	default:
		return false
	}
}

// release gives a slot back.
func (p *workerPool) release() {
	<-p.slots
	select {
	case p.freed <- struct{}{}:
	default:
	}
	p.inflight.Done()
}

// close refuses further tryTakes and waits for every slot to be given back.
func (p *workerPool) close() {
	p.mu.Lock()
	p.closed = true
	p.mu.Unlock()
	p.inflight.Wait()
}

// claimLoopBatched is claimLoop that claims only once at least minBatch
// of its slots are free (1 ≤ minBatch ≤ workers): a loop whose slots are
// mostly taken by queued work claims in batches of minBatch or more
// instead of one claim per slot freed.
func claimLoopBatched[T any](ctx context.Context, r *Runtime, what string, kinds storage.WorkKind, pool *workerPool, minBatch int,
	claim func(ctx context.Context, tenant string, max int) ([]T, bool, error), run func(ctx context.Context, item T)) {
	w, done := r.newWaiter(kinds)
	defer done()
	gos := r.gos.Load() // the pool of this Start's goroutines
	minBatch = min(max(minBatch, 1), cap(pool.slots))
	defer pool.close()
	ready := &readySet{in: map[string]bool{}}
	look := true // ask the store which tenants have work
	var (
		looked    time.Time // wall clock of the last look
		lookAgain time.Time // wall clock: a look that failed is made again from then
	)
	rotate := 0
	for ctx.Err() == nil {
		free := pool.free()
		if free < minBatch {
			pool.starved.Store(true)
			select { // wait for a slot to be given back (at least one is taken)
			case <-pool.freed:
			case <-ctx.Done():
				pool.starved.Store(false)
				return
			}
			pool.starved.Store(false)
			continue
		}
		for _, t := range w.drain() {
			switch {
			case t == storage.AnyTenant: // notifications may have been lost
				look = true
			case r.serves(t):
				ready.add(t)
			}
		}
		if !look && (time.Since(looked) >= r.cfg.PollInterval ||
			(!w.nextWake.IsZero() && !r.cfg.Clock.Now().Before(w.nextWake)) ||
			(!lookAgain.IsZero() && !time.Now().Before(lookAgain))) {
			look = true
		}
		if look {
			look = false
			looked, w.nextWake, lookAgain = time.Now(), time.Time{}, time.Time{}
			ts, err := r.store.TenantsReady(ctx, &storage.TenantsReadyParams{Tenants: r.cfg.Tenants, Kinds: kinds,
				Now: r.cfg.Clock.Now()})
			if err != nil && ctx.Err() == nil {
				r.logger.Error("herald: find tenants with "+what, "err", err)
				// What made the loop look (a wake time passed, lost
				// notifications) still holds: a loop kept busy by other
				// tenants would otherwise not look again for a
				// PollInterval, and a due timer would wait as long.
				lookAgain = looked.Add(lookRetry)
			}
			for _, t := range ts {
				ready.add(t)
			}
		}
		if len(ready.list) == 0 {
			look = w.wait(ctx)
			continue
		}
		tenants := slices.Clone(ready.list)
		start := rotate % len(tenants)
		rotate++
		failed, claimed := false, 0
		for i := range tenants {
			if free == 0 {
				break
			}
			t := tenants[(start+i)%len(tenants)]
			left := len(tenants) - i
			share := (free + left - 1) / left // the first ones get the remainder
			claimCtx, cancelClaim := context.WithTimeout(context.WithoutCancel(ctx), claimTimeout)
			began := time.Now()
			items, more, err := claim(claimCtx, t, share)
			cancelClaim()
			r.obs.Claimed(ClaimReport{Tenant: t, Kind: what, Requested: share, Claimed: len(items),
				Duration: time.Since(began), Err: err})
			if err != nil {
				if ctx.Err() == nil {
					r.logger.Error("herald: claim "+what, "tenant", t, "err", err)
				}
				ready.remove(t)
				failed = true
				continue
			}
			if !more {
				// The claim took everything there was: more work comes with
				// a signal (new work, a committed turn that left some) or
				// at its NextWake time. Claiming again at once would only
				// queue an empty claim in front of the turns just started.
				ready.remove(t)
			}
			free -= len(items)
			claimed += len(items)
			for _, item := range items {
				pool.take() // waits only if a hand-off took a slot since free was read
				gos.Go(func() {
					defer pool.release()
					run(context.WithoutCancel(ctx), item)
				})
			}
		}
		switch {
		case failed:
			look = w.wait(ctx) || look
		case claimed == 0 && len(ready.list) > 0:
			// Every ready tenant claimed nothing yet may have more: each
			// holds its room (the bus's busTenantRoom), or all of it but
			// less than a batch. Wait for a slot to be given back, or for
			// new work.
			select {
			case <-pool.freed:
			case <-w.signal:
			case <-ctx.Done():
			case <-time.After(r.cfg.PollInterval):
				look = true
			}
		}
	}
}

// turnLoop claims and runs turns, in a pool of workers it shares with
// the raises that hand their instance off (handOff).
func (r *Runtime) turnLoop(ctx context.Context) {
	pool := newWorkerPool(r.cfg.TurnWorkers)
	r.turns.Store(&turnPool{workerPool: pool, ctx: context.WithoutCancel(ctx)})
	defer r.turns.Store(nil)
	claimLoopBatched(ctx, r, ClaimTurns, storage.WorkTurns, pool, 1, func(ctx context.Context, tenant string, max int) ([]*storage.Turn, bool, error) {
		turns, err := r.store.TurnClaim(ctx, &storage.TurnClaimParams{Tenant: tenant, Now: r.cfg.Clock.Now(), Lease: r.cfg.TurnLease, Max: max})
		for _, t := range turns {
			t.Instance.Tenant = tenant
		}
		return turns, len(turns) >= max, err
	}, r.runTurn)
}

// turnPool is the turn loop's worker pool while it runs, with the context
// its turns run in.
type turnPool struct {
	*workerPool
	ctx context.Context
}

// handOff returns the turn pool with a slot taken for a raise of tenant's
// that may hand its instance off (storage.EventRaiseParams.Claim), or nil
// when the runtime is not running, does not serve tenant or has no free
// worker. The caller gives the slot to runHandOff or back with release.
func (r *Runtime) handOff(tenant string) *turnPool {
	p := r.turns.Load()
	if p == nil || !r.serves(tenant) || !p.tryTake() {
		return nil
	}
	return p
}

// runHandOff runs the turn a raise of tenant claimed, in the slot handOff
// took, without waiting for it.
func (r *Runtime) runHandOff(p *turnPool, tenant string, t *storage.Turn, took time.Duration) {
	t.Instance.Tenant = tenant
	r.obs.Claimed(ClaimReport{Tenant: tenant, Kind: ClaimHandOff, Requested: 1, Claimed: 1, Duration: took})
	r.gos.Load().Go(func() {
		defer p.release()
		if t.Err == nil && r.workflow(t.Instance.Workflow) == nil {
			// Another runtime on the store may have the workflow: give the
			// turn back at once, as if the raise had not handed it off, so
			// that the claim loops of every runtime find it.
			if err := r.store.TurnAbandon(p.ctx, &storage.TurnAbandonParams{Tenant: tenant,
				InstanceID: t.Instance.ID, LockToken: t.LockToken}); err != nil {
				r.logger.Warn("herald: give back a handed-off turn", "tenant", tenant, "instance", t.Instance.ID, "err", err)
			}
			return
		}
		r.runTurn(p.ctx, t)
	})
}

// runTurn replays one instance, applies its new messages and commits the
// outcome in one transaction.
func (r *Runtime) runTurn(ctx context.Context, t *storage.Turn) {
	tenant := t.Instance.Tenant
	ctx, span := startTurnSpan(ctx, r.tracer, t)
	rep := TurnReport{Tenant: tenant, InstanceID: t.Instance.ID, Workflow: t.Instance.Workflow,
		Messages: len(t.Messages), Latency: turnLatency(t, r.cfg.Clock.Now()), Start: time.Now()}
	defer func() {
		rep.Duration = time.Since(rep.Start)
		r.obs.TurnFinished(rep)
		endOutcomeSpan(span, rep.Outcome, rep.Err)
	}()
	if t.Err == nil && r.terminateRequested(ctx, t) {
		rep.Outcome = TurnCommitted // its parent ended: no code runs
		return
	}
	wf := r.workflow(t.Instance.Workflow)
	if wf == nil {
		// Another runtime sharing the store may know this workflow: release
		// the turn, and say on the instance what it waits for.
		rep.Outcome = TurnUnregistered
		r.unregistered(tenant, "workflow", t.Instance.Workflow, t.Instance.ID)
		_ = r.store.TurnAbandon(ctx, &storage.TurnAbandonParams{Tenant: tenant, InstanceID: t.Instance.ID,
			LockToken: t.LockToken, RetryAt: r.blockedRetryAt(),
			Blocked: blockedReason("workflow", t.Instance.Workflow)})
		return
	}
	if t.Err != nil {
		rep.Outcome = TurnUnreplayable
		r.failUnreplayable(ctx, t, failureCorrupt, t.Err)
		return
	}
	out, err := runReplay(&replay.Input{
		InstanceID: t.Instance.ID,
		Workflow:   wf,
		History:    t.History,
		Messages:   t.Messages,
		Now:        r.cfg.Clock.Now(),
		Limits:     r.replayLimits(r.limits.get(ctx, tenant)),
		Go:         r.gos.Load().Go, // a nil pool (a runtime not started) starts a goroutine each time
	})
	if err != nil {
		rep.Outcome = TurnUnreplayable
		r.failUnreplayable(ctx, t, failureReplay, err)
		return
	}
	// The work the turn sends on carries its span: activity tasks (and
	// so their results), published events (and so their bus attempts).
	tp := ""
	if len(out.Activities) > 0 || len(out.Publish) > 0 || len(out.Sends) > 0 {
		tp = traceParent(span)
	}
	for i := range out.Activities {
		out.Activities[i].Tenant = tenant
		out.Activities[i].Retry = r.retryPolicy(out.Activities[i].Retry)
		out.Activities[i].TraceParent = tp
	}
	for i := range out.Publish {
		out.Publish[i].TraceParent = tp
	}
	returnedTraces(t.Messages, out.ReturnedCorrelated)
	if refused, err := r.door.admitTurnSends(ctx, tenant, out.Sends, tp); refused != nil || err != nil {
		if refused != nil {
			rep.Outcome, rep.Err = TurnCommitFailed, refused
			r.failSend(ctx, t, refused)
			return
		}
		rep.Outcome, rep.Err = TurnCommitFailed, err
		r.releaseTurn(ctx, t, "commit turn", err)
		return
	}
	waits := r.correlatedWaits(ctx, tenant, t.Instance.ID, out.CorrelatedWaits)
	commit := &storage.TurnCommitParams{
		Tenant:           tenant,
		InstanceID:       t.Instance.ID,
		LockToken:        t.LockToken,
		Execution:        t.Instance.Execution,
		Now:              r.cfg.Clock.Now(),
		NewEvents:        out.NewEvents,
		ConsumedMessages: out.Consumed,
		Activities:       out.Activities,
		Timers:           out.Timers,
		CancelTimers:     out.CancelTimers,
		CancelActivities: out.CancelActivities,
		Fates:            out.Fates,
		Status:           out.Status,
		Output:           out.Result,
		Failure:          out.Failure,
		ContinueAsNew:    out.ContinueAsNew,

		CorrelatedWaits:       waits,
		CancelCorrelatedWaits: out.CancelCorrelatedWaits,
		ReturnedCorrelated:    out.ReturnedCorrelated,
		Publish:               out.Publish,
		Sends:                 out.Sends,
		Attributes:            out.Attributes,
	}
	childCommit(commit, t, out)
	storeDrops, err := r.store.TurnCommit(ctx, commit)
	if err != nil {
		rep.Outcome, rep.Err = TurnCommitFailed, err
		if errors.Is(err, heraldtype.ErrLeaseLost) {
			rep.Outcome = TurnLeaseLost
			r.logger.Info("herald: turn discarded, lease lost", "instance", t.Instance.ID)
			return
		}
		if len(out.Sends) > 0 && errors.Is(err, heraldtype.ErrEventIDConflict) {
			r.failSend(ctx, t, err)
			return
		}
		r.releaseTurn(ctx, t, "commit turn", err)
		return
	}
	rep.Outcome = TurnCommitted
	r.reportDelivered(t, out)
	for _, p := range out.Publish {
		r.obs.BusPublished(BusPublishReport{Tenant: tenant, EventID: p.ID, Type: p.Type})
	}
	r.reportSends(tenant, out.Sends)
	reportDrops(r.logger, r.obs, tenant, t.Instance.ID, out.Drops)
	reportContinuedDrops(r.logger, r.obs, tenant, t.Instance.ID, out.ContinuedDrops)
	reportDrops(r.logger, r.obs, tenant, t.Instance.ID, storeDrops)
	if out.Failure != nil && out.Failure.Kind == replay.FailureNondeterminism {
		r.logger.Error("herald: workflow failed: non-deterministic", "instance", t.Instance.ID, "err", out.Failure.Message)
	}
}

// turnLatency is how long the oldest message of a turn had been visible
// when it was claimed at now.
func turnLatency(t *storage.Turn, now time.Time) time.Duration {
	var oldest time.Time
	for i := range t.Messages {
		if v := t.Messages[i].VisibleAt; !v.IsZero() && (oldest.IsZero() || v.Before(oldest)) {
			oldest = v
		}
	}
	if oldest.IsZero() || now.Before(oldest) {
		return 0
	}
	return now.Sub(oldest)
}

// reportDelivered reports each event a committed turn delivered, with the
// lane and name of its message (this turn's) or of its EventRaised record
// (buffered by an earlier turn).
func (r *Runtime) reportDelivered(t *storage.Turn, out *replay.Output) {
	for _, f := range out.Fates {
		if f.Fate != history.FateDelivered {
			continue
		}
		rep := EventReport{Tenant: t.Instance.Tenant, InstanceID: t.Instance.ID, EventID: f.EventID}
		if lane, name, key, ok := eventOrigin(t, out, f.EventID); ok {
			rep.Lane, rep.Name, rep.Key = string(lane), name, key
		}
		r.obs.EventDelivered(rep)
	}
}

func eventOrigin(t *storage.Turn, out *replay.Output, eventID string) (history.Lane, string, string, bool) {
	for i := range t.Messages {
		if m := &t.Messages[i]; m.EventID == eventID {
			return m.Lane, m.Name, m.Key, true
		}
	}
	for _, evs := range [][]history.Event{out.NewEvents, t.History} {
		for i := len(evs) - 1; i >= 0; i-- {
			if ev := &evs[i]; ev.Kind == history.EventRaised && ev.EventID == eventID {
				return ev.Lane, ev.Name, ev.Key, true
			}
		}
	}
	return "", "", "", false
}

// Failure kinds of instances the runtime could not run (WorkflowError.Kind).
const (
	// failureCorrupt: a stored row of the instance cannot be decoded.
	failureCorrupt = "corrupt"
	// failureReplay: the engine refused the instance's history as input (or
	// failed on it).
	failureReplay = "replay"
)

// runReplay is replay.Run with a panic on the engine's side (a history it
// cannot handle) turned into an error, so that it fails one instance, not
// the process.
func runReplay(in *replay.Input) (out *replay.Output, err error) {
	defer func() {
		if p := recover(); p != nil {
			out, err = nil, fmt.Errorf("replay panicked: %v\n%s", p, debug.Stack())
		}
	}()
	return replay.Run(in)
}

// failUnreplayable ends an instance that cannot be run at all — a row of it
// does not decode, or the engine refuses its history — as failed, with the
// cause as its failure: one bad instance must never hold up a claim, a
// tenant or a node, nor be retried forever. It is logged once and counted
// (Observer.InstanceUnreplayable); its pending and buffered events are dropped
// (instance_terminal) as for any end.
func (r *Runtime) failUnreplayable(ctx context.Context, t *storage.Turn, kind string, cause error) {
	msg := failureText(cause)
	if r.endFromTurn(ctx, t, "record instance failure", "", &history.Failure{Kind: kind, Message: msg}) {
		// Logged and reported once: only the call that ended the instance.
		r.obs.InstanceUnreplayable(UnreplayableReport{Tenant: t.Instance.Tenant, InstanceID: t.Instance.ID,
			Workflow: t.Instance.Workflow, Kind: kind, Message: msg})
		r.logger.Error("herald: instance failed: it cannot be replayed", "instance", t.Instance.ID,
			"workflow", t.Instance.Workflow, "kind", kind, "err", msg)
	}
}

// failureText is cause as a stored failure message: at most 4,096 bytes
// and valid UTF-8 (a cut may split a rune, and a decoder's message may
// quote bad bytes).
func failureText(cause error) string {
	msg := strings.ToValidUTF8(cause.Error(), "�")
	if len(msg) > 4096 {
		msg = strings.ToValidUTF8(msg[:4096], "") + "…"
	}
	return msg
}

// endFromTurn ends the claimed turn's instance with InstanceTerminate
// (reason, or failure) instead of committing the turn: its pending and
// buffered events are dropped (instance_terminal) and reported. It reports
// whether this call ended the instance (false: it had ended already, or
// the store could not take the end now — then it is logged as what and
// the turn is released for a later claim rather than spun on).
func (r *Runtime) endFromTurn(ctx context.Context, t *storage.Turn, what, reason string, failure *history.Failure) bool {
	dropped, err := r.store.InstanceTerminate(ctx, &storage.InstanceTerminateParams{Tenant: t.Instance.Tenant,
		ID: t.Instance.ID, Reason: reason, Failure: failure, Now: r.cfg.Clock.Now()})
	switch {
	case err == nil:
		reportDrops(r.logger, r.obs, t.Instance.Tenant, t.Instance.ID, dropped)
		return true
	case errors.Is(err, heraldtype.ErrInstanceNotRunning):
	default:
		r.releaseTurn(ctx, t, what, err)
	}
	return false
}

// releaseTurn logs err as what and releases the claimed turn for a later
// claim, after PollInterval, rather than spinning on it.
func (r *Runtime) releaseTurn(ctx context.Context, t *storage.Turn, what string, err error) {
	r.logger.Error("herald: "+what, "instance", t.Instance.ID, "err", err)
	_ = r.store.TurnAbandon(ctx, &storage.TurnAbandonParams{Tenant: t.Instance.Tenant, InstanceID: t.Instance.ID,
		LockToken: t.LockToken, RetryAt: r.cfg.Clock.Now().Add(r.cfg.PollInterval)})
}

// correlatedWaits turns the engine's correlated waits into the store's,
// with the definition's delete-after-first setting as it is now. A wait on a
// definition without correlation config can never be reached (puts to it are
// refused): it is registered anyway, so a timeout still ends it, and logged.
func (r *Runtime) correlatedWaits(ctx context.Context, tenant, instanceID string, ws []replay.CorrelatedWait) []storage.CorrelatedWait {
	if len(ws) == 0 {
		return nil
	}
	out := make([]storage.CorrelatedWait, len(ws))
	for i, w := range ws {
		out[i] = storage.CorrelatedWait{TaskSeq: w.TaskSeq, Def: w.Def, Key: w.Key}
		def, err := r.store.EventDefinitionGet(ctx, &storage.EventDefinitionGetParams{Tenant: tenant, Name: w.Def})
		switch {
		case err == nil && def.Correlation != nil:
			out[i].DeleteAfterFirst = def.Correlation.DeleteAfterFirstCorrelation
		case err == nil || errors.Is(err, heraldtype.ErrNotFound):
			r.logger.Warn("herald: correlated wait on a definition without correlation config: no put can reach it",
				"instance", instanceID, "definition", w.Def, "key", w.Key)
		default:
			r.logger.Error("herald: read event definition", "definition", w.Def, "err", err)
		}
	}
	return out
}

// reportDrops logs each drop breadcrumb at WARN and reports every event it
// stands for to obs: no event is dropped silently. A breadcrumb of a burst of
// limit drops (history.Event.Count) is one WARN line with the count and the
// last event id, so that a flood does not flood the log.
func reportDrops(logger *slog.Logger, obs Observer, tenant, instanceID string, drops []history.Event) {
	reportDropsAt(logger, slog.LevelWarn, "herald: event dropped", obs, tenant, instanceID, drops)
}

// reportContinuedDrops reports the limit drops that continue a burst whose
// breadcrumb (and WARN line) an earlier turn wrote, and logs them at DEBUG:
// one WARN per burst, every drop counted, every fate in the ledger.
func reportContinuedDrops(logger *slog.Logger, obs Observer, tenant, instanceID string, drops []history.Event) {
	reportDropsAt(logger, slog.LevelDebug, "herald: events dropped, continuing a burst", obs, tenant, instanceID, drops)
}

func reportDropsAt(logger *slog.Logger, level slog.Level, msg string, obs Observer, tenant, instanceID string, drops []history.Event) {
	for _, d := range drops {
		n := max(d.Count, 1)
		eventID := d.EventID
		if n > 1 {
			eventID = d.LastEventID
		}
		obs.EventsDropped(DropReport{Tenant: tenant, InstanceID: instanceID, EventID: eventID, Lane: string(d.Lane),
			Name: d.Name, Reason: string(d.Reason), Count: n})
		attrs := []any{"instance", instanceID, "event_id", d.EventID,
			"name", d.Name, "lane", d.Lane, "reason", d.Reason, "origin_execution", d.OriginExecution}
		if n > 1 {
			attrs = append(attrs, "count", n, "last_event_id", d.LastEventID)
		}
		logger.Log(context.Background(), level, msg, attrs...)
	}
}

func (r *Runtime) retryPolicy(p RetryPolicy) RetryPolicy {
	d := r.cfg.DefaultRetry
	if p.MaxAttempts <= 0 {
		p.MaxAttempts = d.MaxAttempts
	}
	if p.InitialInterval <= 0 {
		p.InitialInterval = d.InitialInterval
	}
	if p.BackoffCoefficient < 1 {
		p.BackoffCoefficient = d.BackoffCoefficient
	}
	if p.MaxInterval <= 0 {
		p.MaxInterval = d.MaxInterval
	}
	return p
}

// ActivityInfo describes the running activity attempt.
type ActivityInfo struct {
	InstanceID string
	Execution  int
	Name       string
	Attempt    int
	// IdempotencyKey is "instance/execution/seq": the same for every attempt
	// of one scheduled activity, so side effects can be deduplicated.
	IdempotencyKey string
}

type activityInfoKey struct{}

// ActivityInfoFrom returns the info of the activity running in ctx.
func ActivityInfoFrom(ctx context.Context) (ActivityInfo, bool) {
	ai, ok := ctx.Value(activityInfoKey{}).(ActivityInfo)
	return ai, ok
}

// activityLoop claims and runs activities.
func (r *Runtime) activityLoop(ctx context.Context) {
	claimLoop(ctx, r, ClaimActivities, storage.WorkActivities, r.cfg.ActivityWorkers, func(ctx context.Context, tenant string, max int) ([]*storage.ActivityTask, bool, error) {
		tasks, err := r.store.ActivityClaim(ctx, &storage.ActivityClaimParams{Tenant: tenant, Now: r.cfg.Clock.Now(), Lease: r.cfg.ActivityLease, Max: max})
		for _, t := range tasks {
			t.Tenant = tenant
		}
		return tasks, len(tasks) >= max, err
	}, r.runActivity)
}

func (r *Runtime) runActivity(base context.Context, t *storage.ActivityTask) {
	base, span := startActivitySpan(base, r.tracer, t)
	rep := ActivityReport{Tenant: t.Tenant, InstanceID: t.InstanceID, Execution: t.Execution, Activity: t.Name,
		Attempt: t.Attempt, Start: time.Now()}
	defer func() {
		rep.Duration = time.Since(rep.Start)
		r.obs.ActivityAttempted(rep)
		endOutcomeSpan(span, rep.Outcome, rep.Err)
	}()
	fn := r.activity(t.Name)
	if fn == nil {
		// Leave it for a runtime that has the activity rather than failing
		// the workflow because of a deployment gap, and say on the instance
		// what it waits for.
		rep.Outcome = ActivityUnregistered
		r.unregistered(t.Tenant, "activity", t.Name, t.InstanceID)
		_ = r.store.ActivityRetry(base, &storage.ActivityRetryParams{Tenant: t.Tenant, InstanceID: t.InstanceID,
			Execution: t.Execution, TaskSeq: t.TaskSeq, LockToken: t.LockToken, RetryAt: r.blockedRetryAt(),
			Blocked: blockedReason("activity", t.Name)})
		return
	}
	if attempt.Exhausted(t.Attempt, t.Retry) {
		// Every attempt was lost with its worker (a crash, an OOM kill):
		// fail the activity rather than retry it forever.
		rep.Outcome = ActivityLost
		err := r.store.ActivityComplete(base, &storage.ActivityCompleteParams{Tenant: t.Tenant, InstanceID: t.InstanceID,
			Execution: t.Execution, TaskSeq: t.TaskSeq, LockToken: t.LockToken, Now: r.cfg.Clock.Now(),
			Failure: &history.Failure{Kind: replay.FailureActivity, Message: fmt.Sprintf(
				"attempt %d of %d: the previous attempt's worker was lost (lease expired)", t.Attempt-1, t.Retry.MaxAttempts)}})
		if err != nil && !errors.Is(err, heraldtype.ErrLeaseLost) {
			r.logger.Error("herald: record activity result", "activity", t.Name, "instance", t.InstanceID, "err", err)
		}
		return
	}
	ctx, cancel := context.WithCancel(context.WithValue(base, activityInfoKey{}, ActivityInfo{
		InstanceID: t.InstanceID, Execution: t.Execution, Name: t.Name, Attempt: t.Attempt,
		IdempotencyKey: fmt.Sprintf("%s/%d/%d", t.InstanceID, t.Execution, t.TaskSeq),
	}))
	defer cancel()

	// The heartbeat extends the lease and learns of a cancellation; a lost
	// lease cancels the attempt too (its end is not this worker's).
	keeper := attempt.Keep(base, r.cfg.Clock, r.cfg.ActivityHeartbeat, func() error {
		cancelReq, err := r.store.ActivityHeartbeat(base, &storage.ActivityHeartbeatParams{
			Tenant: t.Tenant, InstanceID: t.InstanceID, Execution: t.Execution, TaskSeq: t.TaskSeq,
			LockToken: t.LockToken, LeaseUntil: r.cfg.Clock.Now().Add(r.cfg.ActivityLease),
		})
		if cancelReq {
			cancel()
		}
		return err
	}, cancel)
	res, failure := attempt.Run(ctx, 0, "activity", "", nil, func(ctx context.Context) (json.RawMessage, error) {
		return fn(ctx, t.Input)
	})
	lost := keeper.Stop()

	if failure == nil {
		depth := lowerDepth(r.limits.get(base, t.Tenant).MaxPayloadDepth, r.cfg.MaxPayloadDepth)
		if reasons := jsonReasons(nil, "result", res, depth); len(reasons) > 0 {
			// Stored, it would be a history row no turn could read back.
			failure = attempt.Failf(heraldtype.ErrorPermanent, "activity %s: %s", t.Name, strings.Join(reasons, "; "))
		}
	}
	if failure != nil {
		rep.Err = failure
		if failure.Err != nil {
			rep.Err = failure.Err
		}
		if failure.Stack != "" { // a panic: the history's failure has no field of its own for it
			failure.Msg += "\n" + failure.Stack
		}
	}
	if lost {
		failure = attempt.LeaseLost
	}
	now := r.cfg.Clock.Now()
	d := attempt.Decide(failure, t.Attempt, t.Retry, now)
	var cerr error
	switch d.Action {
	case attempt.Complete:
		rep.Outcome = ActivityCompleted
		cerr = r.store.ActivityComplete(base, &storage.ActivityCompleteParams{Tenant: t.Tenant, InstanceID: t.InstanceID,
			Execution: t.Execution, TaskSeq: t.TaskSeq, LockToken: t.LockToken, Result: res, Now: now})
	case attempt.Retry:
		rep.Outcome = ActivityRetrying
		r.logger.Info("herald: activity attempt failed; retrying", "activity", t.Name, "instance", t.InstanceID,
			"attempt", t.Attempt, "retry_at", d.At, "err", failure.Msg)
		cerr = r.store.ActivityRetry(base, &storage.ActivityRetryParams{Tenant: t.Tenant, InstanceID: t.InstanceID,
			Execution: t.Execution, TaskSeq: t.TaskSeq, LockToken: t.LockToken, RetryAt: d.At})
	case attempt.Fail:
		rep.Outcome = ActivityFailed
		cerr = r.store.ActivityComplete(base, &storage.ActivityCompleteParams{Tenant: t.Tenant, InstanceID: t.InstanceID,
			Execution: t.Execution, TaskSeq: t.TaskSeq, LockToken: t.LockToken, Now: now,
			Failure: &history.Failure{Kind: replay.FailureActivity, Message: failure.Msg}})
	case attempt.Drop:
		// Another worker holds the activity now: its end is that worker's.
		rep.Outcome = ActivityLost
	}
	if cerr != nil && !errors.Is(cerr, heraldtype.ErrLeaseLost) {
		r.logger.Error("herald: record activity result", "activity", t.Name, "instance", t.InstanceID, "err", cerr)
	}
}
