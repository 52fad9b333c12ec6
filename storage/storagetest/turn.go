package storagetest

import (
	"encoding/json"
	"slices"
	"strings"
	"time"

	"github.com/heraldwf/herald/heraldtype"
	"github.com/heraldwf/herald/history"
	"github.com/heraldwf/herald/storage"
)

func testTurnClaimOrderAndLimits(b *bundle) {
	t := b.t
	b.create("a", t0)
	b.create("b", at(time.Second))
	b.create("c", at(2*time.Second))
	// A newer message does not move a ahead of or behind its oldest one.
	b.raise("a", "ea", "x", at(3*time.Second))

	now := at(4 * time.Second)
	turns := b.claimN(now, 2)
	if got := turnIDs(turns); !slices.Equal(got, []string{"a", "b"}) {
		t.Fatalf("first claim of 2: %v, want [a b]", got)
	}
	if turns[0].LockToken == turns[1].LockToken {
		t.Fatalf("two turns share lock token %q", turns[0].LockToken)
	}
	wantMessages(t, "turn a", turns[0].Messages, "kick", "event:ea")
	if got := turnIDs(b.claimN(now, 10)); !slices.Equal(got, []string{"c"}) {
		t.Fatalf("second claim: %v, want [c]", got)
	}
	b.claimNone(now)

	// MaxMessages caps a turn's messages, oldest first.
	b.create("d", now)
	for _, id := range []string{"d1", "d2", "d3", "d4"} {
		b.raise("d", id, "x", now)
	}
	turns, err := b.s.TurnClaim(b.ctx, &storage.TurnClaimParams{Tenant: b.tenant, Now: now, Lease: lease, Max: 1, MaxMessages: 3})
	if err != nil {
		t.Fatal(err)
	}
	if len(turns) != 1 {
		t.Fatalf("claim d: %v", turnIDs(turns))
	}
	wantMessages(t, "turn d with MaxMessages 3", turns[0].Messages, "kick", "event:d1", "event:d2")
	// The rest is left for the next turn.
	b.commit(b.commitParams(turns[0], now))
	turn := b.claimOne("d", now)
	wantMessages(t, "next turn of d", turn.Messages, "event:d3", "event:d4")
}

func testTurnCommitAtomic(b *bundle) {
	t := b.t
	b.create("i", t0)
	b.raise("i", "e1", "approve", t0)
	turn := b.claimOne("i", t0)
	wantMessages(t, "turn", turn.Messages, "kick", "event:e1")

	// A commit whose second new event reuses seq 1 must write nothing at all.
	now := at(time.Second)
	bad := b.commitParams(turn, now)
	raised := ev(2, history.EventRaised, now)
	raised.EventID, raised.Name = "e1", "approve"
	bad.NewEvents = []history.Event{raised, ev(1, history.TimerCreated, now)}
	bad.Fates = []storage.FateUpdate{{EventID: "e1", Fate: history.FateDelivered, Execution: 1, OriginExecution: 1, WaitNumber: 1}}
	bad.Activities = []storage.ActivityTask{{TaskSeq: 3, Name: "work"}}
	bad.Timers = []storage.TimerSchedule{{TaskSeq: 4, FireAt: at(2 * time.Second)}}
	bad.Status = heraldtype.StatusCompleted
	bad.Output = json.RawMessage(`"done"`)
	if _, err := b.s.TurnCommit(b.ctx, bad); err == nil {
		t.Fatal("TurnCommit with a duplicate seq succeeded")
	}

	wantKinds(t, "history after failed commit", b.history("i", 0), history.ExecutionStarted)
	inst := b.get("i")
	wantEqual(t, "Status after failed commit", inst.Status, heraldtype.StatusPending)
	if inst.Output != nil {
		t.Fatalf("Output after failed commit: %s", inst.Output)
	}
	e := b.event("e1")
	wantEqual(t, "fate after failed commit", e.Fate, history.FatePending)
	if tasks := b.claimActivities(at(3*time.Second), 10); len(tasks) != 0 {
		t.Fatalf("activities after failed commit: %v", taskSeqs(tasks))
	}
	// The failed commit did not release the lease either.
	b.claimNone(at(3 * time.Second))
	// Once the lease runs out, the messages are all still there, and no timer.
	retry := b.claimOne("i", at(lease+3*time.Second))
	wantMessages(t, "messages after failed commit", retry.Messages, "kick", "event:e1")
	if retry.Messages[0].ID != turn.Messages[0].ID || retry.Messages[1].ID != turn.Messages[1].ID {
		t.Fatalf("message ids changed: %v then %v", turn.Messages, retry.Messages)
	}

	// The corrected commit goes through in full.
	now = at(lease + 4*time.Second)
	good := b.commitParams(retry, now)
	raised.Time = now
	sched := ev(3, history.ActivityScheduled, now)
	sched.Name = "work"
	good.NewEvents = []history.Event{raised, sched}
	good.Fates = bad.Fates
	good.Activities = bad.Activities
	b.commit(good)
	wantKinds(t, "history after commit", b.history("i", 0), history.ExecutionStarted, history.EventRaised, history.ActivityScheduled)
	wantEqual(t, "fate after commit", b.event("e1").Fate, history.FateDelivered)
	wantEqual(t, "Status after commit", b.get("i").Status, heraldtype.StatusRunning)
	if tasks := b.claimActivities(now, 10); !slices.Equal(taskSeqs(tasks), []int{3}) {
		t.Fatalf("activities after commit: %v, want [3]", taskSeqs(tasks))
	}
	b.claimNone(now)
}

