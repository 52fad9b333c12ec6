package heraldtest_test

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/heraldwf/herald"
)

func intp(n int) *int { return &n }

// A script target and a Go handler run before Publish returns.
func TestBus_ScriptAndHandlerRunSynchronously(t *testing.T) {
	var seen []string
	env := newEnv(t, func(rt *herald.Runtime) {
		herald.RegisterBusHandler(rt, "audit", func(_ context.Context, ev herald.BusEvent) (any, error) {
			seen = append(seen, ev.ID)
			return map[string]string{"audited": ev.Type}, nil
		})
	})
	env.PutScript("fraud", `if (ctx.event.data.amount > 5000) throw new Error("needs a human"); return {ok: true, amount: ctx.event.data.amount};`)
	env.Subscribe(herald.Subscription{ID: "fraud", Pattern: "order.*", Enabled: true,
		Target: herald.Target{Kind: herald.TargetScript, Script: "fraud"}})
	env.Subscribe(herald.Subscription{ID: "audit", Pattern: "order.paid", Enabled: true,
		Target: herald.Target{Kind: herald.TargetHandler, Handler: "audit"}})

	env.Publish("order.paid", map[string]int{"amount": 40}, herald.WithEventID("pay-1"))
	if len(seen) != 1 || seen[0] != "pay-1" {
		t.Fatalf("the handler saw %v before Publish returned, want [pay-1]", seen)
	}
	ev := env.Published("pay-1")
	if ev.Fate != herald.BusDone || len(ev.Routes) != 2 {
		t.Fatalf("published event %+v", ev)
	}
	for _, sub := range []string{"fraud", "audit"} {
		at := env.Attempts("pay-1", sub)
		if len(at) != 1 || !at[0].Succeeded {
			t.Fatalf("%s attempts %+v", sub, at)
		}
		if sub == "fraud" {
			var res struct {
				OK     bool
				Amount int
			}
			if err := json.Unmarshal(at[0].Result, &res); err != nil || !res.OK || res.Amount != 40 {
				t.Fatalf("script result %s (%v)", at[0].Result, err)
			}
		}
	}
	if dl := env.DeadLetters(""); len(dl) != 0 {
		t.Fatalf("dead letters %+v", dl)
	}
}

// A failing target is retried after its backoff (2 s, 4 s: Advance, not
// sleep) and reaches the dead-letter queue after its last retry.
func TestBus_FailureReachesDLQByAdvance(t *testing.T) {
	calls := 0
	env := newEnv(t, func(rt *herald.Runtime) {
		herald.RegisterBusHandler(rt, "flaky", func(context.Context, herald.BusEvent) (any, error) {
			calls++
			return nil, errors.New("downstream is down")
		})
	})
	env.Subscribe(herald.Subscription{ID: "flaky", Pattern: "order.*", Enabled: true, MaxRetries: intp(2),
		Target: herald.Target{Kind: herald.TargetHandler, Handler: "flaky"}})
	env.PutScript("big", `if (ctx.event.data.amount > 5000) throw new Error("needs a human"); return {ok: true};`)
	env.Subscribe(herald.Subscription{ID: "big", Pattern: "order.*", Enabled: true, MaxRetries: intp(0),
		Target: herald.Target{Kind: herald.TargetScript, Script: "big"}})

	began := time.Now()
	env.Publish("order.paid", map[string]int{"amount": 9000}, herald.WithEventID("pay-2"))
	if calls != 1 {
		t.Fatalf("%d handler calls after Publish, want 1", calls)
	}
	// The script has no retries: dead-lettered at once, with its error.
	dl := env.DeadLetters("big")
	if len(dl) != 1 || dl[0].EventID != "pay-2" || dl[0].Error == "" {
		t.Fatalf("script dead letters %+v", dl)
	}
	if d, ok := env.NextWake(); !ok || d != 2*time.Second {
		t.Fatalf("next wake %v %v, want the retry in 2s", d, ok)
	}
	env.Advance(time.Second)
	if calls != 1 {
		t.Fatalf("retried before its backoff: %d calls", calls)
	}
	env.Advance(time.Second) // retry 1 at +2s; retry 2 due 4s later
	if calls != 2 || len(env.DeadLetters("flaky")) != 0 {
		t.Fatalf("%d calls, dead letters %+v", calls, env.DeadLetters("flaky"))
	}
	env.Advance(time.Minute)
	dl = env.DeadLetters("flaky")
	if calls != 3 || len(dl) != 1 || dl[0].Attempts != 3 || dl[0].Error == "" {
		t.Fatalf("%d calls, dead letters %+v", calls, dl)
	}
	if at := env.Attempts("pay-2", "flaky"); len(at) != 3 || at[2].Succeeded {
		t.Fatalf("attempts %+v", at)
	}
	if took := time.Since(began); took > 5*time.Second {
		t.Fatalf("took %v of wall time", took)
	}
}
