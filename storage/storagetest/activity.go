package storagetest

import (
	"encoding/json"
	"slices"
	"time"

	"github.com/heraldwf/herald/heraldtype"
	"github.com/heraldwf/herald/history"
	"github.com/heraldwf/herald/storage"
)

// scheduleActivities creates instance id and commits its first turn, which
// schedules one activity per seq (named "act<seq>").
func (b *bundle) scheduleActivities(id string, seqs ...int) {
	b.t.Helper()
	b.create(id, t0)
	turn := b.claimOne(id, t0)
	p := b.commitParams(turn, t0)
	for _, seq := range seqs {
		name := "act" + string(rune('0'+seq))
		e := ev(seq, history.ActivityScheduled, t0)
		e.Name = name
		p.NewEvents = append(p.NewEvents, e)
		p.Activities = append(p.Activities, storage.ActivityTask{
			TaskSeq: seq, Name: name, Input: json.RawMessage(`{"seq":` + string(rune('0'+seq)) + `}`),
			Retry: heraldtype.RetryPolicy{MaxAttempts: 3, InitialInterval: time.Second, BackoffCoefficient: 2},
		})
	}
	b.commit(p)
}

func (b *bundle) heartbeat(task *storage.ActivityTask, until time.Time) (bool, error) {
	return b.s.ActivityHeartbeat(b.ctx, &storage.ActivityHeartbeatParams{
		Tenant: b.tenant, InstanceID: task.InstanceID, Execution: task.Execution, TaskSeq: task.TaskSeq,
		LockToken: task.LockToken, LeaseUntil: until,
	})
}

func (b *bundle) complete(task *storage.ActivityTask, result string, failure *history.Failure, now time.Time) error {
	var res json.RawMessage
	if result != "" {
		res = json.RawMessage(result)
	}
	return b.s.ActivityComplete(b.ctx, &storage.ActivityCompleteParams{
		Tenant: b.tenant, InstanceID: task.InstanceID, Execution: task.Execution, TaskSeq: task.TaskSeq,
		LockToken: task.LockToken, Result: res, Failure: failure, Now: now,
	})
}

