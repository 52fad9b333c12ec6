package prometheus_test

import (
	"fmt"
	"math"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/heraldwf/herald"
	heraldprom "github.com/heraldwf/herald/metrics/prometheus"
	"github.com/prometheus/client_golang/prometheus"
)

type check struct {
	metric string
	labels map[string]string
	want   float64
}

func checkAll(t *testing.T, reg *prometheus.Registry, checks []check) {
	t.Helper()
	fams := gather(t, reg)
	for _, ch := range checks {
		if series(fams, ch.metric, ch.labels) == nil {
			t.Errorf("%s%v: no such series", ch.metric, ch.labels)
			continue
		}
		if got := value(fams, ch.metric, ch.labels); got != ch.want {
			t.Errorf("%s%v = %v, want %v", ch.metric, ch.labels, got, ch.want)
		}
	}
}

// TestBus_Reports feeds every kind of bus report to an Observer without
// tenant or subscription labels and reads each metric back under the
// design's names.
func TestBus_Reports(t *testing.T) {
	t.Parallel()
	reg := prometheus.NewRegistry()
	obs, err := heraldprom.New(reg)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range []herald.BusPublishReport{
		{Tenant: "a", EventID: "e1", Type: "user.created"},
		{Tenant: "a", EventID: "e2", Type: "user.created"},
		{Tenant: "b", EventID: "e3", Type: "user.deleted"},
		{Tenant: "a", EventID: "e1", Type: "user.created", Duplicate: true},
		{Tenant: "a", EventID: "e4", Refused: true},
		{Tenant: "a", EventID: "e5", Refused: true, Duplicate: true}, // refused wins: nothing stored
	} {
		obs.BusPublished(r)
	}
	for _, r := range []herald.BusRouteReport{
		{Tenant: "a", EventID: "e1", Matched: []string{"s1", "s2"}, Filtered: []string{"s3"}},
		{Tenant: "a", EventID: "e2", Filtered: []string{"s1", "s2"}}, // all filtered: discarded
		{Tenant: "b", EventID: "e3"}, // no subscription: discarded
		{Tenant: "b", EventID: "e6", Matched: []string{"s9"}},
	} {
		obs.BusRouted(r)
	}
	attempts := []herald.BusAttemptReport{
		{Tenant: "a", Subscription: "s1", Attempt: 1, Outcome: herald.BusOutcomeSucceeded, Duration: 3 * time.Millisecond},
		{Tenant: "a", Subscription: "s2", Attempt: 1, Outcome: herald.BusOutcomeRetry, ErrorKind: "timeout", Duration: 30 * time.Second},
		{Tenant: "a", Subscription: "s2", Attempt: 2, Outcome: herald.BusOutcomeRetry, ErrorKind: "runtime", Duration: 20 * time.Millisecond},
		{Tenant: "a", Subscription: "s2", Attempt: 3, Outcome: herald.BusOutcomeDeadLetter, ErrorKind: "runtime", Duration: 10 * time.Millisecond},
		{Tenant: "b", Subscription: "s9", Attempt: 1, Outcome: herald.BusOutcomeDeadLetter, ErrorKind: "permission", Duration: time.Millisecond},
		{Tenant: "b", Subscription: "s9", Attempt: 1, Outcome: herald.BusOutcomeRetry, ErrorKind: "", Duration: time.Millisecond},
		{Tenant: "b", Subscription: "s9", Attempt: 1, Outcome: herald.BusOutcomeRetry, ErrorKind: "oom\x00" + string(make([]byte, 10000)), Duration: time.Millisecond},
		{Tenant: "b", Subscription: "s9", Attempt: 2, Outcome: herald.BusOutcomeSucceeded, Duration: -time.Second}, // a negative duration is 0
		// Neither success nor failure, and no duration.
		{Tenant: "a", Subscription: "s1", Attempt: 1, Outcome: herald.BusOutcomeLeaseLost, Duration: time.Hour},
		// An outcome the adapter does not know records nothing.
		{Tenant: "a", Subscription: "s1", Attempt: 1, Outcome: "exploded", ErrorKind: "timeout", Duration: time.Hour},
	}
	for _, r := range attempts {
		obs.BusAttempted(r)
	}
	obs.BusQueue(herald.BusQueueReport{Depth: 7, Capacity: 1000})

	none := map[string]string{}
	checkAll(t, reg, []check{
		{"herald_bus_published_total", map[string]string{"result": "accepted"}, 3},
		{"herald_bus_published_total", map[string]string{"result": "duplicate"}, 1},
		{"herald_bus_published_total", map[string]string{"result": "refused"}, 2},
		{"events_matched_total", none, 3},
		{"executions_queued_total", none, 3},
		{"events_filtered_total", none, 3},
		{"herald_bus_events_discarded_total", none, 2},
		{"executions_success_total", none, 2},
		{"executions_failed_total", map[string]string{"error_type": "timeout"}, 1},
		{"executions_failed_total", map[string]string{"error_type": "runtime"}, 2},
		{"executions_failed_total", map[string]string{"error_type": "permission"}, 1},
		{"executions_failed_total", map[string]string{"error_type": heraldprom.UnknownErrorType}, 2},
		{"dlq_events_total", none, 2},
		{"herald_bus_lease_lost_total", none, 1},
		{"execution_duration_histogram", none, 8}, // 2 successes + 6 failures
		{"queue_depth_gauge", none, 7},
		{"queue_capacity_gauge", none, 1000},
	})
	fams := gather(t, reg)
	if n := len(family(fams, "executions_failed_total").GetMetric()); n != 4 {
		t.Errorf("executions_failed_total has %d series, want 4 (timeout, runtime, permission, unknown)", n)
	}
	h := series(fams, "execution_duration_histogram", none).GetHistogram()
	if want := 0.003 + 30 + 0.02 + 0.01 + 0.001*3; math.Abs(h.GetSampleSum()-want) > 1e-9 {
		t.Errorf("duration sum %v, want %v (lease-lost and unknown outcomes excluded)", h.GetSampleSum(), want)
	}
	for _, f := range fams {
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "tenant" || l.GetName() == "subscription" {
					t.Errorf("%s has a %s label without the option", f.GetName(), l.GetName())
				}
			}
		}
	}
}

