package herald_test

// End-to-end tests of Select over receives that have already received: a
// receive that loses a Select before the workflow got its result gives its
// event back, at its place in the order, so the next receive gets it; the
// event's fate ends delivered to that receive; history records the
// give-back on the loser's EventSubscribedCancelled (EventID); a
// delete-after-first correlated event is handed on to the next waiter.
// Before the give-back, the loser consumed the event silently: the
// workflow never saw it and its fate said delivered to the loser.

import (
	"errors"
	"testing"
	"time"

	"github.com/heraldwf/herald"
	"github.com/heraldwf/herald/clock"
	"github.com/heraldwf/herald/history"
)

// slRecv is a receive of slRace: lane "p" (WaitEvent) or "q" (Dequeue).
type slRecv struct {
	Lane    string        `json:"lane"`
	Name    string        `json:"name"`
	Timeout time.Duration `json:"timeout,omitempty"`
}

// slIn tells slRace what to race.
type slIn struct {
	// Race is raced in one Select once the positional event "go" arrives.
	Race []slRecv `json:"race"`
	// Early makes the race's receives before waiting for "go", so that
	// arrivals of earlier turns resolve them.
	Early bool `json:"early,omitempty"`
	// Later is received after the race without waiting: TryDequeue, or a
	// WaitEvent that must be ready at once.
	Later slRecv `json:"later"`
}

type slOut struct {
	Winner int
	Won    string
	// LosersCancelled: every loser's Get returned ErrCanceled.
	LosersCancelled bool
	// Later is what the later receive got at once ("" if nothing).
	Later string
}

func slReceive(ctx *herald.Context, r slRecv) herald.Future {
	var opts []herald.WaitOption
	if r.Timeout > 0 {
		opts = append(opts, herald.WithTimeout(r.Timeout))
	}
	if r.Lane == "q" {
		return ctx.Dequeue(r.Name, opts...)
	}
	return ctx.WaitEvent(r.Name, opts...)
}

func slRace(ctx *herald.Context, in slIn) (slOut, error) {
	var fs []herald.Future
	receive := func() {
		for _, r := range in.Race {
			fs = append(fs, slReceive(ctx, r))
		}
	}
	if in.Early {
		receive()
	}
	if err := ctx.WaitEvent("go").Get(nil); err != nil {
		return slOut{}, err
	}
	if !in.Early {
		receive()
	}
	o := slOut{LosersCancelled: true}
	o.Winner = ctx.Select(fs...)
	if err := fs[o.Winner].Get(&o.Won); err != nil {
		return o, err
	}
	for i, f := range fs {
		if i != o.Winner {
			o.LosersCancelled = o.LosersCancelled && errors.Is(f.Get(nil), herald.ErrCanceled)
		}
	}
	if in.Later.Lane == "q" {
		_, err := ctx.TryDequeue(in.Later.Name, &o.Later)
		return o, err
	}
	if f := ctx.WaitEvent(in.Later.Name); f.Ready() {
		return o, f.Get(&o.Later)
	}
	return o, nil
}

func slSetup(t *testing.T, cfg *herald.Config) *bundle {
	return setupEnv(t, cfg, func(rt *herald.Runtime) { herald.RegisterWorkflow(rt, "sl.race", slRace) })
}

// slSend sends an event on lane "p" or "q" with its id as its payload.
func slSend(b *bundle, id, lane, name, eventID string) {
	b.t.Helper()
	if lane == "q" {
		b.enqueue(id, name, eventID, eventID)
		return
	}
	b.raise(id, name, eventID, eventID)
}

