package alerttest

import (
	"fmt"
	"math"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/heraldwf/herald"
	heraldprom "github.com/heraldwf/herald/metrics/prometheus"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/model/rulefmt"
	"github.com/prometheus/prometheus/promql/parser"
	"github.com/prometheus/prometheus/rules"
)

const (
	failureRate = "HeraldBusFailureRateHigh"
	queueDepth  = "HeraldBusQueueDepthHigh"
	refused     = "HeraldBusPublishRefused"
	deadLetters = "HeraldBusDeadLetters"
	latency     = "HeraldBusExecutionLatencyHigh"
)

// exported returns every series name the adapter exposes, with the label
// names and values each carries, once it has had one report of every kind
// with both label options: counters and gauges by name, histograms as
// their _bucket, _sum and _count series. A scrape adds the target's
// labels.
func exported(t *testing.T) map[string]map[string][]string {
	t.Helper()
	reg := prometheus.NewRegistry()
	obs, err := heraldprom.New(reg, heraldprom.WithTenantLabel(10), heraldprom.WithSubscriptionLabel(10))
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range []herald.BusPublishReport{{Tenant: "a"}, {Tenant: "a", Duplicate: true}, {Tenant: "a", Refused: true}} {
		obs.BusPublished(r)
	}
	obs.BusRouted(herald.BusRouteReport{Tenant: "a", Matched: []string{"s"}, Filtered: []string{"f"}})
	obs.BusRouted(herald.BusRouteReport{Tenant: "a"})
	for _, outcome := range []string{herald.BusOutcomeSucceeded, herald.BusOutcomeRetry, herald.BusOutcomeDeadLetter, herald.BusOutcomeLeaseLost} {
		for _, kind := range []string{"timeout", "runtime", "resource", "permanent", "validation", "permission"} {
			obs.BusAttempted(herald.BusAttemptReport{Tenant: "a", Subscription: "s", Outcome: outcome, ErrorKind: kind})
		}
	}
	obs.BusQueue(herald.BusQueueReport{Depth: 1, Capacity: 2})
	fams, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]map[string][]string{}
	add := func(name string, m *dto.Metric, extra ...string) {
		ls := out[name]
		if ls == nil {
			ls = map[string][]string{}
			out[name] = ls
		}
		for _, l := range m.GetLabel() {
			if !slices.Contains(ls[l.GetName()], l.GetValue()) {
				ls[l.GetName()] = append(ls[l.GetName()], l.GetValue())
			}
		}
		for k, v := range target {
			ls[k] = []string{v}
		}
		for _, e := range extra {
			ls[e] = append(ls[e], "")
		}
	}
	for _, f := range fams {
		for _, m := range f.GetMetric() {
			switch f.GetType() {
			case dto.MetricType_HISTOGRAM:
				add(f.GetName()+"_bucket", m, "le")
				add(f.GetName()+"_sum", m)
				add(f.GetName()+"_count", m)
			default:
				add(f.GetName(), m)
			}
		}
	}
	return out
}