func testTurnCommitTerminalDropsEvents(b *bundle) {
	t := b.t
	b.create("i", t0)
	b.raise("i", "e1", "approve", t0)
	turn := b.claimOne("i", t0)
	// e1 is buffered by this turn; e2 races the instance's last turn.
	now := at(time.Second)
	p := b.commitParams(turn, now)
	raised := ev(2, history.EventRaised, now)
	raised.EventID, raised.Name = "e1", "approve"
	p.NewEvents = []history.Event{raised}
	p.Fates = []storage.FateUpdate{{EventID: "e1", Fate: history.FateBuffered, Execution: 1, OriginExecution: 1}}
	b.commit(p)

	b.raise("i", "e2", "approve", at(2*time.Second))
	b.raise("i", "e3", "approve", at(2*time.Second))
	turn = b.claimOne("i", at(2*time.Second))
	b.raise("i", "e4", "approve", at(3*time.Second)) // arrives during the last turn
	now = at(4 * time.Second)
	p = b.commitParams(turn, now)
	// The last turn consumes e2 and e3 (e3 delivered, e2 not), and completes.
	raised2 := ev(3, history.EventRaised, now)
	raised2.EventID, raised2.Name = "e3", "approve"
	p.NewEvents = []history.Event{raised2, ev(4, history.ExecutionCompleted, now)}
	p.Fates = []storage.FateUpdate{{EventID: "e3", Fate: history.FateDelivered, Execution: 1, OriginExecution: 1, WaitNumber: 1}}
	p.Status = heraldtype.StatusCompleted
	p.Output = json.RawMessage(`42`)
	b.commit(p)

	inst := b.get("i")
	wantEqual(t, "Status", inst.Status, heraldtype.StatusCompleted)
	wantJSON(t, "Output", inst.Output, `42`)
	hist := b.history("i", 0)
	wantKinds(t, "history", hist, history.ExecutionStarted, history.EventRaised, history.EventRaised,
		history.ExecutionCompleted, history.EventDropped, history.EventDropped, history.EventDropped)
	for i, id := range []string{"e1", "e2", "e4"} {
		crumb := hist[4+i]
		wantEqual(t, "breadcrumb EventID", crumb.EventID, id)
		wantEqual(t, "breadcrumb Reason", crumb.Reason, history.DropInstanceTerminal)
		wantTime(t, "breadcrumb Time", crumb.Time, now)
		e := b.event(id)
		wantEqual(t, id+" fate", e.Fate, history.FateDropped)
		wantEqual(t, id+" reason", e.Reason, history.DropInstanceTerminal)
	}
	wantEqual(t, "e3 fate", b.event("e3").Fate, history.FateDelivered)
	b.claimNone(at(time.Hour))
	b.wantNoWake(now)
}

