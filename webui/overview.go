package webui

import (
	"net/http"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

// The overview's numbers are read from the registry /metrics serves
// (Options.Metrics), summed over the metric's series — those of the
// session's tenant when the metrics carry a tenant label — so they are
// /metrics' numbers. A sample is taken at most every sampleEvery, when a
// page asks; "the last minutes" are the differences from the oldest sample
// kept within the window.

const (
	sampleEvery  = 2 * time.Second
	sampleWindow = 15 * time.Minute
)

// overviewMetric is one row of the overview.
type overviewMetric struct {
	Key   string
	Label string
	// Names are the metrics summed; Match keeps series whose labels
	// include these values.
	Names []string
	Match map[string]string
	Gauge bool
}

var overviewMetrics = []overviewMetric{
	{Key: "accepted", Label: "Events accepted (raise, enqueue, correlated)", Names: []string{"herald_events_accepted_total"}},
	{Key: "delivered", Label: "Events delivered to a wait", Names: []string{"herald_events_delivered_total"}},
	{Key: "dropped", Label: "Events dropped", Names: []string{"herald_events_dropped_total"}},
	{Key: "turns", Label: "Turns committed", Names: []string{"herald_turns_total"}, Match: map[string]string{"outcome": "committed"}},
	{Key: "published", Label: "Bus events published", Names: []string{"herald_bus_published_total"}, Match: map[string]string{"result": "accepted"}},
	{Key: "succeeded", Label: "Bus executions succeeded", Names: []string{"executions_success_total"}},
	{Key: "failed", Label: "Failures: bus execution attempts failed", Names: []string{"executions_failed_total"}},
	{Key: "activity_failed", Label: "Failures: activity attempts failed", Names: []string{"herald_activity_attempts_total"}, Match: map[string]string{"outcome": "failed"}},
	{Key: "dlq", Label: "Dead letters (executions dead-lettered)", Names: []string{"dlq_events_total"}},
	{Key: "queue_depth", Label: "Bus queue depth (this server)", Names: []string{"queue_depth_gauge"}, Gauge: true},
}

type sample struct {
	at     time.Time
	tenant map[string]map[string]float64 // tenant ("" = all) → key → value
}

type sampler struct {
	g   prometheus.Gatherer
	now func() time.Time

	mu      sync.Mutex
	samples []sample
}

func newSampler(g prometheus.Gatherer, now func() time.Time) *sampler {
	return &sampler{g: g, now: now}
}

// sample gathers now, at most every sampleEvery, and returns the latest
// sample (nil without metrics or when gathering fails).
func (s *sampler) sample() *sample {
	if s.g == nil {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.now()
	if n := len(s.samples); n > 0 && now.Sub(s.samples[n-1].at) < sampleEvery {
		return &s.samples[n-1]
	}
	mfs, err := s.g.Gather()
	if err != nil {
		return nil
	}
	byName := map[string]*dto.MetricFamily{}
	for _, mf := range mfs {
		byName[mf.GetName()] = mf
	}
	sm := sample{at: now, tenant: map[string]map[string]float64{}}
	add := func(tenant, key string, v float64) {
		m := sm.tenant[tenant]
		if m == nil {
			m = map[string]float64{}
			sm.tenant[tenant] = m
		}
		m[key] += v
	}
	for _, om := range overviewMetrics {
		add("", om.Key, 0)
		for _, name := range om.Names {
			mf := byName[name]
			if mf == nil {
				continue
			}
			for _, m := range mf.Metric {
				labels := map[string]string{}
				for _, lp := range m.Label {
					labels[lp.GetName()] = lp.GetValue()
				}
				ok := true
				for k, v := range om.Match {
					if labels[k] != v {
						ok = false
					}
				}
				if !ok {
					continue
				}
				var v float64
				switch {
				case m.Counter != nil:
					v = m.Counter.GetValue()
				case m.Gauge != nil:
					v = m.Gauge.GetValue()
				}
				add("", om.Key, v)
				if t, ok := labels["tenant"]; ok {
					add("tenant:"+t, om.Key, v)
				}
			}
		}
	}
	s.samples = append(s.samples, sm)
	cut := 0
	for cut < len(s.samples)-1 && now.Sub(s.samples[cut].at) > sampleWindow {
		cut++
	}
	s.samples = append([]sample(nil), s.samples[cut:]...)
	return &s.samples[len(s.samples)-1]
}

// since returns the oldest sample taken at most d ago (nil if none but
// the latest).
func (s *sampler) since(d time.Duration) *sample {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.now()
	for i := range s.samples[:max(len(s.samples)-1, 0)] {
		if now.Sub(s.samples[i].at) <= d {
			return &s.samples[i]
		}
	}
	return nil
}

type overviewRow struct {
	Key, Label string
	Gauge      bool
	Total      float64
	Last1m     *float64
	Last5m     *float64
	PerMinute  *float64 // over the longest span sampled within 5 minutes
}

type overviewData struct {
	Configured bool
	Scope      string // "tenant t" or "all tenants"
	At         time.Time
	Rows       []overviewRow
}

func (u *UI) overviewData(s *session) *overviewData {
	d := &overviewData{}
	latest := u.overview.sample()
	if latest == nil {
		return d
	}
	d.Configured, d.At = true, latest.at
	scope := "tenant:" + s.tenant
	d.Scope = "tenant " + s.tenant
	if _, ok := latest.tenant[scope]; !ok && !hasTenantLabels(latest) {
		scope, d.Scope = "", "all tenants (the metrics carry no tenant label)"
	}
	val := func(sm *sample, om overviewMetric) float64 {
		if om.Gauge {
			return sm.tenant[""][om.Key] // runtime-wide
		}
		return sm.tenant[scope][om.Key]
	}
	s1, s5 := u.overview.since(time.Minute), u.overview.since(5*time.Minute)
	for _, om := range overviewMetrics {
		row := overviewRow{Key: om.Key, Label: om.Label, Gauge: om.Gauge, Total: val(latest, om)}
		if !om.Gauge {
			if s1 != nil {
				v := row.Total - val(s1, om)
				row.Last1m = &v
			}
			if s5 != nil {
				v := row.Total - val(s5, om)
				row.Last5m = &v
				if span := latest.at.Sub(s5.at).Minutes(); span > 0 {
					pm := v / span
					row.PerMinute = &pm
				}
			}
		}
		d.Rows = append(d.Rows, row)
	}
	return d
}

func hasTenantLabels(sm *sample) bool {
	for k := range sm.tenant {
		if k != "" {
			return true
		}
	}
	return false
}

func (u *UI) overviewPage(w http.ResponseWriter, r *http.Request, s *session) {
	u.render(w, r, http.StatusOK, "overview", s, &pageData{Title: "Overview", Nav: "overview", Data: u.overviewData(s)})
}

func (u *UI) overviewLive(w http.ResponseWriter, r *http.Request, s *session) {
	u.render(w, r, http.StatusOK, "overview_live", s, &pageData{Data: u.overviewData(s)})
}
