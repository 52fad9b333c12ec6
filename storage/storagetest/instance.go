package storagetest

import (
	"encoding/json"
	"slices"
	"time"

	"github.com/heraldwf/herald/heraldtype"
	"github.com/heraldwf/herald/history"
	"github.com/heraldwf/herald/storage"
)

func testInstanceCreateGet(b *bundle) {
	t := b.t
	inst := b.create("a", t0)
	wantEqual(t, "Tenant", inst.Tenant, b.tenant)
	wantEqual(t, "ID", inst.ID, "a")
	wantEqual(t, "Workflow", inst.Workflow, "wf")
	wantEqual(t, "Status", inst.Status, heraldtype.StatusPending)
	wantEqual(t, "Execution", inst.Execution, 1)
	wantJSON(t, "Input", inst.Input, `{"id":"a"}`)
	wantTime(t, "CreatedAt", inst.CreatedAt, t0)

	got := b.get("a")
	wantEqual(t, "get Status", got.Status, heraldtype.StatusPending)
	wantEqual(t, "get Execution", got.Execution, 1)
	wantJSON(t, "get Input", got.Input, `{"id":"a"}`)
	wantTime(t, "get CreatedAt", got.CreatedAt, t0)
	if got.Failure != nil || got.Output != nil {
		t.Fatalf("new instance has output %s, failure %v", got.Output, got.Failure)
	}

	_, err := b.s.InstanceCreate(b.ctx, &storage.InstanceCreateParams{Tenant: b.tenant, ID: "a", Workflow: "other", Now: at(time.Second)})
	wantErr(t, "InstanceCreate of an existing id", err, heraldtype.ErrInstanceExists)
	wantEqual(t, "Workflow after failed re-create", b.get("a").Workflow, "wf")

	_, err = b.s.InstanceGet(b.ctx, &storage.InstanceGetParams{Tenant: b.tenant, ID: "missing"})
	wantErr(t, "InstanceGet(missing)", err, heraldtype.ErrNotFound)

	evs := b.history("a", 0)
	wantKinds(t, "history", evs, history.ExecutionStarted)
	started := evs[0]
	wantEqual(t, "ExecutionStarted.Seq", started.Seq, 1)
	wantEqual(t, "ExecutionStarted.Execution", started.Execution, 1)
	wantEqual(t, "ExecutionStarted.Workflow", started.Workflow, "wf")
	wantJSON(t, "ExecutionStarted.Input", started.Input, `{"id":"a"}`)
	wantTime(t, "ExecutionStarted.Time", started.Time, t0)

	// The kick is visible at once; the turn carries the instance and its history.
	turn := b.claimOne("a", t0)
	wantMessages(t, "first turn", turn.Messages, "kick")
	wantEqual(t, "kick Execution", turn.Messages[0].Execution, 1)
	wantEqual(t, "turn Instance.Status", turn.Instance.Status, heraldtype.StatusPending)
	wantEqual(t, "turn Instance.Tenant", turn.Instance.Tenant, b.tenant)
	wantKinds(t, "turn history", turn.History, history.ExecutionStarted)
	// Leased: no second claim.
	b.claimNone(t0)

	// The first commit makes it running.
	b.commit(b.commitParams(turn, at(time.Second)))
	got = b.get("a")
	wantEqual(t, "Status after first commit", got.Status, heraldtype.StatusRunning)
	wantTime(t, "UpdatedAt after first commit", got.UpdatedAt, at(time.Second))
	b.claimNone(at(time.Hour))
}

func testInstanceList(b *bundle) {
	t := b.t
	b.create("a", t0)
	b.create("b", at(time.Second))
	if _, err := b.s.InstanceCreate(b.ctx, &storage.InstanceCreateParams{
		Tenant: b.tenant, ID: "c", Workflow: "other", Now: at(2 * time.Second),
	}); err != nil {
		t.Fatal(err)
	}
	list := func(p storage.InstanceListParams) []string {
		t.Helper()
		p.Tenant = b.tenant
		insts, _, err := b.s.InstanceList(b.ctx, &p)
		if err != nil {
			t.Fatalf("InstanceList: %v", err)
		}
		ids := make([]string, len(insts))
		for i, inst := range insts {
			ids[i] = inst.ID
		}
		return ids
	}
	want := func(what string, got []string, want ...string) {
		t.Helper()
		if !slices.Equal(got, want) {
			t.Fatalf("%s: %v, want %v", what, got, want)
		}
	}
	want("all, newest first", list(storage.InstanceListParams{}), "c", "b", "a")
	want("workflow wf", list(storage.InstanceListParams{Workflow: "wf"}), "b", "a")
	want("limit 1", list(storage.InstanceListParams{Limit: 1}), "c")

	turns := b.claimN(at(3*time.Second), 1) // a's kick is the oldest message
	if len(turns) != 1 || turns[0].Instance.ID != "a" {
		t.Fatalf("TurnClaim: %v, want [a]", turnIDs(turns))
	}
	p := b.commitParams(turns[0], at(4*time.Second))
	p.Status = heraldtype.StatusCompleted
	p.Output = json.RawMessage(`"done"`)
	p.NewEvents = []history.Event{ev(2, history.ExecutionCompleted, at(4*time.Second))}
	b.commit(p)
	want("status completed", list(storage.InstanceListParams{Status: heraldtype.StatusCompleted}), "a")
	want("status pending", list(storage.InstanceListParams{Status: heraldtype.StatusPending}), "c", "b")
	want("other tenant", b.in(b.tenant+"-other").listIDs())
	inst := b.get("a")
	wantJSON(t, "Output", inst.Output, `"done"`)
}

