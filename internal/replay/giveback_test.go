package replay_test

import (
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/heraldwf/herald/heraldtype"
	"github.com/heraldwf/herald/history"
	"github.com/heraldwf/herald/internal/replay"
	"github.com/heraldwf/herald/storage"
)

// enqueue sends a queue-lane message (its id as its payload) through the
// harness's inbox.
func enqueue(h *harness, name, id string, latest bool) {
	h.t.Helper()
	m := h.push(storage.Message{Kind: storage.MsgEvent, Lane: history.LaneQueue, EventID: id, Name: name,
		Payload: jsonOf(id), Latest: latest})
	h.fates[id] = storage.FateUpdate{EventID: id, Fate: history.FatePending}
	h.raised = append(h.raised, raisedEvent{id: id, name: name, msg: m, lane: history.LaneQueue})
}

// get reads a future whose value is a JSON string; "canceled" for
// ErrCanceled.
func get(h *harness, f *replay.Future) (string, error) {
	v, err := f.Get()
	switch {
	case errors.Is(err, replay.ErrCanceled):
		return "canceled", nil
	case err != nil:
		return "", err
	}
	return unquote(h.t, v), nil
}

// gotNow is the value of a future that must be ready ("not ready" if not).
func gotNow(h *harness, f *replay.Future) (string, error) {
	if !f.Ready() {
		return "not ready", nil
	}
	return get(h, f)
}

// wantGiveBack checks the give-back of eventID on the losing receive's
// cancellation in evs: the cancellation names the loser (its subscription
// seq) and the outcome (the wait number it went to, or a drop reason).
func wantGiveBack(t *testing.T, evs []history.Event, eventID string, loser, waitNumber int, reason history.DropReason) {
	t.Helper()
	for _, ev := range evs {
		if ev.Kind == history.EventSubscribedCancelled && ev.EventID == eventID {
			if ev.TaskSeq != loser || ev.WaitNumber != waitNumber || ev.Reason != reason {
				t.Fatalf("give-back of %s: task %d wait %d reason %q, want task %d wait %d reason %q\n%s",
					eventID, ev.TaskSeq, ev.WaitNumber, ev.Reason, loser, waitNumber, reason, dumpEvents(evs))
			}
			return
		}
	}
	t.Fatalf("no give-back of %s\n%s", eventID, dumpEvents(evs))
}

func subscribed(evs []history.Event, lane history.Lane, name string) []history.Event {
	var out []history.Event
	for _, ev := range evs {
		if ev.Kind == history.EventSubscribed && ev.Lane == lane && ev.Name == name {
			out = append(out, ev)
		}
	}
	return out
}