// TestBus_DurationBuckets: the histogram's bounds are
// ExecutionDurationBuckets, each observation lands in the first bucket
// whose bound is not below it, and a custom set replaces them.
func TestBus_DurationBuckets(t *testing.T) {
	t.Parallel()
	b := heraldprom.ExecutionDurationBuckets
	if b[0] > 0.001 || b[len(b)-1] < 30 {
		t.Fatalf("buckets %v do not span 1 ms to 30 s", b)
	}
	for i := 1; i < len(b); i++ {
		if r := b[i] / b[i-1]; r > 1.7 {
			t.Errorf("bounds %v and %v are %.2f apart, want at most 1.7", b[i-1], b[i], r)
		}
	}
	if !slices.Contains(b, 2) {
		t.Errorf("buckets %v have no bound at the 2 s p95 target", b)
	}

	reg := prometheus.NewRegistry()
	obs, err := heraldprom.New(reg)
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range []time.Duration{1200 * time.Microsecond, 2 * time.Second, 45 * time.Second, 200 * time.Second} {
		obs.BusAttempted(herald.BusAttemptReport{Outcome: herald.BusOutcomeSucceeded, Duration: d})
	}
	h := series(gather(t, reg), "execution_duration_histogram", map[string]string{}).GetHistogram()
	got := map[float64]uint64{}
	var bounds []float64
	for _, bk := range h.GetBucket() {
		got[bk.GetUpperBound()] = bk.GetCumulativeCount()
		bounds = append(bounds, bk.GetUpperBound())
	}
	if !slices.Equal(bounds, b) {
		t.Errorf("exported bounds %v, want %v", bounds, b)
	}
	for bound, want := range map[float64]uint64{0.001: 0, 0.0015: 1, 1.5: 1, 2: 2, 30: 2, 60: 3, 120: 3} {
		if got[bound] != want {
			t.Errorf("le=%v: cumulative %d, want %d", bound, got[bound], want)
		}
	}
	if h.GetSampleCount() != 4 {
		t.Errorf("count %d, want 4 (200 s is in +Inf only)", h.GetSampleCount())
	}

	reg2 := prometheus.NewRegistry()
	obs2, err := heraldprom.New(reg2, heraldprom.WithExecutionDurationBuckets(0.1, 1))
	if err != nil {
		t.Fatal(err)
	}
	obs2.BusAttempted(herald.BusAttemptReport{Outcome: herald.BusOutcomeSucceeded, Duration: 500 * time.Millisecond})
	h2 := series(gather(t, reg2), "execution_duration_histogram", map[string]string{}).GetHistogram()
	if n := len(h2.GetBucket()); n != 2 || h2.GetBucket()[1].GetCumulativeCount() != 1 || h2.GetBucket()[0].GetCumulativeCount() != 0 {
		t.Errorf("custom buckets: %v", h2.GetBucket())
	}
	// WithDurationBuckets is for the engine's histograms only.
	reg3 := prometheus.NewRegistry()
	obs3, err := heraldprom.New(reg3, heraldprom.WithDurationBuckets(1, 2))
	if err != nil {
		t.Fatal(err)
	}
	obs3.BusAttempted(herald.BusAttemptReport{Outcome: herald.BusOutcomeSucceeded})
	if n := len(series(gather(t, reg3), "execution_duration_histogram", map[string]string{}).GetHistogram().GetBucket()); n != len(b) {
		t.Errorf("WithDurationBuckets changed the execution histogram: %d buckets", n)
	}
}

