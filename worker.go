package herald

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"runtime/debug"
	"strings"
	"sync"
	"time"

	"github.com/heraldwf/herald/history"
	"github.com/heraldwf/herald/internal/replay"
	"github.com/heraldwf/herald/storage"
)

// claimTimeout bounds one claim call; it does not end with Stop.
const claimTimeout = 30 * time.Second

// waiter sleeps until the store signals new work, the next known wake time
// arrives, the poll interval passes, or ctx ends.
type waiter struct {
	r      *Runtime
	signal <-chan struct{}
	timer  *time.Timer
}

func (r *Runtime) newWaiter(kinds storage.WorkKind) (*waiter, func()) {
	ch, cancel := r.store.SubscribeKinds(r.cfg.Tenant, kinds)
	t := time.NewTimer(time.Hour)
	t.Stop()
	return &waiter{r: r, signal: ch, timer: t}, func() { cancel(); t.Stop() }
}

func (w *waiter) wait(ctx context.Context) {
	d := w.r.cfg.PollInterval
	now := w.r.cfg.Now()
	if at, ok, err := w.r.store.NextWake(ctx, &storage.NextWakeParams{Tenant: w.r.cfg.Tenant, Now: now}); err == nil && ok {
		if until := at.Sub(now); until < d {
			d = max(until, time.Millisecond)
		}
	}
	w.timer.Reset(d)
	select {
	case <-ctx.Done():
	case <-w.signal:
	case <-w.timer.C:
	}
	if !w.timer.Stop() {
		select {
		case <-w.timer.C:
		default:
		}
	}
}

// claimLoop claims work while worker slots are free and runs each item in
// its own goroutine, sleeping on the waiter when there is none. It is the
// loop of both the turn and the activity workers.
//
// A claim is not cut off by Stop: a claim the database committed but the
// caller saw cancelled would strand its work until the lease ran out. What
// a claim returns is run, even when stopping; Stop waits for it.
func claimLoop[T any](ctx context.Context, r *Runtime, what string, kinds storage.WorkKind, workers int,
	claim func(ctx context.Context, max int) ([]T, error), run func(ctx context.Context, item T)) {
	w, done := r.newWaiter(kinds)
	defer done()
	slots := make(chan struct{}, workers)
	var inflight sync.WaitGroup
	defer inflight.Wait()
	for ctx.Err() == nil {
		free := cap(slots) - len(slots)
		if free == 0 {
			select { // wait for a slot
			case slots <- struct{}{}:
				<-slots
			case <-ctx.Done():
				return
			}
			continue
		}
		claimCtx, cancelClaim := context.WithTimeout(context.WithoutCancel(ctx), claimTimeout)
		items, err := claim(claimCtx, free)
		cancelClaim()
		if err != nil {
			if ctx.Err() == nil {
				r.logger.Error("herald: claim "+what, "err", err)
			}
			w.wait(ctx)
			continue
		}
		if len(items) == 0 {
			w.wait(ctx)
			continue
		}
		for _, item := range items {
			slots <- struct{}{}
			inflight.Add(1)
			go func() {
				defer func() { <-slots; inflight.Done() }()
				run(context.WithoutCancel(ctx), item)
			}()
		}
		if len(items) < free {
			// The claim took everything there was: more work comes with a
			// signal (new work, a committed turn that left some) or at its
			// NextWake time. Claiming again at once would only queue an
			// empty claim in front of the turns just started.
			w.wait(ctx)
		}
	}
}

// turnLoop claims and runs turns.
func (r *Runtime) turnLoop(ctx context.Context) {
	claimLoop(ctx, r, "turns", storage.WorkTurns, r.cfg.TurnWorkers, func(ctx context.Context, max int) ([]*storage.Turn, error) {
		return r.store.TurnClaim(ctx, &storage.TurnClaimParams{Tenant: r.cfg.Tenant, Now: r.cfg.Now(), Lease: r.cfg.TurnLease, Max: max})
	}, r.runTurn)
}

