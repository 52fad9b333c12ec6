package prometheus_test

import (
	"context"
	"errors"
	"log/slog"
	"math"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/heraldwf/herald"
	heraldprom "github.com/heraldwf/herald/metrics/prometheus"
	"github.com/heraldwf/herald/storage/sqlite"
	"github.com/prometheus/client_golang/prometheus"
)

// TestObserver_RealRuntime drives a runtime on SQLite through a workflow
// with a retried activity and a delivered event, then an event dropped when
// its instance is terminated, and reads the counters and histogram counts
// back from the registry.
func TestObserver_RealRuntime(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	reg := prometheus.NewRegistry()
	obs, err := heraldprom.New(reg, heraldprom.WithTenantLabel(4))
	if err != nil {
		t.Fatal(err)
	}
	store, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "herald.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	cfg := &herald.Config{ClientConfig: herald.ClientConfig{Observer: obs, Logger: slog.New(slog.DiscardHandler)}}
	rt, err := herald.NewRuntime(store, cfg)
	if err != nil {
		t.Fatal(err)
	}
	var attempts atomic.Int32
	herald.RegisterActivity(rt, "flaky", func(ctx context.Context, _ struct{}) (string, error) {
		if attempts.Add(1) == 1 {
			return "", errors.New("first attempt fails")
		}
		return "ok", nil
	})
	herald.RegisterWorkflow(rt, "order", func(ctx *herald.Context, _ struct{}) (string, error) {
		retry := herald.WithRetry(herald.RetryPolicy{InitialInterval: time.Millisecond})
		if err := ctx.CallActivity("flaky", nil, retry).Get(nil); err != nil {
			return "", err
		}
		var v string
		err := ctx.WaitEvent("go").Get(&v)
		return v, err
	})
	herald.RegisterWorkflow(rt, "parked", func(ctx *herald.Context, _ struct{}) (string, error) {
		return "", ctx.WaitEvent("never").Get(nil)
	})
	if err := rt.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer rt.Stop(context.Background())
	c, err := rt.Client("acme")
	if err != nil {
		t.Fatal(err)
	}

	if _, err := c.StartWorkflow(ctx, "order", nil, herald.WithInstanceID("o1")); err != nil {
		t.Fatal(err)
	}
	if _, err := c.RaiseEvent(ctx, "o1", "go", "done"); err != nil {
		t.Fatal(err)
	}
	if _, err := c.WaitForCompletion(ctx, "o1"); err != nil {
		t.Fatal(err)
	}
	// An event nobody waits for is dropped when its instance is terminated.
	if _, err := c.StartWorkflow(ctx, "parked", nil, herald.WithInstanceID("p1")); err != nil {
		t.Fatal(err)
	}
	if _, err := c.RaiseEvent(ctx, "p1", "stray", 1); err != nil {
		t.Fatal(err)
	}
	if err := c.Terminate(ctx, "p1", "test"); err != nil {
		t.Fatal(err)
	}

	checks := []struct {
		metric string
		labels map[string]string
		want   float64
	}{
		{"herald_events_accepted_total", map[string]string{"tenant": "acme", "lane": "positional"}, 2},
		{"herald_events_delivered_total", map[string]string{"tenant": "acme", "lane": "positional"}, 1},
		{"herald_events_dropped_total", map[string]string{"tenant": "acme", "lane": "positional", "reason": "instance_terminal"}, 1},
		{"herald_activity_attempts_total", map[string]string{"tenant": "acme", "outcome": herald.ActivityRetrying}, 1},
		{"herald_activity_attempts_total", map[string]string{"tenant": "acme", "outcome": herald.ActivityCompleted}, 1},
		{"herald_activity_duration_seconds", map[string]string{"tenant": "acme", "outcome": herald.ActivityCompleted}, 1},
	}
	fams := gather(t, reg)
	for _, ch := range checks {
		if got := value(fams, ch.metric, ch.labels); got != ch.want {
			t.Errorf("%s%v = %v, want %v", ch.metric, ch.labels, got, ch.want)
		}
	}
	// At least two turns: the start (which may also take the early event)
	// and the activity's result. How messages batch into turns varies, so
	// the count is a floor; each turn is counted once in the counter and
	// once in each histogram.
	committed := value(fams, "herald_turns_total", map[string]string{"tenant": "acme", "outcome": herald.TurnCommitted})
	if committed < 2 {
		t.Errorf("committed turns %v, want at least 2", committed)
	}
	if got := value(fams, "herald_turn_duration_seconds", map[string]string{"tenant": "acme", "outcome": herald.TurnCommitted}); got != committed {
		t.Errorf("turn duration histogram count %v, want %v (one per committed turn)", got, committed)
	}
	if got := value(fams, "herald_turn_claim_latency_seconds", map[string]string{"tenant": "acme"}); got < committed {
		t.Errorf("claim latency histogram count %v, want at least %v", got, committed)
	}
	if got := value(fams, "herald_claimed_total", map[string]string{"tenant": "acme", "kind": herald.ClaimActivities}); got != 2 {
		t.Errorf("activities claimed %v, want 2", got)
	}
	// A turn is claimed by the turn loop or handed off by the raise that
	// made it runnable.
	claimed := value(fams, "herald_claimed_total", map[string]string{"tenant": "acme", "kind": herald.ClaimTurns}) +
		value(fams, "herald_claimed_total", map[string]string{"tenant": "acme", "kind": herald.ClaimHandOff})
	if claimed < committed {
		t.Errorf("turns claimed or handed off %v, want at least %v", claimed, committed)
	}
	// Never an id as a label.
	for _, f := range fams {
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if v := l.GetValue(); v == "o1" || v == "p1" || strings.Contains(l.GetName(), "id") {
					t.Errorf("%s has label %s=%q", f.GetName(), l.GetName(), v)
				}
			}
		}
	}
}

