package storagetest

import (
	"encoding/json"
	"time"

	"github.com/heraldwf/herald/heraldtype"
	"github.com/heraldwf/herald/history"
	"github.com/heraldwf/herald/storage"
)

// testTurnSends: the events a turn sends (TurnCommitParams.Sends) are
// written with the commit — to a running instance (inbox message, ready),
// a missing one (kept, pending), an ended one (dropped, instance_terminal),
// each ledger row naming the sender and only in the sender's tenant; a
// send whose id the ledger has for the same target is a duplicate, one for
// another target fails the whole commit with ErrEventIDConflict.
func testTurnSends(b *bundle) {
	t := b.t
	b.createCompleted("done", t0)

	b.create("s", at(time.Second))
	turn := b.claimOne("s", at(time.Second))
	b.create("r", at(2*time.Second))
	other := b.in(b.tenant + "-other")
	other.create("r", at(2*time.Second))

	now := at(3 * time.Second)
	p := b.commitParams(turn, now)
	sent := ev(2, history.EventSent, now)
	sent.Target, sent.Lane, sent.Name, sent.EventID = "r", history.LanePositional, "ping", "s/1/2"
	p.NewEvents = []history.Event{sent}
	p.Sends = []storage.TurnSend{
		{InstanceID: "r", EventID: "s/1/2", Lane: history.LanePositional, Name: "ping", Payload: json.RawMessage(`1`)},
		{InstanceID: "ghost", EventID: "s/1/3", Lane: history.LanePositional, Name: "ping", Payload: json.RawMessage(`2`),
			ExpiresAt: at(time.Hour)},
		{InstanceID: "done", EventID: "s/1/4", Lane: history.LanePositional, Name: "ping", Payload: json.RawMessage(`3`)},
		{InstanceID: "r", EventID: "s/1/5", Lane: history.LaneQueue, Name: "jobs", Payload: json.RawMessage(`{"n":4}`), Latest: true},
	}
	b.commit(p)

	for id, want := range map[string]struct {
		instance string
		fate     history.Fate
		reason   history.DropReason
	}{
		"s/1/2": {"r", history.FatePending, ""},
		"s/1/3": {"ghost", history.FatePending, ""},
		"s/1/4": {"done", history.FateDropped, history.DropInstanceTerminal},
		"s/1/5": {"r", history.FatePending, ""},
	} {
		e := b.event(id)
		wantEqual(t, id+" instance", e.InstanceID, want.instance)
		wantEqual(t, id+" fate", e.Fate, want.fate)
		wantEqual(t, id+" reason", e.Reason, want.reason)
		wantEqual(t, id+" sender", e.Sender, "s")
		wantTime(t, id+" received", e.ReceivedAt, now)
	}
	if _, err := other.s.EventGet(other.ctx, &storage.EventGetParams{Tenant: other.tenant, EventID: "s/1/2"}); err == nil {
		t.Fatal("the other tenant's ledger has the send")
	}
	rt := b.claimOne("r", at(4*time.Second))
	wantMessages(t, "receiver", rt.Messages, "kick", "event:s/1/2", "event:s/1/5")
	m := rt.Messages[2]
	wantEqual(t, "queue message lane", m.Lane, history.LaneQueue)
	wantEqual(t, "queue message name", m.Name, "jobs")
	wantEqual(t, "queue message latest", m.Latest, true)
	wantJSON(t, "queue message payload", m.Payload, `{"n":4}`)
	b.commit(b.commitParams(rt, at(4*time.Second)))
	wantMessages(t, "other tenant's r", other.claimOne("r", at(4*time.Second)).Messages, "kick")

	// A duplicate (the same id, target, lane and name) writes nothing.
	b.raise("s", "wake", "wake", at(5*time.Second))
	turn = b.claimOne("s", at(5*time.Second))
	p = b.commitParams(turn, at(5*time.Second))
	p.Sends = []storage.TurnSend{{InstanceID: "r", EventID: "s/1/2", Lane: history.LanePositional, Name: "ping", Payload: json.RawMessage(`9`)}}
	b.commit(p)
	b.claimNone(at(6 * time.Second))
	if n := len(b.events("r")); n != 2 {
		t.Fatalf("receiver's ledger has %d events after a duplicate send, want 2", n)
	}

	// The id of another target: nothing of the commit is written.
	b.raise("s", "wake2", "wake", at(7*time.Second))
	turn = b.claimOne("s", at(7*time.Second))
	p = b.commitParams(turn, at(7*time.Second))
	p.NewEvents = []history.Event{ev(3, history.TimerCreated, at(7*time.Second))}
	p.Sends = []storage.TurnSend{
		{InstanceID: "r", EventID: "s/1/9", Lane: history.LanePositional, Name: "ping", Payload: json.RawMessage(`5`)},
		{InstanceID: "ghost", EventID: "s/1/2", Lane: history.LanePositional, Name: "ping", Payload: json.RawMessage(`6`)},
	}
	_, err := b.s.TurnCommit(b.ctx, p)
	wantErr(t, "send with a taken id", err, heraldtype.ErrEventIDConflict)
	wantKinds(t, "sender's history", b.history("s", 0), history.ExecutionStarted, history.EventSent)
	if n := len(b.events("r")); n != 2 {
		t.Fatalf("receiver's ledger has %d events after a refused commit, want 2", n)
	}
	if n := len(b.events("ghost")); n != 1 {
		t.Fatalf("ghost's ledger has %d events, want 1", n)
	}

	// A malformed send is refused before anything is written.
	p.Sends = []storage.TurnSend{{InstanceID: "r", EventID: "", Lane: history.LanePositional, Name: "ping"}}
	_, err = b.s.TurnCommit(b.ctx, p)
	wantErr(t, "send without an id", err, heraldtype.ErrInvalidArgument)
	p.Sends = []storage.TurnSend{{InstanceID: "r", EventID: "x", Lane: history.LaneCorrelated, Name: "ping"}}
	_, err = b.s.TurnCommit(b.ctx, p)
	wantErr(t, "send on the correlated lane", err, heraldtype.ErrInvalidArgument)
}