func testActivities(b *bundle) {
	t := b.t
	b.scheduleActivities("i", 2, 3)
	b.claimNone(t0)

	now := at(time.Second)
	tasks := b.claimActivities(now, 1)
	if !slices.Equal(taskSeqs(tasks), []int{2}) {
		t.Fatalf("first ActivityClaim: %v, want [2]", taskSeqs(tasks))
	}
	a2 := tasks[0]
	wantEqual(t, "Tenant", a2.Tenant, b.tenant)
	wantEqual(t, "InstanceID", a2.InstanceID, "i")
	wantEqual(t, "Execution", a2.Execution, 1)
	wantEqual(t, "Name", a2.Name, "act2")
	wantJSON(t, "Input", a2.Input, `{"seq":2}`)
	wantEqual(t, "Attempt", a2.Attempt, 1)
	wantEqual(t, "Retry", a2.Retry, heraldtype.RetryPolicy{MaxAttempts: 3, InitialInterval: time.Second, BackoffCoefficient: 2})
	wantTime(t, "LeaseUntil", a2.LeaseUntil, now.Add(lease))
	if a2.LockToken == "" || a2.CancelRequested {
		t.Fatalf("claimed task: token %q, cancel %v", a2.LockToken, a2.CancelRequested)
	}

	tasks = b.claimActivities(now, 10)
	if !slices.Equal(taskSeqs(tasks), []int{3}) {
		t.Fatalf("second ActivityClaim: %v, want [3] (2 is leased)", taskSeqs(tasks))
	}
	a3 := tasks[0]
	if len(b.claimActivities(now, 10)) != 0 {
		t.Fatal("leased tasks claimed again")
	}

	// Heartbeat extends 2's lease; 3's runs out and is taken over.
	cancel, err := b.heartbeat(a2, at(5*time.Minute))
	if err != nil || cancel {
		t.Fatalf("ActivityHeartbeat = %v, %v; want false, nil", cancel, err)
	}
	wrong := *a2
	wrong.LockToken = "not-the-token"
	_, err = b.heartbeat(&wrong, at(5*time.Minute))
	wantErr(t, "heartbeat with a wrong token", err, heraldtype.ErrLeaseLost)

	now = at(3 * time.Minute)
	tasks = b.claimActivities(now, 10)
	if !slices.Equal(taskSeqs(tasks), []int{3}) {
		t.Fatalf("ActivityClaim after 3's lease ran out: %v, want [3]", taskSeqs(tasks))
	}
	a3b := tasks[0]
	if a3b.LockToken == a3.LockToken {
		t.Fatal("takeover kept the lock token")
	}
	wantEqual(t, "Attempt after taking over a lost attempt", a3b.Attempt, a3.Attempt+1)
	wantErr(t, "complete with the taken-over token", b.complete(a3, `"late"`, nil, now), heraldtype.ErrLeaseLost)
	_, err = b.heartbeat(a3, at(10*time.Minute))
	wantErr(t, "heartbeat with the taken-over token", err, heraldtype.ErrLeaseLost)
	if err := b.complete(a3b, "", &history.Failure{Kind: "activity", Message: "boom"}, now); err != nil {
		t.Fatalf("ActivityComplete with a failure: %v", err)
	}

	// 2 fails its first attempt and is retried later.
	err = b.s.ActivityRetry(b.ctx, &storage.ActivityRetryParams{
		Tenant: b.tenant, InstanceID: "i", Execution: 1, TaskSeq: 2, LockToken: "not-the-token", RetryAt: at(10 * time.Minute),
	})
	wantErr(t, "retry with a wrong token", err, heraldtype.ErrLeaseLost)
	if err := b.s.ActivityRetry(b.ctx, &storage.ActivityRetryParams{
		Tenant: b.tenant, InstanceID: "i", Execution: 1, TaskSeq: 2, LockToken: a2.LockToken, RetryAt: at(10 * time.Minute),
	}); err != nil {
		t.Fatalf("ActivityRetry: %v", err)
	}
	_, err = b.heartbeat(a2, at(20*time.Minute))
	wantErr(t, "heartbeat after retry", err, heraldtype.ErrLeaseLost)
	if tasks := b.claimActivities(at(9*time.Minute), 10); len(tasks) != 0 {
		t.Fatalf("retried task claimed before RetryAt: %v", taskSeqs(tasks))
	}
	b.wantNextWake(at(9*time.Minute), at(10*time.Minute))
	tasks = b.claimActivities(at(10*time.Minute), 10)
	if !slices.Equal(taskSeqs(tasks), []int{2}) || tasks[0].Attempt != 2 {
		t.Fatalf("ActivityClaim at RetryAt: %v (attempt %d), want [2] attempt 2", taskSeqs(tasks), tasks[0].Attempt)
	}
	a2b := tasks[0]
	if err := b.complete(a2b, `{"ok":true}`, nil, at(10*time.Minute)); err != nil {
		t.Fatalf("ActivityComplete: %v", err)
	}
	wantErr(t, "second completion", b.complete(a2b, `{"ok":true}`, nil, at(10*time.Minute)), heraldtype.ErrLeaseLost)

	// Both results reach the instance's inbox, in completion order.
	turn := b.claimOne("i", at(10*time.Minute))
	wantMessages(t, "results", turn.Messages, "activity_failed:3", "activity_completed:2")
	failed, completed := turn.Messages[0], turn.Messages[1]
	wantEqual(t, "failed Execution", failed.Execution, 1)
	if failed.Failure == nil || failed.Failure.Kind != "activity" || failed.Failure.Message != "boom" {
		t.Fatalf("failed.Failure = %+v", failed.Failure)
	}
	wantJSON(t, "completed Result", completed.Result, `{"ok":true}`)
	if completed.Failure != nil {
		t.Fatalf("completed.Failure = %+v", completed.Failure)
	}
	if len(b.claimActivities(at(time.Hour), 10)) != 0 {
		t.Fatal("completed tasks still claimable")
	}
}

