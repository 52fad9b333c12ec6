package storagetest

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/heraldwf/herald/heraldtype"
	"github.com/heraldwf/herald/history"
	"github.com/heraldwf/herald/storage"
)

// testHistoryAcrossTurns: every turn carries its execution's whole
// history, as HistoryList returns it, however the turn was taken (a claim
// of several, a claim of one, a raise that hands off) and whatever came
// before it: turns the same store committed, a commit refused for a lost
// lease, a turn given back, a continue-as-new, an instance another turn
// of which went elsewhere. A store may keep histories between turns (see
// backend.HistoryCache); what it hands out must not tell.
func testHistoryAcrossTurns(b *bundle) {
	t := b.t
	step := 0
	now := func() time.Time { step++; return at(time.Duration(step) * time.Second) }
	next := b.commitMore
	ids := []string{"h1", "h2", "h3"}
	for _, id := range ids {
		b.create(id, at(0))
	}
	// A claim of several: every instance's first turn.
	start := now()
	turns := b.claimN(start, 10)
	wantEqual(t, "first claim", len(turns), 3)
	for _, turn := range turns {
		next(turn, "a", 1, start)
	}
	// A claim of several again, on instances whose last turn this store
	// committed, and one that takes a turn of h1 and h2 only.
	r := now()
	b.raise("h1", "e-b1", "b", r)
	b.raise("h2", "e-b2", "b", r)
	turns = b.claimN(r, 10)
	wantEqual(t, "second claim", fmt.Sprint(turnIDs(turns)), "[h1 h2]")
	for _, turn := range turns {
		next(turn, "b", 2, r)
	}
	// A hand-off.
	r = now()
	turn := b.wantHandOff(b.raiseHandOff("h1", "e-c1", r, 0), "h1", r, "event:e-c1")
	next(turn, "c", 1, r)
	// A claim of one.
	r = now()
	b.raise("h3", "e-d3", "d", r)
	next(b.claimOne("h3", r), "d", 3, r)
	// A turn given back, and a commit refused for a lost lease: the next
	// turn's history is the one before them.
	r = now()
	b.raise("h2", "e-e2", "e", r)
	given := b.claimOne("h2", r)
	b.wantWholeHistory(given)
	if err := b.s.TurnAbandon(b.ctx, &storage.TurnAbandonParams{Tenant: b.tenant, InstanceID: "h2", LockToken: given.LockToken}); err != nil {
		t.Fatalf("TurnAbandon: %v", err)
	}
	r = now()
	taken := b.claimOne("h2", r)
	stale := b.commitParams(given, r)
	stale.NewEvents = []history.Event{ev(given.History[len(given.History)-1].Seq+1, history.EventRaised, r)}
	wantErr(t, "commit with a spent token", errOf(b.s.TurnCommit(b.ctx, stale)), heraldtype.ErrLeaseLost)
	next(taken, "e", 1, r)
	r = now()
	b.raise("h2", "e-f2", "f", r)
	next(b.claimOne("h2", r), "f", 1, r)
	// A continue-as-new: the turns after it carry the new execution's
	// history only.
	r = now()
	turn = b.wantHandOff(b.raiseHandOff("h1", "e-g1", r, 0), "h1", r, "event:e-g1")
	b.continueAsNew(turn, r)
	r = now()
	turn = b.claimOne("h1", r)
	wantEqual(t, "execution after continue-as-new", turn.Instance.Execution, 2)
	next(turn, "h", 2, r)
	r = now()
	turn = b.wantHandOff(b.raiseHandOff("h1", "e-i1", r, 0), "h1", r, "event:e-i1")
	wantEqual(t, "execution of the hand-off after continue-as-new", turn.Instance.Execution, 2)
	next(turn, "i", 1, r)
	wantKinds(t, "h1's second execution", b.history("h1", 2), history.ExecutionStarted,
		history.EventRaised, history.EventRaised, history.EventRaised)
	// Every instance's history is what the turns committed.
	wantEqual(t, "h2's history", len(b.history("h2", 1)), 6)
	wantEqual(t, "h3's history", len(b.history("h3", 1)), 5)
}

// wantWholeHistory requires turn to carry its execution's whole history,
// event for event as HistoryList returns it.
func (b *bundle) wantWholeHistory(turn *storage.Turn) {
	b.t.Helper()
	if turn.Err != nil {
		b.t.Fatalf("turn of %s: %v", turn.Instance.ID, turn.Err)
	}
	want := b.history(turn.Instance.ID, turn.Instance.Execution)
	if len(turn.History) != len(want) {
		b.t.Fatalf("turn of %s (execution %d): %d history events, want %d", turn.Instance.ID, turn.Instance.Execution,
			len(turn.History), len(want))
	}
	for i := range want {
		if d := eventDiff(&turn.History[i], &want[i]); d != "" {
			b.t.Fatalf("turn of %s: history event %d: %s", turn.Instance.ID, i, d)
		}
	}
}