func testTurnCommitFates(b *bundle) {
	t := b.t
	b.create("i", t0)
	b.raise("i", "e1", "approve", t0)
	b.raise("i", "e2", "approve", t0)
	q := &storage.EventRaiseParams{Tenant: b.tenant, InstanceID: "i", EventID: "q1", Lane: "queue", Name: "jobs", Now: t0}
	if _, err := b.s.EventRaise(b.ctx, q); err != nil {
		t.Fatal(err)
	}
	turn := b.claimOne("i", t0)
	p := b.commitParams(turn, at(time.Second))
	p.Fates = []storage.FateUpdate{
		{EventID: "e1", Fate: history.FateDelivered, Execution: 1, OriginExecution: 1, WaitNumber: 2},
		{EventID: "e2", Fate: history.FateBuffered, Execution: 1, OriginExecution: 1},
		{EventID: "q1", Fate: history.FateDropped, Reason: history.DropLimit, Execution: 1, OriginExecution: 1},
	}
	b.commit(p)

	e1 := b.event("e1")
	wantEqual(t, "e1 fate", e1.Fate, history.FateDelivered)
	wantEqual(t, "e1 execution", e1.Execution, 1)
	wantEqual(t, "e1 origin", e1.OriginExecution, 1)
	wantEqual(t, "e1 wait", e1.WaitNumber, 2)
	wantTime(t, "e1 received", e1.ReceivedAt, t0)
	wantTime(t, "e1 updated", e1.UpdatedAt, at(time.Second))
	q1 := b.event("q1")
	wantEqual(t, "q1 fate", q1.Fate, history.FateDropped)
	wantEqual(t, "q1 reason", q1.Reason, history.DropLimit)

	list := func(p storage.EventListParams) []string {
		t.Helper()
		p.Tenant, p.InstanceID = b.tenant, "i"
		evs, err := b.s.EventList(b.ctx, &p)
		if err != nil {
			t.Fatalf("EventList: %v", err)
		}
		ids := []string{}
		for _, e := range evs {
			ids = append(ids, e.EventID)
		}
		return ids
	}
	for _, c := range []struct {
		what string
		p    storage.EventListParams
		want []string
	}{
		{"all", storage.EventListParams{}, []string{"e1", "e2", "q1"}},
		{"buffered", storage.EventListParams{Fate: history.FateBuffered}, []string{"e2"}},
		{"queue lane", storage.EventListParams{Lane: "queue"}, []string{"q1"}},
		{"name approve", storage.EventListParams{Name: "approve"}, []string{"e1", "e2"}},
		{"limit 1", storage.EventListParams{Limit: 1}, []string{"e1"}},
	} {
		if got := list(c.p); !slices.Equal(got, c.want) {
			t.Fatalf("EventList %s: %v, want %v", c.what, got, c.want)
		}
	}
	_, err := b.s.EventGet(b.ctx, &storage.EventGetParams{Tenant: b.tenant, EventID: "missing"})
	wantErr(t, "EventGet(missing)", err, heraldtype.ErrNotFound)
}

func testTurnCommitScopedToInstance(b *bundle) {
	t := b.t
	b.create("a", t0)
	b.create("b", t0)
	b.raise("b", "eb", "approve", t0)
	turns := b.claimN(t0, 1)
	if len(turns) != 1 || turns[0].Instance.ID != "a" {
		t.Fatalf("TurnClaim: %v, want [a]", turnIDs(turns))
	}
	ta := turns[0]
	turns = b.claimN(t0, 1)
	if len(turns) != 1 || turns[0].Instance.ID != "b" {
		t.Fatalf("TurnClaim: %v, want [b]", turnIDs(turns))
	}
	tb := turns[0]

	// a's commit names b's messages, b's event and b's timers: none of it
	// touches b.
	p := b.commitParams(ta, at(time.Second))
	for _, m := range tb.Messages {
		p.ConsumedMessages = append(p.ConsumedMessages, m.ID)
	}
	p.Fates = []storage.FateUpdate{{EventID: "eb", Fate: history.FateDelivered, Execution: 1, OriginExecution: 1, WaitNumber: 1}}
	b.commit(p)
	wantEqual(t, "fate of b's event after a's commit", b.event("eb").Fate, history.FatePending)

	// b's token does not commit a.
	wrong := b.commitParams(tb, at(time.Second))
	wrong.InstanceID = "a"
	wantErr(t, "commit of a with b's token", errOf(b.s.TurnCommit(b.ctx, wrong)), heraldtype.ErrLeaseLost)

	if err := b.s.TurnAbandon(b.ctx, &storage.TurnAbandonParams{Tenant: b.tenant, InstanceID: "b", LockToken: tb.LockToken}); err != nil {
		t.Fatal(err)
	}
	turn := b.claimOne("b", at(time.Second))
	wantMessages(t, "b's messages", turn.Messages, "kick", "event:eb")
}

