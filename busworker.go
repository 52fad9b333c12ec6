package herald

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"go.opentelemetry.io/otel/trace"

	"github.com/heraldwf/herald/bus"
	"github.com/heraldwf/herald/bus/jstarget"
	"github.com/heraldwf/herald/heraldtype"
	"github.com/heraldwf/herald/history"
	"github.com/heraldwf/herald/internal/attempt"
	"github.com/heraldwf/herald/storage"
)

// The runtime's side of the event bus (docs/bus.md): one claim loop, on
// the shared multi-tenant claimLoop, that routes a tenant's published
// events (matching them against its subscriptions) and claims its due
// executions, only as many as the dispatch queue has room for; a pool of
// Bus.Workers runs them. Every attempt ends in a store write that records
// it and moves the execution on (attempt.Decide): succeeded, retrying on
// the bus's RetryPolicy (attempt.BusRetry: 2^n s), or dead-lettered.

// BusHandler is a Go target of the event bus: RegisterBusHandler names it,
// a subscription's target {kind: handler, handler: name} calls it. The
// returned value (encoded as JSON) is recorded as the attempt's result. An
// error is retried with backoff unless it is Permanent (then the execution
// goes to the dead-letter queue at once); ctx ends at the subscription's
// timeout (kind timeout). A panic is recovered and recorded with its stack
// (kind runtime). BusHandlerInfoFrom(ctx) gives the tenant, subscription,
// execution, attempt and an idempotency key.
type BusHandler func(ctx context.Context, ev BusEvent) (any, error)

// RegisterBusHandler registers a Go handler for the event bus under name,
// for every tenant the runtime serves. Registering a name again replaces
// the handler.
func RegisterBusHandler(rt *Runtime, name string, fn BusHandler) {
	rt.mu.Lock()
	defer rt.mu.Unlock()
	if rt.busHandlers == nil {
		rt.busHandlers = map[string]BusHandler{}
	}
	rt.busHandlers[name] = fn
}

// ServeScriptChild must be called first thing in main by a program whose
// runtime runs script targets: scripts run in child processes that
// re-execute the program, and in such a child it serves scripts and never
// returns. In any other process it returns at once.
func ServeScriptChild() { jstarget.ServeChild() }

// busState is the runtime's event-bus state.
type busState struct {
	routers sync.Map // tenant → *bus.Router

	// held counts each tenant's claimed executions not yet finished or
	// released (busTenantRoom bounds it).
	heldMu sync.Mutex
	held   map[string]int

	scriptsMu sync.Mutex
	scripts   *jstarget.Runner // started at the first script, closed when the bus loop ends

	compiledMu sync.Mutex
	compiled   map[scriptKey]*jstarget.Script
	// latest is each script's latest version as read at a subscription
	// generation (which PutScript and DeleteScript change): an attempt
	// claimed at generation g uses an entry read at g or later without
	// reading the store.
	latest map[scriptHead]latestScript

	// attempts is the running bus loop's attempts in flight (nil: none
	// runs), for a Stop that cannot wait for them (abandonBus).
	attempts atomic.Pointer[busAttempts]
}

type scriptHead struct{ tenant, id string }

type latestScript struct {
	gen    int64
	script *jstarget.Script
}

type scriptKey struct {
	tenant, id string
	version    int
}

// busItem is a claimed execution.
type busItem struct {
	tenant string
	// renewed is when its lease was last set while it waited in the
	// dispatch queue (engine clock): at its claim, then by
	// queuedLeases.renew, while a worker that takes it reads it
	// (mustStart).
	renewed atomicTime
	// gen is the tenant's subscription generation read just before the
	// claim (0: not known).
	gen int64
	*storage.BusClaimed
	// slotFree gives back the dispatch queue's script slot this item
	// holds (nil: none); see freeSlot.
	slotFree func()
}

// freeSlot gives back the item's script slot, if it holds one: once its
// script has run (the child is free again), or when its attempt ends
// without running it. Only the goroutine running the attempt calls it.
func (it *busItem) freeSlot() {
	if f := it.slotFree; f != nil {
		it.slotFree = nil
		f()
	}
}

// busRouteBatch is how many events one BusRoute call routes. A routing
// call is one write transaction; on SQLite every other write waits behind
// it, so a smaller batch shortens the tail of the writes queued after it;
// at 64 the bus's throughput did not drop against 256 (bench/results.md,
// "Event bus: 2026-11-24, 12:13 UTC").
const busRouteBatch = 64

