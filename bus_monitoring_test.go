package herald_test

// Seed 004 "Monitoring": the bus's metrics through the Prometheus adapter
// (metrics/prometheus) after real bus runs, and the shipped alert rules
// (metrics/prometheus/alerts.yml). The alert expressions are evaluated by
// the real PromQL engine in the metrics/prometheus/alerttest module; here
// the runs that should fire them produce the numbers they read.

import (
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/heraldwf/herald"
	prommetrics "github.com/heraldwf/herald/metrics/prometheus"
)

// promBus starts a runtime whose observer is the Prometheus adapter on a
// fresh registry.
func promBus(t *testing.T, cfg *herald.Config, register func(rt *herald.Runtime)) (*bundle, *prometheus.Registry) {
	t.Helper()
	return promBusWith(t, setup, cfg, register)
}

// promEnv is promBus on a heraldtest.Env (setupEnv): each attempt runs
// alone, in the test's goroutine.
func promEnv(t *testing.T, cfg *herald.Config, register func(rt *herald.Runtime)) (*bundle, *prometheus.Registry) {
	t.Helper()
	return promBusWith(t, setupEnv, cfg, register)
}

func promBusWith(t *testing.T, start func(*testing.T, *herald.Config, func(*herald.Runtime)) *bundle,
	cfg *herald.Config, register func(rt *herald.Runtime)) (*bundle, *prometheus.Registry) {
	t.Helper()
	reg := prometheus.NewRegistry()
	obs, err := prommetrics.New(reg, prommetrics.WithTenantLabel(10))
	if err != nil {
		t.Fatal(err)
	}
	if cfg == nil {
		cfg = &herald.Config{}
	}
	cfg.Observer = obs
	return start(t, cfg, register), reg
}

// metric sums a gathered metric's samples whose labels include want; it
// fails the test if the metric is not exported.
func metric(t *testing.T, reg *prometheus.Registry, name string, want map[string]string) float64 {
	t.Helper()
	sum, ok := gathered(t, reg, name, want)
	if !ok {
		t.Fatalf("metric %s is not exported", name)
	}
	return sum
}

// gathered sums a gathered metric's samples whose labels include want;
// ok is false while the metric is not exported: a labelled metric (a
// vector) is exported only once a report has given it a first sample.
func gathered(t *testing.T, reg *prometheus.Registry, name string, want map[string]string) (sum float64, ok bool) {
	t.Helper()
	fams, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range fams {
		if f.GetName() != name {
			continue
		}
	next:
		for _, m := range f.Metric {
			for k, v := range want {
				found := false
				for _, l := range m.Label {
					if l.GetName() == k && l.GetValue() == v {
						found = true
					}
				}
				if !found {
					continue next
				}
			}
			switch {
			case m.Counter != nil:
				sum += m.Counter.GetValue()
			case m.Gauge != nil:
				sum += m.Gauge.GetValue()
			case m.Histogram != nil:
				sum += float64(m.Histogram.GetSampleCount())
			}
		}
		return sum, true
	}
	return 0, false
}

func histogram(t *testing.T, reg *prometheus.Registry, name string) *dto.Histogram {
	t.Helper()
	fams, _ := reg.Gather()
	for _, f := range fams {
		if f.GetName() == name && len(f.Metric) > 0 {
			return f.Metric[0].Histogram
		}
	}
	t.Fatalf("histogram %s is not exported", name)
	return nil
}

