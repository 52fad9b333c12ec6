package postgres_test

import (
	"context"
	"fmt"
	"time"

	"github.com/heraldwf/herald/storage"
	"github.com/heraldwf/herald/storage/postgres"
)

// A worker node: it claims turns as long as there are some, and sleeps until
// a write anywhere in the cluster wakes it (NOTIFY) or the next timer is due
// (NextWake), polling now and then in case a wake-up was lost.
func Example() {
	ctx := context.Background()
	store, err := postgres.Open(ctx, "postgres://herald@db.internal:5432/herald?sslmode=require",
		postgres.WithSchema("herald"), postgres.WithMaxConns(20))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer store.Close()

	wake, cancel := store.SubscribeKinds("default", storage.WorkAll)
	defer cancel()
	for {
		turns, err := store.TurnClaim(ctx, &storage.TurnClaimParams{Tenant: "default", Lease: 30 * time.Second, Max: 16})
		if err != nil {
			fmt.Println(err)
			return
		}
		for _, turn := range turns {
			_ = turn // replay the workflow, then store.TurnCommit(...)
		}
		if len(turns) > 0 {
			continue
		}
		sleep := 5 * time.Second // the polling fallback
		if at, ok, err := store.NextWake(ctx, &storage.NextWakeParams{Tenant: "default"}); err == nil && ok {
			sleep = min(sleep, max(0, time.Until(at)))
		}
		select {
		case <-wake:
		case <-time.After(sleep):
		}
	}
}