// checkRules returns the problems of the rule file content: parse errors
// (rulefmt, which parses each expression and annotation template), and
// selectors, matchers and groupings that name a series or label the
// adapter (or an earlier recording rule) does not produce.
func checkRules(t *testing.T, content []byte) []string {
	t.Helper()
	rgs, errs := rulefmt.Parse(content, false)
	var problems []string
	for _, err := range errs {
		problems = append(problems, err.Error())
	}
	if rgs == nil {
		return problems
	}
	series := exported(t)
	for _, g := range rgs.Groups {
		for _, r := range g.Rules {
			name := r.Alert + r.Record
			expr, err := parser.ParseExpr(r.Expr)
			if err != nil {
				problems = append(problems, fmt.Sprintf("%s: %v", name, err))
				continue
			}
			parser.Inspect(expr, func(node parser.Node, _ []parser.Node) error {
				switch n := node.(type) {
				case *parser.VectorSelector:
					ls, ok := series[n.Name]
					if !ok {
						problems = append(problems, fmt.Sprintf("%s: reads %q, which the adapter does not export", name, n.Name))
						return nil
					}
					for _, m := range n.LabelMatchers {
						if m.Name == "__name__" {
							continue
						}
						values, ok := ls[m.Name]
						if !ok {
							problems = append(problems, fmt.Sprintf("%s: %s has no label %q", name, n.Name, m.Name))
							continue
						}
						if m.Type == labels.MatchEqual && !slices.Contains(values, m.Value) {
							problems = append(problems, fmt.Sprintf("%s: %s{%s=%q}: the adapter never sets that value (it sets %q)", name, n.Name, m.Name, m.Value, values))
						}
					}
				case *parser.AggregateExpr:
					// Every grouping label is a label of a series the
					// aggregation reads.
					var have []string
					parser.Inspect(n.Expr, func(inner parser.Node, _ []parser.Node) error {
						if vs, ok := inner.(*parser.VectorSelector); ok {
							for l := range series[vs.Name] {
								have = append(have, l)
							}
						}
						return nil
					})
					for _, l := range n.Grouping {
						if !slices.Contains(have, l) {
							problems = append(problems, fmt.Sprintf("%s: groups by %q, which no series it reads has", name, l))
						}
					}
				}
				return nil
			})
			if r.Record != "" {
				// Later rules may read the recorded series: it keeps the
				// labels the expression grouped by.
				ls := map[string][]string{}
				if agg := outerAggregate(expr); agg != nil {
					for _, l := range agg.Grouping {
						if l != "le" {
							ls[l] = []string{""}
						}
					}
				}
				series[r.Record] = ls
			}
		}
	}
	return problems
}

// outerAggregate returns the first aggregation in expr (the one a recording
// rule's labels come from), or nil.
func outerAggregate(expr parser.Expr) *parser.AggregateExpr {
	var found *parser.AggregateExpr
	parser.Inspect(expr, func(node parser.Node, _ []parser.Node) error {
		if a, ok := node.(*parser.AggregateExpr); ok && found == nil {
			found = a
		}
		return nil
	})
	return found
}

// TestAlert_RulesParse: alerts.yml parses with Prometheus's rule parser,
// every series and label it reads is one the adapter exports, the alerts
// the design asks for are there with a for: clause, a severity and both
// annotations; and the checker itself catches a misspelt metric, label
// value and grouping label and a broken expression.
func TestAlert_RulesParse(t *testing.T) {
	content, err := os.ReadFile(rulesFile)
	if err != nil {
		t.Fatal(err)
	}
	if problems := checkRules(t, content); len(problems) > 0 {
		t.Fatalf("%s:\n%s", rulesFile, strings.Join(problems, "\n"))
	}
	rgs, errs := rulefmt.ParseFile(rulesFile, false)
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	alerts := map[string]rulefmt.Rule{}
	var records []string
	for _, g := range rgs.Groups {
		for _, r := range g.Rules {
			if r.Alert != "" {
				alerts[r.Alert] = r
			} else {
				records = append(records, r.Record)
			}
		}
	}
	for _, name := range []string{failureRate, queueDepth, refused, deadLetters, latency} {
		r, ok := alerts[name]
		if !ok {
			t.Errorf("no alert %s", name)
			continue
		}
		if r.Labels["severity"] == "" {
			t.Errorf("%s has no severity label", name)
		}
		if r.Annotations["summary"] == "" || len(r.Annotations["description"]) < 80 {
			t.Errorf("%s: summary %q, description %q: both are needed, the description saying what it means and what to do", name, r.Annotations["summary"], r.Annotations["description"])
		}
	}
	for name, want := range map[string]time.Duration{failureRate: 5 * time.Minute, queueDepth: 2 * time.Minute, latency: 10 * time.Minute} {
		if got := time.Duration(alerts[name].For); got != want {
			t.Errorf("%s: for %v, want %v", name, got, want)
		}
	}
	for _, q := range []string{"p50", "p95", "p99"} {
		if !slices.Contains(records, "tenant:execution_duration_seconds:"+q+"_5m") {
			t.Errorf("no recording rule for the %s of execution durations", q)
		}
	}

	// The checker finds what it should.
	for what, bad := range map[string]struct{ from, to, want string }{
		"misspelt metric":      {"rate(executions_failed_total[5m])", "rate(executions_failure_total[5m])", `"executions_failure_total", which the adapter does not export`},
		"unknown label value":  {`{result="refused"}[5m]`, `{result="rejected"}[5m]`, `never sets that value`},
		"unknown label":        {`{result="refused"}[5m]`, `{outcome="refused"}[5m]`, `has no label "outcome"`},
		"unknown grouping":     {"sum by (tenant, le)", "sum by (tenant, bucket)", `groups by "bucket"`},
		"broken expression":    {"queue_depth_gauge / (queue_capacity_gauge > 0) > 0.9", "queue_depth_gauge / (queue_capacity_gauge > 0) >", "HeraldBusQueueDepthHigh\": could not parse expression"},
		"broken template":      {"{{ $value | humanizePercentage }} full", "{{ $value | humanizePercentage full", "HeraldBusQueueDepthHigh"},
		"alert and record set": {"- alert: HeraldBusDeadLetters", "- alert: HeraldBusDeadLetters\n        record: x", "only one of"},
	} {
		mutated := strings.Replace(string(content), bad.from, bad.to, 1)
		if mutated == string(content) {
			t.Fatalf("%s: %q is not in %s", what, bad.from, rulesFile)
		}
		problems := strings.Join(checkRules(t, []byte(mutated)), "\n")
		if !strings.Contains(problems, bad.want) {
			t.Errorf("%s: the checker reported %q, want it to mention %q", what, problems, bad.want)
		}
	}
}