// busLoop routes and runs the event bus's work until ctx ends: one claim
// loop routes published events, another claims and runs executions.
// Routing does not wait for execution capacity: a published event gets its
// routes (and its executions their place in the store's queue) while every
// worker is busy.
func (r *Runtime) busLoop(ctx context.Context) {
	if r.cfg.Bus.Disabled {
		return
	}
	defer r.closeScripts()
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		// One routing batch at a time per runtime, fair across tenants.
		claimLoop(ctx, r, ClaimBusRoute, storage.WorkBus, 1,
			func(cctx context.Context, tenant string, _ int) ([]int, bool, error) {
				n, full, err := r.routeBus(cctx, tenant)
				if n == 0 {
					return nil, full, err
				}
				return []int{n}, full, err
			},
			func(context.Context, int) {})
	}()
	defer wg.Wait()
	// Bus.Workers workers take claimed Go-handler, workflow and lane
	// executions from the fair queue, as many script workers its script
	// executions (at least Bus.ScriptProcesses: one per child), and both
	// hand the ends of their attempts to the finisher. Scripts have
	// workers of their own so that however long they run, they never hold
	// one the other targets need.
	q := newBusQueue(r.cfg.Bus.ScriptProcesses, r.cfg.Bus.TenantScriptProcesses, func(depth int) {
		r.obs.BusQueue(BusQueueReport{Depth: depth, Capacity: r.cfg.Bus.QueueSize})
	})
	fin := newBusFinisher(r)
	// The attempts run on until they end, even past the loop's end, unless
	// a Stop that cannot wait for them abandons them (abandonBus).
	atts := newBusAttempts(context.WithoutCancel(ctx))
	r.bus.attempts.Store(atts)
	defer r.bus.attempts.CompareAndSwap(atts, nil)
	var workers sync.WaitGroup
	defer func() { workers.Wait(); fin.close() }()
	work := func(script bool) {
		defer workers.Done()
		for {
			j := q.pop(ctx, script)
			if j == nil {
				return
			}
			r.attemptBus(atts.ctx, fin, atts, j.it)
			j.it.freeSlot()
			close(j.done)
		}
	}
	leases := &queuedLeases{r: r, q: q}
	wg.Add(1)
	go func() { defer wg.Done(); leases.keep(ctx) }()
	workers.Add(r.cfg.Bus.Workers + max(r.cfg.Bus.Workers, r.cfg.Bus.ScriptProcesses))
	for range r.cfg.Bus.Workers {
		go work(false)
	}
	for range max(r.cfg.Bus.Workers, r.cfg.Bus.ScriptProcesses) {
		go work(true)
	}
	// Slots: Workers running plus QueueSize waiting for a worker for one
	// tenant (busTenantRoom), and busClaimBatch more that only the other
	// tenants can take. A claim waits until busClaimBatch of them are
	// free: while the queue holds work (a backlog behind slow targets,
	// such as scripts waiting for a child), the loop claims in batches
	// rather than once per attempt ended, which is most of the claims'
	// cost on the store's writer.
	claimLoopBatched(ctx, r, ClaimBus, storage.WorkBus, newWorkerPool(r.busTenantRoom()+r.busClaimBatch()), r.busClaimBatch(),
		func(cctx context.Context, tenant string, max int) ([]*busItem, bool, error) {
			leases.renew(cctx, tenant)
			return r.claimBus(cctx, tenant, max)
		},
		func(_ context.Context, it *busItem) {
			r.runBus(ctx, q, it)
			r.bus.unclaimed(it.tenant)
		})
}

// busTenantRoom is how many of the claim loop's slots one tenant's
// executions may hold: Bus.Workers + Bus.QueueSize, busClaimBatch fewer
// than there are, so that one tenant's backlog (say, scripts queued behind
// its runaways, which wait for its share of the script slots) never takes
// the room another tenant's executions need to be claimed at all.
func (r *Runtime) busTenantRoom() int { return r.cfg.Bus.Workers + r.cfg.Bus.QueueSize }

// claim counts n more of the tenant's executions as claimed and
// unfinished, at most room in all: how many it may claim (n or fewer). It
// gives none while fewer than batch (or n) fit, so that a tenant at its
// room claims in batches as its slots free, as the claim loop does.
func (b *busState) claim(tenant string, n, room, batch int) int {
	b.heldMu.Lock()
	defer b.heldMu.Unlock()
	if fit := room - b.held[tenant]; fit < min(n, batch) {
		return 0
	}
	n = min(n, room-b.held[tenant])
	if n > 0 {
		if b.held == nil {
			b.held = map[string]int{}
		}
		b.held[tenant] += n
	}
	return n
}

// unclaimed counts one of the tenant's claimed executions as finished
// (or released); a claim of fewer than it counted gives the rest back
// with unclaimedN.
func (b *busState) unclaimed(tenant string) { b.unclaimedN(tenant, 1) }