// TestEngineGiveBack: a receive that loses a Select after it received
// gives the event back, as if it had never been taken (docs/events.md, the
// README's "a Dequeue that loses a Select consumes nothing").
func TestEngineGiveBack(t *testing.T) {
	t.Parallel()
	t.Run("two waits with buffered events: the loser's event goes to the next wait", func(t *testing.T) {
		t.Parallel()
		h := newHarness(t, "", nil)
		h.wf = func(s *replay.State, _ json.RawMessage) (json.RawMessage, error) {
			if err := sleep(s); err != nil {
				return nil, err
			}
			a, b := s.WaitEvent("a", 0), s.WaitEvent("b", 0)
			h.note("winner %d", s.Select(a, b))
			va, err := get(h, a)
			if err != nil {
				return nil, err
			}
			vb, err := get(h, b)
			if err != nil {
				return nil, err
			}
			later, err := gotNow(h, s.WaitEvent("b", 0))
			return jsonOf([]string{va, vb, later}), err
		}
		h.turn()
		h.raise("a", "a1", "")
		h.raise("b", "b1", "")
		h.turn()
		h.fireNext()
		out := h.turn()
		wantResult(t, out, `["a1","canceled","b1"]`)
		wantKinds(t, "race", out.NewEvents, history.TimerFired, history.EventSubscribed, history.EventSubscribed,
			history.EventSubscribedCancelled, history.EventSubscribed, history.ExecutionCompleted)
		subs := subscribed(h.cur(), history.LanePositional, "b")
		wantGiveBack(t, h.cur(), "b1", subs[0].Seq, 0, "")
		if subs[1].EventID != "b1" || subs[1].WaitNumber != 2 {
			t.Fatalf("the next wait took %+v", subs[1])
		}
		wantFates(t, out, "a1:delivered#1@1", "b1:delivered#1@1", "b1:buffered@1", "b1:delivered#2@1")
		wantFate(t, h, "b1", history.FateDelivered, "", 1, 1, 2)
		if len(out.Drops) != 0 {
			t.Fatalf("drops %+v", out.Drops)
		}
	})
	t.Run("a loser whose result the workflow got keeps it", func(t *testing.T) {
		t.Parallel()
		h := newHarness(t, "", nil)
		h.wf = func(s *replay.State, _ json.RawMessage) (json.RawMessage, error) {
			if err := sleep(s); err != nil {
				return nil, err
			}
			a, b := s.WaitEvent("a", 0), s.WaitEvent("b", 0)
			vb, err := get(h, b)
			if err != nil {
				return nil, err
			}
			h.note("winner %d", s.Select(a, b))
			again, err := get(h, b)
			if err != nil {
				return nil, err
			}
			later, err := gotNow(h, s.WaitEvent("b", 0))
			return jsonOf([]string{vb, again, later}), err
		}
		h.turn()
		h.raise("a", "a1", "")
		h.raise("b", "b1", "")
		h.turn()
		h.fireNext()
		out := h.turn()
		wantResult(t, out, `["b1","b1","not ready"]`)
		if len(kindOf(out.NewEvents, history.EventSubscribedCancelled)) != 0 {
			t.Fatalf("nothing should be given back\n%s", dumpEvents(out.NewEvents))
		}
		wantFate(t, h, "b1", history.FateDelivered, "", 1, 1, 1)
	})
	t.Run("resolved in earlier turns, given to a listening wait", func(t *testing.T) {
		t.Parallel()
		h := newHarness(t, "", nil)
		h.wf = func(s *replay.State, _ json.RawMessage) (json.RawMessage, error) {
			w1, w2 := s.WaitEvent("x", 0), s.WaitEvent("x", 0)
			tm := s.NewTimer(time.Minute)
			if _, err := tm.Get(); err != nil {
				return nil, err
			}
			h.note("winner %d", s.Select(tm, w1))
			v1, err := get(h, w1)
			if err != nil {
				return nil, err
			}
			v2, err := get(h, w2)
			return jsonOf([]string{v1, v2}), err
		}
		h.turn()
		h.raise("x", "x1", "")
		out := h.turn()
		wantFates(t, out, "x1:delivered#1@1")
		h.fireNext()
		out = h.turn()
		wantResult(t, out, `["canceled","x1"]`)
		subs := subscribed(h.cur(), history.LanePositional, "x")
		wantGiveBack(t, h.cur(), "x1", subs[0].Seq, 2, "")
		wantFates(t, out, "x1:delivered#2@1")
		if len(h.find(history.TimerCancelled)) != 0 {
			t.Fatalf("no timer to cancel\n%s", dumpEvents(h.cur()))
		}
	})
	t.Run("the timeout-wrapped wait as loser", func(t *testing.T) {
		t.Parallel()
		h := newHarness(t, "", nil)
		h.wf = func(s *replay.State, _ json.RawMessage) (json.RawMessage, error) {
			w := s.WaitEvent("x", time.Hour)
			tm := s.NewTimer(time.Minute)
			if _, err := tm.Get(); err != nil {
				return nil, err
			}
			h.note("winner %d", s.Select(tm, w))
			v, err := get(h, w)
			if err != nil {
				return nil, err
			}
			later, err := gotNow(h, s.WaitEvent("x", 0))
			return jsonOf([]string{v, later}), err
		}
		h.turn()
		h.raise("x", "x1", "")
		out := h.turn()
		wantKinds(t, "delivery", out.NewEvents, history.EventRaised, history.TimerCancelled)
		h.fire(1, 4) // the minute timer
		out = h.turn()
		wantResult(t, out, `["canceled","x1"]`)
		wantGiveBack(t, h.cur(), "x1", 2, 0, "")
		wantFates(t, out, "x1:buffered@1", "x1:delivered#2@1")
	})
	t.Run("no withdrawn question: the next event is not dropped", func(t *testing.T) {
		t.Parallel()
		h := newHarness(t, "", nil)
		h.wf = func(s *replay.State, _ json.RawMessage) (json.RawMessage, error) {
			w := s.WaitEvent("x", 0)
			tm := s.NewTimer(time.Minute)
			if _, err := tm.Get(); err != nil {
				return nil, err
			}
			s.Select(tm, w)
			if err := sleep(s); err != nil {
				return nil, err
			}
			return waitAll(h, s, "x", "x")
		}
		h.turn()
		h.raise("x", "x1", "")
		h.turn()
		h.fireNext()
		out := h.turn()
		wantFates(t, out, "x1:buffered@1")
		h.raise("x", "x2", "")
		out = h.turn()
		wantFates(t, out, "x2:buffered@1")
		h.fireNext()
		wantResult(t, h.turn(), `["x1","x2"]`)
	})
	t.Run("over the limit: kept, later arrivals dropped, all carried", func(t *testing.T) {
		t.Parallel()
		h := newHarness(t, "", nil)
		h.limits.MaxUnconsumedEvents = 1
		h.wf = func(s *replay.State, raw json.RawMessage) (json.RawMessage, error) {
			if s.Execution() == 2 {
				return waitAll(h, s, "x", "y")
			}
			w := s.WaitEvent("x", 0)
			tm := s.NewTimer(time.Minute)
			if _, err := tm.Get(); err != nil {
				return nil, err
			}
			s.Select(tm, w)
			if err := sleep(s); err != nil {
				return nil, err
			}
			return nil, &replay.ContinueAsNewError{Input: raw}
		}
		h.turn()
		h.raise("x", "x1", "")
		h.raise("y", "y1", "")
		h.turn()
		h.fireNext()
		out := h.turn()
		wantFates(t, out, "x1:buffered@1")
		h.raise("y", "y2", "")
		out = h.turn()
		wantFates(t, out, "y2:dropped/limit@1")
		h.fireNext()
		out = h.turn()
		start := out.ContinueAsNew.StartEvents
		wantKinds(t, "start", start, history.ExecutionStarted, history.EventRaised, history.EventRaised)
		if start[1].EventID != "x1" || start[2].EventID != "y1" {
			t.Fatalf("carried %s, %s; want x1, y1 in arrival order", start[1].EventID, start[2].EventID)
		}
		wantResult(t, h.turn(), `["x1","y1"]`)
	})
	t.Run("queue: a Dequeue and a WaitEvent of one name", func(t *testing.T) {
		t.Parallel()
		h := newHarness(t, "", nil)
		h.wf = func(s *replay.State, _ json.RawMessage) (json.RawMessage, error) {
			if err := sleep(s); err != nil {
				return nil, err
			}
			w, d := s.WaitEvent("n", 0), s.Dequeue("n", 0)
			h.note("winner %d", s.Select(w, d))
			v, ok := s.TryDequeue("n")
			if !ok {
				return jsonOf("lost"), nil
			}
			return v, nil
		}
		h.turn()
		h.raise("n", "p1", "")
		enqueue(h, "n", "q1", false)
		h.turn()
		h.fireNext()
		out := h.turn()
		wantResult(t, out, `"q1"`)
		wantGiveBack(t, h.cur(), "q1", subscribed(h.cur(), history.LaneQueue, "n")[0].Seq, 0, "")
		wantFate(t, h, "q1", history.FateDelivered, "", 1, 1, 2)
	})
	t.Run("queue: latest-value message superseded on return", func(t *testing.T) {
		t.Parallel()
		h := newHarness(t, "", nil)
		h.wf = func(s *replay.State, _ json.RawMessage) (json.RawMessage, error) {
			d, w := s.Dequeue("L", 0), s.WaitEvent("p", 0)
			if err := sleep(s); err != nil {
				return nil, err
			}
			s.Select(w, d)
			v, ok := s.TryDequeue("L")
			if !ok {
				return jsonOf("none"), nil
			}
			return v, nil
		}
		h.turn()
		enqueue(h, "L", "l1", true)
		enqueue(h, "L", "l2", true)
		h.raise("p", "p1", "")
		out := h.turn()
		wantFates(t, out, "l1:delivered#1@1", "l2:buffered@1", "p1:delivered#1@1")
		h.fireNext()
		out = h.turn()
		wantResult(t, out, `"l2"`)
		wantGiveBack(t, h.cur(), "l1", 2, 0, history.DropSuperseded)
		wantFate(t, h, "l1", history.FateDropped, history.DropSuperseded, 1, 1, 0)
		if len(out.Drops) != 1 || out.Drops[0].EventID != "l1" || out.Drops[0].Reason != history.DropSuperseded ||
			out.Drops[0].Kind != history.EventSubscribedCancelled {
			t.Fatalf("drops %+v", out.Drops)
		}
	})
	t.Run("queue: a returned message does not count against the carry limit", func(t *testing.T) {
		t.Parallel()
		h := newHarness(t, "", nil)
		h.limits.MaxQueuedEvents = 1
		h.wf = func(s *replay.State, raw json.RawMessage) (json.RawMessage, error) {
			if s.Execution() == 2 {
				var got []string
				for {
					v, ok := s.TryDequeue("q")
					if !ok {
						return jsonOf(got), nil
					}
					got = append(got, unquote(h.t, v))
				}
			}
			d := s.Dequeue("q", 0)
			tm := s.NewTimer(time.Minute)
			if _, err := tm.Get(); err != nil {
				return nil, err
			}
			s.Select(tm, d)
			return nil, &replay.ContinueAsNewError{Input: raw}
		}
		h.turn()
		enqueue(h, "q", "q1", false)
		enqueue(h, "q", "q2", false)
		out := h.turn()
		wantFates(t, out, "q1:delivered#1@1", "q2:buffered@1")
		h.fireNext()
		out = h.turn()
		start := out.ContinueAsNew.StartEvents
		wantKinds(t, "start", start, history.ExecutionStarted, history.EventRaised, history.EventRaised)
		wantResult(t, h.turn(), `["q1","q2"]`)
	})
	t.Run("correlated: the copy is dropped and the event returned to the store", func(t *testing.T) {
		t.Parallel()
		h := newHarness(t, "", nil)
		h.corr = newCorrStore()
		h.corr.deleteAfterFirst["doc"] = true
		h.wf = func(s *replay.State, _ json.RawMessage) (json.RawMessage, error) {
			c, w := s.WaitCorrelated("doc", "k", 0), s.WaitEvent("p", 0)
			if err := sleep(s); err != nil {
				return nil, err
			}
			s.Select(w, c)
			v, err := get(h, c)
			if err != nil {
				return nil, err
			}
			later, err := get(h, s.WaitCorrelated("doc", "k", 0))
			return jsonOf([]string{v, later}), err
		}
		h.turn()
		h.corrPut("doc", "k", "P1")
		h.raise("p", "p1", "")
		h.turn()
		first := h.raised[0].id
		h.fireNext()
		out := h.turn()
		wantGiveBack(t, h.cur(), first, subscribed(h.cur(), history.LaneCorrelated, "doc")[0].Seq, 0, history.DropWithdrawnWait)
		if r := out.ReturnedCorrelated; len(r) != 1 || r[0].EventID != first || r[0].Def != "doc" || r[0].Key != "k" ||
			string(r[0].Payload) != `"P1"` {
			t.Fatalf("returned %+v", out.ReturnedCorrelated)
		}
		wantFate(t, h, first, history.FateDropped, history.DropWithdrawnWait, 1, 1, 0)
		// The store stored it again; the new wait receives it.
		wantResult(t, h.turn(), `["canceled","P1"]`)
	})
}

