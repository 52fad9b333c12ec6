package pattern_test

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/heraldwf/herald/bus/pattern"
	"github.com/heraldwf/herald/internal/busload"
)

// benchIndex builds 10,000 subscriptions of the shapes a bus sees, over
// 20 domains × 25 entities × 8 actions: 70 % exact types
// ("billing.invoice.paid"), 10 % "domain.entity.*", 5 % "domain.>",
// 5 % "*.entity.action", 5 % "domain.*.action", 5 % "domain.entity.>".
// It returns the index and 4,096 event types to publish, a tenth of them
// with a fourth, version segment.
func benchIndex(b *testing.B) (*pattern.Index[int], []string) {
	b.Helper()
	rng := rand.New(rand.NewPCG(4, 12))
	seg := func(kind string, n int) string { return fmt.Sprintf("%s%d", kind, rng.IntN(n)) }
	var x pattern.Index[int]
	for id := 0; x.Len() < 10_000; id++ {
		if _, err := x.Add(busload.Pattern(rng), id); err != nil {
			b.Fatal(err)
		}
	}
	events := make([]string, 4096)
	for i := range events {
		events[i] = seg("domain", 20) + "." + seg("entity", 25) + "." + seg("action", 8)
		if i%10 == 0 {
			events[i] += ".v2"
		}
	}
	return &x, events
}

// BenchmarkMatch10k matches one event type against 10,000 subscriptions
// (issue 12's target: median under 10 µs per event). "append" reuses the
// result slice, as a dispatcher would; "match" allocates it; "latency"
// times each call alone and reports the median and p99.
func BenchmarkMatch10k(b *testing.B) {
	x, events := benchIndex(b)
	b.Run("append", func(b *testing.B) {
		var buf []int
		total := 0
		b.ReportAllocs()
		i := 0
		for b.Loop() {
			buf, _ = x.AppendMatch(buf[:0], events[i%len(events)])
			total += len(buf)
			i++
		}
		b.ReportMetric(float64(total)/float64(i), "matches/op")
	})
	b.Run("match", func(b *testing.B) {
		b.ReportAllocs()
		i := 0
		for b.Loop() {
			if _, err := x.Match(events[i%len(events)]); err != nil {
				b.Fatal(err)
			}
			i++
		}
	})
	b.Run("latency", func(b *testing.B) {
		var buf []int
		var took []time.Duration
		i := 0
		for b.Loop() {
			start := time.Now()
			buf, _ = x.AppendMatch(buf[:0], events[i%len(events)])
			took = append(took, time.Since(start))
			i++
		}
		slices.Sort(took)
		b.ReportMetric(float64(took[len(took)/2].Nanoseconds()), "p50-ns")
		b.ReportMetric(float64(took[len(took)*99/100].Nanoseconds()), "p99-ns")
	})
}

// BenchmarkAdd10k measures building the 10,000-subscription index.
func BenchmarkAdd10k(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		benchIndex(b)
	}
}
