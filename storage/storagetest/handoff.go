package storagetest

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/heraldwf/herald/heraldtype"
	"github.com/heraldwf/herald/history"
	"github.com/heraldwf/herald/storage"
)

// raiseHandOff raises with a direct hand-off (EventRaiseParams.Claim) and
// OnClaimed, as the runtime does; the result's Turn is the turn handed
// over, whichever way the store delivered it.
func (b *bundle) raiseHandOff(id, eventID string, now time.Time, maxMessages int) *storage.EventRaiseResult {
	b.t.Helper()
	return b.raiseHandOffWith(id, eventID, now, maxMessages, true)
}

// raiseHandOffWith is raiseHandOff, with OnClaimed set only if early. A
// store may deliver the turn through OnClaimed or in the result, never
// both, at most once, and OnClaimed returns before EventRaise does.
func (b *bundle) raiseHandOffWith(id, eventID string, now time.Time, maxMessages int, early bool) *storage.EventRaiseResult {
	b.t.Helper()
	p := b.raiseParams(id, eventID, "approve", now)
	p.Claim = &storage.TurnClaimParams{Lease: lease, MaxMessages: maxMessages}
	var (
		calls int
		got   *storage.Turn
	)
	if early {
		p.OnClaimed = func(t *storage.Turn) { calls++; got = t }
	}
	res, err := b.s.EventRaise(b.ctx, p)
	if err != nil {
		b.t.Fatalf("EventRaise(%s, %s) with a hand-off: %v", id, eventID, err)
	}
	switch {
	case calls > 1:
		b.t.Fatalf("EventRaise(%s, %s): OnClaimed called %d times", id, eventID, calls)
	case calls == 1 && got == nil:
		b.t.Fatalf("EventRaise(%s, %s): OnClaimed called with no turn", id, eventID)
	case got != nil && res.Turn != nil:
		b.t.Fatalf("EventRaise(%s, %s): the turn both given to OnClaimed and returned", id, eventID)
	case got != nil:
		res.Turn = got
	}
	return res
}

// wantHandOff requires res to carry the turn of instance id, leased at now,
// with the given messages.
func (b *bundle) wantHandOff(res *storage.EventRaiseResult, id string, now time.Time, messages ...string) *storage.Turn {
	b.t.Helper()
	turn := res.Turn
	if turn == nil {
		b.t.Fatalf("raise of %s at %v: no turn handed off", res.EventID, now.Sub(t0))
	}
	wantEqual(b.t, "handed-off instance", turn.Instance.ID, id)
	wantEqual(b.t, "handed-off tenant", turn.Instance.Tenant, b.tenant)
	if turn.LockToken == "" {
		b.t.Fatal("handed-off turn: empty lock token")
	}
	if turn.Err != nil {
		b.t.Fatalf("handed-off turn: %v", turn.Err)
	}
	wantTime(b.t, "handed-off LeaseUntil", turn.LeaseUntil, now.Add(lease))
	wantMessages(b.t, "handed-off turn", turn.Messages, messages...)
	return turn
}

func wantNoHandOff(b *bundle, what string, res *storage.EventRaiseResult) {
	b.t.Helper()
	if res.Turn != nil {
		b.t.Fatalf("%s: turn of %s handed off (token %s), want none", what, res.Turn.Instance.ID, res.Turn.LockToken)
	}
}

