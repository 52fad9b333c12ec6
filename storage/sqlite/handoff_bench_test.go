package sqlite_test

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/heraldwf/herald/heraldtype"
	"github.com/heraldwf/herald/history"
	"github.com/heraldwf/herald/storage"
)

// BenchmarkHandOff measures one event's store calls on an idle store, one
// at a time: a raise and then a claim (claim), a raise that hands off its
// instance in its result (handoff), or to OnClaimed at its commit, the
// turn committed while the raise is flushed (early); each op ends with the
// turn's commit.
func BenchmarkHandOff(b *testing.B) {
	for _, mode := range []string{"claim", "handoff", "early"} {
		b.Run(mode, func(b *testing.B) {
			ctx := context.Background()
			s := open(b, filepath.Join(b.TempDir(), "bench.db"))
			now := time.Now()
			commit := func(t *storage.Turn, seq int) {
				ids := make([]int64, len(t.Messages))
				for i, m := range t.Messages {
					ids[i] = m.ID
				}
				if _, err := s.TurnCommit(ctx, &storage.TurnCommitParams{Tenant: "b", InstanceID: t.Instance.ID, LockToken: t.LockToken,
					Execution: t.Instance.Execution, Now: now, ConsumedMessages: ids, Status: heraldtype.StatusRunning,
					NewEvents: []history.Event{{Seq: seq, Kind: history.TimerCreated, Time: now}}}); err != nil {
					b.Fatal(err)
				}
			}
			for i := range b.N {
				if _, err := s.InstanceCreate(ctx, &storage.InstanceCreateParams{Tenant: "b", ID: fmt.Sprint("i", i), Workflow: "wf", Input: json.RawMessage(`1`), Now: now}); err != nil {
					b.Fatal(err)
				}
				ts, err := s.TurnClaim(ctx, &storage.TurnClaimParams{Tenant: "b", Now: now, Lease: time.Minute, Max: 1})
				if err != nil || len(ts) != 1 {
					b.Fatal(ts, err)
				}
				commit(ts[0], 2)
			}
			b.ResetTimer()
			for i := range b.N {
				p := &storage.EventRaiseParams{Tenant: "b", InstanceID: fmt.Sprint("i", i), EventID: fmt.Sprint("e", i), Lane: history.LanePositional,
					Name: "go", Payload: json.RawMessage(`1`), Now: now}
				if mode != "claim" {
					p.Claim = &storage.TurnClaimParams{Lease: time.Minute}
				}
				var committed chan struct{}
				if mode == "early" {
					committed = make(chan struct{})
					p.OnClaimed = func(t *storage.Turn) {
						go func() {
							defer close(committed)
							commit(t, 3)
						}()
					}
				}
				res, err := s.EventRaise(ctx, p)
				if err != nil {
					b.Fatal(err)
				}
				if mode == "early" {
					if res.Turn != nil {
						b.Fatal("early: the turn came in the result")
					}
					<-committed
					continue
				}
				t := res.Turn
				if t == nil {
					ts, err := s.TurnClaim(ctx, &storage.TurnClaimParams{Tenant: "b", Now: now, Lease: time.Minute, Max: 1})
					if err != nil || len(ts) != 1 {
						b.Fatal(ts, err)
					}
					t = ts[0]
				}
				commit(t, 3)
			}
		})
	}
}
