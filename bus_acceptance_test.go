package herald_test

// One test per acceptance criterion of seed 004 (the event bus), named by
// section and criterion. They run on SQLite, and on PostgreSQL with
// HERALD_TEST_BACKEND=postgres. Backoff delays are checked on the virtual
// clock; the "matching within 10 ms" criterion is a benchmark
// (bus/pattern BenchmarkMatch10k, bench/ bus rows).

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/heraldwf/herald"
	"github.com/heraldwf/herald/bus/rule"
	"github.com/heraldwf/herald/clock"
	"github.com/heraldwf/herald/history"
)

// okHandler registers a handler that records the events it saw.
func okHandler(rt *herald.Runtime, name string, seen *atomic.Int64) {
	herald.RegisterBusHandler(rt, name, func(ctx context.Context, ev herald.BusEvent) (any, error) {
		if seen != nil {
			seen.Add(1)
		}
		return map[string]string{"handled": ev.ID}, nil
	})
}

// --- Event Subscription ---

func TestSeed004_Subscription_Records(t *testing.T) {
	t.Parallel()
	b := setup(t, nil, nil)
	b.script("welcome", `return "hi " + ctx.event.data.name;`)
	filter := json.RawMessage(`{"logic":"AND","conditions":[{"field":"data.role","op":"eq","value":"admin"}]}`)
	s := b.subscribe(herald.Subscription{ID: "s1", Pattern: "user.created", Filter: filter, MaxRetries: intp(5),
		Timeout: herald.Duration(10 * time.Second), Target: herald.Target{Kind: herald.TargetScript, Script: "welcome"}})
	if s.Version != 1 || s.CreatedAt.IsZero() || !s.UpdatedAt.Equal(s.CreatedAt) || !s.Enabled {
		t.Fatalf("new subscription: %+v", s)
	}
	got, err := b.client.Subscription(b.ctx, "s1")
	if err != nil {
		t.Fatal(err)
	}
	if got.Pattern != "user.created" || string(got.Filter) != string(filter) || got.Target.Script != "welcome" ||
		*got.MaxRetries != 5 || time.Duration(got.Timeout) != 10*time.Second || !got.CreatedAt.Equal(s.CreatedAt) {
		t.Fatalf("stored subscription differs: %+v", got)
	}
	// Replacing keeps CreatedAt and bumps the version.
	s2 := b.subscribe(herald.Subscription{ID: "s1", Pattern: "user.*", Target: herald.Target{Kind: herald.TargetScript, Script: "welcome"}})
	if s2.Version != 2 || !s2.CreatedAt.Equal(s.CreatedAt) || s2.Pattern != "user.*" || len(s2.Filter) != 0 {
		t.Fatalf("replaced subscription: %+v", s2)
	}
	b.subscribe(herald.Subscription{ID: "s0", Pattern: "order.>", Target: herald.Target{Kind: herald.TargetScript, Script: "welcome"}})
	list, err := b.client.Subscriptions(b.ctx)
	if err != nil || len(list) != 2 || list[0].ID != "s0" || list[1].ID != "s1" {
		t.Fatalf("list: %v %v", list, err)
	}

	// Invalid subscriptions are refused, listing every problem, and change
	// nothing.
	_, err = b.client.PutSubscription(b.ctx, herald.Subscription{ID: "bad", Pattern: "user.*x.>.y",
		Filter:  json.RawMessage(`{"logic":"XOR","conditions":[{"field":"a..b","op":"like","value":1}]}`),
		Target:  herald.Target{Kind: herald.TargetScript, Script: "missing"},
		Timeout: herald.Duration(-time.Second), MaxRetries: intp(-1)})
	var se *herald.SubscriptionInvalidError
	if !errors.As(err, &se) || !errors.Is(err, herald.ErrInvalidArgument) {
		t.Fatalf("invalid subscription: %v, want a *SubscriptionInvalidError", err)
	}
	for _, want := range []string{"pattern", "logic", "field", "op", "target.script", "timeout", "max_retries"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("refusal does not mention %q: %v", want, err)
		}
	}
	if _, err := b.client.Subscription(b.ctx, "bad"); !errors.Is(err, herald.ErrNotFound) {
		t.Fatalf("a refused subscription was stored: %v", err)
	}
	for _, p := range []string{"", "user..created", "us*er", ">.user", "user.>.x", strings.Repeat("a.", 200) + "b"} {
		_, err := b.client.PutSubscription(b.ctx, herald.Subscription{ID: "p", Pattern: p, Target: herald.Target{Kind: herald.TargetHandler, Handler: "h"}})
		if !errors.Is(err, herald.ErrInvalidArgument) {
			t.Errorf("pattern %q accepted: %v", p, err)
		}
	}
	if err := b.client.DeleteSubscription(b.ctx, "s0"); err != nil {
		t.Fatal(err)
	}
	if err := b.client.DeleteSubscription(b.ctx, "s0"); !errors.Is(err, herald.ErrNotFound) {
		t.Fatalf("second delete: %v", err)
	}
}

func TestSeed004_Subscription_FilterRules(t *testing.T) {
	t.Parallel()
	var seen atomic.Int64
	b := setup(t, nil, func(rt *herald.Runtime) { okHandler(rt, "h", &seen) })
	// (role = admin AND (plan in [pro, team] OR seats >= 10)).
	b.subscribe(herald.Subscription{ID: "admins", Pattern: "user.created",
		Filter: json.RawMessage(`{"logic":"AND","conditions":[
			{"field":"data.role","op":"eq","value":"admin"},
			{"logic":"OR","conditions":[
				{"field":"data.plan","op":"in","value":["pro","team"]},
				{"field":"data.seats","op":"gte","value":10}]}]}`),
		Target: herald.Target{Kind: herald.TargetHandler, Handler: "h"}})
	cases := []struct {
		id       string
		data     map[string]any
		match    bool
		filtered string // part of FilteredBy
	}{
		{"e-pro", map[string]any{"role": "admin", "plan": "pro"}, true, ""},
		{"e-seats", map[string]any{"role": "admin", "plan": "free", "seats": 12}, true, ""},
		{"e-user", map[string]any{"role": "user", "plan": "pro"}, false, "data.role eq"},
		{"e-small", map[string]any{"role": "admin", "plan": "free", "seats": 3}, false, "OR"},
		{"e-norole", map[string]any{"plan": "pro"}, false, "absent"},
	}
	for _, c := range cases {
		b.publish("user.created", c.data, c.id)
	}
	for _, c := range cases {
		ev := b.waitEnded(c.id)
		r := routeOf(ev, "admins")
		if r == nil || r.Matched != c.match {
			t.Errorf("%s: %s, want matched=%v", c.id, describeBus(ev), c.match)
			continue
		}
		if c.match && (ev.Fate != herald.BusDone || r.Execution == nil || r.Execution.Status != herald.ExecSucceeded) {
			t.Errorf("%s: %s, want done", c.id, describeBus(ev))
		}
		if !c.match && (ev.Fate != herald.BusFiltered || r.Execution != nil || !strings.Contains(r.FilteredBy, c.filtered)) {
			t.Errorf("%s: %s, want filtered by %q and no execution", c.id, describeBus(ev), c.filtered)
		}
	}
	if got := seen.Load(); got != 2 {
		t.Errorf("the handler ran %d times, want 2 (filtered events never run)", got)
	}
	// A rule with several problems is refused listing each, with its path.
	_, err := b.client.PutSubscription(b.ctx, herald.Subscription{ID: "bad", Pattern: "x",
		Filter: json.RawMessage(`{"logic":"AND","conditions":[{"field":"data.n","op":"gt","value":[1]},{"field":"data.s","op":"exists","value":1},{"op":"eq"}]}`),
		Target: herald.Target{Kind: herald.TargetHandler, Handler: "h"}})
	var re *rule.InvalidError
	if !errors.As(err, &re) || len(re.Problems) < 3 {
		t.Fatalf("bad rule: %v, want a *rule.InvalidError with every problem", err)
	}
	for _, p := range re.Problems {
		if !strings.HasPrefix(p.Path, "$.conditions[") {
			t.Errorf("problem without a path into the rule: %+v", p)
		}
	}
}