func (b *bundle) listIDs() []string {
	b.t.Helper()
	insts, _, err := b.s.InstanceList(b.ctx, &storage.InstanceListParams{Tenant: b.tenant})
	if err != nil {
		b.t.Fatalf("InstanceList: %v", err)
	}
	ids := []string{}
	for _, inst := range insts {
		ids = append(ids, inst.ID)
	}
	return ids
}

func testInstanceTerminate(b *bundle) {
	t := b.t
	b.create("i", t0)
	b.raise("i", "e1", "approve", at(time.Second))
	b.raise("i", "e2", "approve", at(time.Second))

	// Turn 1: e1 is buffered, e2 delivered; an activity and a timer are scheduled.
	turn := b.claimOne("i", at(2*time.Second))
	wantMessages(t, "turn 1", turn.Messages, "kick", "event:e1", "event:e2")
	now := at(2 * time.Second)
	p := b.commitParams(turn, now)
	raised1 := ev(2, history.EventRaised, now)
	raised1.EventID, raised1.Name, raised1.Lane = "e1", "approve", history.LanePositional
	raised2 := ev(3, history.EventRaised, now)
	raised2.EventID, raised2.Name, raised2.Lane = "e2", "approve", history.LanePositional
	sched := ev(4, history.ActivityScheduled, now)
	sched.Name = "work"
	timer := ev(5, history.TimerCreated, now)
	timer.FireAt = at(time.Hour)
	p.NewEvents = []history.Event{raised1, raised2, sched, timer}
	p.Fates = []storage.FateUpdate{
		{EventID: "e1", Fate: history.FateBuffered, Execution: 1, OriginExecution: 1},
		{EventID: "e2", Fate: history.FateDelivered, Execution: 1, OriginExecution: 1, WaitNumber: 1},
	}
	p.Activities = []storage.ActivityTask{{TaskSeq: 4, Name: "work"}}
	p.Timers = []storage.TimerSchedule{{TaskSeq: 5, FireAt: at(time.Hour)}}
	b.commit(p)

	// e3 stays pending; a second turn is in flight when the instance is terminated.
	b.raise("i", "e3", "approve", at(3*time.Second))
	inflight := b.claimOne("i", at(3*time.Second))

	end := at(4 * time.Second)
	dropped, err := b.s.InstanceTerminate(b.ctx, &storage.InstanceTerminateParams{Tenant: b.tenant, ID: "i", Reason: "operator", Now: end})
	if err != nil {
		t.Fatalf("InstanceTerminate: %v", err)
	}
	inst := b.get("i")
	wantEqual(t, "Status", inst.Status, heraldtype.StatusTerminated)
	if inst.Failure == nil || inst.Failure.Kind != "terminated" || inst.Failure.Message != "operator" {
		t.Fatalf("Failure = %+v, want terminated: operator", inst.Failure)
	}

	hist := b.history("i", 0)
	wantKinds(t, "history", hist,
		history.ExecutionStarted, history.EventRaised, history.EventRaised, history.ActivityScheduled, history.TimerCreated,
		history.ExecutionTerminated, history.EventDropped, history.EventDropped)
	term := hist[5]
	if term.Failure == nil || term.Failure.Kind != "terminated" || term.Failure.Message != "operator" {
		t.Fatalf("ExecutionTerminated.Failure = %+v", term.Failure)
	}
	wantTime(t, "ExecutionTerminated.Time", term.Time, end)
	wantEqual(t, "dropped breadcrumbs returned", len(dropped), 2)
	for i, id := range []string{"e1", "e3"} {
		crumb := hist[6+i]
		wantEqual(t, "returned breadcrumb EventID", dropped[i].EventID, id)
		wantEqual(t, "returned breadcrumb Seq", dropped[i].Seq, crumb.Seq)
		wantEqual(t, "breadcrumb EventID", crumb.EventID, id)
		wantEqual(t, "breadcrumb Name", crumb.Name, "approve")
		wantEqual(t, "breadcrumb Lane", crumb.Lane, history.LanePositional)
		wantEqual(t, "breadcrumb Reason", crumb.Reason, history.DropInstanceTerminal)
		wantTime(t, "breadcrumb Time", crumb.Time, end)
	}

	for _, id := range []string{"e1", "e3"} {
		e := b.event(id)
		wantEqual(t, id+" fate", e.Fate, history.FateDropped)
		wantEqual(t, id+" reason", e.Reason, history.DropInstanceTerminal)
	}
	e2 := b.event("e2")
	wantEqual(t, "e2 fate", e2.Fate, history.FateDelivered)
	wantEqual(t, "e2 wait number", e2.WaitNumber, 1)

	// The in-flight turn is fenced off and writes nothing.
	fenced := b.commitParams(inflight, at(5*time.Second))
	fenced.NewEvents = []history.Event{ev(9, history.TimerCreated, at(5*time.Second))}
	fenced.Status = heraldtype.StatusCompleted
	wantErr(t, "commit of the in-flight turn", errOf(b.s.TurnCommit(b.ctx, fenced)), heraldtype.ErrLeaseLost)
	wantEqual(t, "history length after fenced commit", len(b.history("i", 0)), 8)
	wantEqual(t, "Status after fenced commit", b.get("i").Status, heraldtype.StatusTerminated)

	// Inbox, timers and activities are gone.
	b.claimNone(at(2 * time.Hour))
	if tasks := b.claimActivities(at(2*time.Hour), 10); len(tasks) != 0 {
		t.Fatalf("ActivityClaim after terminate: %v", taskSeqs(tasks))
	}
	b.wantNoWake(end)

	_, err = b.s.InstanceTerminate(b.ctx, &storage.InstanceTerminateParams{Tenant: b.tenant, ID: "i", Reason: "again", Now: end})
	wantErr(t, "InstanceTerminate of a terminated instance", err, heraldtype.ErrInstanceNotRunning)
	_, err = b.s.InstanceTerminate(b.ctx, &storage.InstanceTerminateParams{Tenant: b.tenant, ID: "missing", Now: end})
	wantErr(t, "InstanceTerminate(missing)", err, heraldtype.ErrNotFound)
	_, err = b.s.EventRaise(b.ctx, b.raiseParams("i", "e4", "approve", end))
	wantErr(t, "EventRaise to a terminated instance", err, heraldtype.ErrInstanceNotRunning)
}