func testLeaseFencing(b *bundle) {
	t := b.t
	b.create("i", t0)
	first := b.claimOne("i", t0)
	b.claimNone(at(lease / 2))
	b.raise("i", "e1", "approve", at(lease/2))

	// The lease runs out: a second claim takes the instance over.
	second := b.claimOne("i", at(lease+time.Second))
	if second.LockToken == first.LockToken {
		t.Fatalf("takeover kept lock token %q", first.LockToken)
	}
	wantMessages(t, "takeover turn", second.Messages, "kick", "event:e1")

	now := at(lease + 2*time.Second)
	stale := b.commitParams(first, now)
	stale.NewEvents = []history.Event{ev(2, history.TimerCreated, now)}
	stale.Timers = []storage.TimerSchedule{{TaskSeq: 2, FireAt: now}}
	stale.Status = heraldtype.StatusCompleted
	wantErr(t, "commit with the old token", errOf(b.s.TurnCommit(b.ctx, stale)), heraldtype.ErrLeaseLost)
	err := b.s.TurnAbandon(b.ctx, &storage.TurnAbandonParams{Tenant: b.tenant, InstanceID: "i", LockToken: first.LockToken})
	wantErr(t, "abandon with the old token", err, heraldtype.ErrLeaseLost)
	wantKinds(t, "history after stale commit", b.history("i", 0), history.ExecutionStarted)
	wantEqual(t, "Status after stale commit", b.get("i").Status, heraldtype.StatusPending)
	wantEqual(t, "e1 fate after stale commit", b.event("e1").Fate, history.FatePending)

	// The owner commits; its token is spent afterwards.
	p := b.commitParams(second, now)
	p.NewEvents = []history.Event{ev(2, history.TimerCreated, now)}
	b.commit(p)
	wantErr(t, "second commit with a spent token", errOf(b.s.TurnCommit(b.ctx, b.commitParams(second, now))), heraldtype.ErrLeaseLost)
	// A stale commit whose events collide with the owner's is refused for
	// its lease too, not for the collision.
	wantErr(t, "stale commit of a seq the owner wrote", errOf(b.s.TurnCommit(b.ctx, stale)), heraldtype.ErrLeaseLost)
	wantKinds(t, "history", b.history("i", 0), history.ExecutionStarted, history.TimerCreated)
	b.claimNone(at(time.Hour))

	wantErr(t, "commit of a missing instance", errOf(b.s.TurnCommit(b.ctx, &storage.TurnCommitParams{
		Tenant: b.tenant, InstanceID: "missing", LockToken: second.LockToken, Execution: 1, Now: now,
	})), heraldtype.ErrLeaseLost)
}

func testLeaseExpiredNotTakenOver(b *bundle) {
	t := b.t
	b.create("i", t0)
	turn := b.claimOne("i", t0)
	// The lease ran out but nobody claimed the instance: the token still
	// owns it (fencing is by token, not by clock).
	now := at(10 * lease)
	b.commit(b.commitParams(turn, now))
	wantEqual(t, "Status", b.get("i").Status, heraldtype.StatusRunning)
}