func TestSeed004_Subscription_EnableDisable(t *testing.T) {
	t.Parallel()
	var seen atomic.Int64
	b := setup(t, nil, func(rt *herald.Runtime) { okHandler(rt, "h", &seen) })
	b.handlerSub("s", "user.created", "h", nil)
	if _, err := b.client.SetSubscriptionEnabled(b.ctx, "s", false); err != nil {
		t.Fatal(err)
	}
	b.publish("user.created", map[string]any{"n": 1}, "while-disabled")
	if ev := b.waitEnded("while-disabled"); ev.Fate != herald.BusNoMatch || len(ev.Routes) != 0 {
		t.Fatalf("an event published while the only subscription was disabled: %s, want no_match", describeBus(ev))
	}
	s, err := b.client.Subscription(b.ctx, "s")
	if err != nil || s.Enabled {
		t.Fatalf("a disabled subscription must still exist, disabled: %+v %v", s, err)
	}
	if _, err := b.client.SetSubscriptionEnabled(b.ctx, "s", true); err != nil {
		t.Fatal(err)
	}
	b.publish("user.created", map[string]any{"n": 2}, "after-enable")
	if ev := b.waitEnded("after-enable"); ev.Fate != herald.BusDone {
		t.Fatalf("after enabling: %s", describeBus(ev))
	}
	if seen.Load() != 1 {
		t.Fatalf("handler ran %d times, want 1", seen.Load())
	}
	// The disabled event was not routed again by enabling.
	if ev := b.published("while-disabled"); ev.Fate != herald.BusNoMatch {
		t.Fatalf("enabling re-routed an old event: %s", describeBus(ev))
	}
}

func TestSeed004_Subscription_TenantIsolation(t *testing.T) {
	t.Parallel()
	var seen atomic.Int64
	b := setup(t, nil, func(rt *herald.Runtime) { okHandler(rt, "h", &seen) })
	acme := b.as(mustRuntimeClient(b.rt, "acme"))
	globex := b.as(mustRuntimeClient(b.rt, "globex"))
	acme.handlerSub("s", "user.created", "h", nil)

	globex.publish("user.created", map[string]any{"x": 1}, "g1")
	if ev := globex.waitEnded("g1"); ev.Fate != herald.BusNoMatch {
		t.Fatalf("another tenant's subscription matched: %s", describeBus(ev))
	}
	if _, err := globex.client.Subscription(b.ctx, "s"); !errors.Is(err, herald.ErrNotFound) {
		t.Fatalf("globex reads acme's subscription: %v", err)
	}
	if err := globex.client.DeleteSubscription(b.ctx, "s"); !errors.Is(err, herald.ErrNotFound) {
		t.Fatalf("globex deletes acme's subscription: %v", err)
	}
	if _, err := globex.client.SetSubscriptionEnabled(b.ctx, "s", false); !errors.Is(err, herald.ErrNotFound) {
		t.Fatalf("globex disables acme's subscription: %v", err)
	}
	if list, _ := globex.client.Subscriptions(b.ctx); len(list) != 0 {
		t.Fatalf("globex lists %d subscriptions", len(list))
	}
	// The same id in two tenants is two subscriptions.
	globex.handlerSub("s", "order.paid", "h", nil)
	if s, _ := acme.client.Subscription(b.ctx, "s"); s.Pattern != "user.created" || s.Version != 1 {
		t.Fatalf("globex's put changed acme's subscription: %+v", s)
	}
	acme.publish("user.created", nil, "a1")
	if ev := acme.waitEnded("a1"); ev.Fate != herald.BusDone {
		t.Fatalf("acme: %s", describeBus(ev))
	}
	if _, err := globex.client.PublishedEvent(b.ctx, "a1"); !errors.Is(err, herald.ErrNotFound) {
		t.Fatalf("globex reads acme's published event: %v", err)
	}
	if seen.Load() != 1 {
		t.Fatalf("handler ran %d times, want 1", seen.Load())
	}
}

// --- Event Matching ---

func TestSeed004_Matching_AllMatching(t *testing.T) {
	t.Parallel()
	var seen atomic.Int64
	b := setup(t, nil, func(rt *herald.Runtime) { okHandler(rt, "h", &seen) })
	for id, p := range map[string]string{"exact": "user.created", "one": "user.*", "tail": "user.>", "all": ">",
		"other": "order.*", "deeper": "user.*.x"} {
		b.handlerSub(id, p, "h", nil)
	}
	b.publish("user.created", nil, "e1")
	b.publish("user.profile.updated", nil, "e2")
	ev := b.waitEnded("e1")
	m, f := matchedSubs(ev)
	slices.Sort(m)
	if !slices.Equal(m, []string{"all", "exact", "one", "tail"}) || len(f) != 0 || ev.Fate != herald.BusDone {
		t.Fatalf("user.created routed to %v (filtered %v), want all, exact, one, tail: %s", m, f, describeBus(ev))
	}
	for _, r := range ev.Routes {
		if r.Execution == nil || r.Execution.Status != herald.ExecSucceeded || r.Execution.Attempts != 1 {
			t.Errorf("route %s: %+v", r.Subscription, r.Execution)
		}
	}
	ev = b.waitEnded("e2")
	m, _ = matchedSubs(ev)
	slices.Sort(m)
	if !slices.Equal(m, []string{"all", "tail"}) {
		t.Fatalf("user.profile.updated routed to %v, want all, tail", m)
	}
	if seen.Load() != 6 {
		t.Fatalf("handler ran %d times, want 6 (4 + 2)", seen.Load())
	}
}