// TestEngineGiveBackReplay: histories written before give-backs existed
// (the loser kept its event) replay as they were made; a history whose
// give-back differs from what the code does is non-deterministic.
func TestEngineGiveBackReplay(t *testing.T) {
	t.Parallel()
	wf := func(s *replay.State, _ json.RawMessage) (json.RawMessage, error) {
		a, b := s.WaitEvent("a", 0), s.WaitEvent("b", 0)
		s.Select(a, b)
		vb, err := b.Get()
		if errors.Is(err, replay.ErrCanceled) {
			vb = jsonOf("canceled")
		}
		if _, err := s.WaitEvent("c", 0).Get(); err != nil {
			return nil, err
		}
		return vb, nil
	}
	msg := func(id int64, name string) storage.Message {
		return storage.Message{ID: id, Kind: storage.MsgEvent, Lane: history.LanePositional, EventID: name + "1", Name: name,
			Payload: jsonOf(name + "1")}
	}
	run := func(hist []history.Event, msgs ...storage.Message) *replay.Output {
		t.Helper()
		out, err := replay.Run(&replay.Input{InstanceID: "i", Workflow: wf, History: hist, Messages: msgs, Now: t0.Add(time.Hour)})
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	start := history.Event{Seq: 1, Time: t0, Kind: history.ExecutionStarted, Workflow: "wf", Execution: 1}

	// Today: a1 and b1 wait for the code; the loser gives b1 back.
	out := run([]history.Event{start}, msg(1, "a"), msg(2, "b"))
	wantKinds(t, "first turn", out.NewEvents, history.EventRaised, history.EventRaised, history.EventSubscribed,
		history.EventSubscribed, history.EventSubscribedCancelled, history.EventSubscribed)
	wantGiveBack(t, out.NewEvents, "b1", 5, 0, "")
	today := append([]history.Event{start}, out.NewEvents...)
	if out := run(today); out.Status != heraldtype.StatusRunning || len(out.NewEvents) != 0 {
		t.Fatalf("replay: %+v", out)
	}
	wantResult(t, run(today, msg(3, "c")), `"canceled"`)

	// Before: the same turn had no give-back; the loser kept b1. The code
	// replays it as it was made.
	legacy := slices.Delete(slices.Clone(today), 5, 6)
	legacy[5].Seq = 6
	wantResult(t, run(legacy, msg(3, "c")), `"b1"`)

	// A recorded give-back of another event, or with another outcome, does
	// not fit the code.
	for _, change := range []func(*history.Event){
		func(e *history.Event) { e.EventID = "b2" },
		func(e *history.Event) { e.WaitNumber = 2 },
		func(e *history.Event) { e.Reason = history.DropSuperseded },
	} {
		bad := slices.Clone(today)
		change(&bad[5])
		out := run(bad)
		if out.Status != heraldtype.StatusFailed || out.Failure.Kind != replay.FailureNondeterminism ||
			!strings.Contains(out.Failure.Message, "giving back b1") {
			t.Fatalf("altered give-back %+v: status %s, failure %v", bad[5], out.Status, out.Failure)
		}
	}
}