// eventDiff says how got differs from want, down to what JSON does not
// show: the bytes of raw JSON fields, and the time zones' names.
func eventDiff(got, want *history.Event) string {
	g, _ := json.Marshal(got)
	w, _ := json.Marshal(want)
	if string(g) != string(w) {
		return fmt.Sprintf("%s, want %s", g, w)
	}
	for _, f := range []struct {
		name      string
		got, want []byte
	}{{"input", got.Input, want.Input}, {"result", got.Result, want.Result}, {"payload", got.Payload, want.Payload}} {
		if string(f.got) != string(f.want) {
			return fmt.Sprintf("%s %q, want %q", f.name, f.got, f.want)
		}
	}
	for _, f := range []struct {
		name      string
		got, want time.Time
	}{{"time", got.Time, want.Time}, {"fire_at", got.FireAt, want.FireAt}, {"received_at", got.ReceivedAt, want.ReceivedAt}} {
		if gz, wz := f.got.Format("2006-01-02T15:04:05.999999999 MST -0700"), f.want.Format("2006-01-02T15:04:05.999999999 MST -0700"); gz != wz {
			return fmt.Sprintf("%s %s, want %s", f.name, gz, wz)
		}
	}
	return ""
}

// HistoryAcrossStores checks, for two stores a and b on the same data (two
// nodes of one database), that every turn a hands out carries its
// execution's whole history after b committed turns of the instance that
// a never saw: a store that keeps histories between turns (see
// backend.HistoryCache) reads what was added since, through a claim of
// one, a claim of several and a hand-off, and a continue-as-new on b is
// not mistaken for more events of the execution a knew.
func HistoryAcrossStores(t *testing.T, a, b storage.Store) {
	ctx := context.Background()
	tenant := "t-history-across-stores"
	na := &bundle{t: t, s: a, ctx: ctx, tenant: tenant}
	nb := &bundle{t: t, s: b, ctx: ctx, tenant: tenant}
	step := 0
	now := func() time.Time { step++; return at(time.Duration(step) * time.Second) }
	// turnOfEach raises to x and y on the store of on, then claims their
	// turns there and commits n events to each.
	turnOfEach := func(on *bundle, round string, n int) {
		t.Helper()
		r := now()
		on.raise("x", "e-"+round+"-x", round, r)
		on.raise("y", "e-"+round+"-y", round, r)
		turns := on.claimN(r, 10)
		wantEqual(t, "claim of round "+round, fmt.Sprint(turnIDs(turns)), "[x y]")
		for _, turn := range turns {
			on.commitMore(turn, round, n, r)
		}
	}
	na.create("x", at(0))
	na.create("y", at(0))
	r := now()
	for _, turn := range na.claimN(r, 10) { // a knows x and y
		na.commitMore(turn, "a", 1, r)
	}
	// b runs turns of both that a does not see; then a: a hand-off of x,
	// and after more turns on b, a claim of several (x again and y).
	turnOfEach(nb, "b", 2)
	r = now()
	turn := na.wantHandOff(na.raiseHandOff("x", "e-c-x", r, 0), "x", r, "event:e-c-x")
	na.commitMore(turn, "c", 1, r)
	turnOfEach(nb, "d", 1)
	turnOfEach(na, "e", 1)
	// b continues x as new and runs its first turn; a's next turn of x,
	// a hand-off, is of execution 2, of which a knows nothing.
	r = now()
	nb.raise("x", "e-f-x", "f", r)
	nb.continueAsNew(nb.claimOne("x", r), r)
	r = now()
	turn = nb.claimOne("x", r) // the kick of execution 2
	wantEqual(t, "execution of b's turn after its continue-as-new", turn.Instance.Execution, 2)
	nb.commitMore(turn, "g", 1, r)
	r = now()
	turn = na.wantHandOff(na.raiseHandOff("x", "e-h-x", r, 0), "x", r, "event:e-h-x")
	wantEqual(t, "execution of a's hand-off after b's continue-as-new", turn.Instance.Execution, 2)
	na.commitMore(turn, "h", 1, r)
}

// commitMore requires turn to carry its whole history and commits it,
// consuming its messages, with n more events of kind EventRaised named
// round. Their times are not in UTC and their payloads not compact, as a
// caller may make them: the turns after must get them as HistoryList does
// (as stored).
func (b *bundle) commitMore(turn *storage.Turn, round string, n int, at time.Time) {
	b.t.Helper()
	b.wantWholeHistory(turn)
	p := b.commitParams(turn, at)
	last := turn.History[len(turn.History)-1].Seq
	for i := range n {
		e := ev(last+1+i, history.EventRaised, at.In(histZone))
		e.Name, e.Payload = round, json.RawMessage(fmt.Sprintf(`{ "n": %d }`, i))
		p.NewEvents = append(p.NewEvents, e)
	}
	b.commit(p)
}

// histZone is the time zone of the events commitMore writes.
var histZone = time.FixedZone("east", 3600)

// continueAsNew requires turn to carry its whole history and commits it as
// a continue-as-new into execution 2.
func (b *bundle) continueAsNew(turn *storage.Turn, at time.Time) {
	b.t.Helper()
	b.wantWholeHistory(turn)
	p := b.commitParams(turn, at)
	p.NewEvents = []history.Event{ev(turn.History[len(turn.History)-1].Seq+1, history.ExecutionContinuedAsNew, at)}
	started := ev(1, history.ExecutionStarted, at)
	started.Workflow, started.Execution = "wf", 2
	p.ContinueAsNew = &storage.ContinueAsNewParams{Input: json.RawMessage(`{"round":2}`), StartEvents: []history.Event{started}}
	b.commit(p)
}