func TestSeed004_Matching_FilterEvaluation(t *testing.T) {
	t.Parallel()
	b := setup(t, nil, func(rt *herald.Runtime) { okHandler(rt, "h", nil) })
	data := map[string]any{"role": "admin", "age": 42, "tags": []any{"a", "vip"}, "email": "ann@example.com", "nil": nil}
	cond := func(field, op string, value any) json.RawMessage {
		c := map[string]any{"field": field, "op": op}
		if op != "exists" {
			c["value"] = value
		}
		raw, _ := json.Marshal(map[string]any{"logic": "AND", "conditions": []any{c}})
		return raw
	}
	cases := []struct {
		field, op string
		value     any
		want      bool
	}{
		{"data.role", "eq", "admin", true}, {"data.role", "eq", "Admin", false},
		{"data.role", "ne", "user", true}, {"data.role", "ne", "admin", false},
		{"data.age", "gt", 41, true}, {"data.age", "gt", 42, false},
		{"data.age", "gte", 42, true}, {"data.age", "gte", 42.5, false},
		{"data.age", "lt", 43, true}, {"data.age", "lt", 42, false},
		{"data.age", "lte", 42, true}, {"data.age", "lte", 41, false},
		{"data.role", "in", []any{"user", "admin"}, true}, {"data.role", "in", []any{"user"}, false},
		{"data.role", "nin", []any{"user"}, true}, {"data.role", "nin", []any{"admin"}, false},
		{"data.tags", "contains", "vip", true}, {"data.tags", "contains", "gold", false},
		{"data.email", "contains", "@example", true},
		{"data.email", "prefix", "ann@", true}, {"data.email", "prefix", "bob@", false},
		{"data.email", "suffix", ".com", true}, {"data.email", "suffix", ".org", false},
		{"data.nil", "exists", nil, true}, {"data.missing", "exists", nil, false},
		{"data.age", "eq", "42", false}, // no coercion between types
	}
	for i, c := range cases {
		b.subscribe(herald.Subscription{ID: fmt.Sprintf("c%02d", i), Pattern: "probe", Filter: cond(c.field, c.op, c.value),
			Target: herald.Target{Kind: herald.TargetHandler, Handler: "h"}})
	}
	b.publish("probe", data, "p1")
	ev := b.waitEnded("p1")
	for i, c := range cases {
		r := routeOf(ev, fmt.Sprintf("c%02d", i))
		if r == nil {
			t.Errorf("%s %s %v: no route", c.field, c.op, c.value)
			continue
		}
		if r.Matched != c.want {
			t.Errorf("%s %s %v: matched=%v, want %v (%s)", c.field, c.op, c.value, r.Matched, c.want, r.FilteredBy)
		}
		if !r.Matched && !strings.Contains(r.FilteredBy, c.field) {
			t.Errorf("%s %s: FilteredBy %q does not name the field", c.field, c.op, r.FilteredBy)
		}
	}
}

func TestSeed004_Matching_NonMatchingDiscarded(t *testing.T) {
	t.Parallel()
	var seen atomic.Int64
	b := setup(t, nil, func(rt *herald.Runtime) { okHandler(rt, "h", &seen) })
	b.handlerSub("orders", "order.*", "h", nil)
	b.publish("user.created", map[string]any{"n": 1}, "nobody")
	ev := b.waitEnded("nobody")
	if ev.Fate != herald.BusNoMatch || len(ev.Routes) != 0 || ev.RoutedAt.IsZero() {
		t.Fatalf("an event nothing matches: %s, want no_match with no routes", describeBus(ev))
	}
	if a := b.attempts("nobody"); len(a) != 0 {
		t.Fatalf("an unmatched event has %d attempts", len(a))
	}
	if seen.Load() != 0 {
		t.Fatalf("the handler ran for an unmatched event")
	}
	// Its fate is recorded, and answered by EventFate too: not silently discarded.
	rec, err := b.client.EventFate(b.ctx, "nobody")
	if err != nil || rec.Lane != "bus" || rec.Fate != history.FateDropped || rec.Reason != "no_match" || rec.Bus == nil {
		t.Fatalf("EventFate of an unmatched published event: %+v %v", rec, err)
	}
}

// --- Async Execution ---

func TestSeed004_Async_NonBlocking(t *testing.T) {
	t.Parallel()
	g := newGate()
	b := setup(t, nil, func(rt *herald.Runtime) {
		herald.RegisterBusHandler(rt, "slow", func(ctx context.Context, ev herald.BusEvent) (any, error) {
			g.run(ev)
			return nil, nil
		})
	})
	t.Cleanup(g.open) // after setup's: runs before the runtime stops
	b.handlerSub("s", "job.*", "slow", nil)
	r := b.publish("job.created", nil, "j1")
	if r.Duplicate || r.EventID != "j1" || r.PublishedAt.IsZero() {
		t.Fatalf("receipt: %+v", r)
	}
	// The handler is blocked; Publish returned, and more publishes do.
	g.waitStarted(t, 1)
	b.publish("job.created", nil, "j2")
	x := b.waitExecution("j1", "s", "running", statusIs(herald.ExecRunning))
	if x.Attempts != 1 {
		t.Fatalf("running execution: %+v", x)
	}
	g.open()
	b.waitBus("j1", "done", func(ev *herald.PublishedEvent) bool { return ev.Fate == herald.BusDone })
	b.waitBus("j2", "done", func(ev *herald.PublishedEvent) bool { return ev.Fate == herald.BusDone })
	// Publishing an id again is a no-op with a duplicate receipt.
	if d := b.publish("job.created", nil, "j1"); !d.Duplicate || !d.PublishedAt.Equal(r.PublishedAt) {
		t.Fatalf("republish: %+v", d)
	}
	if _, err := b.client.Publish(b.ctx, "job.other", nil, herald.WithEventID("j1")); !errors.Is(err, herald.ErrEventIDConflict) {
		t.Fatalf("an id reused for another type: %v", err)
	}
}

func TestSeed004_Async_PoolSize(t *testing.T) {
	t.Parallel()
	g := newGate()
	obs := newBusObserver()
	b := setup(t, &herald.Config{Bus: herald.BusConfig{Workers: 3}, ClientConfig: herald.ClientConfig{Observer: obs}},
		func(rt *herald.Runtime) {
			herald.RegisterBusHandler(rt, "slow", func(ctx context.Context, ev herald.BusEvent) (any, error) {
				g.run(ev)
				return nil, nil
			})
		})
	t.Cleanup(g.open) // after setup's: runs before the runtime stops
	b.handlerSub("s", "job", "slow", nil)
	for i := range 10 {
		b.publish("job", nil, fmt.Sprintf("j%d", i))
	}
	g.waitStarted(t, 3)
	// All ten are claimed (the queue has room for 1000): three run, seven
	// wait for a worker.
	deadline := time.Now().Add(testTimeout(t))
	for {
		obs.mu.Lock()
		depth := obs.depth
		obs.mu.Unlock()
		if depth == 7 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("dispatch queue depth %d, want 7", depth)
		}
		time.Sleep(time.Millisecond)
	}
	if running, peak := g.counts(); running != 3 || peak != 3 {
		t.Fatalf("running %d (peak %d), want exactly Bus.Workers = 3", running, peak)
	}
	g.open()
	for i := range 10 {
		b.waitBus(fmt.Sprintf("j%d", i), "done", func(ev *herald.PublishedEvent) bool { return ev.Fate == herald.BusDone })
	}
	if _, peak := g.counts(); peak != 3 {
		t.Fatalf("peak concurrency %d, want 3", peak)
	}
}

