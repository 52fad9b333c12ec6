package storagetest

import (
	"context"
	"fmt"
	"testing"

	"github.com/heraldwf/herald/heraldtype"
	"github.com/heraldwf/herald/history"
	"github.com/heraldwf/herald/storage"
)

// CorrelationMarkersDeleted checks what the public interface cannot see:
// that a backend deletes, not merely ignores, the correlation markers of an
// instance that completes, continues as new or is terminated, and the
// marker a put delivers to. s must be a fresh store; markers counts the
// markers it holds (in its own tables).
func CorrelationMarkersDeleted(t *testing.T, s storage.Store, markers func() int) {
	t.Helper()
	ctx := context.Background()
	now := t0
	pokes := 0
	turnOf := func(id string) *storage.Turn {
		t.Helper()
		pokes++
		if _, err := s.EventRaise(ctx, &storage.EventRaiseParams{Tenant: "t", InstanceID: id, EventID: fmt.Sprint("poke", pokes), Name: "poke", Now: now}); err != nil {
			t.Fatal(err)
		}
		turns, err := s.TurnClaim(ctx, &storage.TurnClaimParams{Tenant: "t", Now: now, Max: 1})
		if err != nil || len(turns) != 1 || turns[0].Instance.ID != id {
			t.Fatalf("TurnClaim: %v, %v", turns, err)
		}
		return turns[0]
	}
	commit := func(turn *storage.Turn, edit func(p *storage.TurnCommitParams)) {
		t.Helper()
		p := &storage.TurnCommitParams{Tenant: "t", InstanceID: turn.Instance.ID, LockToken: turn.LockToken,
			Execution: turn.Instance.Execution, Now: now}
		for _, m := range turn.Messages {
			p.ConsumedMessages = append(p.ConsumedMessages, m.ID)
		}
		if edit != nil {
			edit(p)
		}
		if _, err := s.TurnCommit(ctx, p); err != nil {
			t.Fatal(err)
		}
	}
	for _, id := range []string{"done", "again", "killed", "live"} {
		if _, err := s.InstanceCreate(ctx, &storage.InstanceCreateParams{Tenant: "t", ID: id, Workflow: "wf", Now: now}); err != nil {
			t.Fatal(err)
		}
		commit(turnOf(id), func(p *storage.TurnCommitParams) {
			p.CorrelatedWaits = []storage.CorrelatedWait{{TaskSeq: 2, Def: "d", Key: "k"}, {TaskSeq: 3, Def: "d", Key: "other"}}
		})
	}
	if n := markers(); n != 8 {
		t.Fatalf("%d markers, want 8", n)
	}
	commit(turnOf("done"), func(p *storage.TurnCommitParams) { p.Status = heraldtype.StatusCompleted })
	commit(turnOf("again"), func(p *storage.TurnCommitParams) {
		p.ContinueAsNew = &storage.ContinueAsNewParams{StartEvents: []history.Event{{Seq: 1, Kind: history.ExecutionStarted, Execution: 2}}}
	})
	if _, err := s.InstanceTerminate(ctx, &storage.InstanceTerminateParams{Tenant: "t", ID: "killed", Now: now}); err != nil {
		t.Fatal(err)
	}
	if n := markers(); n != 2 {
		t.Fatalf("%d markers after the instances ended, want 2", n)
	}
	if _, err := s.CorrelatedPut(ctx, &storage.CorrelatedPutParams{Tenant: "t", Def: "d", Key: "k", Payload: []byte(`1`), Now: now}); err != nil {
		t.Fatal(err)
	}
	if n := markers(); n != 1 {
		t.Fatalf("%d markers after a put, want 1", n)
	}
}
