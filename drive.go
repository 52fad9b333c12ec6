package herald

import (
	"context"
	"fmt"
	"time"

	"github.com/heraldwf/herald/internal/drive"
	"github.com/heraldwf/herald/storage"
)

// The synchronous driver of package heraldtest (internal/drive): the work
// the runtime's loops would claim and run in the background, claimed and
// run one unit at a time in the calling goroutine, with the same
// functions the loops use (runTurn, runActivity, routeBus, claimBus,
// attemptBus, the maintenance pass). A runtime driven this way is not
// Started.

func init() {
	drive.Step = func(ctx context.Context, rt any, tenant string) (drive.Unit, bool, error) {
		return asRuntime(rt).runPending(ctx, tenant)
	}
	drive.NextWake = func(ctx context.Context, rt any, tenant string) (time.Time, bool, error) {
		r := asRuntime(rt)
		return r.store.NextWake(ctx, &storage.NextWakeParams{Tenant: tenant, Now: r.cfg.Clock.Now()})
	}
	drive.Maintain = func(ctx context.Context, rt any, tenant string) {
		r := asRuntime(rt)
		r.expireEvents(ctx, tenant)
		r.expireCorrelated(ctx, tenant)
		r.pruneBus(ctx, tenant)
	}
	drive.Close = func(rt any) { asRuntime(rt).closeScripts() }
}

func asRuntime(rt any) *Runtime {
	r, ok := rt.(*Runtime)
	if !ok || r == nil {
		panic(fmt.Sprintf("herald: internal/drive called with %T, not a *herald.Runtime", rt))
	}
	return r
}

// runPending routes the tenant's published events, then claims and runs at
// most one unit claimable now on the engine clock: a turn, else an
// activity attempt, else a bus attempt (ran false: none).
func (r *Runtime) runPending(ctx context.Context, tenant string) (u drive.Unit, ran bool, err error) {
	if !r.cfg.Bus.Disabled {
		for {
			n, full, err := r.routeBus(ctx, tenant)
			if err != nil {
				return u, false, err
			}
			u.Routed += n
			if !full {
				break
			}
		}
	}
	now := r.cfg.Clock.Now()
	turns, err := r.store.TurnClaim(ctx, &storage.TurnClaimParams{Tenant: tenant, Now: now, Lease: r.cfg.TurnLease, Max: 1})
	if err != nil {
		return u, false, fmt.Errorf("claim a turn: %w", err)
	}
	if len(turns) > 0 {
		t := turns[0]
		t.Instance.Tenant = tenant
		u.Kind, u.Instance = drive.Turn, t.Instance.ID
		r.runTurn(ctx, t)
		return u, true, nil
	}
	tasks, err := r.store.ActivityClaim(ctx, &storage.ActivityClaimParams{Tenant: tenant, Now: now, Lease: r.cfg.ActivityLease, Max: 1})
	if err != nil {
		return u, false, fmt.Errorf("claim an activity: %w", err)
	}
	if len(tasks) > 0 {
		t := tasks[0]
		t.Tenant = tenant
		u.Kind, u.Instance, u.Name, u.Attempt = drive.Activity, t.InstanceID, t.Name, t.Attempt
		r.runActivity(ctx, t)
		return u, true, nil
	}
	if r.cfg.Bus.Disabled {
		return u, false, nil
	}
	items, _, err := r.claimBus(ctx, tenant, 1)
	if err != nil {
		return u, false, fmt.Errorf("claim a bus execution: %w", err)
	}
	if len(items) > 0 {
		it := items[0]
		u.Kind, u.Name, u.EventID, u.Attempt = drive.Bus, it.Execution.Subscription, it.Execution.EventID, it.Execution.Attempts
		fin := newBusFinisher(r)
		atts := newBusAttempts(ctx)
		r.attemptBus(atts.ctx, fin, atts, it)
		atts.cancel()
		fin.close()
		return u, true, nil
	}
	return u, false, nil
}