func (b *busState) unclaimedN(tenant string, n int) {
	if n <= 0 {
		return
	}
	b.heldMu.Lock()
	defer b.heldMu.Unlock()
	if b.held[tenant] -= n; b.held[tenant] <= 0 {
		delete(b.held, tenant)
	}
}

// busClaimBatch is the fewest free slots the bus's claim loop claims for:
// Bus.Workers, but at most half the dispatch queue, so that holding a
// claim back never leaves a worker without work while the store has some
// (the slots still taken then hold at least half a queue of executions
// waiting). A claim of an idle bus is not held back: all its slots are
// free.
func (r *Runtime) busClaimBatch() int {
	return max(1, min(r.cfg.Bus.Workers, r.cfg.Bus.QueueSize/2))
}

// claimBus claims up to max of the tenant's due executions.
func (r *Runtime) claimBus(ctx context.Context, tenant string, max int) ([]*busItem, bool, error) {
	// A tenant holding its whole room claims nothing and stays ready: the
	// claim loop claims for it again once a slot is given back.
	if max = r.bus.claim(tenant, max, r.busTenantRoom(), r.busClaimBatch()); max == 0 {
		return nil, true, nil
	}
	items, more, err := r.claimBusN(ctx, tenant, max)
	r.bus.unclaimedN(tenant, max-len(items))
	return items, more, err
}

// claimBusN claims up to max of the tenant's due executions.
func (r *Runtime) claimBusN(ctx context.Context, tenant string, max int) ([]*busItem, bool, error) {
	// The router (subscriptions) and the generation the script cache is
	// checked against are brought up to date first: an attempt sees every
	// subscription and script put before its claim.
	rt, err := r.router(ctx, tenant)
	if err != nil {
		return nil, false, err
	}
	claimed, err := r.store.BusClaim(ctx, &storage.BusClaimParams{Tenant: tenant, Max: max,
		Now: r.cfg.Clock.Now(), Lease: r.cfg.Bus.Lease})
	if err != nil {
		return nil, false, err
	}
	now := r.cfg.Clock.Now()
	items := make([]*busItem, len(claimed))
	for i, c := range claimed {
		items[i] = &busItem{tenant: tenant, gen: rt.Generation, BusClaimed: c}
		items[i].renewed.store(now)
	}
	return items, len(items) >= max, nil
}

// router returns the tenant's router, rebuilt when its subscriptions
// changed (one generation read per call).
func (r *Runtime) router(ctx context.Context, tenant string) (*bus.Router, error) {
	gen, err := r.store.BusSubscriptionGeneration(ctx, &storage.BusTenantParams{Tenant: tenant})
	if err != nil {
		return nil, fmt.Errorf("subscription generation: %w", err)
	}
	if v, ok := r.bus.routers.Load(tenant); ok && v.(*bus.Router).Generation == gen {
		return v.(*bus.Router), nil
	}
	vs, gen, err := r.store.BusSubscriptionVersions(ctx, &storage.BusTenantParams{Tenant: tenant})
	if err != nil {
		return nil, fmt.Errorf("list subscriptions: %w", err)
	}
	rt := bus.NewVersionedRouter(gen, vs)
	r.bus.routers.Store(tenant, rt)
	return rt, nil
}

// routeBus routes one batch of the tenant's unrouted events: how many it
// routed, and whether the batch was full (more may wait).
// The store routes only with the router of the current subscription
// generation (CheckGeneration): when a subscription changed since the
// router was read (on another node too), it reads it again and routes
// again.
func (r *Runtime) routeBus(ctx context.Context, tenant string) (int, bool, error) {
	for i := 0; ; i++ {
		n, full, err := r.routeBusAt(ctx, tenant)
		if i == 3 || !errors.Is(err, storage.ErrSubscriptionsChanged) {
			return n, full, err
		}
	}
}

func (r *Runtime) routeBusAt(ctx context.Context, tenant string) (int, bool, error) {
	rt, err := r.router(ctx, tenant)
	if err != nil {
		return 0, false, err
	}
	var reports []BusRouteReport
	n, err := r.store.BusRoute(ctx, &storage.BusRouteParams{Tenant: tenant, Max: busRouteBatch, Now: r.cfg.Clock.Now(),
		CheckGeneration: true, Generation: rt.Generation,
		Route: func(ev *storage.BusEvent) []storage.BusRouteDecision {
			ds := rt.Route(ev)
			rep := BusRouteReport{Tenant: tenant, EventID: ev.ID, Type: ev.Type}
			for _, d := range ds {
				if d.Matched {
					rep.Matched = append(rep.Matched, d.Subscription)
				} else {
					rep.Filtered = append(rep.Filtered, d.Subscription)
				}
			}
			reports = append(reports, rep)
			return ds
		}})
	if err != nil {
		return 0, false, fmt.Errorf("route published events: %w", err)
	}
	// The store may have called Route again for a retried transaction:
	// the last n calls are the ones it committed.
	if len(reports) > n {
		reports = reports[len(reports)-n:]
	}
	for _, rep := range reports {
		r.obs.BusRouted(rep)
	}
	return n, n >= busRouteBatch, nil
}

