package storagetest

import (
	"encoding/json"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/heraldwf/herald/heraldtype"
	"github.com/heraldwf/herald/history"
	"github.com/heraldwf/herald/storage"
)

func testTenantIsolation(b *bundle) {
	t := b.t
	ta, tb := b.in(b.tenant+"-a"), b.in(b.tenant+"-b")
	for _, x := range []*bundle{ta, tb} {
		if _, err := b.s.InstanceCreate(b.ctx, &storage.InstanceCreateParams{
			Tenant: x.tenant, ID: "shared", Workflow: "wf", Input: json.RawMessage(`"` + x.tenant + `"`), Now: t0,
		}); err != nil {
			t.Fatalf("InstanceCreate in %s: %v", x.tenant, err)
		}
	}
	wantJSON(t, "input in a", ta.get("shared").Input, `"`+ta.tenant+`"`)
	wantJSON(t, "input in b", tb.get("shared").Input, `"`+tb.tenant+`"`)
	_, err := b.s.InstanceGet(b.ctx, &storage.InstanceGetParams{Tenant: b.tenant, ID: "shared"})
	wantErr(t, "InstanceGet in a third tenant", err, heraldtype.ErrNotFound)

	// The same event id in two tenants is two events.
	ta.raise("shared", "e1", "approve", t0)
	if res := tb.raise("shared", "e1", "reject", t0); res.Duplicate {
		t.Fatal("event id of tenant a deduplicated an event of tenant b")
	}
	wantEqual(t, "name in a", ta.event("e1").Name, "approve")
	wantEqual(t, "name in b", tb.event("e1").Name, "reject")

	// Claims never cross tenants.
	turnA := ta.claimOne("shared", at(time.Second))
	wantEqual(t, "turn tenant", turnA.Instance.Tenant, ta.tenant)
	wantMessages(t, "turn in a", turnA.Messages, "kick", "event:e1")
	wantJSON(t, "turn input", turnA.Instance.Input, `"`+ta.tenant+`"`)
	turnB := tb.claimOne("shared", at(time.Second))
	wantJSON(t, "turn input in b", turnB.Instance.Input, `"`+tb.tenant+`"`)

	// A's token does not commit B's instance.
	cross := ta.commitParams(turnA, at(2*time.Second))
	cross.Tenant = tb.tenant
	cross.Status = heraldtype.StatusCompleted
	wantErr(t, "commit with another tenant's token", errOf(b.s.TurnCommit(b.ctx, cross)), heraldtype.ErrLeaseLost)

	// B schedules an activity; A sees none.
	p := tb.commitParams(turnB, at(2*time.Second))
	sched := ev(2, history.ActivityScheduled, at(2*time.Second))
	sched.Name = "work"
	p.NewEvents = []history.Event{sched}
	p.Activities = []storage.ActivityTask{{TaskSeq: 2, Name: "work"}}
	p.Fates = []storage.FateUpdate{{EventID: "e1", Fate: history.FateDelivered, Execution: 1, OriginExecution: 1, WaitNumber: 1}}
	tb.commit(p)
	if tasks := ta.claimActivities(at(3*time.Second), 10); len(tasks) != 0 {
		t.Fatalf("tenant a claimed tenant b's activity: %v", taskSeqs(tasks))
	}
	wantEqual(t, "e1 fate in a", ta.event("e1").Fate, history.FatePending)
	wantEqual(t, "e1 fate in b", tb.event("e1").Fate, history.FateDelivered)
	tasks := tb.claimActivities(at(3*time.Second), 10)
	if len(tasks) != 1 || tasks[0].Tenant != tb.tenant {
		t.Fatalf("tenant b's activity claim: %+v", tasks)
	}
	// Completing with the right key but the wrong tenant fails.
	err = b.s.ActivityComplete(b.ctx, &storage.ActivityCompleteParams{
		Tenant: ta.tenant, InstanceID: "shared", Execution: 1, TaskSeq: 2, LockToken: tasks[0].LockToken, Now: at(3 * time.Second),
	})
	wantErr(t, "ActivityComplete in the wrong tenant", err, heraldtype.ErrLeaseLost)

	// Terminating A leaves B running.
	if _, err := b.s.InstanceTerminate(b.ctx, &storage.InstanceTerminateParams{Tenant: ta.tenant, ID: "shared", Now: at(4 * time.Second)}); err != nil {
		t.Fatal(err)
	}
	wantEqual(t, "status in a", ta.get("shared").Status, heraldtype.StatusTerminated)
	wantEqual(t, "status in b", tb.get("shared").Status, heraldtype.StatusRunning)
	wantEqual(t, "e1 fate in b after a's termination", tb.event("e1").Fate, history.FateDelivered)
	if !slices.Equal(tb.listIDs(), []string{"shared"}) || len(b.listIDs()) != 0 {
		t.Fatal("InstanceList crosses tenants")
	}
	if got := tb.events(""); len(got) != 1 || got[0].EventID != "e1" {
		t.Fatalf("EventList of tenant b: %+v", got)
	}
	wantKinds(t, "history in b", tb.history("shared", 0), history.ExecutionStarted, history.ActivityScheduled)
	if err := b.s.ActivityComplete(b.ctx, &storage.ActivityCompleteParams{
		Tenant: tb.tenant, InstanceID: "shared", Execution: 1, TaskSeq: 2, LockToken: tasks[0].LockToken, Now: at(5 * time.Second),
	}); err != nil {
		t.Fatalf("ActivityComplete in tenant b: %v", err)
	}
	ta.claimNone(at(6 * time.Second))
	turnB = tb.claimOne("shared", at(6*time.Second))
	wantMessages(t, "turn in b", turnB.Messages, "activity_completed:2")
}