// testEventRaiseHandOff: a raise that asks for a hand-off leases the
// instance it made runnable in its own transaction and returns the turn as
// TurnClaim would have; an instance that is leased, held back, missing or
// ended is not handed off, and the lease fences like a claim's.
func testEventRaiseHandOff(b *bundle) {
	t := b.t
	b.create("i", t0)
	first := b.claimOne("i", t0)
	p := b.commitParams(first, at(time.Second))
	p.NewEvents = []history.Event{ev(2, history.TimerCreated, at(time.Second))}
	b.commit(p)

	// An idle instance: the raise hands it off, with its history and the
	// event, and nobody else can claim it.
	now := at(2 * time.Second)
	res := b.raiseHandOff("i", "e1", now, 0)
	if res.Duplicate || res.Started || res.EventID != "e1" {
		t.Fatalf("hand-off raise: %+v", res)
	}
	turn := b.wantHandOff(res, "i", now, "event:e1")
	wantKinds(t, "handed-off history", turn.History, history.ExecutionStarted, history.TimerCreated)
	wantEqual(t, "handed-off execution", turn.Instance.Execution, first.Instance.Execution)
	wantEqual(t, "handed-off status", turn.Instance.Status, heraldtype.StatusRunning)
	wantJSON(t, "handed-off payload", turn.Messages[0].Payload, `{"event":"e1"}`)
	wantEqual(t, "e1 fate", b.event("e1").Fate, history.FatePending)
	b.claimNone(at(3 * time.Second))

	// A leased instance is not handed off again; the event waits.
	wantNoHandOff(b, "raise to a leased instance", b.raiseHandOff("i", "e2", at(4*time.Second), 0))
	b.claimNone(at(4 * time.Second))

	// The handed-off turn commits like a claimed one; e2 is then claimable.
	b.commit(b.commitParams(turn, at(5*time.Second)))
	wantEqual(t, "e1 fate after commit", b.event("e1").Fate, history.FatePending) // fates are the commit's Fates
	second := b.claimOne("i", at(5*time.Second))
	wantMessages(t, "turn after the hand-off", second.Messages, "event:e2")
	b.commit(b.commitParams(second, at(6*time.Second)))

	// A duplicate is not handed off (nothing was written).
	dup := b.raiseHandOff("i", "e1", at(7*time.Second), 0)
	if !dup.Duplicate {
		t.Fatalf("raise of a seen id: %+v, want a duplicate", dup)
	}
	wantNoHandOff(b, "duplicate raise", dup)
	b.claimNone(at(7 * time.Second))

	// An instance held back by an abandon with RetryAt is not handed off
	// before then.
	b.raise("i", "e3", "approve", at(8*time.Second))
	held := b.claimOne("i", at(8*time.Second))
	if err := b.s.TurnAbandon(b.ctx, &storage.TurnAbandonParams{Tenant: b.tenant, InstanceID: "i",
		LockToken: held.LockToken, RetryAt: at(time.Minute)}); err != nil {
		t.Fatalf("TurnAbandon: %v", err)
	}
	wantNoHandOff(b, "raise to a held-back instance", b.raiseHandOff("i", "e4", at(10*time.Second), 0))
	b.claimNone(at(30 * time.Second))
	stale := b.claimOne("i", at(time.Minute))
	wantMessages(t, "turn after the hold", stale.Messages, "event:e3", "event:e4")

	// A lease that ran out is taken over by a hand-off, which fences the
	// old holder out as a claim would.
	now = at(time.Minute + lease + time.Second)
	over := b.wantHandOff(b.raiseHandOff("i", "e5", now, 0), "i", now, "event:e3", "event:e4", "event:e5")
	if over.LockToken == stale.LockToken {
		t.Fatalf("takeover kept lock token %q", stale.LockToken)
	}
	wantErr(t, "commit with the taken-over token", errOf(b.s.TurnCommit(b.ctx, b.commitParams(stale, now))), heraldtype.ErrLeaseLost)
	b.commit(b.commitParams(over, now))

	// MaxMessages caps the handed-off turn's messages as it caps a claim's.
	now = at(2 * time.Minute)
	b.raise("i", "e6", "approve", now)
	b.raise("i", "e7", "approve", now)
	capped := b.wantHandOff(b.raiseHandOff("i", "e8", now, 2), "i", now, "event:e6", "event:e7")
	b.commit(b.commitParams(capped, now))
	rest := b.claimOne("i", now)
	wantMessages(t, "turn after the capped hand-off", rest.Messages, "event:e8")
	b.commit(b.commitParams(rest, now))

	// An instance that does not exist is not handed off, started or not.
	wantNoHandOff(b, "raise before create", b.raiseHandOff("later", "x1", now, 0))
	sp := b.raiseParams("started", "x2", "approve", now)
	sp.StartIfAbsent = &storage.InstanceCreateParams{Workflow: "wf"}
	sp.Claim = &storage.TurnClaimParams{Lease: lease}
	res, err := b.s.EventRaise(b.ctx, sp)
	if err != nil || !res.Started {
		t.Fatalf("raise with StartIfAbsent and a hand-off: %+v, %v", res, err)
	}
	wantNoHandOff(b, "raise that started its instance", res)
	wantMessages(t, "first turn of the started instance", b.claimOne("started", now).Messages, "kick", "event:x2")

	// An ended instance refuses the raise and is not leased.
	b.createCompleted("ended", now)
	ap := b.raiseParams("ended", "x3", "approve", now)
	ap.Claim = &storage.TurnClaimParams{Lease: lease}
	ap.OnClaimed = func(tt *storage.Turn) { t.Errorf("OnClaimed called for a refused raise (token %s)", tt.LockToken) }
	wantErr(t, "hand-off raise to an ended instance", errOf(b.s.EventRaise(b.ctx, ap)), heraldtype.ErrInstanceNotRunning)
	b.claimNone(now)

	// Another tenant's instance of the same id is its own. Without
	// OnClaimed the turn comes in the result.
	o := b.in(b.tenant + "-other")
	o.create("i", now)
	ot := o.wantHandOff(o.raiseHandOffWith("i", "o1", now, 0, false), "i", now, "kick", "event:o1")
	wantKinds(t, "other tenant's history", ot.History, history.ExecutionStarted)
	b.claimNone(now)
	b.wantHandOff(b.raiseHandOffWith("i", "e9", now, 0, false), "i", now, "event:e9")
}