// slWantGivenBack checks that the loser whose EventSubscribed is the
// n-th receive of lane/name in history gave eventID back (buffered again),
// that the receive numbered later received it, and that its fate says so.
func slWantGivenBack(b *bundle, id string, lane history.Lane, name, eventID string, loser, later int) {
	b.t.Helper()
	evs := b.history(id, 0)
	subs := ofKind(evs, history.EventSubscribed, lane, name)
	if len(subs) < max(loser, later) {
		b.t.Fatalf("%d receives of %s/%s, want %d; history:%s", len(subs), lane, name, max(loser, later), dumpHistory(evs))
	}
	back := ofKind(withID(evs, eventID), history.EventSubscribedCancelled, lane, name)
	if len(back) != 1 || back[0].TaskSeq != subs[loser-1].Seq || back[0].Reason != "" || back[0].WaitNumber != 0 {
		b.t.Fatalf("%s: want one give-back of %s by receive %d (seq %d); history:%s", id, eventID, loser, subs[loser-1].Seq,
			dumpHistory(evs))
	}
	if got := subs[later-1]; got.EventID != eventID || got.WaitNumber != later {
		b.t.Fatalf("%s: receive %d got %q (number %d), want %s; history:%s", id, later, got.EventID, got.WaitNumber, eventID,
			dumpHistory(evs))
	}
	b.checkFate(eventID, wantFate{Lane: lane, Name: name, Fate: history.FateDelivered, Execution: 1, Origin: 1, WaitNumber: later})
	if d := ofKind(evs, history.EventDropped, "", ""); len(d) != 0 {
		b.t.Fatalf("%s: drops %+v; history:%s", id, d, dumpHistory(evs))
	}
	b.replayAll(id)
}

// slRun starts slRace with in, sends the events (lane, name, id) and, once
// each is buffered (or, with in.Early, delivered to its receive), "go"; it
// returns the result.
func slRun(b *bundle, id string, in slIn, events ...[3]string) slOut {
	b.t.Helper()
	b.start("sl.race", id, in)
	if in.Early {
		b.waitExec(id, 1, history.EventSubscribed, history.LanePositional, "go", 1)
	}
	for _, e := range events {
		slSend(b, id, e[0], e[1], e[2])
		if in.Early {
			b.waitFate(e[2], history.FateDelivered)
		} else {
			b.waitFate(e[2], history.FateBuffered)
		}
	}
	b.raise(id, "go", nil, id+"-go")
	var o slOut
	b.result(id, &o)
	return o
}

func TestSelectLoser_TwoWaitEventsBuffered(t *testing.T) {
	t.Parallel()
	b := slSetup(t, nil)
	o := slRun(b, "i", slIn{Race: []slRecv{{"p", "a", 0}, {"p", "b", 0}}, Later: slRecv{Lane: "p", Name: "b"}},
		[3]string{"p", "a", "a1"}, [3]string{"p", "b", "b1"})
	if o != (slOut{Winner: 0, Won: "a1", LosersCancelled: true, Later: "b1"}) {
		t.Fatalf("result %+v", o)
	}
	slWantGivenBack(b, "i", history.LanePositional, "b", "b1", 1, 2)
	b.checkFate("a1", wantFate{Lane: history.LanePositional, Name: "a", Fate: history.FateDelivered, Execution: 1, Origin: 1, WaitNumber: 1})
}

func TestSelectLoser_WaitEventVsDequeueBuffered(t *testing.T) {
	t.Parallel()
	b := slSetup(t, nil)
	o := slRun(b, "i", slIn{Race: []slRecv{{"p", "p", 0}, {"q", "q", 0}}, Later: slRecv{Lane: "q", Name: "q"}},
		[3]string{"p", "p", "p1"}, [3]string{"q", "q", "q1"})
	if o != (slOut{Winner: 0, Won: "p1", LosersCancelled: true, Later: "q1"}) {
		t.Fatalf("result %+v", o)
	}
	slWantGivenBack(b, "i", history.LaneQueue, "q", "q1", 1, 2)
}

func TestSelectLoser_TwoDequeuesBuffered(t *testing.T) {
	t.Parallel()
	b := slSetup(t, nil)
	t.Run("same queue", func(t *testing.T) {
		// The winner takes q1, the loser q2, which goes back: TryDequeue
		// (receive 3 of the queue) takes it.
		o := slRun(b, "same", slIn{Race: []slRecv{{"q", "q", 0}, {"q", "q", 0}}, Later: slRecv{Lane: "q", Name: "q"}},
			[3]string{"q", "q", "q1"}, [3]string{"q", "q", "q2"})
		if o != (slOut{Winner: 0, Won: "q1", LosersCancelled: true, Later: "q2"}) {
			t.Fatalf("result %+v", o)
		}
		slWantGivenBack(b, "same", history.LaneQueue, "q", "q2", 2, 3)
	})
	t.Run("different queues", func(t *testing.T) {
		o := slRun(b, "diff", slIn{Race: []slRecv{{"q", "x", 0}, {"q", "y", 0}}, Later: slRecv{Lane: "q", Name: "y"}},
			[3]string{"q", "x", "x1"}, [3]string{"q", "y", "y1"})
		if o != (slOut{Winner: 0, Won: "x1", LosersCancelled: true, Later: "y1"}) {
			t.Fatalf("result %+v", o)
		}
		slWantGivenBack(b, "diff", history.LaneQueue, "y", "y1", 1, 2)
	})
}