func TestSeed004_Async_QueueSize(t *testing.T) {
	t.Parallel()
	g := newGate()
	obs := newBusObserver()
	b := setup(t, &herald.Config{Bus: herald.BusConfig{Workers: 1, QueueSize: 1}, ClientConfig: herald.ClientConfig{Observer: obs}},
		func(rt *herald.Runtime) {
			herald.RegisterBusHandler(rt, "slow", func(ctx context.Context, ev herald.BusEvent) (any, error) {
				g.run(ev)
				return nil, nil
			})
		})
	t.Cleanup(g.open) // after setup's: runs before the runtime stops
	b.handlerSub("s", "job", "slow", nil)
	ids := []string{"q0", "q1", "q2", "q3", "q4"}
	for _, id := range ids {
		b.publish("job", nil, id)
	}
	g.waitStarted(t, 1)
	// Two are claimed (one runs, one waits in the queue of one); the
	// other three stay queued in the store, not in memory.
	count := func() (running, queued int) {
		for _, id := range ids {
			ev := b.published(id)
			if r := routeOf(ev, "s"); r != nil && r.Execution != nil {
				switch r.Execution.Status {
				case herald.ExecRunning:
					running++
				case herald.ExecQueued:
					queued++
				}
			}
		}
		return running, queued
	}
	deadline := time.Now().Add(testTimeout(t) / 2)
	for {
		running, queued := count()
		if time.Now().After(deadline) {
			for _, id := range ids {
				t.Log(describeBus(b.published(id)))
			}
		}
		if running == 2 && queued == 3 {
			break
		}
		if running > 2 {
			t.Fatalf("%d executions claimed, more than Workers + QueueSize = 2", running)
		}
		if time.Now().After(deadline) {
			t.Fatalf("claimed %d, queued %d; want 2 and 3", running, queued)
		}
		time.Sleep(time.Millisecond)
	}
	obs.mu.Lock()
	maxDepth := obs.maxDepth
	obs.mu.Unlock()
	if maxDepth > 1 {
		t.Fatalf("dispatch queue depth reached %d, want at most QueueSize = 1", maxDepth)
	}
	g.open()
	for _, id := range ids {
		b.waitBus(id, "done", func(ev *herald.PublishedEvent) bool { return ev.Fate == herald.BusDone })
	}
}

func TestSeed004_Async_GracefulShutdown(t *testing.T) {
	t.Parallel()
	st := testStore(t)
	g := newGate()
	rt, err := herald.NewRuntime(st, &herald.Config{PollInterval: 20 * time.Millisecond, Bus: herald.BusConfig{Workers: 1}})
	if err != nil {
		t.Fatal(err)
	}
	var done atomic.Int64
	herald.RegisterBusHandler(rt, "slow", func(ctx context.Context, ev herald.BusEvent) (any, error) {
		g.run(ev)
		done.Add(1)
		return "finished", nil
	})
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout(t))
	defer cancel()
	if err := rt.Start(ctx); err != nil {
		t.Fatal(err)
	}
	b := on(t, mustRuntimeClient(rt, herald.DefaultTenant))
	t.Cleanup(g.open) // after setup's: runs before the runtime stops
	b.handlerSub("s", "job", "slow", nil)
	for _, id := range []string{"g0", "g1", "g2"} {
		b.publish("job", nil, id)
	}
	first := g.waitStarted(t, 1)[0]
	stopped := make(chan error, 1)
	go func() { stopped <- rt.Stop(context.Background()) }()
	// Stop waits for the in-flight execution.
	select {
	case err := <-stopped:
		t.Fatalf("Stop returned (%v) while an execution was in flight", err)
	case <-time.After(50 * time.Millisecond):
	}
	g.open()
	if err := <-stopped; err != nil {
		t.Fatal(err)
	}
	if done.Load() != 1 {
		t.Fatalf("%d executions ran, want only the in-flight one", done.Load())
	}
	x := routeOf(b.published(first), "s").Execution
	if x.Status != herald.ExecSucceeded || string(x.Result) != `"finished"` {
		t.Fatalf("the in-flight execution after Stop: %+v", x)
	}
	// The others were released untouched (or not routed yet), durable for
	// the next start.
	for _, id := range []string{"g0", "g1", "g2"} {
		if id == first {
			continue
		}
		ev := b.published(id)
		if ev.Fate == herald.BusRouting {
			continue
		}
		if r := routeOf(ev, "s"); r == nil || r.Execution == nil || r.Execution.Status != herald.ExecQueued || r.Execution.Attempts != 0 {
			t.Fatalf("%s after Stop: %s, want queued with no attempt", id, describeBus(ev))
		}
	}
	if err := rt.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer rt.Stop(context.Background())
	for _, id := range []string{"g0", "g1", "g2"} {
		b.waitBus(id, "done", func(ev *herald.PublishedEvent) bool { return ev.Fate == herald.BusDone })
	}
	if done.Load() != 3 {
		t.Fatalf("%d executions ran, want 3", done.Load())
	}
}

var _ = clock.NewVirtual

// --- Retry Logic ---

// flaky registers handler "flaky" that fails (an ordinary, transient
// error) until it has been called failures times, then succeeds.
func flaky(rt *herald.Runtime, failures int64, calls *atomic.Int64) {
	herald.RegisterBusHandler(rt, "flaky", func(ctx context.Context, ev herald.BusEvent) (any, error) {
		if n := calls.Add(1); n <= failures {
			return nil, fmt.Errorf("transient failure %d", n)
		}
		return "ok", nil
	})
}

// driveRetries advances the virtual clock to each retry of a published
// event's executions as it comes due, until every execution has ended.
func driveRetries(b *bundle, vc *clock.Virtual, id string) {
	b.t.Helper()
	for {
		ev := b.waitBus(id, "settled (every execution ended or waiting for its retry)", func(ev *herald.PublishedEvent) bool {
			if ev.Fate == herald.BusRouting {
				return false
			}
			for _, r := range ev.Routes {
				if x := r.Execution; x != nil && (x.Status == herald.ExecQueued || x.Status == herald.ExecRunning ||
					x.Status == herald.ExecRetrying && !x.NextAttemptAt.After(vc.Now())) {
					return false
				}
			}
			return true
		})
		var next time.Time
		for _, r := range ev.Routes {
			if x := r.Execution; x != nil && x.Status == herald.ExecRetrying && (next.IsZero() || x.NextAttemptAt.Before(next)) {
				next = x.NextAttemptAt
			}
		}
		if next.IsZero() {
			return
		}
		vc.Set(next)
	}
}