func testSubscribe(b *bundle) {
	t := b.t
	other := b.in(b.tenant + "-other")
	ch, cancel := b.s.SubscribeKinds(b.tenant, storage.WorkAll)
	defer cancel()
	chOther, cancelOther := b.s.SubscribeKinds(other.tenant, storage.WorkAll)
	defer cancelOther()
	ch2, cancel2 := b.s.SubscribeKinds(b.tenant, storage.WorkAll)

	wait := func(what string, c <-chan struct{}) {
		t.Helper()
		select {
		case <-c:
		case <-time.After(5 * time.Second):
			t.Fatalf("no signal after %s", what)
		}
	}
	quiet := func(what string, c <-chan struct{}) {
		t.Helper()
		select {
		case <-c:
			t.Fatalf("unexpected signal after %s", what)
		default:
		}
	}
	drain := func(c <-chan struct{}) {
		select {
		case <-c:
		default:
		}
	}

	b.create("i", t0)
	wait("InstanceCreate", ch)
	wait("InstanceCreate (second subscriber)", ch2)
	quiet("InstanceCreate in another tenant", chOther)

	turn := b.claimOne("i", t0)
	b.commit(b.commitParams(turn, t0))
	// Extra signals are allowed (they only cost a claim); missing ones are not.
	drain(ch)

	cancel2()
	cancel2() // idempotent
	drain(ch2)
	b.raise("i", "e1", "approve", at(time.Second))
	wait("EventRaise", ch)
	quiet("EventRaise (cancelled subscriber)", ch2)
	quiet("EventRaise in another tenant", chOther)

	// Signals coalesce: many writes, nobody reading, no writer blocks.
	for i := range 5 {
		b.raise("i", fmt.Sprintf("burst%d", i), "approve", at(2*time.Second))
	}
	wait("a burst of raises", ch)

	other.raise("j", "e1", "approve", t0)
	wait("EventRaise in the other tenant", chOther)
}

func testConcurrentClaims(b *bundle) {
	t := b.t
	const n = 30
	for i := range n {
		b.create(fmt.Sprintf("i%02d", i), t0)
	}
	var (
		mu      sync.Mutex
		claimed = map[string]int{}
		wg      sync.WaitGroup
	)
	for range 6 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				turns, err := b.s.TurnClaim(b.ctx, &storage.TurnClaimParams{Tenant: b.tenant, Now: at(time.Second), Lease: lease, Max: 4})
				if err != nil {
					t.Errorf("TurnClaim: %v", err)
					return
				}
				if len(turns) == 0 {
					return
				}
				for _, turn := range turns {
					mu.Lock()
					claimed[turn.Instance.ID]++
					mu.Unlock()
					p := b.commitParams(turn, at(time.Second))
					if _, err := b.s.TurnCommit(b.ctx, p); err != nil {
						t.Errorf("TurnCommit(%s): %v", turn.Instance.ID, err)
					}
				}
			}
		}()
	}
	wg.Wait()
	if len(claimed) != n {
		t.Fatalf("claimed %d instances, want %d", len(claimed), n)
	}
	for id, c := range claimed {
		if c != 1 {
			t.Fatalf("instance %s claimed %d times", id, c)
		}
	}
	b.claimNone(at(time.Hour))
}

func testConcurrentRaises(b *bundle) {
	t := b.t
	b.create("i", t0)
	const distinct, dups = 40, 10
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		fresh int
	)
	for i := range distinct + dups {
		wg.Add(1)
		go func() {
			defer wg.Done()
			id := "dup"
			if i < distinct {
				id = fmt.Sprintf("e%02d", i)
			}
			res, err := b.s.EventRaise(b.ctx, b.raiseParams("i", id, "approve", at(time.Second)))
			if err != nil {
				t.Errorf("EventRaise(%s): %v", id, err)
				return
			}
			if id == "dup" && !res.Duplicate {
				mu.Lock()
				fresh++
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if fresh != 1 {
		t.Fatalf("the same event id was accepted %d times, want 1", fresh)
	}
	if got := len(b.events("i")); got != distinct+1 {
		t.Fatalf("ledger has %d events, want %d", got, distinct+1)
	}
	turn := b.claimOne("i", at(time.Second))
	if got := len(turn.Messages); got != distinct+2 {
		t.Fatalf("turn has %d messages, want %d (events and kick)", got, distinct+2)
	}
}