// runBus queues a claimed execution for the workers and waits until one
// has run its attempt (the claim loop's slot is held until then). Once the
// runtime is stopping, an execution no worker has taken is released,
// untouched, for the next start or another node.
func (r *Runtime) runBus(loop context.Context, q *busQueue, it *busItem) {
	j := &busJob{it: it, script: r.isScriptTarget(it), done: make(chan struct{})}
	q.push(j)
	select {
	case <-j.done:
	case <-loop.Done():
		if q.remove(j) {
			r.releaseBus(context.WithoutCancel(loop), it)
			return
		}
		<-j.done // a worker has it
	}
}

// isScriptTarget reports whether the execution's subscription, as the
// tenant's router knows it, has a script target, so that the dispatch
// queue hands it out only when a script child is free. (A subscription
// changed to a script target after the router was built runs its script
// without a slot: it may wait for a child inside the runner, as every
// script did before the queue knew of children.)
func (r *Runtime) isScriptTarget(it *busItem) bool {
	if v, ok := r.bus.routers.Load(it.tenant); ok {
		if s := v.(*bus.Router).Subscription(it.Execution.Subscription); s != nil {
			return s.Target.Kind == heraldtype.TargetScript
		}
	}
	return false
}

func (r *Runtime) releaseBus(ctx context.Context, it *busItem) {
	errs, err := r.store.BusFinish(ctx, &storage.BusFinishParams{Tenant: it.tenant, Now: r.cfg.Clock.Now(),
		Results: []storage.BusResult{{Execution: it.Execution.ID, LockToken: it.LockToken, Outcome: storage.BusReleased,
			RetryAt: r.cfg.Clock.Now()}}})
	if err == nil && len(errs) == 1 {
		err = errs[0]
	}
	if err != nil && !errors.Is(err, heraldtype.ErrLeaseLost) {
		r.logger.Warn("herald: release a bus execution at stop (its lease will run out instead)",
			"tenant", it.tenant, "execution", it.Execution.ID, "err", err)
	}
}

// fail is a failed bus attempt of kind.
func fail(kind heraldtype.ErrorKind, format string, args ...any) *attempt.Failure {
	return attempt.Failf(kind, format, args...)
}

// attemptBus runs one attempt and records its end, in a span of its own
// (startBusSpan) whose context the target's work gets.
func (r *Runtime) attemptBus(ctx context.Context, fin *busFinisher, atts *busAttempts, it *busItem) {
	ctx, span := startBusSpan(ctx, r.tracer, it)
	var (
		outcome string
		spanErr error
	)
	defer func() { endOutcomeSpan(span, outcome, spanErr) }()
	r.attemptBusIn(ctx, fin, atts, it, &outcome, &spanErr)
}