// checkFor asserts that alert, for instances matching match, went pending
// and then fired exactly its for: duration later (in whole ticks).
func checkFor(t *testing.T, s *sim, alert string, hold time.Duration, match map[string]string) {
	t.Helper()
	pending := s.firstTick(alert, rules.StatePending, match)
	firing := s.firstTick(alert, rules.StateFiring, match)
	if pending < 0 || firing < 0 {
		t.Fatalf("%s%v: first pending after tick %d, first firing after tick %d: want both", alert, match, pending, firing)
	}
	if got := time.Duration(firing-pending) * step; got != hold {
		t.Errorf("%s%v fired %v after going pending, want %v (its for:)", alert, match, got, hold)
	}
}

// feedAttempts reports n attempts of tenant's subscription, the first
// failed of them failed (a retry with kind, or a dead letter when dead).
func feedAttempts(s *sim, tenant, sub string, n, failed int, kind string, dead bool) {
	for i := range n {
		r := herald.BusAttemptReport{Tenant: tenant, Subscription: sub, Attempt: 1, Outcome: herald.BusOutcomeSucceeded, Duration: 50 * time.Millisecond}
		if i < failed {
			r.Outcome, r.ErrorKind = herald.BusOutcomeRetry, kind
			if dead {
				r.Outcome = herald.BusOutcomeDeadLetter
			}
		}
		s.Obs.BusAttempted(r)
	}
}

const ratioQuery = `sum by (tenant) (rate(executions_failed_total[5m])) / (sum by (tenant) (rate(executions_failed_total[5m])) + sum by (tenant) (rate(executions_success_total[5m])))`