// virtualBus starts a runtime on a virtual clock.
func virtualBus(t *testing.T, register func(rt *herald.Runtime)) (*bundle, *clock.Virtual) {
	vc := clock.NewVirtual(time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC))
	return setup(t, &herald.Config{ClientConfig: herald.ClientConfig{Clock: vc}}, register), vc
}

func TestSeed004_Retry_TransientBackoff(t *testing.T) {
	t.Parallel()
	var calls atomic.Int64
	b, vc := virtualBus(t, func(rt *herald.Runtime) { flaky(rt, 2, &calls) })
	b.handlerSub("s", "job", "flaky", nil)
	t0 := vc.Now()
	b.publish("job", nil, "e")
	x := b.waitExecution("e", "s", "retrying after attempt 1", func(x *herald.Execution) bool {
		return x.Status == herald.ExecRetrying && x.Attempts == 1
	})
	if !x.NextAttemptAt.Equal(t0.Add(2*time.Second)) || !strings.Contains(x.LastError, "transient failure 1") {
		t.Fatalf("after the first failure: %+v, want a retry at +2s", x)
	}
	vc.Advance(2 * time.Second)
	x = b.waitExecution("e", "s", "retrying after attempt 2", func(x *herald.Execution) bool {
		return x.Status == herald.ExecRetrying && x.Attempts == 2
	})
	if !x.NextAttemptAt.Equal(t0.Add(6 * time.Second)) {
		t.Fatalf("after the second failure: %+v, want a retry 4s later", x)
	}
	vc.Advance(4 * time.Second)
	x = b.waitExecution("e", "s", "succeeded", statusIs(herald.ExecSucceeded))
	if x.Attempts != 3 || string(x.Result) != `"ok"` {
		t.Fatalf("final: %+v", x)
	}
	as := b.attempts("e")
	if len(as) != 3 || as[0].Succeeded || as[1].Succeeded || !as[2].Succeeded ||
		as[0].ErrorKind != herald.ErrorRuntime || as[0].Number != 1 || as[2].Number != 3 {
		t.Fatalf("attempt records: %+v", as)
	}
}

func TestSeed004_Retry_PermanentToDLQ(t *testing.T) {
	t.Parallel()
	var calls atomic.Int64
	b := setup(t, nil, func(rt *herald.Runtime) {
		herald.RegisterBusHandler(rt, "perm", func(ctx context.Context, ev herald.BusEvent) (any, error) {
			calls.Add(1)
			return nil, herald.Permanent(errors.New("customer does not exist"))
		})
	})
	b.handlerSub("h", "job", "perm", nil)
	b.script("bad", `throw new PermanentError("invalid payload: " + ctx.event.data.n);`)
	b.subscribe(herald.Subscription{ID: "js", Pattern: "job", Target: herald.Target{Kind: herald.TargetScript, Script: "bad"}})
	b.publish("job", map[string]any{"n": 7}, "e")
	ev := b.waitEnded("e")
	for _, sub := range []string{"h", "js"} {
		x := routeOf(ev, sub).Execution
		if x.Status != herald.ExecDeadLettered || x.Attempts != 1 || x.DeadLetter == 0 {
			t.Errorf("%s: %+v, want dead-lettered after one attempt", sub, x)
		}
		d, err := b.client.DeadLetterByID(b.ctx, x.DeadLetter)
		if err != nil || d.ErrorKind != herald.ErrorPermanent || d.Attempts != 1 {
			t.Errorf("%s dead letter: %+v %v", sub, d, err)
		}
	}
	if calls.Load() != 1 {
		t.Fatalf("a permanent error was retried: %d calls", calls.Load())
	}
	if d, _ := b.client.DeadLetterByID(b.ctx, routeOf(ev, "js").Execution.DeadLetter); !strings.Contains(d.Error, "invalid payload: 7") {
		t.Fatalf("script's PermanentError message: %q", d.Error)
	}
}

func TestSeed004_Retry_MaxRetries(t *testing.T) {
	t.Parallel()
	var c1, c2, c3 atomic.Int64
	b, vc := virtualBus(t, func(rt *herald.Runtime) {
		for name, c := range map[string]*atomic.Int64{"one": &c1, "def": &c2, "none": &c3} {
			herald.RegisterBusHandler(rt, name, func(ctx context.Context, ev herald.BusEvent) (any, error) {
				c.Add(1)
				return nil, errors.New("down")
			})
		}
	})
	b.handlerSub("one", "job", "one", intp(1))
	b.handlerSub("def", "job", "def", nil)
	b.handlerSub("none", "job", "none", intp(0))
	b.publish("job", nil, "e")
	driveRetries(b, vc, "e")
	ev := b.waitEnded("e")
	for sub, want := range map[string]int{"one": 2, "def": 4, "none": 1} {
		x := routeOf(ev, sub).Execution
		if x.Status != herald.ExecDeadLettered || x.Attempts != want {
			t.Errorf("%s: %+v, want dead-lettered after %d attempts", sub, x, want)
		}
	}
	if c1.Load() != 2 || c2.Load() != 4 || c3.Load() != 1 {
		t.Fatalf("calls %d %d %d, want 2 4 1", c1.Load(), c2.Load(), c3.Load())
	}
}

func TestSeed004_Retry_Delays2n(t *testing.T) {
	t.Parallel()
	var calls atomic.Int64
	b, vc := virtualBus(t, func(rt *herald.Runtime) { flaky(rt, 100, &calls) })
	b.handlerSub("s", "job", "flaky", nil)
	t0 := vc.Now()
	b.publish("job", nil, "e")
	at := t0
	for n, delay := range []time.Duration{2 * time.Second, 4 * time.Second, 8 * time.Second} {
		x := b.waitExecution("e", "s", fmt.Sprintf("retrying after attempt %d", n+1), func(x *herald.Execution) bool {
			return x.Status == herald.ExecRetrying && x.Attempts == n+1
		})
		if got := x.NextAttemptAt.Sub(at); got != delay {
			t.Fatalf("delay after attempt %d: %v, want %v", n+1, got, delay)
		}
		at = x.NextAttemptAt
		vc.Set(at)
	}
	x := b.waitExecution("e", "s", "dead-lettered", statusIs(herald.ExecDeadLettered))
	if x.Attempts != 4 {
		t.Fatalf("final: %+v", x)
	}
	as := b.attempts("e")
	if len(as) != 4 {
		t.Fatalf("%d attempt records", len(as))
	}
	for i, want := range []time.Time{t0, t0.Add(2 * time.Second), t0.Add(6 * time.Second), t0.Add(14 * time.Second)} {
		if !as[i].StartedAt.Equal(want) {
			t.Errorf("attempt %d started at +%v, want +%v", i+1, as[i].StartedAt.Sub(t0), want.Sub(t0))
		}
	}
}

