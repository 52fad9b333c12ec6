package herald_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/heraldwf/herald"
	"github.com/heraldwf/herald/history"
)

// countingObserver counts what the engine reports, for assertions.
type countingObserver struct {
	herald.NopObserver
	mu           sync.Mutex
	accepted     map[string]int // by lane
	duplicates   int
	delivered    map[string]int // by lane
	dropped      map[string]int // events, by reason
	turns        map[string]int // by outcome
	activities   map[string]int // by outcome
	claims       map[string]int // claims that returned work, by kind
	unreplayable int
	unregistered []herald.UnregisteredReport
	tenants      map[string]bool // every tenant a report named
	bad          []string        // reports missing what every report must carry
}

func newCountingObserver() *countingObserver {
	return &countingObserver{accepted: map[string]int{}, delivered: map[string]int{}, dropped: map[string]int{},
		turns: map[string]int{}, activities: map[string]int{}, claims: map[string]int{}, tenants: map[string]bool{}}
}

func (o *countingObserver) tenant(t, what string) {
	o.tenants[t] = true
	if t == "" {
		o.bad = append(o.bad, what+" without a tenant")
	}
}

func (o *countingObserver) EventAccepted(r herald.EventReport) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.tenant(r.Tenant, "EventAccepted")
	o.accepted[r.Lane]++
	if r.Duplicate {
		o.duplicates++
	}
}

func (o *countingObserver) EventDelivered(r herald.EventReport) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.tenant(r.Tenant, "EventDelivered")
	if r.Lane == "" || r.Name == "" || r.EventID == "" || r.InstanceID == "" {
		o.bad = append(o.bad, "EventDelivered without lane, name or ids")
	}
	o.delivered[r.Lane]++
}

func (o *countingObserver) EventsDropped(r herald.DropReport) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.tenant(r.Tenant, "EventsDropped")
	if r.Count < 1 {
		o.bad = append(o.bad, "EventsDropped with a count below 1")
	}
	o.dropped[r.Reason] += r.Count
}

func (o *countingObserver) TurnFinished(r herald.TurnReport) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.tenant(r.Tenant, "TurnFinished")
	if r.Outcome == "" || r.Start.IsZero() || r.Duration < 0 || r.Latency < 0 {
		o.bad = append(o.bad, "TurnFinished without outcome, start or duration")
	}
	o.turns[r.Outcome]++
}

func (o *countingObserver) ActivityAttempted(r herald.ActivityReport) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.tenant(r.Tenant, "ActivityAttempted")
	if r.Outcome == "" || r.Attempt < 1 || r.Start.IsZero() {
		o.bad = append(o.bad, "ActivityAttempted without outcome, attempt or start")
	}
	o.activities[r.Outcome]++
}

func (o *countingObserver) Claimed(r herald.ClaimReport) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.tenant(r.Tenant, "Claimed")
	if r.Claimed > 0 {
		o.claims[r.Kind]++
	}
}

func (o *countingObserver) InstanceUnreplayable(r herald.UnreplayableReport) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.tenant(r.Tenant, "InstanceUnreplayable")
	o.unreplayable++
}

func (o *countingObserver) Unregistered(r herald.UnregisteredReport) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.tenant(r.Tenant, "Unregistered")
	o.unregistered = append(o.unregistered, r)
}

// droppedBy returns how many events were reported dropped for reason.
func (o *countingObserver) droppedBy(reason string) int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.dropped[reason]
}

// unreplayableCount returns how many instances were reported failed as
// unreplayable.
func (o *countingObserver) unreplayableCount() int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.unreplayable
}

// turnCount returns the turns reported with one of outcomes (every turn
// without any).
func (o *countingObserver) turnCount(outcomes ...string) int {
	o.mu.Lock()
	defer o.mu.Unlock()
	n := 0
	for k, v := range o.turns {
		if len(outcomes) == 0 {
			n += v
		}
		for _, want := range outcomes {
			if k == want {
				n += v
			}
		}
	}
	return n
}

// activityCount returns the activity attempts reported.
func (o *countingObserver) activityCount() int {
	o.mu.Lock()
	defer o.mu.Unlock()
	n := 0
	for _, v := range o.activities {
		n += v
	}
	return n
}