// TestObserver_TenantCap: beyond the cap every new tenant is "other";
// tenants seen before the cap was reached keep their series.
func TestObserver_TenantCap(t *testing.T) {
	t.Parallel()
	reg := prometheus.NewRegistry()
	obs, err := heraldprom.New(reg, heraldprom.WithTenantLabel(2))
	if err != nil {
		t.Fatal(err)
	}
	for _, tenant := range []string{"a", "b", "c", "d", "a", "c"} {
		obs.EventAccepted(herald.EventReport{Tenant: tenant, Lane: "queue"})
	}
	fams := gather(t, reg)
	want := map[string]float64{"a": 2, "b": 1, heraldprom.OtherTenant: 3, "c": 0, "d": 0}
	for tenant, w := range want {
		if got := value(fams, "herald_events_accepted_total", map[string]string{"tenant": tenant, "lane": "queue"}); got != w {
			t.Errorf("tenant %q: %v, want %v", tenant, got, w)
		}
	}
	if n := mustCount(t, reg, "herald_events_accepted_total"); n != 3 {
		t.Errorf("%d series, want 3", n)
	}
}

// TestObserver_NoTenantLabelByDefault: without WithTenantLabel the series
// carry no tenant; a burst of drops adds its count; duplicates are counted
// apart from accepted events.
func TestObserver_NoTenantLabelByDefault(t *testing.T) {
	t.Parallel()
	reg := prometheus.NewRegistry()
	obs, err := heraldprom.New(reg)
	if err != nil {
		t.Fatal(err)
	}
	obs.EventAccepted(herald.EventReport{Tenant: "a", Lane: "queue"})
	obs.EventAccepted(herald.EventReport{Tenant: "b", Lane: "queue", Duplicate: true})
	obs.EventsDropped(herald.DropReport{Tenant: "a", Lane: "queue", Reason: "limit", Count: 5})
	obs.Claimed(herald.ClaimReport{Tenant: "a", Kind: herald.ClaimTurns, Err: errors.New("db down")})
	obs.InstanceUnreplayable(herald.UnreplayableReport{Tenant: "a", Kind: "corrupt"})
	obs.Unregistered(herald.UnregisteredReport{Tenant: "a", Kind: "workflow", Name: "x"})
	fams := gather(t, reg)
	for _, ch := range []struct {
		metric string
		labels map[string]string
		want   float64
	}{
		{"herald_events_accepted_total", map[string]string{"lane": "queue"}, 1},
		{"herald_events_duplicate_total", map[string]string{"lane": "queue"}, 1},
		{"herald_events_dropped_total", map[string]string{"lane": "queue", "reason": "limit"}, 5},
		{"herald_claims_total", map[string]string{"kind": "turns", "result": "error"}, 1},
		{"herald_claim_duration_seconds", map[string]string{"kind": "turns"}, 1},
		{"herald_instances_unreplayable_total", map[string]string{"kind": "corrupt"}, 1},
		{"herald_unregistered_total", map[string]string{"kind": "workflow"}, 1},
	} {
		if got := value(fams, ch.metric, ch.labels); got != ch.want {
			t.Errorf("%s%v = %v, want %v", ch.metric, ch.labels, got, ch.want)
		}
	}
	for _, f := range fams {
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "tenant" {
					t.Errorf("%s has a tenant label without WithTenantLabel", f.GetName())
				}
			}
		}
	}
}