// --- Dead Letter Queue ---

// deadLetterAfterRetries publishes an event whose handler always fails
// and drives the virtual clock until it is dead-lettered.
func deadLetterAfterRetries(t *testing.T, b *bundle, vc *clock.Virtual, sub, eventID string) *herald.Execution {
	t.Helper()
	b.publish("job", map[string]any{"order": 42}, eventID)
	for n := 1; n <= 3; n++ {
		x := b.waitExecution(eventID, sub, "retrying", func(x *herald.Execution) bool {
			return x.Status == herald.ExecRetrying && x.Attempts == n
		})
		vc.Set(x.NextAttemptAt)
	}
	return b.waitExecution(eventID, sub, "dead-lettered", statusIs(herald.ExecDeadLettered))
}

func TestSeed004_DLQ_AfterMaxRetries(t *testing.T) {
	t.Parallel()
	var calls atomic.Int64
	b, vc := virtualBus(t, func(rt *herald.Runtime) { flaky(rt, 100, &calls) })
	b.handlerSub("s", "job", "flaky", nil)
	x := deadLetterAfterRetries(t, b, vc, "s", "e")
	d, err := b.client.DeadLetterByID(b.ctx, x.DeadLetter)
	if err != nil {
		t.Fatal(err)
	}
	if d.Subscription != "s" || d.EventID != "e" || d.EventType != "job" || string(d.EventData) != `{"order":42}` ||
		d.Target.Kind != herald.TargetHandler || d.Target.Handler != "flaky" || d.Attempts != 4 ||
		d.ErrorKind != herald.ErrorRuntime || !strings.Contains(d.Error, "transient failure 4") ||
		!d.FailedAt.Equal(vc.Now()) || d.CreatedAt.IsZero() || d.Execution != x.ID {
		t.Fatalf("dead letter: %+v", d)
	}
	page, err := b.client.DeadLetters(b.ctx, herald.DeadLetterFilter{})
	if err != nil || len(page.Letters) != 1 || page.Letters[0].ID != d.ID {
		t.Fatalf("DLQ list: %+v %v", page, err)
	}
}

func TestSeed004_DLQ_ErrorAndStack(t *testing.T) {
	t.Parallel()
	b := setup(t, nil, func(rt *herald.Runtime) {
		herald.RegisterBusHandler(rt, "panics", func(ctx context.Context, ev herald.BusEvent) (any, error) {
			var m map[string]int
			m["boom"]++ // a nil map: panics
			return nil, nil
		})
	})
	b.script("thrower", "const x = 1;\nfunction inner() {\n  throw new Error('cannot process ' + ctx.event.type);\n}\ninner();")
	b.subscribe(herald.Subscription{ID: "js", Pattern: "job", MaxRetries: intp(0), Target: herald.Target{Kind: herald.TargetScript, Script: "thrower"}})
	b.handlerSub("go", "job", "panics", intp(0))
	b.publish("job", nil, "e")
	ev := b.waitEnded("e")
	js, _ := b.client.DeadLetterByID(b.ctx, routeOf(ev, "js").Execution.DeadLetter)
	if js == nil || !strings.Contains(js.Error, "cannot process job") || !strings.Contains(js.Stack, "inner") ||
		!strings.Contains(js.Stack, ":3") {
		t.Fatalf("script dead letter: error %q stack %q", js.Error, js.Stack)
	}
	gl, _ := b.client.DeadLetterByID(b.ctx, routeOf(ev, "go").Execution.DeadLetter)
	if gl == nil || !strings.Contains(gl.Error, "panicked") || !strings.Contains(gl.Stack, "bus_acceptance_test.go") {
		t.Fatalf("handler dead letter: error %q stack %.300q", gl.Error, gl.Stack)
	}
}

func TestSeed004_DLQ_Review(t *testing.T) {
	t.Parallel()
	b := setup(t, nil, nil)
	b.script("fixme", `throw new PermanentError("not yet");`)
	b.subscribe(herald.Subscription{ID: "a", Pattern: "job.*", Target: herald.Target{Kind: herald.TargetScript, Script: "fixme"}})
	b.subscribe(herald.Subscription{ID: "b", Pattern: "job.b", Target: herald.Target{Kind: herald.TargetScript, Script: "fixme"}})
	for i := range 5 {
		b.publish("job.a", map[string]any{"i": i}, fmt.Sprintf("a%d", i))
	}
	b.publish("job.b", nil, "b0")
	for _, id := range []string{"a0", "a1", "a2", "a3", "a4", "b0"} {
		b.waitEnded(id)
	}
	all, err := b.client.DeadLetters(b.ctx, herald.DeadLetterFilter{})
	if err != nil || len(all.Letters) != 7 { // 5 of a, b0 twice (a and b)
		t.Fatalf("DLQ: %d letters, %v", len(all.Letters), err)
	}
	for i := 1; i < len(all.Letters); i++ {
		if all.Letters[i-1].ID <= all.Letters[i].ID {
			t.Fatalf("DLQ not newest first")
		}
	}
	// Filters and paging.
	bySub, _ := b.client.DeadLetters(b.ctx, herald.DeadLetterFilter{Subscription: "b"})
	byType, _ := b.client.DeadLetters(b.ctx, herald.DeadLetterFilter{EventType: "job.b"})
	byKind, _ := b.client.DeadLetters(b.ctx, herald.DeadLetterFilter{ErrorKind: herald.ErrorTimeout})
	if len(bySub.Letters) != 1 || len(byType.Letters) != 2 || len(byKind.Letters) != 0 {
		t.Fatalf("filters: by sub %d, by type %d, by kind %d", len(bySub.Letters), len(byType.Letters), len(byKind.Letters))
	}
	var paged []int64
	cursor := int64(0)
	for {
		p, err := b.client.DeadLetters(b.ctx, herald.DeadLetterFilter{Limit: 3, Cursor: cursor})
		if err != nil {
			t.Fatal(err)
		}
		for _, l := range p.Letters {
			paged = append(paged, l.ID)
		}
		if p.NextCursor == 0 {
			break
		}
		cursor = p.NextCursor
	}
	if len(paged) != 7 {
		t.Fatalf("paging saw %d letters, want 7", len(paged))
	}
	// Inspect, fix the script, reprocess one: it runs the new version.
	one := bySub.Letters[0]
	if one.EventID != "b0" || one.Subscription != "b" {
		t.Fatalf("inspect: %+v", one)
	}
	b.script("fixme", `return "fixed " + ctx.event.id;`)
	n, err := b.client.ReprocessDeadLetters(b.ctx, herald.DeadLetterFilter{IDs: []int64{one.ID}})
	if err != nil || n != 1 {
		t.Fatalf("reprocess one: %d %v", n, err)
	}
	x := b.waitExecution("b0", "b", "succeeded", statusIs(herald.ExecSucceeded))
	if x.Reprocessed != 1 || x.Attempts != 1 || string(x.Result) != `"fixed b0"` {
		t.Fatalf("reprocessed execution: %+v", x)
	}
	kept, err := b.client.DeadLetterByID(b.ctx, one.ID)
	if err != nil || kept.ReprocessedAt.IsZero() {
		t.Fatalf("the reprocessed letter is kept, marked: %+v %v", kept, err)
	}
	if n, _ := b.client.ReprocessDeadLetters(b.ctx, herald.DeadLetterFilter{IDs: []int64{one.ID}}); n != 0 {
		t.Fatalf("a letter was reprocessed twice")
	}
	// Delete a filtered set, reprocess the rest.
	n, err = b.client.DeleteDeadLetters(b.ctx, herald.DeadLetterFilter{EventType: "job.b"})
	if err != nil || n != 1 {
		t.Fatalf("delete by type: %d %v", n, err)
	}
	n, err = b.client.ReprocessDeadLetters(b.ctx, herald.DeadLetterFilter{})
	if err != nil || n != 5 {
		t.Fatalf("reprocess all: %d %v", n, err)
	}
	for i := range 5 {
		b.waitExecution(fmt.Sprintf("a%d", i), "a", "succeeded", statusIs(herald.ExecSucceeded))
	}
	left, _ := b.client.DeadLetters(b.ctx, herald.DeadLetterFilter{})
	if len(left.Letters) != 0 {
		t.Fatalf("%d letters wait for a decision after reprocessing all", len(left.Letters))
	}
	hist, _ := b.client.DeadLetters(b.ctx, herald.DeadLetterFilter{IncludeReprocessed: true})
	if len(hist.Letters) != 6 {
		t.Fatalf("with reprocessed: %d letters, want 6 (7 minus the deleted one)", len(hist.Letters))
	}
}