// attemptBusIn is attemptBus within its span: it sets *outcome (the
// report's) and *spanErr (the attempt's failure, if any).
func (r *Runtime) attemptBusIn(ctx context.Context, fin *busFinisher, atts *busAttempts, it *busItem, outcome *string, spanErr *error) {
	ex := &it.Execution
	sub, subErr := r.subscription(ctx, it.tenant, ex.Subscription)
	maxRetries := DefaultMaxRetries
	timeout := r.cfg.Bus.Timeout
	var target heraldtype.Target
	if sub != nil {
		target = sub.Target
		if sub.MaxRetries != nil {
			maxRetries = *sub.MaxRetries
		}
		if sub.Timeout > 0 {
			timeout = time.Duration(sub.Timeout)
		}
	}
	if !atts.begin(it) {
		// A Stop that could not wait abandoned the attempts as this one was
		// about to start: it is released, unstarted.
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), busReleaseTimeout)
		defer cancel()
		r.releaseBus(rctx, it)
		return
	}
	// The final attempt started, and its node stopped or stalled: the
	// execution is dead-lettered without a new attempt (none is counted;
	// the record is the lost attempt's). Otherwise the attempt starts
	// (mustStart): it is counted, and its lease renewed, before the target
	// runs (which also fences out an attempt another node took over
	// meanwhile); else its end counts it.
	policy := attempt.BusPolicy(maxRetries)
	takenOverLast := it.TakenOver && attempt.Exhausted(ex.Attempts, policy)
	if takenOverLast {
		ex.Attempts--
	} else if !r.mustStart(it, target) {
		// Counted by its end's record.
	} else if err := r.startAttempt(ctx, it); err != nil {
		if errors.Is(err, heraldtype.ErrLeaseLost) {
			atts.end(it)
			*outcome = BusOutcomeLeaseLost
			r.obs.BusAttempted(BusAttemptReport{Tenant: it.tenant, Subscription: ex.Subscription, EventID: ex.EventID,
				Attempt: ex.Attempts, Outcome: BusOutcomeLeaseLost})
			return
		}
		// Not started, so not counted: given back for the next claim.
		r.logger.Error("herald: start a bus attempt", "tenant", it.tenant, "execution", ex.ID, "err", err)
		if atts.end(it) {
			r.releaseBus(ctx, it)
		}
		*outcome = "unstarted"
		return
	}
	var keeper *attempt.Keeper
	defer func() {
		if keeper != nil {
			keeper.Stop()
		}
	}()

	began, wallBegan := r.cfg.Clock.Now(), time.Now()
	var res json.RawMessage
	var logs []string
	var failure *attempt.Failure
	switch {
	case subErr != nil:
		failure = subErr
	case takenOverLast:
		failure = fail(heraldtype.ErrorRuntime, "the lease of the final attempt ran out (its node stopped or stalled)")
	default:
		// The lease is renewed until the end is recorded (finishHeld). A
		// lost lease does not cut the target short: its end is found
		// lost when it is recorded.
		keeper = attempt.Keep(ctx, r.cfg.Clock, r.cfg.Bus.Lease/3, func() error {
			return r.store.BusHeartbeat(ctx, &storage.BusHeartbeatParams{Tenant: it.tenant, Execution: ex.ID,
				LockToken: it.LockToken, LeaseUntil: r.cfg.Clock.Now().Add(r.cfg.Bus.Lease)})
		}, nil)
		res, logs, failure = r.runTarget(ctx, it, sub, timeout)
	}
	// What a target returns is the tenant's to choose, so it is capped
	// before it reaches the store: a result over the cap is not stored,
	// an error message or stack over its cap is cut.
	if failure == nil && len(res) > MaxBusResultBytes {
		failure = fail(heraldtype.ErrorResource, "the result is %d bytes, over the %d-byte cap", len(res), MaxBusResultBytes)
		res = nil
	}
	if failure != nil {
		failure.Msg = capText(failure.Msg, MaxBusErrorBytes)
		failure.Stack = capText(failure.Stack, MaxBusErrorBytes)
	}
	dur := time.Since(wallBegan)

	now := r.cfg.Clock.Now()
	rec := heraldtype.Attempt{Number: ex.Attempts, StartedAt: began, Duration: heraldtype.Duration(dur), Logs: logs}
	result := storage.BusResult{Execution: ex.ID, LockToken: it.LockToken}
	rep := BusAttemptReport{Tenant: it.tenant, Subscription: ex.Subscription, Target: string(target.Kind),
		EventID: ex.EventID, Attempt: ex.Attempts, Duration: dur}
	if failure != nil {
		rec.ErrorKind, rec.Error, rec.Stack = failure.Kind, failure.Msg, failure.Stack
		rep.ErrorKind = string(failure.Kind)
	}
	switch d := attempt.Decide(failure, ex.Attempts, policy, now); d.Action {
	case attempt.Complete:
		rec.Succeeded, rec.Result = true, res
		result.Outcome = storage.BusSucceeded
		rep.Outcome = BusOutcomeSucceeded
	case attempt.Retry:
		result.Outcome = storage.BusRetry
		result.RetryAt = d.At
		rep.Outcome = BusOutcomeRetry
	default: // attempt.Fail: the executor makes no lost-lease failure of its own (Drop)
		result.Outcome = storage.BusDeadLetter
		result.DeadLetter = &heraldtype.DeadLetter{Target: target, ErrorKind: failure.Kind, Error: failure.Msg,
			Stack: failure.Stack, FailedAt: now}
		rep.Outcome = BusOutcomeDeadLetter
	}
	result.Attempt = rec
	if failure != nil {
		*spanErr = failure
	}
	if !atts.end(it) {
		// Abandoned by a Stop that could not wait: released, not recorded.
		*outcome = BusOutcomeLeaseLost
		return
	}
	if err := r.finishHeld(fin, atts, it, now, result); err != nil {
		if errors.Is(err, heraldtype.ErrLeaseLost) {
			rep.Outcome = BusOutcomeLeaseLost
			*outcome = rep.Outcome
			r.obs.BusAttempted(rep)
			return
		}
		// The attempt's end is not recorded (the store refused it, or the
		// runtime stopped while it failed): the lease runs out and the
		// execution is taken over.
		r.logger.Error("herald: record a bus attempt", "tenant", it.tenant, "execution", ex.ID, "err", err)
		*outcome = "unrecorded"
		return
	}
	*outcome = rep.Outcome
	r.obs.BusAttempted(rep)
}