// Both receives resolved by arrivals of earlier turns (each delivered
// straight to its receive, never buffered), then a Sleep on the virtual
// clock, then the race.
func TestSelectLoser_ResolvedInEarlierTurns(t *testing.T) {
	t.Parallel()
	clock := clock.NewVirtual(time.Now())
	b := setupEnv(t, &herald.Config{ClientConfig: herald.ClientConfig{Clock: clock}}, func(rt *herald.Runtime) {
		herald.RegisterWorkflow(rt, "w", func(ctx *herald.Context, _ struct{}) (slOut, error) {
			w, d := ctx.WaitEvent("a"), ctx.Dequeue("q")
			if err := ctx.Sleep(time.Hour); err != nil {
				return slOut{}, err
			}
			o := slOut{Winner: ctx.Select(w, d)}
			if err := w.Get(&o.Won); err != nil {
				return o, err
			}
			o.LosersCancelled = errors.Is(d.Get(nil), herald.ErrCanceled)
			_, err := ctx.TryDequeue("q", &o.Later)
			return o, err
		})
	})
	b.start("w", "i", nil)
	b.waitHistory("i", history.TimerCreated, "", 1)
	b.raise("i", "a", "a1", "a1")
	b.enqueue("i", "q", "q1", "q1")
	b.waitFate("a1", history.FateDelivered)
	b.waitFate("q1", history.FateDelivered)
	clock.Advance(time.Hour)
	var o slOut
	b.result("i", &o)
	if o != (slOut{Winner: 0, Won: "a1", LosersCancelled: true, Later: "q1"}) {
		t.Fatalf("result %+v", o)
	}
	slWantGivenBack(b, "i", history.LaneQueue, "q", "q1", 1, 2)
}

// The loser is a wait with a timeout (its future wraps the wait and its
// timer), resolved in an earlier turn; its timer was cancelled when it
// received.
func TestSelectLoser_TimeoutWrappedWait(t *testing.T) {
	t.Parallel()
	b := slSetup(t, nil)
	o := slRun(b, "i", slIn{Early: true, Race: []slRecv{{"p", "a", 0}, {"p", "b", time.Hour}}, Later: slRecv{Lane: "p", Name: "b"}},
		[3]string{"p", "a", "a1"}, [3]string{"p", "b", "b1"})
	if o != (slOut{Winner: 0, Won: "a1", LosersCancelled: true, Later: "b1"}) {
		t.Fatalf("result %+v", o)
	}
	slWantGivenBack(b, "i", history.LanePositional, "b", "b1", 1, 2)
	evs := b.history("i", 0)
	if len(ofKind(evs, history.TimerCreated, "", "")) != 1 || len(ofKind(evs, history.TimerCancelled, "", "")) != 1 {
		t.Fatalf("the wait's timer should be created and cancelled once; history:%s", dumpHistory(evs))
	}
}

// slCorrRace waits on a correlated key and a positional event, then, on
// "go", races them: the positional event wins.
func slCorrRace(ctx *herald.Context, key string) (string, error) {
	c, w := ctx.WaitCorrelated("doc", key), ctx.WaitEvent("p")
	if err := ctx.WaitEvent("go").Get(nil); err != nil {
		return "", err
	}
	if ctx.Select(w, c) != 0 {
		return "correlated won", nil
	}
	if err := c.Get(nil); !errors.Is(err, herald.ErrCanceled) {
		return "", errors.New("the losing correlated wait did not return ErrCanceled")
	}
	return "p won", nil
}

