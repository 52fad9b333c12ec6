package storagetest

import (
	"encoding/json"
	"time"

	"github.com/heraldwf/herald/heraldtype"
	"github.com/heraldwf/herald/history"
	"github.com/heraldwf/herald/storage"
)

func testEventRaiseDedup(b *bundle) {
	t := b.t
	b.create("i", t0)
	res := b.raise("i", "e1", "approve", at(time.Second))
	if res.Duplicate || res.Started || res.EventID != "e1" {
		t.Fatalf("first raise: %+v", res)
	}
	wantTime(t, "ReceivedAt", res.ReceivedAt, at(time.Second))

	again := b.raise("i", "e1", "approve", at(5*time.Second))
	if !again.Duplicate || again.EventID != "e1" {
		t.Fatalf("second raise: %+v, want a duplicate", again)
	}
	wantTime(t, "duplicate ReceivedAt", again.ReceivedAt, at(time.Second))

	for _, c := range []struct {
		what string
		p    *storage.EventRaiseParams
	}{
		{"another name", b.raiseParams("i", "e1", "reject", at(6*time.Second))},
		{"another instance", b.raiseParams("j", "e1", "approve", at(6*time.Second))},
		{"another lane", func() *storage.EventRaiseParams {
			p := b.raiseParams("i", "e1", "approve", at(6*time.Second))
			p.Lane = "queue"
			return p
		}()},
	} {
		_, err := b.s.EventRaise(b.ctx, c.p)
		wantErr(t, "reuse of an event id for "+c.what, err, heraldtype.ErrEventIDConflict)
	}

	evs := b.events("i")
	if len(evs) != 1 {
		t.Fatalf("ledger has %d events, want 1", len(evs))
	}
	if len(b.events("j")) != 0 {
		t.Fatal("a conflicting raise reached the ledger")
	}
	e := b.event("e1")
	wantEqual(t, "InstanceID", e.InstanceID, "i")
	wantEqual(t, "Lane", e.Lane, history.LanePositional)
	wantEqual(t, "Name", e.Name, "approve")
	wantEqual(t, "Fate", e.Fate, history.FatePending)
	wantEqual(t, "Execution", e.Execution, 0)
	wantTime(t, "ReceivedAt", e.ReceivedAt, at(time.Second))

	turn := b.claimOne("i", at(6*time.Second))
	wantMessages(t, "turn", turn.Messages, "kick", "event:e1")
	m := turn.Messages[1]
	wantEqual(t, "message Lane", m.Lane, history.LanePositional)
	wantEqual(t, "message Name", m.Name, "approve")
	wantJSON(t, "message Payload", m.Payload, `{"event":"e1"}`)
	wantTime(t, "message VisibleAt", m.VisibleAt, at(time.Second))

	// A duplicate of a consumed event is still a duplicate.
	b.commit(b.commitParams(turn, at(7*time.Second)))
	if !b.raise("i", "e1", "approve", at(8*time.Second)).Duplicate {
		t.Fatal("raise of a consumed event id was not a duplicate")
	}
	b.claimNone(at(8 * time.Second))
}

func testEventRaiseTerminal(b *bundle) {
	t := b.t
	b.create("i", t0)
	turn := b.claimOne("i", t0)
	p := b.commitParams(turn, at(time.Second))
	p.NewEvents = []history.Event{ev(2, history.ExecutionFailed, at(time.Second))}
	p.Status = heraldtype.StatusFailed
	p.Failure = &history.Failure{Kind: "application", Message: "no"}
	b.commit(p)
	inst := b.get("i")
	if inst.Failure == nil || inst.Failure.Message != "no" {
		t.Fatalf("Failure = %+v", inst.Failure)
	}

	_, err := b.s.EventRaise(b.ctx, b.raiseParams("i", "e1", "approve", at(2*time.Second)))
	wantErr(t, "EventRaise to a failed instance", err, heraldtype.ErrInstanceNotRunning)
	sp := b.raiseParams("i", "e2", "approve", at(2*time.Second))
	sp.StartIfAbsent = &storage.InstanceCreateParams{Workflow: "wf"}
	_, err = b.s.EventRaise(b.ctx, sp)
	wantErr(t, "EventRaise with StartIfAbsent to a failed instance", err, heraldtype.ErrInstanceNotRunning)

	for _, id := range []string{"e1", "e2"} {
		_, err = b.s.EventGet(b.ctx, &storage.EventGetParams{Tenant: b.tenant, EventID: id})
		wantErr(t, "EventGet of a rejected event", err, heraldtype.ErrNotFound)
	}
	if len(b.events("i")) != 0 {
		t.Fatal("rejected events reached the ledger")
	}
	b.claimNone(at(time.Hour))
	b.wantNoWake(t0)
	wantEqual(t, "history length", len(b.history("i", 0)), 2)
}