// TestNew_Errors: a second New on one registry and bad options are refused
// with typed errors, and leave the registry as it was.
func TestNew_Errors(t *testing.T) {
	t.Parallel()
	reg := prometheus.NewRegistry()
	first, err := heraldprom.New(reg)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := heraldprom.New(reg); !errors.Is(err, heraldprom.ErrAlreadyRegistered) {
		t.Errorf("second New: %v, want ErrAlreadyRegistered", err)
	}
	// The same names with other labels clash too, but are not "already
	// registered": a plain wrapped error.
	if _, err := heraldprom.New(reg, heraldprom.WithTenantLabel(3)); err == nil || errors.Is(err, heraldprom.ErrAlreadyRegistered) {
		t.Errorf("New with other labels on the same registry: %v, want a clash error", err)
	}
	first.EventAccepted(herald.EventReport{Lane: "queue"})
	if n := mustCount(t, reg, "herald_events_accepted_total"); n != 1 {
		t.Errorf("%d accepted series after the refused News, want 1 (the first Observer's)", n)
	}

	for name, opt := range map[string]heraldprom.Option{
		"tenant cap 0":                 heraldprom.WithTenantLabel(0),
		"no buckets":                   heraldprom.WithDurationBuckets(),
		"decreasing buckets":           heraldprom.WithDurationBuckets(1, 0.5),
		"duplicate bucket":             heraldprom.WithDurationBuckets(0.1, 0.1),
		"subscription cap 0":           heraldprom.WithSubscriptionLabel(0),
		"subscription cap -1":          heraldprom.WithSubscriptionLabel(-1),
		"no execution buckets":         heraldprom.WithExecutionDurationBuckets(),
		"NaN execution bucket":         heraldprom.WithExecutionDurationBuckets(0.1, math.NaN()),
		"decreasing execution buckets": heraldprom.WithExecutionDurationBuckets(2, 1),
	} {
		empty := prometheus.NewRegistry()
		if _, err := heraldprom.New(empty, opt); !errors.Is(err, heraldprom.ErrInvalidOption) {
			t.Errorf("%s: %v, want ErrInvalidOption", name, err)
		}
		if fams, _ := empty.Gather(); len(fams) != 0 {
			t.Errorf("%s: registry holds %d families after a refused New", name, len(fams))
		}
		// Nothing registered: a good New still succeeds.
		if _, err := heraldprom.New(empty); err != nil {
			t.Errorf("%s: New after a refused New: %v", name, err)
		}
	}
}
