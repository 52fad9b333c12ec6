package storagetest

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/heraldwf/herald/heraldtype"
	"github.com/heraldwf/herald/storage"
)

// BenchCorrelated measures the correlated lane's two hot paths one call at
// a time (no concurrency, so every round trip a backend adds shows): a
// CorrelatedPut that delivers to a waiting instance (fan-out or
// delete-after-first) or stores the event for no one, and a TurnCommit that
// registers a correlated wait, delivered a stored event at once or stored
// as a marker. One op is one put or one commit; the setup of each op
// (instances, claims, markers, stored events) is outside the timer.
// newStore returns an empty store, closed by the caller.
func BenchCorrelated(b *testing.B, newStore func(b *testing.B) storage.Store) {
	payload := json.RawMessage(`{"order":42,"note":"benchmark"}`)
	for _, c := range []struct {
		name   string
		put    bool // measure the put, else the commit with the wait
		waiter bool // a put: an instance waits; a commit: an event is stored
		daf    bool
	}{
		{"Put/none", true, false, false},
		{"Put/fanout", true, true, false},
		{"Put/deleteAfterFirst", true, true, true},
		{"Wait/marker", false, false, false},
		{"Wait/stored", false, true, false},
		{"Wait/storedDeleteAfterFirst", false, true, true},
	} {
		b.Run(c.name, func(b *testing.B) {
			s := newStore(b)
			ctx := context.Background()
			const tenant = "bench"
			now := t0
			put := func(key string) {
				if _, err := s.CorrelatedPut(ctx, &storage.CorrelatedPutParams{Tenant: tenant, Def: "order", Key: key,
					Payload: payload, DeleteAfterFirst: c.daf, Now: now}); err != nil {
					b.Fatal(err)
				}
			}
			key := func(i int) string { return fmt.Sprintf("k%07d", i) }
			// Every instance's first turn, claimed.
			turns := make([]*storage.Turn, 0, b.N)
			if !c.put || c.waiter {
				for i := range b.N {
					if _, err := s.InstanceCreate(ctx, &storage.InstanceCreateParams{Tenant: tenant, ID: key(i), Workflow: "wf", Now: now}); err != nil {
						b.Fatal(err)
					}
				}
				for len(turns) < b.N {
					got, err := s.TurnClaim(ctx, &storage.TurnClaimParams{Tenant: tenant, Now: now, Lease: time.Hour, Max: 500})
					if err != nil {
						b.Fatal(err)
					}
					if len(got) == 0 {
						b.Fatalf("claimed %d turns of %d", len(turns), b.N)
					}
					turns = append(turns, got...)
				}
			}
			commit := func(t *storage.Turn) {
				ids := make([]int64, len(t.Messages))
				for i, m := range t.Messages {
					ids[i] = m.ID
				}
				p := &storage.TurnCommitParams{Tenant: tenant, InstanceID: t.Instance.ID, LockToken: t.LockToken,
					Execution: t.Instance.Execution, Now: now, ConsumedMessages: ids, Status: heraldtype.StatusRunning,
					CorrelatedWaits: []storage.CorrelatedWait{{TaskSeq: 1, Def: "order", Key: t.Instance.ID, DeleteAfterFirst: c.daf}}}
				if _, err := s.TurnCommit(ctx, p); err != nil {
					b.Fatal(err)
				}
			}
			if c.put {
				for _, t := range turns {
					commit(t) // the marker the put delivers to
				}
				b.ResetTimer()
				for i := range b.N {
					put(key(i))
				}
				return
			}
			if c.waiter {
				for i := range b.N {
					put(key(i))
				}
			}
			b.ResetTimer()
			for _, t := range turns {
				commit(t)
			}
		})
	}
}