func TestSeed004_DLQ_TenantIsolation(t *testing.T) {
	t.Parallel()
	b := setup(t, nil, nil)
	acme := b.as(mustRuntimeClient(b.rt, "acme"))
	globex := b.as(mustRuntimeClient(b.rt, "globex"))
	acme.script("bad", `throw new PermanentError("no");`)
	acme.subscribe(herald.Subscription{ID: "s", Pattern: "job", Target: herald.Target{Kind: herald.TargetScript, Script: "bad"}})
	acme.publish("job", nil, "e")
	x := acme.waitExecution("e", "s", "dead-lettered", statusIs(herald.ExecDeadLettered))
	if p, _ := globex.client.DeadLetters(b.ctx, herald.DeadLetterFilter{IncludeReprocessed: true}); len(p.Letters) != 0 {
		t.Fatalf("globex lists acme's dead letters")
	}
	if _, err := globex.client.DeadLetterByID(b.ctx, x.DeadLetter); !errors.Is(err, herald.ErrNotFound) {
		t.Fatalf("globex reads acme's dead letter: %v", err)
	}
	if n, _ := globex.client.ReprocessDeadLetters(b.ctx, herald.DeadLetterFilter{IDs: []int64{x.DeadLetter}}); n != 0 {
		t.Fatalf("globex reprocessed acme's dead letter")
	}
	if n, _ := globex.client.DeleteDeadLetters(b.ctx, herald.DeadLetterFilter{IDs: []int64{x.DeadLetter}}); n != 0 {
		t.Fatalf("globex deleted acme's dead letter")
	}
	if _, err := acme.client.DeadLetterByID(b.ctx, x.DeadLetter); err != nil {
		t.Fatalf("acme lost its dead letter: %v", err)
	}
}

// --- Security ---

func TestSeed004_Security_SanitizedInjection(t *testing.T) {
	t.Parallel()
	b := setup(t, nil, nil)
	// The script tries to change what it was given and to reach the host;
	// it reports what it could do.
	b.script("probe", `
		const out = {};
		try { ctx.event.data.role = "root"; out.mutated = true; } catch (e) { out.mutated = false; }
		try { ctx.event.type = "other"; out.retyped = true; } catch (e) { out.retyped = false; }
		try { ctx.tenant.id = "globex"; out.retenanted = true; } catch (e) { out.retenanted = false; }
		out.role = ctx.event.data.role;
		out.proto = Object.getPrototypeOf(ctx.event.data) === Object.prototype;
		out.polluted = ({}).isAdmin === true;
		out.text = ctx.event.data.text;
		out.frozen = Object.isFrozen(ctx.event) && Object.isFrozen(ctx.event.data) && Object.isFrozen(ctx.event.data.nested);
		return out;`)
	b.subscribe(herald.Subscription{ID: "s", Pattern: "user.created", Target: herald.Target{Kind: herald.TargetScript, Script: "probe"}})
	data := map[string]any{"role": "user", "text": "</script><script>alert(1)</script>'; DROP TABLE x;--",
		"__proto__": map[string]any{"isAdmin": true}, "constructor": map[string]any{"prototype": map[string]any{"isAdmin": true}},
		"nested": map[string]any{"a": []any{1, 2}}}
	b.publish("user.created", data, "inj")
	x := b.waitExecution("inj", "s", "succeeded", statusIs(herald.ExecSucceeded))
	var got map[string]any
	if err := json.Unmarshal(x.Result, &got); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"mutated", "retyped", "retenanted", "polluted"} {
		if got[k] != false {
			t.Errorf("script could %s: %v", k, got)
		}
	}
	if got["role"] != "user" || got["text"] != data["text"] || got["frozen"] != true || got["proto"] != true {
		t.Errorf("what the script saw: %v", got)
	}
	// The stored event is unchanged.
	ev := b.published("inj")
	var stored map[string]any
	_ = json.Unmarshal(ev.Data, &stored)
	if stored["role"] != "user" || stored["text"] != data["text"] {
		t.Fatalf("stored event changed: %s", ev.Data)
	}
}