// waitMetric waits until the metric is exported with the value want. The
// runtime reports a bus attempt to the observer after committing its end,
// so a test that saw the end in the store may gather before the report:
// then the metric may not be exported yet (its vector has no sample),
// which is "not yet", not a failure.
func waitMetric(t *testing.T, reg *prometheus.Registry, name string, labels map[string]string, want float64) {
	t.Helper()
	deadline := time.Now().Add(testTimeout(t))
	for {
		got, ok := gathered(t, reg, name, labels)
		if ok && got == want {
			return
		}
		if time.Now().After(deadline) {
			if !ok {
				t.Fatalf("metric %s is not exported after %v", name, testTimeout(t))
			}
			t.Fatalf("%s%v = %v, want %v", name, labels, got, want)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

func TestSeed004_Monitoring_Prometheus(t *testing.T) {
	t.Parallel()
	b, reg := promBus(t, nil, func(rt *herald.Runtime) {
		okHandler(rt, "ok", nil)
		herald.RegisterBusHandler(rt, "bad", func(ctx context.Context, ev herald.BusEvent) (any, error) {
			return nil, herald.Permanent(errors.New("no"))
		})
	})
	b.handlerSub("good", "job", "ok", nil)
	b.handlerSub("dead", "job", "bad", nil)
	b.subscribe(herald.Subscription{ID: "picky", Pattern: "job",
		Filter: []byte(`{"logic":"AND","conditions":[{"field":"data.vip","op":"eq","value":true}]}`),
		Target: herald.Target{Kind: herald.TargetHandler, Handler: "ok"}})
	b.publish("job", map[string]any{"vip": false}, "e1")
	b.publish("nothing.here", nil, "e2")
	b.waitEnded("e1")
	b.waitEnded("e2")
	// A routing and an attempt are reported once committed, and a reader
	// of the store may see the commit first; one report then sets several
	// metrics one after another (an attempt's counters, then its
	// duration). So each metric is waited for: it must reach its value.
	ten := map[string]string{"tenant": herald.DefaultTenant}
	for _, m := range []struct {
		name string
		want float64
	}{
		{"events_matched_total", 2},  // good, dead
		{"events_filtered_total", 1}, // picky
		{"executions_queued_total", 2},
		{"executions_success_total", 1},
		{"executions_failed_total", 1},
		{"dlq_events_total", 1},
		{"execution_duration_histogram", 2},
	} {
		waitMetric(t, reg, m.name, ten, m.want)
	}
	waitMetric(t, reg, "executions_failed_total", map[string]string{"error_type": "permanent"}, 1)
	waitMetric(t, reg, "queue_capacity_gauge", nil, herald.DefaultBusQueueSize)
	metric(t, reg, "queue_depth_gauge", nil) // exported
	if got := metric(t, reg, "herald_bus_published_total", map[string]string{"result": "accepted"}); got != 2 {
		t.Errorf("herald_bus_published_total{accepted} = %v", got)
	}
}

// alertRule returns the expression of a rule of the shipped alert file.
func alertRule(t *testing.T, name string) string {
	t.Helper()
	raw, err := os.ReadFile("metrics/prometheus/alerts.yml")
	if err != nil {
		t.Fatal(err)
	}
	text := string(raw)
	i := strings.Index(text, "alert: "+name)
	if i < 0 {
		t.Fatalf("alerts.yml has no alert %s", name)
	}
	rest := text[i:]
	j := strings.Index(rest, "expr:")
	if j < 0 {
		t.Fatalf("alert %s has no expr", name)
	}
	expr := rest[j+len("expr:"):]
	if k := strings.Index(expr, "for:"); k >= 0 {
		expr = expr[:k] // the rule's expression ends where its for: clause starts
	}
	return expr
}

func TestSeed004_Monitoring_AlertFailureRate(t *testing.T) {
	t.Parallel()
	expr := alertRule(t, "HeraldBusFailureRateHigh")
	for _, m := range []string{"executions_failed_total", "executions_success_total", "0.1"} {
		if !strings.Contains(expr, m) {
			t.Fatalf("HeraldBusFailureRateHigh does not read %s: %s", m, expr)
		}
	}
	// A run with 20% of attempts failing: the rate the alert computes is
	// over 10%. (alerttest evaluates the expression with PromQL.)
	b, reg := promEnv(t, nil, func(rt *herald.Runtime) {
		herald.RegisterBusHandler(rt, "h", func(ctx context.Context, ev herald.BusEvent) (any, error) {
			if strings.HasSuffix(ev.ID, "-fail") {
				return nil, herald.Permanent(errors.New("no"))
			}
			return nil, nil
		})
	})
	b.handlerSub("s", "job", "h", nil)
	for i := range 10 {
		id := fmt.Sprint(i)
		if i%5 == 0 {
			id += "-fail"
		}
		b.publish("job", nil, id)
		b.waitEnded(id)
	}
	// An attempt is reported once its end is committed, which a reader of
	// the store may see first.
	waitMetric(t, reg, "executions_success_total", nil, 8)
	waitMetric(t, reg, "executions_failed_total", nil, 2)
	failed := metric(t, reg, "executions_failed_total", nil)
	ok := metric(t, reg, "executions_success_total", nil)
	if failed != 2 || ok != 8 || failed/(failed+ok) <= 0.10 {
		t.Fatalf("failed %v, succeeded %v: the failure rate must be 20%%", failed, ok)
	}
}

func TestSeed004_Monitoring_AlertQueueDepth(t *testing.T) {
	t.Parallel()
	expr := alertRule(t, "HeraldBusQueueDepthHigh")
	for _, m := range []string{"queue_depth_gauge", "queue_capacity_gauge", "0.9"} {
		if !strings.Contains(expr, m) {
			t.Fatalf("HeraldBusQueueDepthHigh does not read %s: %s", m, expr)
		}
	}
	g := newGate()
	b, reg := promBus(t, &herald.Config{Bus: herald.BusConfig{Workers: 1, QueueSize: 10}}, func(rt *herald.Runtime) {
		herald.RegisterBusHandler(rt, "slow", func(ctx context.Context, ev herald.BusEvent) (any, error) {
			g.run(ev)
			return nil, nil
		})
	})
	t.Cleanup(g.open) // after setup's: runs before the runtime stops
	b.handlerSub("s", "job", "slow", nil)
	for i := range 11 {
		b.publish("job", nil, fmt.Sprint(i))
	}
	g.waitStarted(t, 1)
	// One runs, ten wait: the queue is full (10 of 10 > 90%).
	waitMetric(t, reg, "queue_depth_gauge", nil, 10)
	waitMetric(t, reg, "queue_capacity_gauge", nil, 10)
	g.open()
	for i := range 11 {
		b.waitEnded(fmt.Sprint(i))
	}
	waitMetric(t, reg, "queue_depth_gauge", nil, 0)
}

// quantile is PromQL's histogram_quantile over one histogram.
func quantile(q float64, h *dto.Histogram) float64 {
	total := float64(h.GetSampleCount())
	rank := q * total
	prevBound, prevCount := 0.0, 0.0
	bs := h.Bucket
	sort.Slice(bs, func(i, j int) bool { return bs[i].GetUpperBound() < bs[j].GetUpperBound() })
	for _, b := range bs {
		c := float64(b.GetCumulativeCount())
		if c >= rank {
			if math.IsInf(b.GetUpperBound(), 1) {
				return prevBound
			}
			return prevBound + (b.GetUpperBound()-prevBound)*(rank-prevCount)/(c-prevCount)
		}
		prevBound, prevCount = b.GetUpperBound(), c
	}
	return prevBound
}

func TestSeed004_Monitoring_DurationQuantiles(t *testing.T) {
	t.Parallel()
	// On an Env each attempt runs alone: the histogram measures the work,
	// not the wait for a core among twenty workers.
	b, reg := promEnv(t, nil, func(rt *herald.Runtime) {
		herald.RegisterBusHandler(rt, "work", func(ctx context.Context, ev herald.BusEvent) (any, error) {
			// The work itself: most executions are quick, one in ten takes 80 ms.
			if strings.HasPrefix(ev.ID, "slow") {
				time.Sleep(80 * time.Millisecond)
			}
			return nil, nil
		})
	})
	b.handlerSub("s", "job", "work", nil)
	var ids []string
	for i := range 100 {
		id := fmt.Sprint("fast", i)
		if i%10 == 0 {
			id = fmt.Sprint("slow", i)
		}
		ids = append(ids, id)
		b.publish("job", nil, id)
	}
	for _, id := range ids {
		b.waitEnded(id)
	}
	waitMetric(t, reg, "execution_duration_histogram", nil, 100)
	h := histogram(t, reg, "execution_duration_histogram")
	if h.GetSampleCount() != 100 {
		t.Fatalf("%d samples, want 100", h.GetSampleCount())
	}
	p50, p95, p99 := quantile(0.50, h), quantile(0.95, h), quantile(0.99, h)
	t.Logf("p50 %.4fs p95 %.4fs p99 %.4fs", p50, p95, p99)
	// The slow tenth sits above the 90th percentile: p95 and p99 come from
	// it (>= the 80 ms of work, less a bucket's interpolation), p50 from the
	// quick ones.
	if !(p50 < p95 && p95 <= p99) || p50 >= 0.08 || p95 < 0.04 {
		t.Fatalf("quantiles p50 %v p95 %v p99 %v do not separate the quick and the slow executions", p50, p95, p99)
	}
}
