package postgres_test

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/heraldwf/herald/heraldtype"
	"github.com/heraldwf/herald/history"
	"github.com/heraldwf/herald/storage"
	"github.com/heraldwf/herald/storage/postgres"
	"github.com/heraldwf/herald/storage/storagetest"
)

// BenchmarkEventRoundTrip measures the store's side of the round-trip scenario (bench/README.md)
// on 1 and 3 nodes (stores with their own pools on one schema): N instances
// start, each waits for one event, the events are raised and every instance
// completes. Every node claims and commits from many goroutines. One op is
// one instance (two turns). Commits are durable (synchronous_commit on)
// except in the sync=off runs.
func BenchmarkEventRoundTrip(b *testing.B) {
	for _, c := range []struct {
		nodes int
		sync  string
	}{{1, "on"}, {3, "on"}, {1, "off"}, {3, "off"}} {
		b.Run(fmt.Sprintf("nodes=%d/sync=%s", c.nodes, c.sync), func(b *testing.B) {
			nodes := c.nodes
			schema := newSchema(b)
			stores := make([]*postgres.Store, nodes)
			for i := range stores {
				stores[i] = open(b, schema, postgres.WithMaxConns(16), postgres.WithSynchronousCommit(c.sync))
			}
			ctx := context.Background()
			now := time.Now()
			const (
				writers     = 32 // goroutines creating and raising, over all nodes
				claimers    = 4  // claim loops per node
				commitsEach = 16 // turns per claim
				tenant      = "b"
			)
			parallel := func(n int, fn func(s *postgres.Store, i int)) {
				var wg sync.WaitGroup
				next := make(chan int)
				for w := range writers {
					wg.Add(1)
					go func() {
						defer wg.Done()
						for i := range next {
							fn(stores[w%nodes], i)
						}
					}()
				}
				for i := range n {
					next <- i
				}
				close(next)
				wg.Wait()
			}
			// runTurns claims and commits on every node until no work is
			// left; finish decides how each turn ends.
			runTurns := func(finish func(t *storage.Turn, p *storage.TurnCommitParams)) {
				var wg sync.WaitGroup
				for _, s := range stores {
					for range claimers {
						wg.Add(1)
						go func() {
							defer wg.Done()
							for {
								turns, err := s.TurnClaim(ctx, &storage.TurnClaimParams{Tenant: tenant, Now: now, Lease: time.Minute, Max: commitsEach})
								if err != nil {
									b.Error(err)
									return
								}
								if len(turns) == 0 {
									return
								}
								var cw sync.WaitGroup
								for _, t := range turns {
									cw.Add(1)
									go func() {
										defer cw.Done()
										ids := make([]int64, len(t.Messages))
										for i, m := range t.Messages {
											ids[i] = m.ID
										}
										p := &storage.TurnCommitParams{Tenant: tenant, InstanceID: t.Instance.ID, LockToken: t.LockToken,
											Execution: t.Instance.Execution, Now: now, ConsumedMessages: ids}
										finish(t, p)
										if _, err := s.TurnCommit(ctx, p); err != nil {
											b.Error(err)
										}
									}()
								}
								cw.Wait()
							}
						}()
					}
				}
				wg.Wait()
			}
			b.ResetTimer()
			start := time.Now()
			parallel(b.N, func(s *postgres.Store, i int) {
				if _, err := s.InstanceCreate(ctx, &storage.InstanceCreateParams{Tenant: tenant, ID: fmt.Sprint(i), Workflow: "wf", Now: now}); err != nil {
					b.Error(err)
				}
			})
			runTurns(func(t *storage.Turn, p *storage.TurnCommitParams) {
				e := history.Event{Seq: 2, Kind: history.EventSubscribed, Name: "go", Time: now}
				p.NewEvents, p.Status = []history.Event{e}, heraldtype.StatusRunning
			})
			parallel(b.N, func(s *postgres.Store, i int) {
				if _, err := s.EventRaise(ctx, &storage.EventRaiseParams{Tenant: tenant, InstanceID: fmt.Sprint(i), EventID: fmt.Sprint("e", i),
					Lane: history.LanePositional, Name: "go", Now: now}); err != nil {
					b.Error(err)
				}
			})
			runTurns(func(t *storage.Turn, p *storage.TurnCommitParams) {
				m := t.Messages[0]
				p.NewEvents = []history.Event{
					{Seq: 3, Kind: history.EventRaised, EventID: m.EventID, Name: m.Name, Time: now},
					{Seq: 4, Kind: history.ExecutionCompleted, Time: now},
				}
				p.Fates = []storage.FateUpdate{{EventID: m.EventID, Fate: history.FateDelivered, Execution: 1, OriginExecution: 1, WaitNumber: 1}}
				p.Status = heraldtype.StatusCompleted
			})
			el := time.Since(start)
			b.ReportMetric(float64(b.N)/el.Seconds(), "instances/s")
			b.ReportMetric(2*float64(b.N)/el.Seconds(), "turns/s")
		})
	}
}

