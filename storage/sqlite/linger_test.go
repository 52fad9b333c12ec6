package sqlite

import (
	"context"
	"encoding/json"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/heraldwf/herald/heraldtype"
	"github.com/heraldwf/herald/history"
	"github.com/heraldwf/herald/storage"
)

// openLinger opens a store whose syncer waits up to linger for a
// handed-off turn, and counts its fsyncs of the WAL.
func openLinger(t *testing.T, linger time.Duration) (*Store, *atomic.Int64) {
	t.Helper()
	s, err := Open(context.Background(), filepath.Join(t.TempDir(), "l.db"), func(c *config) { c.maxLinger = linger })
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	if s.syncq == nil {
		t.Fatal("FULL store runs without the sync pipeline")
	}
	var syncs atomic.Int64
	real := s.syncFn
	s.syncFn = func() error { syncs.Add(1); return real() }
	if err := create(context.Background(), s, "i"); err != nil {
		t.Fatal(err)
	}
	return s, &syncs
}

// raiseEarly raises an event for instance i with a hand-off and OnClaimed,
// which passes the turn to then on a goroutine of its own. It returns the
// raise's error, or fails the test if the raise is not answered within a
// generous bound (the syncer kept lingering).
func raiseEarly(t *testing.T, s *Store, eventID string, then func(*storage.Turn)) (*storage.EventRaiseResult, int) {
	t.Helper()
	calls := 0
	p := &storage.EventRaiseParams{Tenant: "t", InstanceID: "i", EventID: eventID, Lane: history.LanePositional,
		Name: "go", Payload: json.RawMessage(`1`), Claim: &storage.TurnClaimParams{Lease: time.Minute},
		OnClaimed: func(tt *storage.Turn) {
			calls++
			go then(tt)
		}}
	type answer struct {
		res *storage.EventRaiseResult
		err error
	}
	done := make(chan answer, 1)
	go func() {
		res, err := s.EventRaise(context.Background(), p)
		done <- answer{res, err}
	}()
	select {
	case a := <-done:
		if a.err != nil {
			t.Fatalf("EventRaise: %v", a.err)
		}
		return a.res, calls
	case <-time.After(30 * time.Second):
		t.Fatal("EventRaise not answered: the syncer waits for a turn that came back")
		return nil, 0
	}
}

// A raise that hands its turn over early and the turn's commit are made
// durable by one fsync: the syncer holds the raise's flush until the
// turn's commit has committed (the linger bound here is a minute, so a
// syncer that did not wait would show two fsyncs, and one that missed the
// commit would not answer).
func TestHandOffRaiseAndCommitShareOneFsync(t *testing.T) {
	s, syncs := openLinger(t, time.Minute)
	before, statsBefore := syncs.Load(), s.Stats().Syncs
	committed := make(chan error, 1)
	var turn *storage.Turn
	res, calls := raiseEarly(t, s, "e1", func(tt *storage.Turn) {
		turn = tt
		_, err := s.TurnCommit(context.Background(), &storage.TurnCommitParams{Tenant: "t", InstanceID: "i",
			LockToken: tt.LockToken, Execution: tt.Instance.Execution, Status: heraldtype.StatusRunning,
			ConsumedMessages: messageIDs(tt), NewEvents: []history.Event{{Seq: 2, Kind: history.TimerCreated, Time: time.Now()}}})
		committed <- err
	})
	if calls != 1 || res.Turn != nil {
		t.Fatalf("OnClaimed called %d times, result's turn %v: want the turn through OnClaimed only", calls, res.Turn)
	}
	if err := <-committed; err != nil {
		t.Fatalf("TurnCommit of the handed-off turn: %v", err)
	}
	if n := len(turn.Messages); n != 2 || turn.Messages[1].EventID != "e1" {
		t.Fatalf("handed-off turn's messages: %+v, want the kick and e1", turn.Messages)
	}
	if n := syncs.Load() - before; n != 1 {
		t.Fatalf("%d fsyncs for the raise and its turn's commit, want 1", n)
	}
	if n := s.Stats().Syncs - statsBefore; n != 1 {
		t.Fatalf("Stats().Syncs moved by %d, want 1", n)
	}
	if m := s.linger.Load(); m != nil {
		t.Fatalf("linger mark %+v left after the turn came back", m)
	}
	if ts, err := s.TurnClaim(context.Background(), &storage.TurnClaimParams{Tenant: "t", Lease: time.Minute}); err != nil || len(ts) != 0 {
		t.Fatalf("claim after the commit: %d turns, %v: want none (the event was consumed)", len(ts), err)
	}
}

