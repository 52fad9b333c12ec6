package bus_test

import (
	"slices"
	"testing"
	"time"

	"github.com/heraldwf/herald/bus"
	"github.com/heraldwf/herald/internal/busload"
)

// BenchmarkRoute10k routes one event against 10,000 subscriptions with
// Router.Route: the pattern trie, then the filters of the matched
// subscriptions (the event's data decoded once if any has one). The
// target (docs/bus.md, seed 004): median under 10 µs per event. "route"
// reports ns/op and allocations; "latency" times each call alone and
// reports the median, p95 and p99 as metrics.
func BenchmarkRoute10k(b *testing.B) {
	subs := busload.Subscriptions(10_000)
	r := bus.NewRouter(1, subs)
	if r.Len() != len(subs) {
		b.Fatalf("router indexed %d of %d subscriptions", r.Len(), len(subs))
	}
	evs := busload.Events(4096)
	b.Run("route", func(b *testing.B) {
		b.ReportAllocs()
		i, decisions, matched := 0, 0, 0
		for b.Loop() {
			ds := r.Route(evs[i%len(evs)])
			decisions += len(ds)
			for _, d := range ds {
				if d.Matched {
					matched++
				}
			}
			i++
		}
		b.ReportMetric(float64(decisions)/float64(i), "decisions/op")
		b.ReportMetric(float64(matched)/float64(i), "matched/op")
	})
	b.Run("latency", func(b *testing.B) {
		var took []time.Duration
		i := 0
		for b.Loop() {
			start := time.Now()
			r.Route(evs[i%len(evs)])
			took = append(took, time.Since(start))
			i++
		}
		slices.Sort(took)
		b.ReportMetric(float64(took[len(took)/2].Nanoseconds()), "p50-ns")
		b.ReportMetric(float64(took[len(took)*95/100].Nanoseconds()), "p95-ns")
		b.ReportMetric(float64(took[len(took)*99/100].Nanoseconds()), "p99-ns")
	})
}

// BenchmarkNewRouter10k measures building the router of 10,000
// subscriptions (done when a tenant's subscriptions change).
func BenchmarkNewRouter10k(b *testing.B) {
	subs := busload.Subscriptions(10_000)
	b.ReportAllocs()
	for b.Loop() {
		bus.NewRouter(1, subs)
	}
}

// TestRouterSubsShape guards the benchmark's inputs: every generated
// subscription is indexed, the events match some subscriptions and not
// others, and filters both pass and refuse.
func TestRouterSubsShape(t *testing.T) {
	subs := busload.Subscriptions(10_000)
	r := bus.NewRouter(1, subs)
	if r.Len() != len(subs) {
		t.Fatalf("router indexed %d of %d subscriptions", r.Len(), len(subs))
	}
	var none, matched, filtered int
	for _, ev := range busload.Events(1000) {
		ds := r.Route(ev)
		if len(ds) == 0 {
			none++
		}
		for _, d := range ds {
			if d.Matched {
				matched++
			} else {
				filtered++
				if d.FilteredBy == "" {
					t.Fatalf("event %s: %s filtered without a reason", ev.ID, d.Subscription)
				}
			}
		}
	}
	if none == 0 || matched == 0 || filtered == 0 {
		t.Fatalf("inputs too uniform: %d events with no match, %d matched, %d filtered decisions", none, matched, filtered)
	}
}
