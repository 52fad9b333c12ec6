package sqlite

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/heraldwf/herald/history"
	"github.com/heraldwf/herald/storage"
	"github.com/heraldwf/herald/storage/internal/backend"
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

// A hand-off's turn has the whole history whether the cache holds all of
// it (the Seq that ends the history comes with the lease, raiseLease, and
// nothing is read: TestLoadOneHistorySkipsWhatTheCacheHolds) or the
// history has grown behind the cache (another store on the file ran a
// turn), when it reads the rest.
func TestHandOffReadsHistoryOnlyPastTheCache(t *testing.T) {
	path := t.TempDir() + "/h.db"
	ctx := context.Background()
	now := time.Unix(100, 0)
	s, err := Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	claim := func(s *Store) *storage.Turn {
		t.Helper()
		turns, err := s.TurnClaim(ctx, &storage.TurnClaimParams{Tenant: "t", Max: 1, Lease: time.Minute, Now: now})
		if err != nil || len(turns) != 1 {
			t.Fatalf("claim: %v, %d turns", err, len(turns))
		}
		return turns[0]
	}
	commit := func(s *Store, turn *storage.Turn, seq int) {
		t.Helper()
		if _, err := s.TurnCommit(ctx, &storage.TurnCommitParams{Tenant: "t", InstanceID: "i", LockToken: turn.LockToken,
			Execution: 1, ConsumedMessages: messageIDs(turn),
			NewEvents: []history.Event{{Seq: seq, Kind: history.EventSubscribed, Name: "go", Time: now}},
			Status:    "running", Now: now}); err != nil {
			t.Fatal(err)
		}
	}
	handOff := func(s *Store, eventID string) *storage.Turn {
		t.Helper()
		var got *storage.Turn
		res, err := s.EventRaise(ctx, &storage.EventRaiseParams{Tenant: "t", InstanceID: "i", EventID: eventID,
			Lane: history.LanePositional, Name: "go", Now: now, Claim: &storage.TurnClaimParams{Lease: time.Minute},
			OnClaimed: func(t *storage.Turn) { got = t }})
		if err != nil {
			t.Fatal(err)
		}
		if got == nil {
			got = res.Turn
		}
		if got == nil {
			t.Fatalf("raise of %s handed nothing off", eventID)
		}
		return got
	}
	if _, err := s.InstanceCreate(ctx, &storage.InstanceCreateParams{Tenant: "t", ID: "i", Workflow: "wf", Now: now}); err != nil {
		t.Fatal(err)
	}
	commit(s, claim(s), 2)
	turn := handOff(s, "e1")
	if turn.Err != nil || len(turn.History) != 2 || turn.History[1].Kind != history.EventSubscribed {
		t.Fatalf("hand-off with the whole history cached: err %v, history %+v; want the start and the subscription", turn.Err, turn.History)
	}
	if err := s.TurnAbandon(ctx, &storage.TurnAbandonParams{Tenant: "t", InstanceID: "i", LockToken: turn.LockToken}); err != nil {
		t.Fatal(err)
	}
	// Another store on the file runs a turn: s's cache is behind.
	o, err := Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	defer o.Close()
	commit(o, claim(o), 3)
	turn = handOff(s, "e2")
	if turn.Err != nil || len(turn.History) != 3 || turn.History[2].Kind != history.EventSubscribed {
		t.Fatalf("hand-off behind another store's turn: err %v, history %+v; want 3 events", turn.Err, turn.History)
	}
}

// noQueries is a querier that fails every query.
type noQueries struct{ t *testing.T }

func (q noQueries) QueryContext(context.Context, string, ...any) (rowsIter, error) {
	q.t.Error("a query was run")
	return nil, errors.New("no queries")
}

func (q noQueries) QueryRowContext(context.Context, string, ...any) scanner {
	q.t.Error("a query was run")
	return wrow{err: errors.New("no queries")}
}

// loadOneHistory runs no query when the history ends where the cache's
// copy does, and reads past the cache otherwise.
func TestLoadOneHistorySkipsWhatTheCacheHolds(t *testing.T) {
	s := openTest(t)
	now := time.Unix(100, 0)
	evs := []history.Event{{Seq: 1, Kind: history.ExecutionStarted, Time: now}, {Seq: 2, Kind: history.EventSubscribed, Time: now}}
	s.hist.Put("t", "i", 1, evs)
	turn := &storage.Turn{Instance: storage.Instance{Tenant: "t", ID: "i", Execution: 1}}
	docs, err := s.loadOneHistory(context.Background(), noQueries{t}, turn, "t", 2)
	if err != nil || docs != nil || len(turn.History) != 2 {
		t.Fatalf("with the history ending at the cache's end: docs %v, err %v, history %+v", docs, err, turn.History)
	}
	var ran bool
	_, err = s.loadOneHistory(context.Background(), queryProbe{&ran}, turn, "t", 3)
	if !ran || err == nil {
		t.Fatalf("with the history past the cache's end: queried %v, err %v; want a query", ran, err)
	}
}

// queryProbe records that a query was run, and fails it.
type queryProbe struct{ ran *bool }

func (q queryProbe) QueryContext(context.Context, string, ...any) (rowsIter, error) {
	*q.ran = true
	return nil, errors.New("probed")
}

func (q queryProbe) QueryRowContext(context.Context, string, ...any) scanner {
	*q.ran = true
	return wrow{err: errors.New("probed")}
}

// appendEncoded inserts any number of events, in order, and refuses a seq
// already taken.
func TestAppendEncodedManyEvents(t *testing.T) {
	s := openTest(t)
	ctx := context.Background()
	now := time.Unix(100, 0)
	for _, n := range []int{1, 2, 9} {
		id := fmt.Sprint("i", n)
		evs := make([]history.Event, n)
		docs := make([]string, n)
		for i := range evs {
			evs[i] = history.Event{Seq: i + 1, Kind: history.EventSubscribed, Name: fmt.Sprint("w", i), Time: now}
			doc, err := backend.EncodeHistoryEvent(i, &evs[i])
			if err != nil {
				t.Fatal(err)
			}
			docs[i] = doc
		}
		if err := s.write(ctx, func(w *wtx) error { return appendEncoded(w, "t", id, 1, evs, docs) }); err != nil {
			t.Fatal(err)
		}
		got, err := loadHistoryDocs(ctx, s.reader(nil), "t", id, 1, 0, 0)
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != n {
			t.Fatalf("%d events appended, %d read back", n, len(got))
		}
		for i, doc := range got {
			if string(doc) != docs[i] {
				t.Fatalf("event %d of %d: %s, want %s", i+1, n, doc, docs[i])
			}
		}
		err = s.write(ctx, func(w *wtx) error { return appendEncoded(w, "t", id, 1, evs[n-1:], docs[n-1:]) })
		if err == nil || !strings.Contains(err.Error(), "already has") {
			t.Fatalf("appending seq %d again: %v, want a refusal", n, err)
		}
	}
}