func TestSeed004_Security_TenantValidated(t *testing.T) {
	t.Parallel()
	b := setup(t, nil, nil)
	for _, tenant := range []string{"", "a\x00b", strings.Repeat("t", 300), "\xff\xfe"} {
		if _, err := b.rt.Client(tenant); !errors.Is(err, herald.ErrInvalidArgument) {
			t.Errorf("Runtime.Client(%q): %v, want ErrInvalidArgument", tenant, err)
		}
		if _, err := herald.NewClient(b.store, tenant, nil); !errors.Is(err, herald.ErrInvalidArgument) {
			t.Errorf("NewClient(%q): %v, want ErrInvalidArgument", tenant, err)
		}
	}
	// Bad identifiers in every bus call are refused (or unknown), nothing stored.
	bad := "x\x00y"
	if _, err := b.client.Publish(b.ctx, "a.b", nil, herald.WithEventID(bad)); !errors.Is(err, herald.ErrEventInvalid) {
		t.Errorf("Publish with a NUL id: %v", err)
	}
	for _, typ := range []string{"", "a..b", "a.*", "a.>", strings.Repeat("x", 300), "a\x00b"} {
		if _, err := b.client.Publish(b.ctx, typ, nil); !errors.Is(err, herald.ErrEventInvalid) {
			t.Errorf("Publish(%q): %v", typ, err)
		}
	}
	if _, err := b.client.PutScript(b.ctx, bad, "return 1;"); !errors.Is(err, herald.ErrInvalidArgument) {
		t.Errorf("PutScript with a NUL id: %v", err)
	}
	if _, err := b.client.PutSubscription(b.ctx, herald.Subscription{ID: bad, Pattern: "a", Target: herald.Target{Kind: herald.TargetHandler, Handler: "h"}}); !errors.Is(err, herald.ErrInvalidArgument) {
		t.Errorf("PutSubscription with a NUL id: %v", err)
	}
	if _, err := b.client.PublishedEvent(b.ctx, bad); !errors.Is(err, herald.ErrNotFound) {
		t.Errorf("PublishedEvent with a NUL id: %v", err)
	}
	if _, err := b.client.Publish(b.ctx, "a.b", map[string]any{"x": strings.Repeat("y", herald.DefaultMaxPayloadBytes)}); !errors.Is(err, herald.ErrEventInvalid) {
		t.Errorf("Publish of an oversized event: %v", err)
	}
	deep := any("leaf")
	for range 10000 {
		deep = []any{deep}
	}
	if _, err := b.client.Publish(b.ctx, "a.b", deep); !errors.Is(err, herald.ErrEventInvalid) {
		t.Errorf("Publish of a 10,000-deep event: %v", err)
	}
	if subs, _ := b.client.Subscriptions(b.ctx); len(subs) != 0 {
		t.Fatalf("a refused call stored a subscription")
	}
}

func TestSeed004_Security_NoCrossTenantEvents(t *testing.T) {
	t.Parallel()
	b := setup(t, nil, nil)
	acme := b.as(mustRuntimeClient(b.rt, "acme"))
	globex := b.as(mustRuntimeClient(b.rt, "globex"))
	src := `return {tenant: ctx.tenant.id, id: ctx.event.id, secret: ctx.event.data.secret};`
	for _, c := range []*bundle{acme, globex} {
		c.script("echo", src)
		c.subscribe(herald.Subscription{ID: "s", Pattern: "doc.>", Target: herald.Target{Kind: herald.TargetScript, Script: "echo"}})
	}
	acme.publish("doc.saved", map[string]any{"secret": "acme-only"}, "same-id")
	globex.publish("doc.saved", map[string]any{"secret": "globex-only"}, "same-id")
	for _, c := range []struct {
		b             *bundle
		tenant, other string
	}{{acme, "acme", "globex"}, {globex, "globex", "acme"}} {
		x := c.b.waitExecution("same-id", "s", "succeeded", statusIs(herald.ExecSucceeded))
		var got map[string]string
		_ = json.Unmarshal(x.Result, &got)
		if got["tenant"] != c.tenant || got["secret"] != c.tenant+"-only" {
			t.Errorf("%s's script saw %v", c.tenant, got)
		}
		if as := c.b.attempts("same-id"); len(as) != 1 {
			t.Errorf("%s: %d attempts for its event, want 1 (the other tenant's never counts)", c.tenant, len(as))
		}
	}
}

func TestSeed004_Security_FilterInjection(t *testing.T) {
	t.Parallel()
	var seen atomic.Int64
	b := setup(t, nil, func(rt *herald.Runtime) { okHandler(rt, "h", &seen) })
	// Values that would be code or SQL elsewhere are data here.
	sqlish := `' OR 1=1; DROP TABLE bus_events; --`
	b.subscribe(herald.Subscription{ID: "s", Pattern: "x",
		Filter: json.RawMessage(fmt.Sprintf(`{"logic":"AND","conditions":[{"field":"data.name","op":"eq","value":%q}]}`, sqlish)),
		Target: herald.Target{Kind: herald.TargetHandler, Handler: "h"}})
	b.publish("x", map[string]any{"name": "bob"}, "e1")
	b.publish("x", map[string]any{"name": sqlish}, "e2")
	if ev := b.waitEnded("e1"); ev.Fate != herald.BusFiltered {
		t.Fatalf("e1: %s", describeBus(ev))
	}
	if ev := b.waitEnded("e2"); ev.Fate != herald.BusDone {
		t.Fatalf("e2 (the literal value): %s", describeBus(ev))
	}
	// Rules that try to be more than data are refused when saved.
	for name, f := range map[string]string{
		"a script":        `{"logic":"AND","conditions":[{"field":"data.x","op":"eq","value":"1","script":"process.exit()"}]}`,
		"a regex op":      `{"logic":"AND","conditions":[{"field":"data.x","op":"regex","value":".*"}]}`,
		"a bracket path":  `{"logic":"AND","conditions":[{"field":"data['x']","op":"eq","value":1}]}`,
		"an object value": `{"logic":"AND","conditions":[{"field":"data.x","op":"eq","value":{"$gt":""}}]}`,
		"a deep rule":     strings.Repeat(`{"logic":"AND","conditions":[`, 40) + `{"field":"a","op":"exists"}` + strings.Repeat(`]}`, 40),
		"a huge rule":     `{"logic":"AND","conditions":[` + strings.Repeat(`{"field":"a","op":"exists"},`, 5000) + `{"field":"a","op":"exists"}]}`,
		"duplicate keys":  `{"logic":"AND","logic":"OR","conditions":[{"field":"a","op":"exists"}]}`,
		"not json":        `{"logic":"AND",`,
	} {
		_, err := b.client.PutSubscription(b.ctx, herald.Subscription{ID: "evil", Pattern: "x", Filter: json.RawMessage(f),
			Target: herald.Target{Kind: herald.TargetHandler, Handler: "h"}})
		if !errors.Is(err, herald.ErrInvalidArgument) {
			t.Errorf("%s: accepted (%v)", name, err)
		}
	}
	if _, err := b.client.Subscription(b.ctx, "evil"); !errors.Is(err, herald.ErrNotFound) {
		t.Fatalf("a refused rule was stored")
	}
	// The store is intact: publishing and routing still work.
	b.publish("x", map[string]any{"name": sqlish}, "e3")
	if ev := b.waitEnded("e3"); ev.Fate != herald.BusDone || seen.Load() != 2 {
		t.Fatalf("after the attempts: %s, handler ran %d times", describeBus(ev), seen.Load())
	}
}
