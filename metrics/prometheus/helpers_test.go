package prometheus_test

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"
)

func gather(t *testing.T, reg *prometheus.Registry) []*dto.MetricFamily {
	t.Helper()
	fams, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	return fams
}

func mustCount(t *testing.T, reg *prometheus.Registry, name string) int {
	t.Helper()
	n, err := testutil.GatherAndCount(reg, name)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// value returns the counter or gauge value, or the histogram's sample
// count, of the series of metric whose labels are exactly labels (0 when
// there is none).
func value(fams []*dto.MetricFamily, metric string, labels map[string]string) float64 {
	for _, f := range fams {
		if f.GetName() != metric {
			continue
		}
	series:
		for _, m := range f.GetMetric() {
			if len(m.GetLabel()) != len(labels) {
				continue
			}
			for _, l := range m.GetLabel() {
				if v, ok := labels[l.GetName()]; !ok || v != l.GetValue() {
					continue series
				}
			}
			switch {
			case m.Counter != nil:
				return m.GetCounter().GetValue()
			case m.Gauge != nil:
				return m.GetGauge().GetValue()
			case m.Histogram != nil:
				return float64(m.GetHistogram().GetSampleCount())
			}
		}
	}
	return 0
}

// series returns the series of metric whose labels are exactly labels
// (nil when there is none).
func series(fams []*dto.MetricFamily, metric string, labels map[string]string) *dto.Metric {
	for _, f := range fams {
		if f.GetName() != metric {
			continue
		}
	next:
		for _, m := range f.GetMetric() {
			if len(m.GetLabel()) != len(labels) {
				continue
			}
			for _, l := range m.GetLabel() {
				if v, ok := labels[l.GetName()]; !ok || v != l.GetValue() {
					continue next
				}
			}
			return m
		}
	}
	return nil
}

// family returns the family named name (nil when the registry has none:
// a vector with no series is not gathered).
func family(fams []*dto.MetricFamily, name string) *dto.MetricFamily {
	for _, f := range fams {
		if f.GetName() == name {
			return f
		}
	}
	return nil
}
