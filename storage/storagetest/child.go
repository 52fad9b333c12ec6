package storagetest

import (
	"encoding/json"
	"slices"
	"time"

	"github.com/heraldwf/herald/heraldtype"
	"github.com/heraldwf/herald/history"
	"github.com/heraldwf/herald/storage"
)

// childTests are the suite's tests of child workflows and cancellation.
var childTests = []struct {
	name string
	fn   func(b *bundle)
}{
	{"ChildStartAndEnd", testChildStartAndEnd},
	{"ChildParentClose", testChildParentClose},
	{"InstanceCancel", testInstanceCancel},
}

// messagesOf claims id's turn and returns its messages, then releases it.
func (b *bundle) messagesOf(id string, now time.Time) []storage.Message {
	b.t.Helper()
	turn := b.turnOf(id, now)
	if turn == nil {
		return nil
	}
	if err := b.s.TurnAbandon(b.ctx, &storage.TurnAbandonParams{Tenant: b.tenant, InstanceID: id,
		LockToken: turn.LockToken}); err != nil {
		b.t.Fatalf("TurnAbandon(%s): %v", id, err)
	}
	return turn.Messages
}

func hasMessage(ms []storage.Message, kind storage.MessageKind) *storage.Message {
	for i := range ms {
		if ms[i].Kind == kind {
			return &ms[i]
		}
	}
	return nil
}

// startChildren commits a first turn of parent that starts children.
func (b *bundle) startChildren(parent string, now time.Time, children ...storage.ChildStart) {
	b.t.Helper()
	turn := b.turnOf(parent, now)
	if turn == nil {
		b.t.Fatalf("%s not claimable", parent)
	}
	p := b.commitParams(turn, now)
	for i, c := range children {
		p.NewEvents = append(p.NewEvents, history.Event{Seq: 2 + i, Time: now, Kind: history.ChildWorkflowScheduled,
			Name: c.Workflow, ChildID: c.ID})
	}
	p.StartChildren = children
	p.Family = true
	b.commit(p)
}

func testChildStartAndEnd(b *bundle) {
	t := b.t
	b.create("p", at(0))
	b.create("taken", at(0))
	b.startChildren("p", at(time.Second),
		storage.ChildStart{ID: "k", Workflow: "wf", Input: json.RawMessage(`7`), TaskSeq: 2},
		storage.ChildStart{ID: "taken", Workflow: "wf", TaskSeq: 3})
	k := b.get("k")
	wantEqual(t, "child ParentID", k.ParentID, "p")
	wantEqual(t, "child Status", k.Status, heraldtype.StatusPending)
	wantJSON(t, "child Input", k.Input, `7`)
	wantKinds(t, "child history", b.history("k", 0), history.ExecutionStarted)
	wantEqual(t, "parent HasChildren", b.get("p").HasChildren, true)
	wantEqual(t, "parent ParentID", b.get("p").ParentID, "")
	// The taken id: the instance is left as it was, the parent is told.
	wantEqual(t, "stranger ParentID", b.get("taken").ParentID, "")
	wantEqual(t, "stranger Workflow", b.get("taken").Workflow, "wf")
	m := hasMessage(b.messagesOf("p", at(2*time.Second)), storage.MsgChildFailed)
	if m == nil || m.TaskSeq != 3 || m.Execution != 1 || m.Name != "taken" || m.Failure == nil ||
		m.Failure.Kind != heraldtype.FailureChildIDExists {
		t.Fatalf("parent's message for the taken id: %+v", m)
	}
	// Consume it, so that the parent has nothing left.
	turn := b.turnOf("p", at(2*time.Second))
	b.commit(b.commitParams(turn, at(2*time.Second)))

	// The child completes: its parent is told in the same transaction.
	kt := b.turnOf("k", at(3*time.Second))
	p := b.commitParams(kt, at(3*time.Second))
	p.NewEvents = []history.Event{{Seq: 2, Time: at(3 * time.Second), Kind: history.ExecutionCompleted, Result: json.RawMessage(`14`)}}
	p.Status, p.Output, p.Family = heraldtype.StatusCompleted, json.RawMessage(`14`), true
	b.commit(p)
	m = hasMessage(b.messagesOf("p", at(4*time.Second)), storage.MsgChildCompleted)
	if m == nil || m.TaskSeq != 2 || m.Execution != 1 || m.Name != "k" {
		t.Fatalf("parent's message for the completed child: %+v", m)
	}
	wantJSON(t, "child result", m.Result, `14`)

	// A child that is terminated tells its parent too (and not a parent
	// that has moved to another execution: not tested here).
	b.create("q", at(5*time.Second))
	b.startChildren("q", at(5*time.Second), storage.ChildStart{ID: "qk", Workflow: "wf", TaskSeq: 2,
		ClosePolicy: storage.ParentCloseAbandon})
	if _, err := b.s.InstanceTerminate(b.ctx, &storage.InstanceTerminateParams{Tenant: b.tenant, ID: "qk", Reason: "op",
		Now: at(6 * time.Second)}); err != nil {
		t.Fatal(err)
	}
	m = hasMessage(b.messagesOf("q", at(7*time.Second)), storage.MsgChildFailed)
	if m == nil || m.TaskSeq != 2 || m.Failure == nil || m.Failure.Kind != heraldtype.FailureTerminated || m.Failure.Message != "op" {
		t.Fatalf("parent's message for the terminated child: %+v", m)
	}
	// Another tenant sees none of it.
	if _, err := b.in(b.tenant+"-other").s.InstanceGet(b.ctx, &storage.InstanceGetParams{Tenant: b.tenant + "-other", ID: "k"}); err == nil {
		t.Fatal("the child is visible from another tenant")
	}
}