// A delete-after-first correlated event received by a wait that loses a
// Select is handed on to the next waiting instance, as for a withdrawn
// wait: the loser's copy is dropped (withdrawn_wait), the next waiter gets
// a copy of its own (a new event id) that ends delivered.
func TestSelectLoser_CorrelatedDeleteAfterFirstHandedOn(t *testing.T) {
	t.Parallel()
	b := setupEnv(t, nil, func(rt *herald.Runtime) {
		herald.RegisterWorkflow(rt, "race", slCorrRace)
		coRegister(rt)
	})
	b.defineCorrelated("doc", &herald.CorrelationConfig{DeleteAfterFirstCorrelation: true})
	b.start("race", "a", "k")
	coWaitSubscribed(b, "a")
	b.start(coWaitWF, "b", coIn{Def: "doc", Key: "k"})
	coWaitSubscribed(b, "b")

	ce := b.put("doc", "k", "v1")
	if len(ce.Produced) != 1 || ce.Produced[0].InstanceID != "a" {
		t.Fatalf("put delivered to %+v, want a (the oldest waiter)", ce.Produced)
	}
	first := ce.Produced[0].EventID
	b.waitFate(first, history.FateDelivered)
	b.raise("a", "p", "p1", "p1")
	b.raise("a", "go", nil, "a-go")
	if got := resultOf[string](b, "a"); got != "p won" {
		t.Fatalf("a: %q", got)
	}
	// The commit that gave the event back handed it on to b.
	var handed []*herald.EventRecord
	for _, e := range b.events("b") {
		if e.Lane == history.LaneCorrelated {
			handed = append(handed, e)
		}
	}
	if len(handed) != 1 || handed[0].EventID == first || handed[0].Key != "k" || handed[0].Name != "doc" {
		t.Fatalf("b's correlated events %+v, want one handed on (a new id, not %s)", handed, first)
	}
	if got := resultOf[string](b, "b"); got != "got:v1" {
		t.Fatalf("b: %q", got)
	}
	rec := b.fate(handed[0].EventID)
	if rec.Fate != history.FateDelivered || rec.WaitNumber != 1 || rec.InstanceID != "b" {
		t.Fatalf("handed-on fate %+v", rec)
	}
	rec = b.fate(first)
	if rec.Fate != history.FateDropped || rec.Reason != history.DropWithdrawnWait || rec.InstanceID != "a" {
		t.Fatalf("a's copy: fate %+v, want dropped/withdrawn_wait", rec)
	}
	evs := b.history("a", 0)
	back := ofKind(withID(evs, first), history.EventSubscribedCancelled, history.LaneCorrelated, "doc")
	if len(back) != 1 || back[0].TaskSeq != coSubscribed(b, "a", evs, "doc", "k") || back[0].Reason != history.DropWithdrawnWait {
		t.Fatalf("a should give %s back; history:%s", first, dumpHistory(evs))
	}
	b.wantWarn("herald: event dropped", "event_id="+first, "reason=withdrawn_wait")
	b.wantNoCorrelated("doc", "k")
	b.replayAll("a")
}

// A fan-out correlated event is still stored when a wait that received it
// loses a Select: the loser's copy is dropped (withdrawn_wait) and the
// correlated event stays for the next wait.
func TestSelectLoser_CorrelatedFanOutKept(t *testing.T) {
	t.Parallel()
	b := setupEnv(t, nil, func(rt *herald.Runtime) { herald.RegisterWorkflow(rt, "race", slCorrRace) })
	b.defineCorrelated("doc", nil)
	b.start("race", "a", "k")
	coWaitSubscribed(b, "a")
	ce := b.put("doc", "k", "v1")
	if len(ce.Produced) != 1 {
		t.Fatalf("produced %+v", ce.Produced)
	}
	first := ce.Produced[0].EventID
	b.waitFate(first, history.FateDelivered)
	b.raise("a", "p", "p1", "p1")
	b.raise("a", "go", nil, "a-go")
	if got := resultOf[string](b, "a"); got != "p won" {
		t.Fatalf("a: %q", got)
	}
	rec := b.fate(first)
	if rec.Fate != history.FateDropped || rec.Reason != history.DropWithdrawnWait {
		t.Fatalf("a's copy: fate %+v, want dropped/withdrawn_wait", rec)
	}
	if c := b.correlated("doc", "k"); len(c.Produced) != 1 || c.Produced[0].EventID != first {
		t.Fatalf("correlated event %+v should be kept with its produced list", c)
	}
	b.replayAll("a")
}
