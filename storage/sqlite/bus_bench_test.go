package sqlite_test

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/heraldwf/herald/heraldtype"
	"github.com/heraldwf/herald/storage"
	"github.com/heraldwf/herald/storage/sqlite"
)

// benchData is a typical bus event's data.
var benchData = json.RawMessage(`{"order_id":"ord-123456","customer":"c-42","total":129.95,"items":[{"sku":"A1","qty":2},{"sku":"B7","qty":1}]}`)

// BenchmarkBusPublish measures the bus's hot path: BusPublish from many
// goroutines at once (the writer merges them: group commit). One op is one
// published event; publishes/s is the store's throughput.
func BenchmarkBusPublish(b *testing.B) {
	for _, mode := range []sqlite.Synchronous{sqlite.SynchronousFull, sqlite.SynchronousNormal} {
		b.Run(string(mode), func(b *testing.B) {
			ctx := context.Background()
			s := open(b, filepath.Join(b.TempDir(), "bench.db"), sqlite.WithSynchronous(mode))
			var n atomic.Int64
			now := time.Now()
			b.SetParallelism(32) // 32 publishers per CPU
			b.ResetTimer()
			start := time.Now()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					i := n.Add(1)
					if _, err := s.BusPublish(ctx, &storage.BusPublishParams{Tenant: "b", Now: now,
						Event: storage.BusPublishEvent{ID: fmt.Sprint("e", i), Type: "order.placed", Data: benchData, Source: "client"}}); err != nil {
						b.Error(err)
						return
					}
				}
			})
			b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "publishes/s")
			st := s.Stats()
			b.ReportMetric(float64(st.Writes)/float64(st.Commits), "writes/commit")
		})
	}
}

// BenchmarkBusPipeline measures the store's side of an event's way through
// the bus: N events published, routed (each to two subscriptions), their
// executions claimed and finished, by concurrent workers. One op is one
// event.
func BenchmarkBusPipeline(b *testing.B) {
	ctx := context.Background()
	s := open(b, filepath.Join(b.TempDir(), "bench.db"))
	now := time.Now()
	route := func(*storage.BusEvent) []storage.BusRouteDecision {
		return []storage.BusRouteDecision{{Subscription: "a", Matched: true}, {Subscription: "b", Matched: true}}
	}
	b.ResetTimer()
	start := time.Now()
	var wg sync.WaitGroup
	next := make(chan int)
	for range 32 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				if _, err := s.BusPublish(ctx, &storage.BusPublishParams{Tenant: "b", Now: now,
					Event: storage.BusPublishEvent{ID: fmt.Sprint("e", i), Type: "order.placed", Data: benchData}}); err != nil {
					b.Error(err)
				}
			}
		}()
	}
	for i := range b.N {
		next <- i
	}
	close(next)
	wg.Wait()
	for {
		n, err := s.BusRoute(ctx, &storage.BusRouteParams{Tenant: "b", Max: 500, Now: now, Route: route})
		if err != nil {
			b.Fatal(err)
		}
		if n == 0 {
			break
		}
	}
	var done atomic.Int64
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				cs, err := s.BusClaim(ctx, &storage.BusClaimParams{Tenant: "b", Max: 16, Now: now, Lease: time.Minute})
				if err != nil {
					b.Error(err)
					return
				}
				if len(cs) == 0 {
					return
				}
				rs := make([]storage.BusResult, len(cs))
				for i, c := range cs {
					rs[i] = storage.BusResult{Execution: c.Execution.ID, LockToken: c.LockToken, Outcome: storage.BusSucceeded,
						Attempt: heraldtype.Attempt{Number: 1, Succeeded: true, StartedAt: now, Duration: heraldtype.Duration(time.Millisecond)}}
				}
				if _, err := s.BusFinish(ctx, &storage.BusFinishParams{Tenant: "b", Results: rs, Now: now}); err != nil {
					b.Error(err)
					return
				}
				done.Add(int64(len(cs)))
			}
		}()
	}
	wg.Wait()
	if got := done.Load(); got != int64(2*b.N) {
		b.Fatalf("finished %d executions, want %d", got, 2*b.N)
	}
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "events/s")
}