// A commit of the handed-off turn that fails (here: a history sequence
// number already taken) commits nothing, yet ends the wait too.
func TestHandOffFailedCommitEndsTheWait(t *testing.T) {
	s, syncs := openLinger(t, time.Minute)
	before := syncs.Load()
	committed := make(chan error, 1)
	raiseEarly(t, s, "e1", func(tt *storage.Turn) {
		_, err := s.TurnCommit(context.Background(), &storage.TurnCommitParams{Tenant: "t", InstanceID: "i",
			LockToken: tt.LockToken, Execution: tt.Instance.Execution, Status: heraldtype.StatusRunning,
			ConsumedMessages: messageIDs(tt), NewEvents: []history.Event{{Seq: 1, Kind: history.TimerCreated, Time: time.Now()}}})
		committed <- err
	})
	if err := <-committed; err == nil {
		t.Fatal("TurnCommit over an existing history seq succeeded")
	}
	if n := syncs.Load() - before; n != 1 {
		t.Fatalf("%d fsyncs for the raise, want 1", n)
	}
}

// A turn given back (TurnAbandon) ends the wait as a commit does.
func TestHandOffGiveBackSharesOneFsync(t *testing.T) {
	s, syncs := openLinger(t, time.Minute)
	before := syncs.Load()
	given := make(chan error, 1)
	raiseEarly(t, s, "e1", func(tt *storage.Turn) {
		given <- s.TurnAbandon(context.Background(), &storage.TurnAbandonParams{Tenant: "t", InstanceID: "i", LockToken: tt.LockToken})
	})
	if err := <-given; err != nil {
		t.Fatalf("TurnAbandon: %v", err)
	}
	if n := syncs.Load() - before; n != 1 {
		t.Fatalf("%d fsyncs for the raise and its turn's give-back, want 1", n)
	}
}

// A turn that never comes back holds the raise's flush only until the
// linger bound, and nothing after it: the next write is flushed at once.
func TestHandOffLingerIsBounded(t *testing.T) {
	s, syncs := openLinger(t, 5*time.Millisecond)
	before := syncs.Load()
	kept := make(chan *storage.Turn, 1)
	raiseEarly(t, s, "e1", func(tt *storage.Turn) { kept <- tt })
	tt := <-kept
	if n := syncs.Load() - before; n != 1 {
		t.Fatalf("%d fsyncs for the raise, want 1", n)
	}
	if err := create(context.Background(), s, "j"); err != nil {
		t.Fatal(err)
	}
	if m := s.linger.Load(); m != nil {
		t.Fatalf("linger mark %+v still published after its bound", m)
	}
	// The late commit still goes through, under the lease.
	if _, err := s.TurnCommit(context.Background(), &storage.TurnCommitParams{Tenant: "t", InstanceID: "i",
		LockToken: tt.LockToken, Execution: tt.Instance.Execution, Status: heraldtype.StatusRunning,
		ConsumedMessages: messageIDs(tt), NewEvents: []history.Event{{Seq: 2, Kind: history.TimerCreated, Time: time.Now()}}}); err != nil {
		t.Fatalf("late TurnCommit: %v", err)
	}
}

// Without OnClaimed the turn comes in the result, after the flush, and
// nothing lingers.
func TestHandOffWithoutOnClaimedReturnsTheTurn(t *testing.T) {
	s, _ := openLinger(t, time.Minute)
	res, err := s.EventRaise(context.Background(), &storage.EventRaiseParams{Tenant: "t", InstanceID: "i", EventID: "e1",
		Lane: history.LanePositional, Name: "go", Payload: json.RawMessage(`1`), Claim: &storage.TurnClaimParams{Lease: time.Minute}})
	if err != nil || res.Turn == nil {
		t.Fatalf("EventRaise: %+v, %v: want the turn in the result", res, err)
	}
	if m := s.linger.Load(); m != nil {
		t.Fatalf("linger mark %+v for a turn returned in the result", m)
	}
}

func messageIDs(t *storage.Turn) []int64 {
	ids := make([]int64, len(t.Messages))
	for i, m := range t.Messages {
		ids[i] = m.ID
	}
	return ids
}