// capText cuts s to at most max bytes (at a UTF-8 boundary), saying how
// long s was.
func capText(s string, max int) string {
	if len(s) <= max {
		return s
	}
	note := fmt.Sprintf(" … (cut: %d bytes in all)", len(s))
	cut := max - len(note)
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + note
}

// subscription returns the subscription an execution belongs to, as the
// tenant's router knows it (refreshed by every claim round), or a
// permanent failure if it was deleted.
func (r *Runtime) subscription(ctx context.Context, tenant, id string) (*heraldtype.Subscription, *attempt.Failure) {
	if v, ok := r.bus.routers.Load(tenant); ok {
		if s := v.(*bus.Router).Subscription(id); s != nil {
			return s, nil
		}
	}
	s, err := r.store.BusSubscriptionGet(ctx, &storage.BusSubscriptionGetParams{Tenant: tenant, ID: id})
	switch {
	case errors.Is(err, heraldtype.ErrNotFound):
		return nil, fail(heraldtype.ErrorPermission, "subscription %q was deleted", id)
	case err != nil:
		return nil, fail(heraldtype.ErrorRuntime, "read subscription %q: %v", id, err)
	}
	return s, nil
}

// runTarget hands the event to the subscription's target.
func (r *Runtime) runTarget(ctx context.Context, it *busItem, sub *heraldtype.Subscription, timeout time.Duration) (json.RawMessage, []string, *attempt.Failure) {
	env := bus.EnvelopeOf(&it.Event)
	t := sub.Target
	var res any
	var failure *attempt.Failure
	switch t.Kind {
	case heraldtype.TargetScript:
		return r.runScript(ctx, it, t.Script, env, timeout)
	case heraldtype.TargetHandler:
		r.mu.RLock()
		fn := r.busHandlers[t.Handler]
		r.mu.RUnlock()
		if fn == nil {
			return nil, nil, fail(heraldtype.ErrorPermission, "no Go handler %q is registered in this runtime", t.Handler)
		}
		res, failure = attempt.Run(ctx, timeout, "handler", t.Handler, engineKind,
			func(ctx context.Context) (any, error) { return fn(withBusHandlerInfo(ctx, it), env) })
	case heraldtype.TargetWorkflow, heraldtype.TargetSignal, heraldtype.TargetEnqueue, heraldtype.TargetCorrelated:
		res, failure = attempt.Run(ctx, timeout, "delivery", "", engineKind,
			func(ctx context.Context) (any, error) { return r.deliver(ctx, it, sub, env) })
	default:
		return nil, nil, fail(heraldtype.ErrorValidation, "target kind %q is unknown", t.Kind)
	}
	if failure != nil {
		if failure.Cause != nil {
			r.logger.Warn("herald: a bus attempt failed on the store", "tenant", it.tenant, "execution", it.Execution.ID, "err", failure.Cause)
		}
		return nil, nil, failure
	}
	raw, merr := json.Marshal(res)
	if merr != nil {
		return nil, nil, fail(heraldtype.ErrorValidation, "the target's result cannot be encoded as JSON: %v", merr)
	}
	return raw, nil, nil
}

// engineKind is the kind of a failure on an error of the engine's own (a
// bus delivery into it, or a handler passing one on): refused input is
// ErrorValidation, an instance that ended or exists, or something not
// found, ErrorPermanent; none of them gets better with a retry. It is the
// bus's part of attempt.Classify, which records them in Herald's words
// (storage.ErrorText: no backend names, no driver text).
func engineKind(err error) heraldtype.ErrorKind {
	switch {
	case errors.Is(err, ErrInvalidArgument), errors.Is(err, ErrEventInvalid), errors.Is(err, heraldtype.ErrEventIDConflict),
		errors.Is(err, ErrDefinitionInvalid), errors.Is(err, bus.ErrTemplate):
		return heraldtype.ErrorValidation
	case errors.Is(err, ErrInstanceNotRunning), errors.Is(err, ErrInstanceExists), errors.Is(err, heraldtype.ErrNotFound):
		return heraldtype.ErrorPermanent
	}
	return ""
}