func testEventRaiseBeforeCreate(b *bundle) {
	t := b.t
	res := b.raise("later", "e1", "approve", t0)
	if res.Duplicate || res.Started {
		t.Fatalf("raise before create: %+v", res)
	}
	wantEqual(t, "fate", b.event("e1").Fate, history.FatePending)
	b.claimNone(at(time.Second))
	b.wantNoWake(at(-time.Second)) // the message is not work until the instance exists
	_, err := b.s.InstanceGet(b.ctx, &storage.InstanceGetParams{Tenant: b.tenant, ID: "later"})
	wantErr(t, "InstanceGet before create", err, heraldtype.ErrNotFound)
	_, err = b.s.HistoryList(b.ctx, &storage.HistoryListParams{Tenant: b.tenant, InstanceID: "later"})
	wantErr(t, "HistoryList before create", err, heraldtype.ErrNotFound)

	b.create("later", at(2*time.Second))
	turn := b.claimOne("later", at(2*time.Second))
	wantMessages(t, "first turn", turn.Messages, "event:e1", "kick")
	wantJSON(t, "payload", turn.Messages[0].Payload, `{"event":"e1"}`)
	wantKinds(t, "history", turn.History, history.ExecutionStarted)
}

func testEventRaiseStartIfAbsent(b *bundle) {
	t := b.t
	p := b.raiseParams("s", "e1", "approve", t0)
	p.StartIfAbsent = &storage.InstanceCreateParams{Workflow: "wf", Input: json.RawMessage(`{"start":true}`)}
	res, err := b.s.EventRaise(b.ctx, p)
	if err != nil {
		t.Fatalf("EventRaise with StartIfAbsent: %v", err)
	}
	if !res.Started || res.Duplicate {
		t.Fatalf("receipt %+v, want Started", res)
	}
	inst := b.get("s")
	wantEqual(t, "Status", inst.Status, heraldtype.StatusPending)
	wantEqual(t, "Workflow", inst.Workflow, "wf")
	wantJSON(t, "Input", inst.Input, `{"start":true}`)
	wantTime(t, "CreatedAt", inst.CreatedAt, t0)
	hist := b.history("s", 0)
	wantKinds(t, "history", hist, history.ExecutionStarted)
	wantJSON(t, "ExecutionStarted.Input", hist[0].Input, `{"start":true}`)

	// The duplicate of the starting raise starts nothing.
	res, err = b.s.EventRaise(b.ctx, p)
	if err != nil || !res.Duplicate || res.Started {
		t.Fatalf("duplicate raise: %+v, %v", res, err)
	}
	// A new event to the now existing instance starts nothing either.
	p2 := b.raiseParams("s", "e2", "approve", at(time.Second))
	p2.StartIfAbsent = p.StartIfAbsent
	res, err = b.s.EventRaise(b.ctx, p2)
	if err != nil || res.Started || res.Duplicate {
		t.Fatalf("raise to the started instance: %+v, %v", res, err)
	}

	turn := b.claimOne("s", at(time.Second))
	var events, kicks int
	for _, m := range turn.Messages {
		switch m.Kind {
		case storage.MsgEvent:
			events++
		case storage.MsgKick:
			kicks++
		}
	}
	if events != 2 || kicks != 1 {
		t.Fatalf("first turn: messages %v, want e1, e2 and one kick", msgKinds(turn.Messages))
	}
}

// testClaimSeesCommittedMessages: a claim whose Now predates messages that
// were committed before it (a worker took its time, then waited for the
// database) still gets every non-timer message, so a first turn sees every
// event raised before the instance started; a timer still waits for its
// time.
func testClaimSeesCommittedMessages(b *bundle) {
	t := b.t
	b.raise("i", "e1", "approve", at(time.Second))
	b.raise("i", "e2", "approve", at(3*time.Second))
	b.create("i", at(4*time.Second))
	turn := b.claimOne("i", at(2*time.Second))
	wantMessages(t, "claim with an early Now", turn.Messages, "event:e1", "event:e2", "kick")
}