// TestBus_SubscriptionLabel: with both caps, the first subscriptions of
// each tenant label keep their ids, later ones are "other", tenants beyond
// their cap share "other" and its subscription cap, and ids Prometheus
// would refuse (not UTF-8) are "other" without taking a slot.
func TestBus_SubscriptionLabel(t *testing.T) {
	t.Parallel()
	reg := prometheus.NewRegistry()
	obs, err := heraldprom.New(reg, heraldprom.WithTenantLabel(2), heraldprom.WithSubscriptionLabel(2))
	if err != nil {
		t.Fatal(err)
	}
	route := func(tenant string, subs ...string) {
		obs.BusRouted(herald.BusRouteReport{Tenant: tenant, Matched: subs})
	}
	route("a", "\xff\xfe") // not UTF-8: other, no slot taken
	route("a", "s1", "s2", "s3", "s1")
	route("b", "s3")
	route("c", "x1")         // tenant beyond the cap: other
	route("d", "x2", "x3")   // other tenant's third subscription: other
	route("\xffbad", "x1")   // not UTF-8: other tenant
	route("b", "s4", "\xc0") // b's second subscription; the bad one is other
	obs.BusAttempted(herald.BusAttemptReport{Tenant: "a", Subscription: "s1", Outcome: herald.BusOutcomeRetry, ErrorKind: "resource"})
	obs.BusAttempted(herald.BusAttemptReport{Tenant: "a", Subscription: "s9", Outcome: herald.BusOutcomeLeaseLost})
	obs.BusPublished(herald.BusPublishReport{Tenant: "zzz"})

	ts := func(tenant, sub string) map[string]string {
		return map[string]string{"tenant": tenant, "subscription": sub}
	}
	o := heraldprom.OtherTenant
	os := heraldprom.OtherSubscription
	checkAll(t, reg, []check{
		{"events_matched_total", ts("a", "s1"), 2},
		{"events_matched_total", ts("a", "s2"), 1},
		{"events_matched_total", ts("a", os), 2}, // \xff\xfe and s3
		{"events_matched_total", ts("b", "s3"), 1},
		{"events_matched_total", ts("b", "s4"), 1},
		{"events_matched_total", ts("b", os), 1},
		{"events_matched_total", ts(o, "x1"), 2}, // c's and the bad tenant's
		{"events_matched_total", ts(o, "x2"), 1},
		{"events_matched_total", ts(o, os), 1},
		{"executions_queued_total", ts("a", "s1"), 2},
		{"executions_failed_total", map[string]string{"tenant": "a", "subscription": "s1", "error_type": "resource"}, 1},
		{"executions_success_total", ts("a", "s1"), 0}, // created by the failure
		{"herald_bus_lease_lost_total", ts("a", os), 1},
		{"herald_bus_published_total", map[string]string{"tenant": o, "result": "accepted"}, 1},
	})
	if n := mustCount(t, reg, "events_matched_total"); n != 9 {
		t.Errorf("events_matched_total has %d series, want 9", n)
	}
}

// TestBus_LabelCardinalityBounded: a flood of distinct tenants and
// subscriptions (an attacker creating them) never makes more than
// (tenants+1) × (subscriptions+1) series.
func TestBus_LabelCardinalityBounded(t *testing.T) {
	t.Parallel()
	reg := prometheus.NewRegistry()
	obs, err := heraldprom.New(reg, heraldprom.WithTenantLabel(3), heraldprom.WithSubscriptionLabel(4))
	if err != nil {
		t.Fatal(err)
	}
	for i := range 2000 {
		obs.BusAttempted(herald.BusAttemptReport{
			Tenant:       fmt.Sprintf("t%d", i%50),
			Subscription: fmt.Sprintf("s%d", i),
			Outcome:      herald.BusOutcomeSucceeded,
		})
	}
	if n := mustCount(t, reg, "executions_success_total"); n != (3+1)*(4+1) {
		t.Errorf("%d series, want %d", n, (3+1)*(4+1))
	}
	if got := value(gather(t, reg), "executions_success_total", map[string]string{"tenant": heraldprom.OtherTenant, "subscription": heraldprom.OtherSubscription}); got != 2000-3*40-4 {
		t.Errorf("other/other = %v, want %d", got, 2000-3*40-4)
	}
}