// deliver starts a workflow, delivers the event into an instance lane
// (admitted by the runtime's door) or puts a correlated event. Ids are
// derived from the bus event id and the subscription, so that a
// retry of an attempt whose result was lost changes nothing.
func (r *Runtime) deliver(ctx context.Context, it *busItem, sub *heraldtype.Subscription, env BusEvent) (any, error) {
	c, err := r.Client(it.tenant)
	if err != nil {
		return nil, err
	}
	doc, err := env.Doc()
	if err != nil {
		return nil, fail(heraldtype.ErrorValidation, "%v", err)
	}
	expand := func(text string) (string, error) {
		tm, err := bus.ParseTemplate(text)
		if err != nil {
			return "", err
		}
		return tm.Expand(doc)
	}
	t := sub.Target
	data := env.Data
	if len(data) == 0 {
		data = json.RawMessage("null")
	}
	switch t.Kind {
	case heraldtype.TargetWorkflow:
		id := derivedID(sub.ID, env.ID)
		if t.InstanceID != "" {
			if id, err = expand(t.InstanceID); err != nil {
				return nil, err
			}
		}
		got, err := c.StartWorkflow(ctx, t.Workflow, env, WithInstanceID(id), WithIDReusePolicy(IDReuseUseExisting))
		if err != nil {
			return nil, err
		}
		return map[string]any{"instance_id": got}, nil
	case heraldtype.TargetSignal, heraldtype.TargetEnqueue:
		inst, err := expand(t.InstanceID)
		if err != nil {
			return nil, err
		}
		// Through the door once, in the attempt's span, straight to the
		// store: no span, retry or hand-off of a client's send (the attempt
		// is the retry; the claim loop runs the turn).
		ev := &laneEvent{tenant: it.tenant, lane: history.LanePositional, instanceID: inst, name: t.Name,
			eventID: derivedID(sub.ID, env.ID), payload: data}
		if t.Kind == heraldtype.TargetEnqueue {
			ev.lane = history.LaneQueue
		}
		lim := r.door.limitsFor(ctx, it.tenant)
		raw, _, err := r.door.checkLane(ev, lim)
		if err != nil {
			return nil, err
		}
		rec, err := r.door.sendLane(ctx, ev, ev.eventID, true, raw, nil, lim, traceParent(trace.SpanFromContext(ctx)), r.store.EventRaise)
		if err != nil {
			return nil, err
		}
		return map[string]any{"instance_id": inst, "event_id": rec.EventID, "duplicate": rec.Duplicate}, nil
	default: // correlated
		key, err := expand(t.Key)
		if err != nil {
			return nil, err
		}
		ce, err := c.PutCorrelatedEvent(ctx, t.Name, key, data)
		if err != nil {
			return nil, err
		}
		return map[string]any{"key": key, "produced": len(ce.Produced)}, nil
	}
}

// derivedID is the id of what a bus execution produces: "bus:" + the
// subscription + ":" + the event id, or a hash of both when that would
// be over MaxIDBytes.
func derivedID(sub, eventID string) string {
	id := "bus:" + sub + ":" + eventID
	if len(id) <= MaxIDBytes {
		return id
	}
	h := sha256.Sum256([]byte(sub + "\x00" + eventID))
	return "bus:" + hex.EncodeToString(h[:])
}

// runScript runs the subscription's script (its latest version when the
// attempt was claimed) in the sandbox.
func (r *Runtime) runScript(ctx context.Context, it *busItem, id string, env BusEvent, timeout time.Duration) (json.RawMessage, []string, *attempt.Failure) {
	compiled, tf := r.latestScript(ctx, it, id)
	if tf != nil {
		return nil, nil, tf
	}
	runner, err := r.scriptRunner()
	if err != nil {
		return nil, nil, fail(heraldtype.ErrorRuntime, "start the script sandbox: %v", err)
	}
	res, err := runner.Run(ctx, compiled, jstarget.Input{TenantID: it.tenant, Timeout: timeout,
		Event: jstarget.Event{ID: env.ID, Type: env.Type, Data: env.Data, Timestamp: env.Timestamp}})
	it.freeSlot() // the child is back in the runner's pool (or replaced, if it was killed)
	if err != nil {
		var je *jstarget.Error
		if !errors.As(err, &je) {
			return nil, nil, fail(heraldtype.ErrorRuntime, "%v", err)
		}
		kind := heraldtype.ErrorRuntime
		switch je.Kind {
		case jstarget.KindTimeout:
			kind = heraldtype.ErrorTimeout
		case jstarget.KindResource:
			kind = heraldtype.ErrorResource
		case jstarget.KindPermanent:
			kind = heraldtype.ErrorPermanent
		case jstarget.KindSyntax:
			kind = heraldtype.ErrorValidation
		}
		return nil, je.Logs, &attempt.Failure{Kind: kind, Msg: je.Message, Stack: je.Stack}
	}
	return res.Value, res.Logs, nil
}