// runTurn replays one instance, applies its new messages and commits the
// outcome in one transaction.
func (r *Runtime) runTurn(ctx context.Context, t *storage.Turn) {
	wf := r.workflow(t.Instance.Workflow)
	if wf == nil {
		// Another runtime sharing the store may know this workflow.
		r.logger.Warn("herald: workflow not registered here; releasing its turn",
			"workflow", t.Instance.Workflow, "instance", t.Instance.ID)
		_ = r.store.TurnAbandon(ctx, &storage.TurnAbandonParams{Tenant: r.cfg.Tenant, InstanceID: t.Instance.ID,
			LockToken: t.LockToken, RetryAt: r.cfg.Now().Add(r.cfg.PollInterval)})
		return
	}
	if t.Err != nil {
		r.failUnreplayable(ctx, t, failureCorrupt, t.Err)
		return
	}
	out, err := runReplay(&replay.Input{
		InstanceID: t.Instance.ID,
		Workflow:   wf,
		History:    t.History,
		Messages:   t.Messages,
		Now:        r.cfg.Now(),
		Limits: replay.Limits{
			MaxUnconsumedEvents:       r.cfg.MaxUnconsumedEvents,
			MaxCarryForwardExecutions: r.cfg.MaxCarryForwardExecutions,
			MaxQueuedEvents:           r.cfg.MaxQueuedEvents,
		},
	})
	if err != nil {
		r.failUnreplayable(ctx, t, failureReplay, err)
		return
	}
	for i := range out.Activities {
		out.Activities[i].Tenant = r.cfg.Tenant
		out.Activities[i].Retry = r.retryPolicy(out.Activities[i].Retry)
	}
	waits := r.correlatedWaits(ctx, t.Instance.ID, out.CorrelatedWaits)
	storeDrops, err := r.store.TurnCommit(ctx, &storage.TurnCommitParams{
		Tenant:           r.cfg.Tenant,
		InstanceID:       t.Instance.ID,
		LockToken:        t.LockToken,
		Execution:        t.Instance.Execution,
		Now:              r.cfg.Now(),
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
	})
	r.stats.Turns.Add(1)
	if err != nil {
		r.stats.TurnsFailed.Add(1)
		if errors.Is(err, storage.ErrLeaseLost) {
			r.stats.LeasesLost.Add(1)
			r.logger.Info("herald: turn discarded, lease lost", "instance", t.Instance.ID)
			return
		}
		r.logger.Error("herald: commit turn", "instance", t.Instance.ID, "err", err)
		_ = r.store.TurnAbandon(ctx, &storage.TurnAbandonParams{Tenant: r.cfg.Tenant, InstanceID: t.Instance.ID,
			LockToken: t.LockToken, RetryAt: r.cfg.Now().Add(r.cfg.PollInterval)})
		return
	}
	reportDrops(r.logger, &r.stats, t.Instance.ID, out.Drops)
	reportContinuedDrops(r.logger, &r.stats, t.Instance.ID, out.ContinuedDrops)
	reportDrops(r.logger, &r.stats, t.Instance.ID, storeDrops)
	if out.Failure != nil && out.Failure.Kind == replay.FailureNondeterminism {
		r.logger.Error("herald: workflow failed: non-deterministic", "instance", t.Instance.ID, "err", out.Failure.Message)
	}
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
// (Stats.InstancesUnreplayable); its pending and buffered events are dropped
// (instance_terminal) as for any end.
func (r *Runtime) failUnreplayable(ctx context.Context, t *storage.Turn, kind string, cause error) {
	msg := cause.Error()
	if len(msg) > 4096 {
		msg = msg[:4096] + "…"
	}
	// The cut may split a rune, and a decoder's message may quote bad bytes:
	// the failure is stored as text.
	msg = strings.ToValidUTF8(msg, "�")
	dropped, err := r.store.InstanceTerminate(ctx, &storage.InstanceTerminateParams{Tenant: r.cfg.Tenant,
		ID: t.Instance.ID, Now: r.cfg.Now(), Failure: &history.Failure{Kind: kind, Message: msg}})
	switch {
	case err == nil:
		// Logged and counted once: only the call that ended the instance.
		r.stats.InstancesUnreplayable.Add(1)
		r.logger.Error("herald: instance failed: it cannot be replayed", "instance", t.Instance.ID,
			"workflow", t.Instance.Workflow, "kind", kind, "err", msg)
		reportDrops(r.logger, &r.stats, t.Instance.ID, dropped)
	case errors.Is(err, storage.ErrInstanceNotRunning):
	default:
		// The store could not take the failure now: leave the instance for
		// a later claim rather than spinning on it.
		r.logger.Error("herald: record instance failure", "instance", t.Instance.ID, "err", err)
		_ = r.store.TurnAbandon(ctx, &storage.TurnAbandonParams{Tenant: r.cfg.Tenant, InstanceID: t.Instance.ID,
			LockToken: t.LockToken, RetryAt: r.cfg.Now().Add(r.cfg.PollInterval)})
	}
}

// correlatedWaits turns the engine's correlated waits into the store's,
// with the definition's delete-after-first setting as it is now. A wait on a
// definition without correlation config can never be reached (puts to it are
// refused): it is registered anyway, so a timeout still ends it, and logged.
func (r *Runtime) correlatedWaits(ctx context.Context, instanceID string, ws []replay.CorrelatedWait) []storage.CorrelatedWait {
	if len(ws) == 0 {
		return nil
	}
	out := make([]storage.CorrelatedWait, len(ws))
	for i, w := range ws {
		out[i] = storage.CorrelatedWait{TaskSeq: w.TaskSeq, Def: w.Def, Key: w.Key}
		def, err := r.store.EventDefinitionGet(ctx, &storage.EventDefinitionGetParams{Tenant: r.cfg.Tenant, Name: w.Def})
		switch {
		case err == nil && def.Correlation != nil:
			out[i].DeleteAfterFirst = def.Correlation.DeleteAfterFirstCorrelation
		case err == nil || errors.Is(err, storage.ErrNotFound):
			r.logger.Warn("herald: correlated wait on a definition without correlation config: no put can reach it",
				"instance", instanceID, "definition", w.Def, "key", w.Key)
		default:
			r.logger.Error("herald: read event definition", "definition", w.Def, "err", err)
		}
	}
	return out
}

// reportDrops logs each drop breadcrumb at WARN and counts every event it
// stands for: no event is dropped silently. A breadcrumb of a burst of
// limit drops (history.Event.Count) is one WARN line with the count and the
// last event id, so that a flood does not flood the log.
func reportDrops(logger *slog.Logger, stats *Stats, instanceID string, drops []history.Event) {
	reportDropsAt(logger, slog.LevelWarn, "herald: event dropped", stats, instanceID, drops)
}

// reportContinuedDrops counts the limit drops that continue a burst whose
// breadcrumb (and WARN line) an earlier turn wrote, and logs them at DEBUG:
// one WARN per burst, every drop counted, every fate in the ledger.
func reportContinuedDrops(logger *slog.Logger, stats *Stats, instanceID string, drops []history.Event) {
	reportDropsAt(logger, slog.LevelDebug, "herald: events dropped, continuing a burst", stats, instanceID, drops)
}

func reportDropsAt(logger *slog.Logger, level slog.Level, msg string, stats *Stats, instanceID string, drops []history.Event) {
	for _, d := range drops {
		n := max(d.Count, 1)
		if stats != nil {
			stats.countDrops(string(d.Reason), int64(n))
		}
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

// backoff is the delay before attempt+1 after attempt failed.
func backoff(p RetryPolicy, attempt int) time.Duration {
	d := float64(p.InitialInterval) * math.Pow(p.BackoffCoefficient, float64(attempt-1))
	if d > float64(p.MaxInterval) {
		return p.MaxInterval
	}
	return time.Duration(d)
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

type nonRetryable struct{ err error }

func (e *nonRetryable) Error() string { return e.err.Error() }
func (e *nonRetryable) Unwrap() error { return e.err }

// NonRetryable marks an activity error as permanent: the activity fails at
// once instead of being retried.
func NonRetryable(err error) error { return &nonRetryable{err} }

// activityLoop claims and runs activities.
func (r *Runtime) activityLoop(ctx context.Context) {
	claimLoop(ctx, r, "activities", storage.WorkActivities, r.cfg.ActivityWorkers, func(ctx context.Context, max int) ([]*storage.ActivityTask, error) {
		return r.store.ActivityClaim(ctx, &storage.ActivityClaimParams{Tenant: r.cfg.Tenant, Now: r.cfg.Now(), Lease: r.cfg.ActivityLease, Max: max})
	}, r.runActivity)
}

func (r *Runtime) runActivity(base context.Context, t *storage.ActivityTask) {
	r.stats.ActivitiesRun.Add(1)
	fn := r.activity(t.Name)
	if fn == nil {
		// Leave it for a runtime that has the activity: let the lease lapse
		// rather than failing the workflow because of a deployment gap.
		r.logger.Warn("herald: activity not registered here; releasing it", "activity", t.Name, "instance", t.InstanceID)
		_ = r.store.ActivityRetry(base, &storage.ActivityRetryParams{Tenant: t.Tenant, InstanceID: t.InstanceID,
			Execution: t.Execution, TaskSeq: t.TaskSeq, LockToken: t.LockToken, RetryAt: r.cfg.Now().Add(r.cfg.PollInterval)})
		return
	}
	if t.Retry.MaxAttempts > 0 && t.Attempt > t.Retry.MaxAttempts {
		// Every attempt was lost with its worker (a crash, an OOM kill):
		// fail the activity rather than retry it forever.
		err := r.store.ActivityComplete(base, &storage.ActivityCompleteParams{Tenant: t.Tenant, InstanceID: t.InstanceID,
			Execution: t.Execution, TaskSeq: t.TaskSeq, LockToken: t.LockToken, Now: r.cfg.Now(),
			Failure: &history.Failure{Kind: replay.FailureActivity, Message: fmt.Sprintf(
				"attempt %d of %d: the previous attempt's worker was lost (lease expired)", t.Attempt-1, t.Retry.MaxAttempts)}})
		if err != nil && !errors.Is(err, storage.ErrLeaseLost) {
			r.logger.Error("herald: record activity result", "activity", t.Name, "instance", t.InstanceID, "err", err)
		}
		return
	}
	ctx, cancel := context.WithCancel(context.WithValue(base, activityInfoKey{}, ActivityInfo{
		InstanceID: t.InstanceID, Execution: t.Execution, Name: t.Name, Attempt: t.Attempt,
		IdempotencyKey: fmt.Sprintf("%s/%d/%d", t.InstanceID, t.Execution, t.TaskSeq),
	}))
	defer cancel()

	// Heartbeat: extend the lease and learn about cancellation.
	hbDone := make(chan struct{})
	var hbWG sync.WaitGroup
	hbWG.Add(1)
	go func() {
		defer hbWG.Done()
		tick := time.NewTicker(r.cfg.ActivityLease / 3)
		defer tick.Stop()
		for {
			select {
			case <-hbDone:
				return
			case <-tick.C:
				cancelReq, err := r.store.ActivityHeartbeat(base, &storage.ActivityHeartbeatParams{
					Tenant: t.Tenant, InstanceID: t.InstanceID, Execution: t.Execution, TaskSeq: t.TaskSeq,
					LockToken: t.LockToken, LeaseUntil: r.cfg.Now().Add(r.cfg.ActivityLease),
				})
				if cancelReq || errors.Is(err, storage.ErrLeaseLost) {
					cancel()
				}
			}
		}
	}()
	res, err := callActivity(ctx, fn, t.Input)
	close(hbDone)
	hbWG.Wait()

	if err == nil {
		if reasons := jsonReasons(nil, "result", res, r.cfg.MaxPayloadDepth); len(reasons) > 0 {
			// Stored, it would be a history row no turn could read back.
			err = NonRetryable(fmt.Errorf("activity %s: %s", t.Name, strings.Join(reasons, "; ")))
		}
	}
	var cerr error
	if err == nil {
		cerr = r.store.ActivityComplete(base, &storage.ActivityCompleteParams{Tenant: t.Tenant, InstanceID: t.InstanceID,
			Execution: t.Execution, TaskSeq: t.TaskSeq, LockToken: t.LockToken, Result: res, Now: r.cfg.Now()})
	} else {
		var nr *nonRetryable
		if !errors.As(err, &nr) && t.Attempt < t.Retry.MaxAttempts {
			at := r.cfg.Now().Add(backoff(t.Retry, t.Attempt))
			r.logger.Info("herald: activity attempt failed; retrying", "activity", t.Name, "instance", t.InstanceID,
				"attempt", t.Attempt, "retry_at", at, "err", err)
			cerr = r.store.ActivityRetry(base, &storage.ActivityRetryParams{Tenant: t.Tenant, InstanceID: t.InstanceID,
				Execution: t.Execution, TaskSeq: t.TaskSeq, LockToken: t.LockToken, RetryAt: at})
		} else {
			cerr = r.store.ActivityComplete(base, &storage.ActivityCompleteParams{Tenant: t.Tenant, InstanceID: t.InstanceID,
				Execution: t.Execution, TaskSeq: t.TaskSeq, LockToken: t.LockToken, Now: r.cfg.Now(),
				Failure: &history.Failure{Kind: replay.FailureActivity, Message: err.Error()}})
		}
	}
	if cerr != nil && !errors.Is(cerr, storage.ErrLeaseLost) {
		r.logger.Error("herald: record activity result", "activity", t.Name, "instance", t.InstanceID, "err", cerr)
	}
}

func callActivity(ctx context.Context, fn activityFunc, in json.RawMessage) (res json.RawMessage, err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("activity panicked: %v\n%s", p, debug.Stack())
		}
	}()
	return fn(ctx, in)
}