// testCommitWrongExecution: a commit whose lease is the instance's but
// whose Execution is not fails and writes nothing, both as a plain commit
// (the backends' one-statement paths) and as one with an activity (their
// general paths); the owner's commit then succeeds.
func testCommitWrongExecution(b *bundle) {
	t := b.t
	b.create("i", t0)
	turn := b.claimOne("i", t0)
	plain := b.commitParams(turn, t0)
	plain.Execution = turn.Instance.Execution + 1
	plain.NewEvents = []history.Event{ev(2, history.ExecutionCompleted, t0)}
	plain.Status = heraldtype.StatusCompleted
	if _, err := b.s.TurnCommit(b.ctx, plain); err == nil || !strings.Contains(err.Error(), "execution") {
		t.Fatalf("plain commit on another execution: got error %v, want one naming the execution", err)
	}
	general := b.commitParams(turn, t0)
	general.Execution = turn.Instance.Execution + 1
	general.NewEvents = []history.Event{ev(2, history.ActivityScheduled, t0)}
	general.Activities = []storage.ActivityTask{{TaskSeq: 2, Name: "a"}}
	if _, err := b.s.TurnCommit(b.ctx, general); err == nil || !strings.Contains(err.Error(), "execution") {
		t.Fatalf("commit with an activity on another execution: got error %v, want one naming the execution", err)
	}
	wantKinds(t, "history after the refused commits", b.history("i", 0), history.ExecutionStarted)
	wantEqual(t, "Status after the refused commits", b.get("i").Status, heraldtype.StatusPending)
	p := b.commitParams(turn, t0)
	p.NewEvents = []history.Event{ev(2, history.ExecutionCompleted, t0)}
	p.Status = heraldtype.StatusCompleted
	b.commit(p)
	wantEqual(t, "Status after the owner's commit", b.get("i").Status, heraldtype.StatusCompleted)
}

func testTurnAbandon(b *bundle) {
	t := b.t
	b.create("i", t0)
	turn := b.claimOne("i", t0)
	err := b.s.TurnAbandon(b.ctx, &storage.TurnAbandonParams{Tenant: b.tenant, InstanceID: "i", LockToken: "not-the-token"})
	wantErr(t, "abandon with a wrong token", err, heraldtype.ErrLeaseLost)

	if err := b.s.TurnAbandon(b.ctx, &storage.TurnAbandonParams{
		Tenant: b.tenant, InstanceID: "i", LockToken: turn.LockToken, RetryAt: at(time.Minute),
	}); err != nil {
		t.Fatalf("TurnAbandon: %v", err)
	}
	b.claimNone(at(30 * time.Second))
	b.wantNextWake(at(30*time.Second), at(time.Minute))
	turn = b.claimOne("i", at(time.Minute))
	wantMessages(t, "turn after abandon", turn.Messages, "kick")

	// Without RetryAt the instance is claimable at once, with its messages.
	if err := b.s.TurnAbandon(b.ctx, &storage.TurnAbandonParams{Tenant: b.tenant, InstanceID: "i", LockToken: turn.LockToken}); err != nil {
		t.Fatalf("TurnAbandon: %v", err)
	}
	turn = b.claimOne("i", at(time.Minute))
	wantMessages(t, "turn after second abandon", turn.Messages, "kick")
	err = b.s.TurnAbandon(b.ctx, &storage.TurnAbandonParams{Tenant: b.tenant, InstanceID: "i", LockToken: turn.LockToken + "x"})
	wantErr(t, "abandon with a wrong token", err, heraldtype.ErrLeaseLost)
}

func testTimers(b *bundle) {
	t := b.t
	b.create("i", t0)
	turn := b.claimOne("i", t0)
	p := b.commitParams(turn, t0)
	t1, t2 := ev(2, history.TimerCreated, t0), ev(3, history.TimerCreated, t0)
	t1.FireAt, t2.FireAt = at(time.Minute), at(2*time.Minute)
	p.NewEvents = []history.Event{t1, t2}
	p.Timers = []storage.TimerSchedule{{TaskSeq: 2, FireAt: at(time.Minute)}, {TaskSeq: 3, FireAt: at(2 * time.Minute)}}
	b.commit(p)

	b.claimNone(at(30 * time.Second))
	b.wantNextWake(at(30*time.Second), at(time.Minute))

	turn = b.claimOne("i", at(time.Minute))
	wantMessages(t, "turn at the first timer", turn.Messages, "timer_fired:2")
	m := turn.Messages[0]
	wantEqual(t, "timer Execution", m.Execution, 1)
	wantTime(t, "timer VisibleAt", m.VisibleAt, at(time.Minute))

	// The turn cancels the second timer: it never fires.
	now := at(time.Minute)
	p = b.commitParams(turn, now)
	fired := ev(4, history.TimerFired, now)
	fired.TaskSeq = 2
	cancelled := ev(5, history.TimerCancelled, now)
	cancelled.TaskSeq = 3
	p.NewEvents = []history.Event{fired, cancelled}
	p.CancelTimers = []int{3}
	b.commit(p)
	b.claimNone(at(time.Hour))
	b.wantNoWake(now)
}