// latestScript returns script id's latest version, compiled, as of the
// attempt's claim: from the cache when it was read at the generation the
// claim saw or later (PutScript and DeleteScript change the generation),
// else from the store.
func (r *Runtime) latestScript(ctx context.Context, it *busItem, id string) (*jstarget.Script, *attempt.Failure) {
	k := scriptHead{tenant: it.tenant, id: id}
	if it.gen > 0 {
		r.bus.compiledMu.Lock()
		e, ok := r.bus.latest[k]
		r.bus.compiledMu.Unlock()
		if ok && e.gen >= it.gen {
			return e.script, nil
		}
	}
	s, err := r.store.BusScriptGet(ctx, &storage.BusScriptGetParams{Tenant: it.tenant, ID: id})
	switch {
	case errors.Is(err, heraldtype.ErrNotFound):
		return nil, fail(heraldtype.ErrorPermission, "script %q was deleted", id)
	case err != nil:
		return nil, fail(heraldtype.ErrorRuntime, "read script %q: %v", id, err)
	}
	compiled, tf := r.compiledScript(it.tenant, s)
	if tf != nil || it.gen <= 0 {
		return compiled, tf
	}
	// Read after the generation it.gen was read, so at least as new as
	// it.gen's latest version.
	r.bus.compiledMu.Lock()
	if e, ok := r.bus.latest[k]; !ok || e.gen < it.gen {
		if r.bus.latest == nil || len(r.bus.latest) >= maxCompiledScripts {
			r.bus.latest = map[scriptHead]latestScript{}
		}
		r.bus.latest[k] = latestScript{gen: it.gen, script: compiled}
	}
	r.bus.compiledMu.Unlock()
	return compiled, nil
}

// maxCompiledScripts bounds the compiled-script cache.
const maxCompiledScripts = 1024

func (r *Runtime) compiledScript(tenant string, s *heraldtype.Script) (*jstarget.Script, *attempt.Failure) {
	k := scriptKey{tenant: tenant, id: s.ID, version: s.Version}
	r.bus.compiledMu.Lock()
	c := r.bus.compiled[k]
	r.bus.compiledMu.Unlock()
	if c != nil {
		return c, nil
	}
	c, err := jstarget.Compile(s.ID, s.Source)
	if err != nil {
		return nil, fail(heraldtype.ErrorValidation, "script %q version %d does not compile: %v", s.ID, s.Version, err)
	}
	r.bus.compiledMu.Lock()
	if r.bus.compiled == nil || len(r.bus.compiled) >= maxCompiledScripts {
		r.bus.compiled = map[scriptKey]*jstarget.Script{}
	}
	r.bus.compiled[k] = c
	r.bus.compiledMu.Unlock()
	return c, nil
}

func (r *Runtime) scriptRunner() (*jstarget.Runner, error) {
	r.bus.scriptsMu.Lock()
	defer r.bus.scriptsMu.Unlock()
	if r.bus.scripts == nil {
		runner, err := jstarget.NewRunner(jstarget.Config{Children: r.cfg.Bus.ScriptProcesses,
			MemoryLimit: r.cfg.Bus.ScriptMemory, Timeout: r.cfg.Bus.Timeout})
		if err != nil {
			return nil, err
		}
		r.bus.scripts = runner
	}
	return r.bus.scripts, nil
}

// closeScripts stops the script child processes (after the bus loop has
// waited for its attempts).
func (r *Runtime) closeScripts() {
	r.bus.scriptsMu.Lock()
	defer r.bus.scriptsMu.Unlock()
	if r.bus.scripts != nil {
		_ = r.bus.scripts.Close()
		r.bus.scripts = nil
	}
}

// pruneBus deletes the tenant's ended bus records older than
// Bus.RecordRetention (maintenance).
func (r *Runtime) pruneBus(ctx context.Context, tenant string) {
	before := r.cfg.Clock.Now().Add(-r.cfg.Bus.RecordRetention)
	for range 100 {
		n, err := r.store.BusPrune(ctx, &storage.BusPruneParams{Tenant: tenant, Before: before, Limit: 1000})
		if err != nil {
			if ctx.Err() == nil {
				r.logger.Error("herald: prune bus records", "tenant", tenant, "err", err)
			}
			return
		}
		if n < 1000 {
			return
		}
	}
}