// TestObserver_SeesEveryKind: one run reports events accepted (duplicates
// flagged), delivered and dropped, turns, activity attempts by outcome,
// claims and unregistered work, to every observer of a MultiObserver; a
// standalone client reports its own drops to its own observer.
func TestObserver_SeesEveryKind(t *testing.T) {
	t.Parallel()
	obs, second := newCountingObserver(), newCountingObserver()
	var flaky atomic.Int32
	b := setup(t, &herald.Config{ClientConfig: herald.ClientConfig{Observer: herald.MultiObserver(obs, nil, second)}},
		func(rt *herald.Runtime) {
			herald.RegisterActivity(rt, "flaky", func(ctx context.Context, _ struct{}) (string, error) {
				if flaky.Add(1) == 1 {
					return "", errors.New("first attempt fails")
				}
				return "ok", nil
			})
			herald.RegisterActivity(rt, "boom", func(ctx context.Context, _ struct{}) (string, error) {
				return "", herald.NonRetryable(errors.New("never works"))
			})
			herald.RegisterWorkflow(rt, "ob", func(ctx *herald.Context, _ struct{}) (string, error) {
				retry := herald.WithRetry(herald.RetryPolicy{InitialInterval: time.Millisecond})
				if err := ctx.CallActivity("flaky", nil, retry).Get(nil); err != nil {
					return "", err
				}
				if err := ctx.CallActivity("boom", nil).Get(nil); err == nil {
					return "", errors.New("boom succeeded")
				}
				var a, q string
				if err := ctx.WaitEvent("go").Get(&a); err != nil {
					return "", err
				}
				if err := ctx.Dequeue("q").Get(&q); err != nil {
					return "", err
				}
				return a + q, nil
			})
			herald.RegisterWorkflow(rt, "calls-missing", func(ctx *herald.Context, _ struct{}) (string, error) {
				return "", ctx.CallActivity("missing", nil).Get(nil)
			})
		})
	c := b.client
	if _, err := c.StartWorkflow(b.ctx, "ob", nil, herald.WithInstanceID("ob")); err != nil {
		t.Fatal(err)
	}
	for range 2 { // the second is a duplicate
		if _, err := c.RaiseEvent(b.ctx, "ob", "go", "a", herald.WithEventID("go-1")); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := c.Enqueue(b.ctx, "ob", "q", "q"); err != nil {
		t.Fatal(err)
	}
	var out string
	if b.result("ob", &out); out != "aq" {
		t.Fatalf("ob returned %q", out)
	}
	if _, err := c.PutEventDefinition(b.ctx, herald.EventDefinition{Name: "paid", Correlation: &herald.CorrelationConfig{}}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.PutCorrelatedEvent(b.ctx, "paid", "k", 1); err != nil {
		t.Fatal(err)
	}
	// Work nobody here has registered.
	for _, wf := range []string{"nobody", "calls-missing"} {
		if _, err := c.StartWorkflow(b.ctx, wf, nil, herald.WithInstanceID(wf)); err != nil {
			t.Fatal(err)
		}
	}
	b.waitFor("unregistered workflow and activity reported", func() bool {
		obs.mu.Lock()
		defer obs.mu.Unlock()
		seen := map[string]bool{}
		for _, u := range obs.unregistered {
			seen[u.Kind+" "+u.Name+" "+u.InstanceID] = true
		}
		return seen["workflow nobody nobody"] && seen["activity missing calls-missing"]
	})

	// A standalone client reports its own drops.
	own := newCountingObserver()
	standalone := mustClient(b.store, herald.DefaultTenant, &herald.ClientConfig{Observer: own, Logger: slog.New(slog.DiscardHandler)})
	if _, err := standalone.RaiseEvent(b.ctx, "nobody", "never", 1); err != nil {
		t.Fatal(err)
	}
	if err := standalone.Terminate(b.ctx, "nobody", "test"); err != nil {
		t.Fatal(err)
	}
	if n := own.droppedBy(string(history.DropInstanceTerminal)); n != 1 {
		t.Errorf("standalone client's observer saw %d instance_terminal drops, want 1", n)
	}
	if n := own.accepted[string(history.LanePositional)]; n != 1 {
		t.Errorf("standalone client's observer saw %d accepted events, want 1", n)
	}
	if n := obs.droppedBy(string(history.DropInstanceTerminal)); n != 0 {
		t.Errorf("the runtime's observer saw the standalone client's drop")
	}

	obs.mu.Lock()
	defer obs.mu.Unlock()
	want := map[string]int{
		"accepted positional": 2, "accepted queue": 1, "accepted correlated": 1, "duplicates": 1,
		"delivered positional": 1, "delivered queue": 1,
		"activity completed": 1, "activity retrying": 1, "activity failed": 1,
	}
	got := map[string]int{
		"accepted positional": obs.accepted["positional"], "accepted queue": obs.accepted["queue"],
		"accepted correlated": obs.accepted["correlated"], "duplicates": obs.duplicates,
		"delivered positional": obs.delivered["positional"], "delivered queue": obs.delivered["queue"],
		"activity completed": obs.activities[herald.ActivityCompleted],
		"activity retrying":  obs.activities[herald.ActivityRetrying],
		"activity failed":    obs.activities[herald.ActivityFailed],
	}
	for k, w := range want {
		if got[k] != w {
			t.Errorf("%s: %d, want %d", k, got[k], w)
		}
	}
	if obs.turns[herald.TurnCommitted] < 4 || obs.turns[herald.TurnUnregistered] < 1 || obs.activities[herald.ActivityUnregistered] < 1 {
		t.Errorf("turns %v, activities %v: want committed turns and unregistered work", obs.turns, obs.activities)
	}
	if obs.claims[herald.ClaimTurns] == 0 || obs.claims[herald.ClaimActivities] == 0 {
		t.Errorf("claims %v: want turn and activity claims", obs.claims)
	}
	if len(obs.bad) > 0 {
		t.Errorf("malformed reports: %q", obs.bad)
	}
	// The fan-out gave the second observer the same events.
	second.mu.Lock()
	defer second.mu.Unlock()
	if !maps.Equal(second.accepted, obs.accepted) || !maps.Equal(second.delivered, obs.delivered) {
		t.Errorf("second observer: accepted %v delivered %v, want %v %v", second.accepted, second.delivered, obs.accepted, obs.delivered)
	}
}

// panickyObserver panics in every report.
type panickyObserver struct{ herald.NopObserver }

func (panickyObserver) EventAccepted(herald.EventReport)  { panic("accepted") }
func (panickyObserver) EventDelivered(herald.EventReport) { panic("delivered") }
func (panickyObserver) EventsDropped(herald.DropReport)   { panic("dropped") }
func (panickyObserver) TurnFinished(herald.TurnReport)    { panic("turn") }
func (panickyObserver) ActivityAttempted(herald.ActivityReport) {
	panic("activity")
}
func (panickyObserver) Claimed(herald.ClaimReport) { panic("claimed") }

// An observer that panics loses its reports, not the engine: workflows run
// to the end, drops still have their fates, and each panicking method is
// logged once.
func TestObserver_PanicDoesNotStopTheEngine(t *testing.T) {
	t.Parallel()
	// The activity waits for the late event to be raised: otherwise the
	// instance can end before the late raise reaches it.
	var gate atomic.Pointer[chan struct{}]
	b := setup(t, &herald.Config{ClientConfig: herald.ClientConfig{Observer: panickyObserver{}}}, func(rt *herald.Runtime) {
		herald.RegisterActivity(rt, "act", func(ctx context.Context, s string) (string, error) {
			select {
			case <-*gate.Load():
			case <-ctx.Done():
				return "", ctx.Err()
			}
			return s + "!", nil
		})
		herald.RegisterWorkflow(rt, "wf", func(ctx *herald.Context, _ any) (string, error) {
			var got string
			if err := ctx.WaitEvent("go").Get(&got); err != nil {
				return "", err
			}
			var out string
			err := ctx.CallActivity("act", got).Get(&out)
			return out, err
		})
	})
	for i := range 3 {
		id := fmt.Sprintf("p-%d", i)
		g := make(chan struct{})
		gate.Store(&g)
		b.start("wf", id, nil)
		b.raise(id, "go", "hi", id+"/go")
		b.raise(id, "go", "late", id+"/late") // dropped when the instance ends
		close(g)
		var out string
		b.result(id, &out)
		if out != "hi!" {
			t.Fatalf("%s: %q, want hi!", id, out)
		}
		b.waitFate(id+"/late", history.FateDropped)
	}
	counts := map[string]int{}
	for _, w := range b.logs.warnings() {
		if strings.Contains(w, "observer panicked") {
			for _, m := range []string{"EventAccepted", "EventDelivered", "EventsDropped", "TurnFinished", "ActivityAttempted", "Claimed"} {
				if strings.Contains(w, "method="+m+" ") {
					counts[m]++
				}
			}
		}
	}
	for _, m := range []string{"EventAccepted", "EventDelivered", "EventsDropped", "TurnFinished", "ActivityAttempted", "Claimed"} {
		if counts[m] != 1 {
			t.Errorf("%s panics logged %d times, want once: %v", m, counts[m], counts)
		}
	}
}