// TestAlert_FailureRate: HeraldBusFailureRateHigh over series the adapter
// produced. Each 5-minute window sees 100 attempts (5 every 15 s scrape):
// with 20 failures among them it goes pending and fires 5 minutes later,
// with 5 it never even goes pending (while the ratio it compares is there,
// at 5%). One tenant whose only subscription never succeeds fires alone.
func TestAlert_FailureRate(t *testing.T) {
	t.Run("20 of 100 fail", func(t *testing.T) {
		s := newSim(t, heraldprom.WithTenantLabel(10))
		s.run(40, func(int) { feedAttempts(s, "acme", "billing", 5, 1, "timeout", false) })
		acme := map[string]string{"tenant": "acme"}
		checkFor(t, s, failureRate, 5*time.Minute, acme)
		if got := s.alertsAt(failureRate, s.ticks-1, acme); len(got) != 1 || got[0].State != rules.StateFiring {
			t.Fatalf("at the end: %v, want one firing alert", got)
		}
		sent := s.sentAlerts(failureRate, acme)
		if len(sent) == 0 {
			t.Fatal("nothing sent to the notifier")
		}
		a := sent[len(sent)-1]
		if got := labelNames(a.Labels); !slices.Equal(got, []string{"alertname", "severity", "tenant"}) {
			t.Errorf("alert labels %v", got)
		}
		if math.Abs(a.Value-0.2) > 1e-9 {
			t.Errorf("alert value %v, want 0.2", a.Value)
		}
		if got := a.Annotations.Get("summary"); got != "Tenant acme: 20% of event-bus execution attempts are failing" {
			t.Errorf("summary %q", got)
		}
		if got := a.Annotations.Get("description"); !strings.Contains(got, "of tenant acme have failed") || !strings.Contains(got, "(now 20%)") {
			t.Errorf("description %q", got)
		}
	})
	t.Run("5 of 100 fail", func(t *testing.T) {
		s := newSim(t, heraldprom.WithTenantLabel(10))
		// One failure in every fourth scrape: 5 in each 100 attempts.
		s.run(40, func(tick int) {
			failed := 0
			if tick%4 == 3 {
				failed = 1
			}
			feedAttempts(s, "acme", "billing", 5, failed, "runtime", false)
		})
		if s.everActive(failureRate, nil) {
			t.Error("5% failures made the alert pending or firing")
		}
		v := s.query(ratioQuery)
		if len(v) != 1 || math.Abs(v[0].F-0.05) > 0.005 {
			t.Errorf("the ratio at the end: %v, want about 0.05 for tenant acme", v)
		}
	})
	t.Run("only one tenant fails", func(t *testing.T) {
		s := newSim(t, heraldprom.WithTenantLabel(10), heraldprom.WithSubscriptionLabel(10))
		s.run(40, func(int) {
			// globex's only subscription never succeeds (a permanent
			// error: straight to the dead-letter queue); acme is healthy
			// and busier.
			feedAttempts(s, "globex", "broken", 1, 1, "permanent", true)
			feedAttempts(s, "acme", "billing", 20, 0, "", false)
		})
		checkFor(t, s, failureRate, 5*time.Minute, map[string]string{"tenant": "globex"})
		if s.everActive(failureRate, map[string]string{"tenant": "acme"}) {
			t.Error("healthy tenant acme alerted")
		}
	})
	t.Run("no tenant label", func(t *testing.T) {
		s := newSim(t)
		s.run(40, func(int) { feedAttempts(s, "acme", "billing", 5, 2, "resource", false) })
		checkFor(t, s, failureRate, 5*time.Minute, nil)
		if a := s.sentAlerts(failureRate, nil); len(a) == 0 || a[0].Labels.Has("tenant") || !strings.HasPrefix(a[0].Annotations.Get("summary"), "40% of") {
			t.Errorf("sent %v", a)
		}
	})
}

// TestAlert_QueueDepth: HeraldBusQueueDepthHigh fires after 2 minutes of a
// queue 950/1000 full and resolves when it drains to 500; 500/1000 and
// exactly 900/1000 never make it pending.
func TestAlert_QueueDepth(t *testing.T) {
	t.Run("950 of 1000", func(t *testing.T) {
		s := newSim(t)
		s.run(20, func(int) { s.Obs.BusQueue(herald.BusQueueReport{Depth: 950, Capacity: 1000}) })
		checkFor(t, s, queueDepth, 2*time.Minute, target)
		sent := s.sentAlerts(queueDepth, target)
		if len(sent) == 0 {
			t.Fatal("nothing sent to the notifier")
		}
		if got := sent[0].Annotations.Get("summary"); got != "Event-bus dispatch queue of node-1:9090 is 95% full" {
			t.Errorf("summary %q", got)
		}
		s.run(1, func(int) { s.Obs.BusQueue(herald.BusQueueReport{Depth: 500, Capacity: 1000}) })
		if got := s.alertsAt(queueDepth, s.ticks-1, nil); len(got) != 0 {
			t.Errorf("still active after the queue drained: %v", got)
		}
	})
	for _, depth := range []int{500, 900} {
		t.Run(fmt.Sprintf("%d of 1000", depth), func(t *testing.T) {
			s := newSim(t)
			s.run(20, func(int) { s.Obs.BusQueue(herald.BusQueueReport{Depth: depth, Capacity: 1000}) })
			if s.everActive(queueDepth, nil) {
				t.Errorf("queue at %d/1000 alerted", depth)
			}
			if v := s.query("queue_depth_gauge / queue_capacity_gauge"); len(v) != 1 || v[0].F != float64(depth)/1000 {
				t.Errorf("ratio %v", v)
			}
		})
	}
	t.Run("capacity 0", func(t *testing.T) {
		s := newSim(t)
		s.run(20, func(int) { s.Obs.BusQueue(herald.BusQueueReport{Depth: 3, Capacity: 0}) })
		if s.everActive(queueDepth, nil) {
			t.Error("a queue reporting capacity 0 alerted")
		}
	})
}

