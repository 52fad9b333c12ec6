package alerttest

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"slices"
	"testing"
	"time"

	heraldprom "github.com/heraldwf/herald/metrics/prometheus"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/model/textparse"
	"github.com/prometheus/prometheus/promql"
	"github.com/prometheus/prometheus/rules"
	"github.com/prometheus/prometheus/util/teststorage"
)

// rulesFile is the rule file under test.
const rulesFile = "../alerts.yml"

// step is both the simulated scrape interval and the rule evaluation
// interval.
const step = 15 * time.Second

// target is what a scrape adds to every series of the target.
var target = map[string]string{"job": "herald", "instance": "node-1:9090"}

// sim is a simulated Prometheus server scraping one Herald process: an
// adapter Observer on its own registry, a TSDB, the PromQL engine, and the
// rule groups of rulesFile. Each tick feeds reports to the Observer,
// scrapes its registry (text exposition format, parsed by Prometheus's
// own parser) into the TSDB at the simulated time, and evaluates the
// rule groups at that time, as the rule manager would.
type sim struct {
	t      *testing.T
	Obs    *heraldprom.Observer
	reg    *prometheus.Registry
	store  *teststorage.TestStorage
	engine *promql.Engine
	groups []*rules.Group
	start  time.Time
	now    time.Time
	ticks  int

	// timeline[alert] holds, for each tick, the alert's instances active
	// after that tick's evaluation (pending or firing).
	timeline map[string][][]rules.Alert
	// sent are the alerts handed to the notifier (firing ones).
	sent []rules.Alert
}

func newSim(t *testing.T, opts ...heraldprom.Option) *sim {
	t.Helper()
	reg := prometheus.NewRegistry()
	obs, err := heraldprom.New(reg, opts...)
	if err != nil {
		t.Fatal(err)
	}
	store := teststorage.New(t)
	t.Cleanup(func() { _ = store.Close() })
	engine := promql.NewEngine(promql.EngineOpts{
		MaxSamples:    10_000_000,
		Timeout:       time.Minute,
		LookbackDelta: 5 * time.Minute,
	})
	s := &sim{
		t: t, Obs: obs, reg: reg, store: store, engine: engine,
		start:    time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC),
		timeline: map[string][][]rules.Alert{},
	}
	s.now = s.start
	mgr := rules.NewManager(&rules.ManagerOptions{
		QueryFunc:  rules.EngineQueryFunc(engine, store),
		Appendable: store,
		Queryable:  store,
		Context:    context.Background(),
		Logger:     slog.New(slog.DiscardHandler),
		NotifyFunc: func(_ context.Context, _ string, alerts ...*rules.Alert) {
			for _, a := range alerts {
				s.sent = append(s.sent, *a)
			}
		},
	})
	groups, errs := mgr.LoadGroups(step, labels.EmptyLabels(), "", nil, false, rulesFile)
	if len(errs) > 0 {
		t.Fatalf("loading %s: %v", rulesFile, errors.Join(errs...))
	}
	for _, g := range groups {
		s.groups = append(s.groups, g)
	}
	if len(s.groups) == 0 {
		t.Fatalf("%s has no rule groups", rulesFile)
	}
	return s
}

// run ticks n times; feed (may be nil) is called at the start of each tick
// with the tick's number (0 for the first tick of the simulation).
func (s *sim) run(n int, feed func(tick int)) {
	s.t.Helper()
	for range n {
		if feed != nil {
			feed(s.ticks)
		}
		s.scrape()
		s.eval()
		s.ticks++
		s.now = s.now.Add(step)
	}
}