func testChildParentClose(b *bundle) {
	t := b.t
	b.create("p", at(0))
	b.create("stranger", at(0))
	b.startChildren("p", at(time.Second),
		storage.ChildStart{ID: "k-term", Workflow: "wf", TaskSeq: 2},
		storage.ChildStart{ID: "k-aban", Workflow: "wf", TaskSeq: 3, ClosePolicy: storage.ParentCloseAbandon},
		storage.ChildStart{ID: "k-canc", Workflow: "wf", TaskSeq: 4, ClosePolicy: storage.ParentCloseRequestCancel},
		storage.ChildStart{ID: "k-asked", Workflow: "wf", TaskSeq: 5, ClosePolicy: storage.ParentCloseAbandon})
	// A turn asks k-asked to cancel, and names a stranger, which is no child of p.
	turn := b.poke("p", at(2*time.Second))
	p := b.commitParams(turn, at(2*time.Second))
	p.CancelChildren = []string{"k-asked", "stranger"}
	b.commit(p)
	if m := hasMessage(b.messagesOf("k-asked", at(3*time.Second)), storage.MsgCancel); m == nil || m.Name == "" {
		t.Fatalf("k-asked has no cancel message: %+v", m)
	}
	if m := hasMessage(b.messagesOf("stranger", at(3*time.Second)), storage.MsgCancel); m != nil {
		t.Fatalf("a stranger was asked to cancel: %+v", m)
	}

	// The parent completes: the policies apply.
	turn = b.poke("p", at(4*time.Second))
	p = b.commitParams(turn, at(4*time.Second))
	p.NewEvents = []history.Event{{Seq: 6, Time: at(4 * time.Second), Kind: history.ExecutionCompleted}}
	p.Status, p.Family = heraldtype.StatusCompleted, true
	b.commit(p)
	if m := hasMessage(b.messagesOf("k-term", at(5*time.Second)), storage.MsgTerminate); m == nil || m.Name != "parent p ended completed" {
		t.Fatalf("k-term: %+v", m)
	}
	if m := hasMessage(b.messagesOf("k-canc", at(5*time.Second)), storage.MsgCancel); m == nil || m.Name != "parent p ended completed" {
		t.Fatalf("k-canc: %+v", m)
	}
	if ms := b.messagesOf("k-aban", at(5*time.Second)); hasMessage(ms, storage.MsgTerminate) != nil || hasMessage(ms, storage.MsgCancel) != nil {
		t.Fatalf("k-aban: %v", msgKinds(ms))
	}
	already, err := b.s.InstanceCancel(b.ctx, &storage.InstanceCancelParams{Tenant: b.tenant, ID: "k-canc", Now: at(6 * time.Second)})
	if err != nil || !already {
		t.Fatalf("InstanceCancel of k-canc after its parent's request: %v %v", already, err)
	}
	ms := b.messagesOf("k-canc", at(7*time.Second))
	if n := len(slices.DeleteFunc(slices.Clone(ms), func(m storage.Message) bool { return m.Kind != storage.MsgCancel })); n != 1 {
		t.Fatalf("k-canc has %d cancel messages", n)
	}
}

func testInstanceCancel(b *bundle) {
	t := b.t
	cancel := func(id string, now time.Time) (bool, error) {
		return b.s.InstanceCancel(b.ctx, &storage.InstanceCancelParams{Tenant: b.tenant, ID: id, Reason: "why", Now: now})
	}
	_, err := cancel("nobody", at(0))
	wantErr(t, "cancel of an unknown instance", err, heraldtype.ErrNotFound)
	b.create("i", at(0))
	already, err := cancel("i", at(time.Second))
	if err != nil || already {
		t.Fatalf("first cancel: %v %v", already, err)
	}
	already, err = cancel("i", at(2*time.Second))
	if err != nil || !already {
		t.Fatalf("second cancel: %v %v", already, err)
	}
	turn := b.turnOf("i", at(3*time.Second))
	wantMessages(t, "turn", turn.Messages, "kick", "cancel")
	wantEqual(t, "reason", turn.Messages[1].Name, "why")
	wantTime(t, "VisibleAt", turn.Messages[1].VisibleAt, at(time.Second))
	p := b.commitParams(turn, at(3*time.Second))
	p.NewEvents = []history.Event{{Seq: 2, Time: at(3 * time.Second), Kind: history.ExecutionCancelRequested},
		{Seq: 3, Time: at(3 * time.Second), Kind: history.ExecutionCanceled, Failure: &history.Failure{Kind: heraldtype.FailureCanceled, Message: "why"}}}
	p.Status, p.Failure = heraldtype.StatusCanceled, &history.Failure{Kind: heraldtype.FailureCanceled, Message: "why"}
	b.commit(p)
	inst := b.get("i")
	wantEqual(t, "status", inst.Status, heraldtype.StatusCanceled)
	_, err = cancel("i", at(4*time.Second))
	wantErr(t, "cancel of a canceled instance", err, heraldtype.ErrInstanceNotRunning)
	// Another tenant's instance of that id does not exist here.
	_, err = b.in(b.tenant+"-b").s.InstanceCancel(b.ctx, &storage.InstanceCancelParams{Tenant: b.tenant + "-b", ID: "i", Now: at(5 * time.Second)})
	wantErr(t, "cancel from another tenant", err, heraldtype.ErrNotFound)
}