// TestAlert_PublishRefused: a single refused publish fires at once, even
// as the first report of its series (which increase() alone misses);
// steady refusals keep it firing; accepted and duplicate publishes never
// alert, and it resolves 5 minutes after the last refusal.
func TestAlert_PublishRefused(t *testing.T) {
	s := newSim(t, heraldprom.WithTenantLabel(10))
	s.run(4, func(int) {
		s.Obs.BusPublished(herald.BusPublishReport{Tenant: "acme"})
		s.Obs.BusPublished(herald.BusPublishReport{Tenant: "acme", Duplicate: true})
	})
	if s.everActive(refused, nil) {
		t.Fatal("accepted and duplicate publishes alerted")
	}
	s.run(1, func(int) { s.Obs.BusPublished(herald.BusPublishReport{Tenant: "globex", Refused: true}) })
	globex := map[string]string{"tenant": "globex"}
	if got := s.alertsAt(refused, s.ticks-1, globex); len(got) != 1 || got[0].State != rules.StateFiring || got[0].Value != 1 {
		t.Fatalf("after globex's first refusal: %v, want one firing alert of value 1", got)
	}
	if got := s.sentAlerts(refused, globex); len(got) != 1 || got[0].Annotations.Get("summary") != "Tenant globex: the event bus refused 1 publishes in 5 minutes" {
		t.Errorf("sent %v", got)
	}
	// Ten more, one per scrape: the series is younger than the window,
	// so its whole value (not doubled by the increase() arm).
	s.run(10, func(int) { s.Obs.BusPublished(herald.BusPublishReport{Tenant: "globex", Refused: true}) })
	if got := s.alertsAt(refused, s.ticks-1, globex); len(got) != 1 || got[0].Value != 11 {
		t.Fatalf("after 11 refusals in 2.5 minutes: %v, want a value of 11", got)
	}
	// Once the series is older than the window, its increase counts:
	// steady refusals, one per scrape, keep it firing.
	s.run(30, func(int) { s.Obs.BusPublished(herald.BusPublishReport{Tenant: "globex", Refused: true}) })
	if got := s.alertsAt(refused, s.ticks-1, globex); len(got) != 1 || got[0].Value < 19 || got[0].Value > 21 {
		t.Fatalf("after 7.5 more minutes of one refusal per scrape: %v, want a value of about 20", got)
	}
	s.run(21, nil)
	if got := s.alertsAt(refused, s.ticks-1, nil); len(got) != 0 {
		t.Errorf("5 minutes after the last refusal: %v, want resolved", got)
	}
	if s.everActive(refused, map[string]string{"tenant": "acme"}) {
		t.Error("acme never had a publish refused but alerted")
	}
}

