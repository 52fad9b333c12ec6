package herald_test

// Isolation of tenants on the event bus (docs/bus.md, "Isolation"): one
// tenant's runaway scripts hold at most its share of the script processes
// and its room in the claim loop, never a worker of the other targets, so another
// tenant's Go handler, script and workflow start run while they spin.

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/heraldwf/herald"
	"github.com/heraldwf/herald/clock"
)

// runawaySpin is how long each of tenant a's runaway scripts spins (its
// timeout, enforced in the script's child process on the wall clock): long
// against what tenant b's executions take, short enough for the runtime's
// Stop to wait for the one still running when the test ends.
const runawaySpin = 8 * time.Second

// TestBus_RunawayScriptsDoNotDelayOtherTenants: two workers, two script
// processes (one tenant's share: one), a queue of 4 (a tenant's claim room
// 6, and 2 more for the others). Tenant a has 12 subscriptions whose script spins
// until its timeout, all matching one event; once a's executions are
// claimed, tenant b publishes one event to a Go handler, a script and a
// workflow target. Each of b's three executions is claimed and succeeds
// while every one of a's runaways is still spinning or queued: none has
// ended (today a's scripts hold every worker and the whole claim room, and
// b's executions wait for a's timeouts). The runtime's clock is virtual and
// stands still, so no lease runs out meanwhile, however slow the machine.
func TestBus_RunawayScriptsDoNotDelayOtherTenants(t *testing.T) {
	t.Parallel()
	vc := clock.NewVirtual(time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC))
	cfg := &herald.Config{ClientConfig: herald.ClientConfig{Clock: vc},
		Bus: herald.BusConfig{Workers: 2, ScriptProcesses: 2, QueueSize: 4}}
	b := setup(t, cfg, func(rt *herald.Runtime) {
		herald.RegisterBusHandler(rt, "h", func(_ context.Context, ev herald.BusEvent) (any, error) { return "ran " + ev.ID, nil })
		herald.RegisterWorkflow(rt, "wf", func(_ *herald.Context, ev herald.BusEvent) (string, error) { return "started by " + ev.ID, nil })
	})
	a := b.as(mustRuntimeClient(b.rt, "a"))
	bb := b.as(mustRuntimeClient(b.rt, "b"))

	a.script("spin", "while (true) {}")
	const runaways = 12
	for i := range runaways {
		a.subscribe(herald.Subscription{ID: fmt.Sprint("spin-", i), Pattern: "spin", MaxRetries: intp(0),
			Timeout: herald.Duration(runawaySpin), Target: herald.Target{Kind: herald.TargetScript, Script: "spin"}})
	}
	bb.script("ok", "return 'ok ' + ctx.event.id;")
	bb.handlerSub("handler", "work", "h", intp(0))
	bb.subscribe(herald.Subscription{ID: "script", Pattern: "work", MaxRetries: intp(0),
		Target: herald.Target{Kind: herald.TargetScript, Script: "ok"}})
	bb.subscribe(herald.Subscription{ID: "workflow", Pattern: "work", MaxRetries: intp(0),
		Target: herald.Target{Kind: herald.TargetWorkflow, Workflow: "wf"}})

	a.publish("spin", nil, "runaway")
	claimedA := func(ev *herald.PublishedEvent) int {
		n := 0
		for _, r := range ev.Routes {
			if r.Execution != nil && r.Execution.Status == herald.ExecRunning {
				n++
			}
		}
		return n
	}
	a.waitBus("runaway", "claimed six times", func(ev *herald.PublishedEvent) bool { return claimedA(ev) >= 6 })

	bb.publish("work", nil, "quiet")
	ev := bb.waitBus("quiet", "ended", func(ev *herald.PublishedEvent) bool { return ev.Fate == herald.BusDone })
	if as := a.attempts("runaway"); len(as) != 0 {
		t.Fatalf("tenant b's executions ended only after %d of tenant a's runaway attempts had ended (%s): "+
			"they waited for a's scripts", len(as), describeBus(ev))
	}
	want := map[string]string{"handler": `"ran quiet"`, "script": `"ok quiet"`,
		"workflow": `{"instance_id":"` + "bus:workflow:quiet" + `"}`}
	for sub, res := range want {
		x := routeOf(ev, sub).Execution
		if x.Status != herald.ExecSucceeded || string(x.Result) != res {
			t.Fatalf("tenant b's %s execution: %s, result %s, want succeeded with %s", sub, x.Status, x.Result, res)
		}
	}
	// Tenant a holds at most Workers + QueueSize claimed executions.
	if n := claimedA(a.published("runaway")); n > 6 {
		t.Fatalf("tenant a has %d executions claimed, over Workers + QueueSize (6)", n)
	}
	if info := bb.waitDone("bus:workflow:quiet"); info.Status != herald.StatusCompleted {
		t.Fatalf("the workflow tenant b's event started: %s", info.Status)
	}
}