func testActivityCancel(b *bundle) {
	t := b.t
	b.scheduleActivities("i", 2, 3, 4)
	tasks := b.claimActivities(at(time.Second), 1)
	if !slices.Equal(taskSeqs(tasks), []int{2}) {
		t.Fatalf("ActivityClaim: %v, want [2]", taskSeqs(tasks))
	}
	a2 := tasks[0]
	tasks = b.claimActivities(at(2*time.Second), 1)
	if !slices.Equal(taskSeqs(tasks), []int{3}) {
		t.Fatalf("ActivityClaim: %v, want [3]", taskSeqs(tasks))
	}
	a3 := tasks[0]

	// A turn cancels all three: 4 (unleased) is deleted, 2 and 3 (leased)
	// are asked to stop.
	b.raise("i", "e1", "stop", at(3*time.Second))
	turn := b.claimOne("i", at(3*time.Second))
	p := b.commitParams(turn, at(3*time.Second))
	p.CancelActivities = []int{2, 3, 4}
	b.commit(p)

	if tasks := b.claimActivities(at(4*time.Second), 10); len(tasks) != 0 {
		t.Fatalf("cancelled tasks claimable: %v", taskSeqs(tasks))
	}
	for _, a := range []*storage.ActivityTask{a2, a3} {
		cancel, err := b.heartbeat(a, at(time.Minute))
		if err != nil || !cancel {
			t.Fatalf("heartbeat of cancelled task %d = %v, %v; want true, nil", a.TaskSeq, cancel, err)
		}
	}
	// 2's result is discarded.
	if err := b.complete(a2, `"late"`, nil, at(5*time.Second)); err != nil {
		t.Fatalf("ActivityComplete of a cancelled task: %v", err)
	}
	b.claimNone(at(5 * time.Second))
	// 3's worker dies: once its lease runs out it is not handed out again.
	if tasks := b.claimActivities(at(10*time.Minute), 10); len(tasks) != 0 {
		t.Fatalf("cancelled task re-claimed after its lease: %v", taskSeqs(tasks))
	}
	b.claimNone(at(10 * time.Minute))
	b.wantNoWake(at(10 * time.Minute))
}

func testCompletionAfterContinueAsNew(b *bundle) {
	t := b.t
	b.scheduleActivities("i", 2, 3)
	tasks := b.claimActivities(at(time.Second), 1)
	if len(tasks) != 1 {
		t.Fatalf("ActivityClaim: %v", taskSeqs(tasks))
	}
	leased := tasks[0]

	b.raise("i", "e1", "next", at(2*time.Second))
	turn := b.claimOne("i", at(2*time.Second))
	now := at(3 * time.Second)
	p := b.commitParams(turn, now)
	p.NewEvents = []history.Event{ev(4, history.ExecutionContinuedAsNew, now)}
	started := ev(1, history.ExecutionStarted, now)
	started.Workflow, started.Execution = "wf", 2
	p.ContinueAsNew = &storage.ContinueAsNewParams{StartEvents: []history.Event{started}}
	b.commit(p)

	// The unleased task of execution 1 is gone; the leased one is asked to
	// stop, and its result is discarded.
	if tasks := b.claimActivities(now, 10); len(tasks) != 0 {
		t.Fatalf("execution 1's tasks claimable after continue-as-new: %v", taskSeqs(tasks))
	}
	cancel, err := b.heartbeat(leased, at(time.Minute))
	if err != nil || !cancel {
		t.Fatalf("heartbeat after continue-as-new = %v, %v; want true, nil", cancel, err)
	}
	if err := b.complete(leased, `"stale"`, nil, at(4*time.Second)); err != nil {
		t.Fatalf("ActivityComplete after continue-as-new: %v", err)
	}
	turn = b.claimOne("i", at(4*time.Second))
	wantMessages(t, "execution 2's first turn", turn.Messages, "kick")
	b.commit(b.commitParams(turn, at(4*time.Second)))
	b.claimNone(at(time.Hour))
}