func testContinueAsNew(b *bundle) {
	t := b.t
	b.create("i", t0)
	turn := b.claimOne("i", t0)
	p := b.commitParams(turn, t0)
	timer := ev(2, history.TimerCreated, t0)
	timer.FireAt = at(time.Hour)
	sched := ev(3, history.ActivityScheduled, t0)
	sched.Name = "never"
	p.NewEvents = []history.Event{timer, sched}
	p.Timers = []storage.TimerSchedule{{TaskSeq: 2, FireAt: at(time.Hour)}}
	p.Activities = []storage.ActivityTask{{TaskSeq: 3, Name: "never"}}
	b.commit(p)

	b.raise("i", "e1", "next", at(time.Second))
	turn = b.claimOne("i", at(time.Second))
	b.raise("i", "e2", "next", at(2*time.Second)) // arrives during the turn, not consumed by it
	now := at(3 * time.Second)
	p = b.commitParams(turn, now)
	can := ev(4, history.ExecutionContinuedAsNew, now)
	can.Input = json.RawMessage(`{"round":2}`)
	p.NewEvents = []history.Event{can}
	started := ev(1, history.ExecutionStarted, now)
	started.Workflow, started.Execution, started.Input = "wf", 2, json.RawMessage(`{"round":2}`)
	carried := ev(2, history.EventRaised, now)
	carried.EventID, carried.Name, carried.AtStart, carried.OriginExecution = "e1", "next", true, 1
	p.ContinueAsNew = &storage.ContinueAsNewParams{
		Input:       json.RawMessage(`{"round":2}`),
		StartEvents: []history.Event{started, carried},
	}
	p.Fates = []storage.FateUpdate{{EventID: "e1", Fate: history.FateBuffered, Execution: 2, OriginExecution: 1}}
	b.commit(p)

	inst := b.get("i")
	wantEqual(t, "Execution", inst.Execution, 2)
	wantEqual(t, "Status", inst.Status, heraldtype.StatusRunning)
	wantJSON(t, "Input", inst.Input, `{"round":2}`)
	wantKinds(t, "old history", b.history("i", 1), history.ExecutionStarted, history.TimerCreated,
		history.ActivityScheduled, history.ExecutionContinuedAsNew)
	hist := b.history("i", 0)
	wantKinds(t, "new history", hist, history.ExecutionStarted, history.EventRaised)
	wantEqual(t, "new ExecutionStarted.Execution", hist[0].Execution, 2)
	if !hist[1].AtStart || hist[1].OriginExecution != 1 {
		t.Fatalf("carried event lost its fields: %+v", hist[1])
	}
	e1 := b.event("e1")
	wantEqual(t, "e1 execution", e1.Execution, 2)
	wantEqual(t, "e1 fate", e1.Fate, history.FateBuffered)

	// The new execution starts with a kick; e2 is still waiting; the old
	// execution's timer and activity are gone.
	turn = b.claimOne("i", now)
	wantEqual(t, "turn Execution", turn.Instance.Execution, 2)
	wantKinds(t, "turn history", turn.History, history.ExecutionStarted, history.EventRaised)
	wantMessages(t, "new execution's turn", turn.Messages, "event:e2", "kick")
	wantEqual(t, "kick Execution", turn.Messages[1].Execution, 2)
	if tasks := b.claimActivities(now, 10); len(tasks) != 0 {
		t.Fatalf("old execution's activity still claimable: %v", taskSeqs(tasks))
	}
	b.commit(b.commitParams(turn, now))
	b.claimNone(at(2 * time.Hour))
	b.wantNoWake(now)
}
