package sqlite

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/heraldwf/herald/history"
	"github.com/heraldwf/herald/storage"
)

// A claim of one turn reads it by the instance's key (loadOne): its history
// and its messages in order, and a message that does not decode fails that
// turn (Turn.Err), not the claim, as in a claim of several.
func TestClaimOfOneReadsItsTurn(t *testing.T) {
	s := openTest(t)
	ctx := context.Background()
	now := time.Unix(100, 0)
	for _, id := range []string{"good", "bad"} {
		if _, err := s.InstanceCreate(ctx, &storage.InstanceCreateParams{Tenant: "t", ID: id, Workflow: "wf",
			Input: json.RawMessage(`1`), Now: now}); err != nil {
			t.Fatal(err)
		}
		claim := func() *storage.Turn {
			t.Helper()
			turns, err := s.TurnClaim(ctx, &storage.TurnClaimParams{Tenant: "t", Max: 1, Lease: time.Minute, Now: now})
			if err != nil {
				t.Fatal(err)
			}
			if len(turns) != 1 || turns[0].Instance.ID != id {
				t.Fatalf("claimed %d turns, want %s's", len(turns), id)
			}
			return turns[0]
		}
		first := claim()
		if _, err := s.TurnCommit(ctx, &storage.TurnCommitParams{Tenant: "t", InstanceID: id, LockToken: first.LockToken,
			Execution: 1, ConsumedMessages: messageIDs(first),
			NewEvents: []history.Event{{Seq: 2, Kind: history.EventSubscribed, Name: "go", Time: now}},
			Status:    "running", Now: now}); err != nil {
			t.Fatal(err)
		}
		for i, ev := range []string{"e1", "e2"} {
			if _, err := s.EventRaise(ctx, &storage.EventRaiseParams{Tenant: "t", InstanceID: id, EventID: id + ev,
				Lane: history.LanePositional, Name: "go", Payload: json.RawMessage(`{"n":` + string(rune('1'+i)) + `}`),
				Now: now}); err != nil {
				t.Fatal(err)
			}
		}
		if id == "bad" {
			if err := s.write(ctx, func(w *wtx) error {
				_, err := w.exec(`UPDATE inbox SET failure = '{"kind": ' WHERE instance_id = ? AND event_id = ?`, id, id+"e2")
				return err
			}); err != nil {
				t.Fatal(err)
			}
		}
		turn := claim()
		switch id {
		case "good":
			if len(turn.History) != 2 || turn.History[1].Kind != history.EventSubscribed {
				t.Fatalf("good: history %+v, want the start and the subscription", turn.History)
			}
			if turn.Err != nil || len(turn.Messages) != 2 || turn.Messages[0].EventID != "goode1" || turn.Messages[1].EventID != "goode2" {
				t.Fatalf("good: err %v, messages %+v, want goode1, goode2", turn.Err, turn.Messages)
			}
		case "bad":
			if turn.Err == nil {
				t.Fatalf("bad: a message that does not decode left the turn without an error: %+v", turn.Messages)
			}
		}
	}
}

// A claim of several reads each instance's history by its key, from the
// event after those the history cache holds: a range of the history's
// primary key, not the whole history.
func TestClaimHistoriesPlan(t *testing.T) {
	s := openTest(t)
	joined := queryPlan(t, s, claimHistoriesSQL, "t", 1, "p:", 2, `{"a":3}`)
	for _, want := range []string{"SEARCH i USING INDEX instances_leased",
		"SEARCH h USING PRIMARY KEY (tenant=? AND instance_id=? AND execution=? AND seq>?)"} {
		if !strings.Contains(joined, want) {
			t.Errorf("plan lacks %q:\n%s", want, joined)
		}
	}
}