// scrape writes what the registry exposes now into the TSDB at s.now,
// through the text exposition format and Prometheus's parser of it, with
// the target's labels added.
func (s *sim) scrape() {
	s.t.Helper()
	fams, err := s.reg.Gather()
	if err != nil {
		s.t.Fatal(err)
	}
	var buf bytes.Buffer
	enc := expfmt.NewEncoder(&buf, expfmt.NewFormat(expfmt.TypeTextPlain))
	for _, f := range fams {
		if err := enc.Encode(f); err != nil {
			s.t.Fatal(err)
		}
	}
	p := textparse.NewPromParser(buf.Bytes(), labels.NewSymbolTable(), false)
	app := s.store.Appender(context.Background())
	ts := s.now.UnixMilli()
	for {
		entry, err := p.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			s.t.Fatalf("parsing the exposition: %v\n%s", err, buf.String())
		}
		if entry != textparse.EntrySeries {
			continue
		}
		_, _, v := p.Series()
		var lset labels.Labels
		p.Labels(&lset)
		b := labels.NewBuilder(lset)
		for k, val := range target {
			b.Set(k, val)
		}
		if _, err := app.Append(0, b.Labels(), ts, v); err != nil {
			s.t.Fatalf("append %s: %v", b.Labels(), err)
		}
	}
	if err := app.Commit(); err != nil {
		s.t.Fatal(err)
	}
}

// eval evaluates every group at s.now and records each alert's active
// instances. A rule whose evaluation failed fails the test: an expression
// the engine cannot run would otherwise look like one that never fires.
func (s *sim) eval() {
	s.t.Helper()
	for _, g := range s.groups {
		g.Eval(context.Background(), s.now)
		for _, r := range g.Rules() {
			if r.Health() != rules.HealthGood {
				s.t.Fatalf("rule %s at %v: health %s: %v", r.Name(), s.now.Sub(s.start), r.Health(), r.LastError())
			}
		}
		for _, ar := range g.AlertingRules() {
			var active []rules.Alert
			for _, a := range ar.ActiveAlerts() {
				active = append(active, *a)
			}
			s.timeline[ar.Name()] = append(s.timeline[ar.Name()], active)
		}
	}
}

// query runs an instant PromQL query at s.now (after the last tick).
func (s *sim) query(q string) promql.Vector {
	s.t.Helper()
	qry, err := s.engine.NewInstantQuery(context.Background(), s.store, nil, q, s.now.Add(-step))
	if err != nil {
		s.t.Fatalf("%s: %v", q, err)
	}
	defer qry.Close()
	res := qry.Exec(context.Background())
	if res.Err != nil {
		s.t.Fatalf("%s: %v", q, res.Err)
	}
	v, err := res.Vector()
	if err != nil {
		s.t.Fatalf("%s: %v", q, err)
	}
	return v
}

// alertsAt returns the instances of alert active after tick, whose labels
// include match.
func (s *sim) alertsAt(alert string, tick int, match map[string]string) []rules.Alert {
	s.t.Helper()
	ticks := s.timeline[alert]
	if ticks == nil {
		s.t.Fatalf("no alert %s in %s", alert, rulesFile)
	}
	var out []rules.Alert
	for _, a := range ticks[tick] {
		if hasLabels(a.Labels, match) {
			out = append(out, a)
		}
	}
	return out
}

// firstTick returns the first tick after which an instance of alert
// matching match was in state (-1: never).
func (s *sim) firstTick(alert string, state rules.AlertState, match map[string]string) int {
	s.t.Helper()
	for tick := range s.timeline[alert] {
		for _, a := range s.alertsAt(alert, tick, match) {
			if a.State == state {
				return tick
			}
		}
	}
	return -1
}

// everActive reports whether an instance of alert matching match was ever
// pending or firing.
func (s *sim) everActive(alert string, match map[string]string) bool {
	for tick := range s.timeline[alert] {
		if len(s.alertsAt(alert, tick, match)) > 0 {
			return true
		}
	}
	return false
}

// sentAlerts returns the alerts named alert handed to the notifier whose
// labels include match.
func (s *sim) sentAlerts(alert string, match map[string]string) []rules.Alert {
	var out []rules.Alert
	for _, a := range s.sent {
		if a.Labels.Get(labels.AlertName) == alert && hasLabels(a.Labels, match) {
			out = append(out, a)
		}
	}
	return out
}

func hasLabels(ls labels.Labels, match map[string]string) bool {
	for k, v := range match {
		if ls.Get(k) != v {
			return false
		}
	}
	return true
}

// labelNames returns the names of ls.
func labelNames(ls labels.Labels) []string {
	var names []string
	ls.Range(func(l labels.Label) { names = append(names, l.Name) })
	slices.Sort(names)
	return names
}
