package postgres_test

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/heraldwf/herald/heraldtype"
	"github.com/heraldwf/herald/storage"
	"github.com/heraldwf/herald/storage/postgres"
)

// BenchmarkBusPublish measures BusPublish from 32 goroutines on one store
// (durable commits): one op is one event stored. Concurrent publishes share
// transactions (publish batches).
func BenchmarkBusPublish(b *testing.B) {
	s := open(b, newSchema(b), postgres.WithMaxConns(16))
	ctx := context.Background()
	data := json.RawMessage(`{"order_id":"o-1","total":42}`)
	var n atomic.Int64
	b.SetParallelism(16) // 16 goroutines per GOMAXPROCS
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			i := n.Add(1)
			if _, err := s.BusPublish(ctx, &storage.BusPublishParams{Tenant: "b",
				Event: storage.BusPublishEvent{ID: fmt.Sprint("e", i), Type: "order.created", Data: data, Source: "client"}}); err != nil {
				b.Error(err)
				return
			}
		}
	})
}

// BenchmarkBusPipeline measures the bus's store calls end to end on 1 and
// 2 nodes: b.N events are published, routed to two subscriptions and each
// execution claimed and finished (succeeded), by 4 workers per node. One
// op is one event (two executions).
func BenchmarkBusPipeline(b *testing.B) {
	for _, nodes := range []int{1, 2} {
		b.Run(fmt.Sprintf("nodes=%d", nodes), func(b *testing.B) {
			schema := newSchema(b)
			stores := make([]*postgres.Store, nodes)
			for i := range stores {
				stores[i] = open(b, schema, postgres.WithMaxConns(8))
			}
			ctx := context.Background()
			now := time.Now()
			b.ResetTimer()
			var wg sync.WaitGroup
			var next atomic.Int64
			for w := range 16 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					s := stores[w%nodes]
					for i := next.Add(1); i <= int64(b.N); i = next.Add(1) {
						if _, err := s.BusPublish(ctx, &storage.BusPublishParams{Tenant: "b", Now: now,
							Event: storage.BusPublishEvent{ID: fmt.Sprint("e", i), Type: "x", Data: json.RawMessage(`1`)}}); err != nil {
							b.Error(err)
							return
						}
					}
				}()
			}
			var done atomic.Int64
			for _, s := range stores {
				for range 4 {
					wg.Add(1)
					go func() {
						defer wg.Done()
						for done.Load() < int64(2*b.N) {
							if _, err := s.BusRoute(ctx, &storage.BusRouteParams{Tenant: "b", Now: now, Max: 100, Route: routeTo("s1", "s2")}); err != nil {
								b.Error(err)
								return
							}
							cs, err := s.BusClaim(ctx, &storage.BusClaimParams{Tenant: "b", Now: now, Max: 32, Lease: time.Minute})
							if err != nil {
								b.Error(err)
								return
							}
							if len(cs) == 0 {
								continue
							}
							rs := make([]storage.BusResult, len(cs))
							for i, c := range cs {
								rs[i] = storage.BusResult{Execution: c.Execution.ID, LockToken: c.LockToken, Outcome: storage.BusSucceeded,
									Attempt: heraldtype.Attempt{Number: c.Execution.Attempts, Succeeded: true, StartedAt: now}}
							}
							if _, err := s.BusFinish(ctx, &storage.BusFinishParams{Tenant: "b", Now: now, Results: rs}); err != nil {
								b.Error(err)
								return
							}
							done.Add(int64(len(cs)))
						}
					}()
				}
			}
			wg.Wait()
		})
	}
}