// TestAlert_DeadLetters: the first dead letter of a subscription fires the
// alert at once, and it resolves 15 minutes later (an old dead letter does
// not alert forever).
func TestAlert_DeadLetters(t *testing.T) {
	s := newSim(t, heraldprom.WithTenantLabel(10), heraldprom.WithSubscriptionLabel(10))
	s.run(4, func(int) { feedAttempts(s, "acme", "billing", 3, 1, "timeout", false) })
	if s.everActive(deadLetters, nil) {
		t.Fatal("retries alone alerted")
	}
	s.run(1, func(int) { feedAttempts(s, "acme", "webhook", 1, 1, "validation", true) })
	acme := map[string]string{"tenant": "acme"}
	if got := s.alertsAt(deadLetters, s.ticks-1, acme); len(got) != 1 || got[0].State != rules.StateFiring || got[0].Value != 1 {
		t.Fatalf("after the first dead letter: %v, want one firing alert of value 1", got)
	}
	s.run(59, nil) // 14 m 45 s
	if got := s.alertsAt(deadLetters, s.ticks-1, acme); len(got) != 1 {
		t.Fatalf("14m45s after the dead letter: %v, want still active", got)
	}
	s.run(2, nil)
	if got := s.alertsAt(deadLetters, s.ticks-1, acme); len(got) != 0 {
		t.Errorf("15 minutes after the dead letter: %v, want resolved", got)
	}
}

// TestAlert_ExecutionLatency: with 10% of attempts taking 5 s the p95 is
// above 2 s and the alert fires after 10 minutes; with 2% it is not.
func TestAlert_ExecutionLatency(t *testing.T) {
	feed := func(s *sim, slow int) func(int) {
		return func(int) {
			for i := range 50 {
				d := 100 * time.Millisecond
				if i < slow {
					d = 5 * time.Second
				}
				s.Obs.BusAttempted(herald.BusAttemptReport{Tenant: "acme", Subscription: "s", Outcome: herald.BusOutcomeSucceeded, Duration: d})
			}
		}
	}
	t.Run("10% slow", func(t *testing.T) {
		s := newSim(t, heraldprom.WithTenantLabel(10))
		s.run(60, feed(s, 5))
		acme := map[string]string{"tenant": "acme"}
		checkFor(t, s, latency, 10*time.Minute, acme)
		sent := s.sentAlerts(latency, acme)
		if len(sent) == 0 || sent[0].Value <= 2 || sent[0].Value > 5 {
			t.Fatalf("sent %v, want a p95 between 2 and 5 s", sent)
		}
	})
	t.Run("2% slow", func(t *testing.T) {
		s := newSim(t, heraldprom.WithTenantLabel(10))
		s.run(60, feed(s, 1))
		if s.everActive(latency, nil) {
			t.Error("alerted")
		}
		if v := s.query(`tenant:execution_duration_seconds:p95_5m`); len(v) != 1 || v[0].F > 0.15 {
			t.Errorf("recorded p95 %v, want at most 0.15 s", v)
		}
	})
}

// TestRecording_Quantiles: the recording rules give p50, p95 and p99 of a
// spread of attempt durations from 2 ms to 40 s within the bucket spacing
// (a factor of 1.7) of the true quantiles.
func TestRecording_Quantiles(t *testing.T) {
	s := newSim(t, heraldprom.WithTenantLabel(10))
	// 200 durations spread evenly on a log scale from 2 ms to 40 s.
	var ds []float64
	for i := range 200 {
		ds = append(ds, 0.002*math.Pow(40/0.002, float64(i)/199))
	}
	s.run(30, func(int) {
		for _, d := range ds {
			s.Obs.BusAttempted(herald.BusAttemptReport{Tenant: "acme", Subscription: "s", Outcome: herald.BusOutcomeSucceeded, Duration: time.Duration(d * float64(time.Second))})
		}
	})
	for _, q := range []struct {
		name string
		q    float64
	}{{"p50", 0.50}, {"p95", 0.95}, {"p99", 0.99}} {
		truth := ds[int(math.Ceil(q.q*float64(len(ds))))-1]
		v := s.query("tenant:execution_duration_seconds:" + q.name + "_5m")
		if len(v) != 1 || v[0].Metric.Get("tenant") != "acme" {
			t.Fatalf("%s: %v, want one series of tenant acme", q.name, v)
		}
		if r := v[0].F / truth; r < 1/1.7 || r > 1.7 {
			t.Errorf("%s = %.4g s, true %.4g s: off by %.2f×", q.name, v[0].F, truth, r)
		}
	}
}