// TestBus_SubscriptionLabelWithoutTenant: without a tenant label the cap is
// over all tenants together, and one id in two tenants is one series.
func TestBus_SubscriptionLabelWithoutTenant(t *testing.T) {
	t.Parallel()
	reg := prometheus.NewRegistry()
	obs, err := heraldprom.New(reg, heraldprom.WithSubscriptionLabel(1))
	if err != nil {
		t.Fatal(err)
	}
	obs.BusRouted(herald.BusRouteReport{Tenant: "a", Filtered: []string{"s1"}})
	obs.BusRouted(herald.BusRouteReport{Tenant: "b", Filtered: []string{"s1", "s2"}})
	checkAll(t, reg, []check{
		{"events_filtered_total", map[string]string{"subscription": "s1"}, 2},
		{"events_filtered_total", map[string]string{"subscription": heraldprom.OtherSubscription}, 1},
		{"herald_bus_events_discarded_total", map[string]string{}, 2},
	})
}

// TestBus_QueueGauges: the gauges appear at the first report, follow the
// latest one, and never go negative.
func TestBus_QueueGauges(t *testing.T) {
	t.Parallel()
	reg := prometheus.NewRegistry()
	obs, err := heraldprom.New(reg, heraldprom.WithTenantLabel(5))
	if err != nil {
		t.Fatal(err)
	}
	fams := gather(t, reg)
	if family(fams, "queue_depth_gauge") != nil || family(fams, "queue_capacity_gauge") != nil {
		t.Fatal("queue gauges exported before any report")
	}
	none := map[string]string{} // no tenant label: the queue is the runtime's
	obs.BusQueue(herald.BusQueueReport{Depth: 950, Capacity: 1000})
	checkAll(t, reg, []check{{"queue_depth_gauge", none, 950}, {"queue_capacity_gauge", none, 1000}})
	obs.BusQueue(herald.BusQueueReport{Depth: 500, Capacity: 1000})
	checkAll(t, reg, []check{{"queue_depth_gauge", none, 500}, {"queue_capacity_gauge", none, 1000}})
	obs.BusQueue(herald.BusQueueReport{Depth: -3, Capacity: -1})
	checkAll(t, reg, []check{{"queue_depth_gauge", none, 0}, {"queue_capacity_gauge", none, 0}})
}

// TestBus_Concurrent: reports from many goroutines (under -race) add up,
// with the caps deciding labels concurrently.
func TestBus_Concurrent(t *testing.T) {
	t.Parallel()
	reg := prometheus.NewRegistry()
	obs, err := heraldprom.New(reg, heraldprom.WithTenantLabel(4), heraldprom.WithSubscriptionLabel(4))
	if err != nil {
		t.Fatal(err)
	}
	const workers, each = 8, 500
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for i := range each {
				tenant, sub := fmt.Sprintf("t%d", (w+i)%6), fmt.Sprintf("s%d", i%7)
				obs.BusRouted(herald.BusRouteReport{Tenant: tenant, Matched: []string{sub}})
				outcome := herald.BusOutcomeSucceeded
				if i%5 == 0 {
					outcome = herald.BusOutcomeRetry
				}
				obs.BusAttempted(herald.BusAttemptReport{Tenant: tenant, Subscription: sub, Outcome: outcome, ErrorKind: "timeout", Duration: time.Millisecond})
				obs.BusQueue(herald.BusQueueReport{Depth: i, Capacity: each})
			}
		})
	}
	wg.Wait()
	fams := gather(t, reg)
	sum := func(name string) float64 {
		var s float64
		for _, m := range family(fams, name).GetMetric() {
			s += m.GetCounter().GetValue()
		}
		return s
	}
	if got := sum("events_matched_total"); got != workers*each {
		t.Errorf("matched %v, want %d", got, workers*each)
	}
	if got := sum("executions_failed_total"); got != workers*each/5 {
		t.Errorf("failed %v, want %d", got, workers*each/5)
	}
	if got := sum("executions_success_total"); got != workers*each*4/5 {
		t.Errorf("succeeded %v, want %d", got, workers*each*4/5)
	}
	if n := len(family(fams, "events_matched_total").GetMetric()); n > 5*5 {
		t.Errorf("%d matched series, want at most 25", n)
	}
}