func testHistoryPaging(b *bundle) {
	t := b.t
	b.create("h", t0)
	turn := b.claimOne("h", t0)
	p := b.commitParams(turn, at(time.Second))
	for seq := 2; seq <= 10; seq++ {
		e := ev(seq, history.TimerCreated, at(time.Second))
		e.FireAt = at(time.Duration(seq) * time.Hour)
		p.NewEvents = append(p.NewEvents, e)
	}
	b.commit(p)

	page := func(exec, after, limit int) []int {
		t.Helper()
		evs, err := b.s.HistoryList(b.ctx, &storage.HistoryListParams{
			Tenant: b.tenant, InstanceID: "h", Execution: exec, AfterSeq: after, Limit: limit,
		})
		if err != nil {
			t.Fatalf("HistoryList: %v", err)
		}
		seqs := make([]int, len(evs))
		for i, e := range evs {
			seqs[i] = e.Seq
		}
		return seqs
	}
	want := func(what string, got []int, want ...int) {
		t.Helper()
		if !slices.Equal(got, want) {
			t.Fatalf("%s: seqs %v, want %v", what, got, want)
		}
	}
	want("all", page(0, 0, 0), 1, 2, 3, 4, 5, 6, 7, 8, 9, 10)
	want("execution 1", page(1, 0, 0), 1, 2, 3, 4, 5, 6, 7, 8, 9, 10)
	want("after 3 limit 4", page(0, 3, 4), 4, 5, 6, 7)
	want("after 7 limit 4", page(0, 7, 4), 8, 9, 10)
	want("after 10", page(0, 10, 0))
	want("execution 2 (none yet)", page(2, 0, 0))

	hist := b.history("h", 0)
	wantTime(t, "FireAt survives storage", hist[4].FireAt, at(5*time.Hour))

	_, err := b.s.HistoryList(b.ctx, &storage.HistoryListParams{Tenant: b.tenant, InstanceID: "missing"})
	wantErr(t, "HistoryList(missing)", err, heraldtype.ErrNotFound)
}
