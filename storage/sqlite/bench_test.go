package sqlite_test

import (
	"context"
	"fmt"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/heraldwf/herald/heraldtype"
	"github.com/heraldwf/herald/history"
	"github.com/heraldwf/herald/storage"
	"github.com/heraldwf/herald/storage/sqlite"
	"github.com/heraldwf/herald/storage/storagetest"
)

// BenchmarkEventRoundTrip measures the store's side of the round-trip scenario (bench/README.md):
// N instances start, each waits for one event, the events are raised and
// every instance completes. Writes come from many goroutines so the writer
// can merge them (group commit). One op is one instance.
func BenchmarkEventRoundTrip(b *testing.B) {
	for _, mode := range []sqlite.Synchronous{sqlite.SynchronousFull, sqlite.SynchronousNormal} {
		b.Run(string(mode), func(b *testing.B) {
			ctx := context.Background()
			s := open(b, filepath.Join(b.TempDir(), "bench.db"), sqlite.WithSynchronous(mode))
			now := time.Now()
			const workers = 32
			parallel := func(n int, fn func(i int)) {
				var wg sync.WaitGroup
				next := make(chan int)
				for range workers {
					wg.Add(1)
					go func() {
						defer wg.Done()
						for i := range next {
							fn(i)
						}
					}()
				}
				for i := range n {
					next <- i
				}
				close(next)
				wg.Wait()
			}
			// runTurns claims and commits until no work is left; finish
			// decides how each turn ends.
			runTurns := func(finish func(t *storage.Turn, p *storage.TurnCommitParams)) {
				var wg sync.WaitGroup
				for range workers / 4 {
					wg.Add(1)
					go func() {
						defer wg.Done()
						for {
							turns, err := s.TurnClaim(ctx, &storage.TurnClaimParams{Tenant: "b", Now: now, Lease: time.Minute, Max: 16})
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
									p := &storage.TurnCommitParams{Tenant: "b", InstanceID: t.Instance.ID, LockToken: t.LockToken,
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
				wg.Wait()
			}
			b.ResetTimer()
			start := time.Now()
			parallel(b.N, func(i int) {
				if _, err := s.InstanceCreate(ctx, &storage.InstanceCreateParams{Tenant: "b", ID: fmt.Sprint(i), Workflow: "wf", Now: now}); err != nil {
					b.Error(err)
				}
			})
			runTurns(func(t *storage.Turn, p *storage.TurnCommitParams) {
				e := history.Event{Seq: 2, Kind: history.EventSubscribed, Name: "go", Time: now}
				p.NewEvents, p.Status = []history.Event{e}, heraldtype.StatusRunning
			})
			parallel(b.N, func(i int) {
				if _, err := s.EventRaise(ctx, &storage.EventRaiseParams{Tenant: "b", InstanceID: fmt.Sprint(i), EventID: fmt.Sprint("e", i),
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
			st := s.Stats()
			b.ReportMetric(float64(st.Writes)/float64(st.Commits), "writes/commit")
		})
	}
}

// BenchmarkPointRead is the read every raise makes (its event definition,
// here one that does not exist) and an instance lookup, on the read pool.
func BenchmarkPointRead(b *testing.B) {
	ctx := context.Background()
	s := open(b, filepath.Join(b.TempDir(), "bench.db"))
	if _, err := s.InstanceCreate(ctx, &storage.InstanceCreateParams{Tenant: "t", ID: "a", Workflow: "wf"}); err != nil {
		b.Fatal(err)
	}
	b.Run("definition", func(b *testing.B) {
		for b.Loop() {
			if _, err := s.EventDefinitionGet(ctx, &storage.EventDefinitionGetParams{Tenant: "t", Name: "go"}); err == nil {
				b.Fatal("found")
			}
		}
	})
	b.Run("instance", func(b *testing.B) {
		for b.Loop() {
			if _, err := s.InstanceGet(ctx, &storage.InstanceGetParams{Tenant: "t", ID: "a"}); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// BenchmarkCorrelated measures the correlated lane's hot paths (see
// storagetest.BenchCorrelated) with synchronous=FULL, and with OFF, which
// takes the disk's flushes (most of the time, and of its noise) out.
func BenchmarkCorrelated(b *testing.B) {
	for _, mode := range []sqlite.Synchronous{sqlite.SynchronousFull, sqlite.SynchronousOff} {
		b.Run("sync="+string(mode), func(b *testing.B) {
			storagetest.BenchCorrelated(b, func(b *testing.B) storage.Store {
				return open(b, filepath.Join(b.TempDir(), "bench.db"), sqlite.WithSynchronous(mode))
			})
		})
	}
}