// testEventRaiseHandOffMessages: the messages of a handed-off turn are
// field for field those a claim of the same turn reads (a store may hand
// over the message it has just written without reading it back): on an
// empty inbox and on one that held a message already, with a payload that
// is not compact, a trace context, and a latest-value flag.
func testEventRaiseHandOffMessages(b *bundle) {
	t := b.t
	zone := time.FixedZone("east", 3600)
	for i, withEarlier := range []bool{false, true} {
		id := fmt.Sprintf("m%d", i)
		b.create(id, t0)
		b.commit(b.commitParams(b.claimOne(id, t0), t0))
		now := at(time.Duration(i+1) * time.Second).In(zone)
		if withEarlier {
			b.raise(id, id+"-earlier", "approve", now)
		}
		p := b.raiseParams(id, id+"-e", "approve", now)
		p.Lane, p.Latest = history.LaneQueue, true
		p.Payload = json.RawMessage(`{ "n": 1,  "s": "x" }`)
		p.TraceParent = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
		p.Claim = &storage.TurnClaimParams{Lease: lease}
		res, err := b.s.EventRaise(b.ctx, p)
		if err != nil {
			t.Fatalf("EventRaise with a hand-off: %v", err)
		}
		handed := res.Turn
		if handed == nil {
			t.Fatalf("%s: no turn handed off", id)
		}
		if err := b.s.TurnAbandon(b.ctx, &storage.TurnAbandonParams{Tenant: b.tenant, InstanceID: id, LockToken: handed.LockToken}); err != nil {
			t.Fatalf("TurnAbandon: %v", err)
		}
		claimed := b.claimOne(id, now)
		if len(handed.Messages) != len(claimed.Messages) {
			t.Fatalf("%s: %d messages handed off, a claim reads %d", id, len(handed.Messages), len(claimed.Messages))
		}
		for k := range claimed.Messages {
			h, c := handed.Messages[k], claimed.Messages[k]
			if d := messageDiff(&h, &c); d != "" {
				t.Fatalf("%s: handed-off message %d differs from the claim's: %s", id, k, d)
			}
		}
	}
}

// messageDiff says how got differs from want, down to the bytes of raw
// JSON and the time zones' names.
func messageDiff(got, want *storage.Message) string {
	g, _ := json.Marshal(got)
	w, _ := json.Marshal(want)
	switch {
	case string(g) != string(w):
		return fmt.Sprintf("%s, want %s", g, w)
	case string(got.Payload) != string(want.Payload) || string(got.Result) != string(want.Result):
		return fmt.Sprintf("payload %q / result %q, want %q / %q", got.Payload, got.Result, want.Payload, want.Result)
	}
	for _, f := range []struct {
		name      string
		got, want time.Time
	}{{"visible_at", got.VisibleAt, want.VisibleAt}, {"created_at", got.CreatedAt, want.CreatedAt}} {
		if gz, wz := f.got.Format(time.RFC3339Nano+" MST"), f.want.Format(time.RFC3339Nano+" MST"); gz != wz {
			return fmt.Sprintf("%s %s, want %s", f.name, gz, wz)
		}
	}
	return ""
}

// testTurnEndDeletesTasks: a turn that ends its instance deletes the
// instance's activity tasks, leased or not, whether a claim or a raise's
// hand-off leased the instance (a store may skip the delete when its claim
// saw no task, never when it saw one).
func testTurnEndDeletesTasks(b *bundle) {
	t := b.t
	for i, handOff := range []bool{false, true} {
		id := fmt.Sprintf("tasks%d", i)
		b.create(id, t0)
		p := b.commitParams(b.claimOne(id, t0), t0)
		a2, a3 := ev(2, history.ActivityScheduled, t0), ev(3, history.ActivityScheduled, t0)
		a2.TaskSeq, a3.TaskSeq = 2, 3
		p.NewEvents = []history.Event{a2, a3}
		p.Activities = []storage.ActivityTask{{TaskSeq: 2, Name: "a"}, {TaskSeq: 3, Name: "a"}}
		b.commit(p)
		if tasks := b.claimActivities(t0, 1); len(tasks) != 1 {
			t.Fatalf("%s: ActivityClaim: %v, want one task", id, taskSeqs(tasks))
		}
		now := at(time.Second)
		var turn *storage.Turn
		if handOff {
			rp := b.raiseParams(id, id+"-e", "approve", now)
			rp.Claim = &storage.TurnClaimParams{Lease: lease}
			res, err := b.s.EventRaise(b.ctx, rp)
			if err != nil {
				t.Fatalf("%s: EventRaise with a hand-off: %v", id, err)
			}
			if turn = res.Turn; turn == nil {
				t.Fatalf("%s: no turn handed off", id)
			}
		} else {
			b.raise(id, id+"-e", "approve", now)
			turn = b.claimOne(id, now)
		}
		end := b.commitParams(turn, now)
		end.NewEvents = []history.Event{ev(4, history.ExecutionCompleted, now)}
		end.Fates = []storage.FateUpdate{{EventID: id + "-e", Fate: history.FateDelivered}}
		end.Status = heraldtype.StatusCompleted
		b.commit(end)
		if tasks := b.claimActivities(at(time.Hour), 10); len(tasks) != 0 {
			t.Fatalf("%s: ActivityClaim after the instance ended: %v, want none", id, taskSeqs(tasks))
		}
	}
}