// BenchmarkRaiseToResumed measures the isolated latency (bench/README.md): one node
// raises an event to an idle instance, and a worker on another node (its
// own store and pool, as another process would have) is woken by NOTIFY,
// claims the turn and commits it. One op is one raise; p50 and p99 are
// reported.
func BenchmarkRaiseToResumed(b *testing.B) {
	schema := newSchema(b)
	writer, worker := open(b, schema), open(b, schema)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	const tenant = "lat"
	now := time.Now()
	done := make(chan int, 1) // messages of each committed turn
	wake, unsubscribe := worker.SubscribeKinds(tenant, storage.WorkAll)
	defer unsubscribe()
	go func() {
		for ctx.Err() == nil {
			turns, err := worker.TurnClaim(ctx, &storage.TurnClaimParams{Tenant: tenant, Now: now, Max: 16})
			if err != nil {
				return
			}
			for _, t := range turns {
				ids := make([]int64, len(t.Messages))
				for i, m := range t.Messages {
					ids[i] = m.ID
				}
				if _, err := worker.TurnCommit(ctx, &storage.TurnCommitParams{Tenant: tenant, InstanceID: t.Instance.ID,
					LockToken: t.LockToken, Execution: t.Instance.Execution, Now: now, ConsumedMessages: ids}); err != nil {
					return
				}
				done <- len(ids)
			}
			if len(turns) == 0 {
				select {
				case <-wake:
				case <-ctx.Done():
				}
			}
		}
	}()
	if _, err := writer.InstanceCreate(ctx, &storage.InstanceCreateParams{Tenant: tenant, ID: "i", Workflow: "wf", Now: now}); err != nil {
		b.Fatal(err)
	}
	<-done // the kick
	lat := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for i := range b.N {
		start := time.Now()
		if _, err := writer.EventRaise(ctx, &storage.EventRaiseParams{Tenant: tenant, InstanceID: "i", EventID: fmt.Sprint("e", i),
			Lane: history.LanePositional, Name: "go", Now: now}); err != nil {
			b.Fatal(err)
		}
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			b.Fatal("the worker was not woken")
		}
		lat = append(lat, time.Since(start))
	}
	b.StopTimer()
	slices.Sort(lat)
	b.ReportMetric(float64(lat[len(lat)/2].Microseconds())/1000, "p50-ms")
	b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds())/1000, "p99-ms")
}

// BenchmarkCorrelated measures the correlated lane's hot paths (see
// storagetest.BenchCorrelated) with synchronous_commit on, and off, which
// takes the WAL flushes (most of the time, and of its noise) out; and,
// with flushes off, the same paths run by the Go rules
// (backend.RegisterWaits, backend.CorrelatedPut) instead of the
// one-statement SQL: the figures behind keeping the SQL on this backend.
func BenchmarkCorrelated(b *testing.B) {
	for _, sync := range []string{"on", "off"} {
		b.Run("sync="+sync, func(b *testing.B) {
			storagetest.BenchCorrelated(b, func(b *testing.B) storage.Store {
				return open(b, newSchema(b), postgres.WithSynchronousCommit(sync))
			})
		})
	}
	b.Run("sync=off/rules=go", func(b *testing.B) {
		storagetest.BenchCorrelated(b, func(b *testing.B) storage.Store {
			return open(b, newSchema(b), postgres.WithSynchronousCommit("off"), postgres.WithGoCorrelatedRules())
		})
	})
}
