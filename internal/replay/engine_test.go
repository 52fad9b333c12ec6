package replay_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/heraldwf/herald/heraldtype"
	"github.com/heraldwf/herald/history"
	"github.com/heraldwf/herald/internal/replay"
	"github.com/heraldwf/herald/storage"
)

// ---- helpers ----

func unquote(t testing.TB, v json.RawMessage) string {
	t.Helper()
	var s string
	if err := json.Unmarshal(v, &s); err != nil {
		t.Fatalf("payload %s is not a JSON string: %v", v, err)
	}
	return s
}

func jsonOf(v any) json.RawMessage {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return b
}

// kinds lists the kinds of evs, for comparing history shapes.
func kinds(evs []history.Event) []history.Kind {
	out := make([]history.Kind, len(evs))
	for i, ev := range evs {
		out[i] = ev.Kind
	}
	return out
}

func wantKinds(t testing.TB, what string, evs []history.Event, want ...history.Kind) {
	t.Helper()
	if got := kinds(evs); !slices.Equal(got, want) {
		t.Fatalf("%s: kinds\n  %v\nwant\n  %v\n%s", what, got, want, dumpEvents(evs))
	}
}

func wantStatus(t testing.TB, out *replay.Output, want heraldtype.Status) {
	t.Helper()
	if out.Status != want {
		t.Fatalf("status %s (failure %v), want %s", out.Status, out.Failure, want)
	}
}

func wantResult(t testing.TB, out *replay.Output, want string) {
	t.Helper()
	wantStatus(t, out, heraldtype.StatusCompleted)
	if string(out.Result) != want {
		t.Fatalf("result %s, want %s", out.Result, want)
	}
}

func wantFate(t testing.TB, h *harness, id string, fate history.Fate, reason history.DropReason, exec, origin, waitNumber int) {
	t.Helper()
	want := storage.FateUpdate{EventID: id, Fate: fate, Reason: reason, Execution: exec, OriginExecution: origin, WaitNumber: waitNumber}
	if got := h.fates[id]; got != want {
		t.Fatalf("fate of %s\n  %+v\nwant\n  %+v", id, got, want)
	}
}

// fateLog renders a turn's fate updates as "id:fate[/reason][#wait]@exec".
func fateLog(fs []storage.FateUpdate) []string {
	var out []string
	for _, f := range fs {
		s := f.EventID + ":" + string(f.Fate)
		if f.Reason != "" {
			s += "/" + string(f.Reason)
		}
		if f.WaitNumber != 0 {
			s += fmt.Sprintf("#%d", f.WaitNumber)
		}
		out = append(out, s+fmt.Sprintf("@%d", f.Execution))
	}
	return out
}

func wantFates(t testing.TB, out *replay.Output, want ...string) {
	t.Helper()
	if got := fateLog(out.Fates); !slices.Equal(got, want) {
		t.Fatalf("turn fates %v, want %v", got, want)
	}
}

// waitAll waits for n events of name one after the other and returns their
// payloads as a JSON list.
func waitAll(h *harness, s *replay.State, names ...string) (json.RawMessage, error) {
	var got []string
	for _, name := range names {
		v, err := s.WaitEvent(name, 0).Get()
		if err != nil {
			return nil, err
		}
		h.note("%s=%s", name, v)
		var str string
		if err := json.Unmarshal(v, &str); err != nil {
			return nil, err
		}
		got = append(got, str)
	}
	return jsonOf(got), nil
}

func sleep(s *replay.State) error {
	_, err := s.NewTimer(time.Minute).Get()
	return err
}

// ---- rule 1 and 2: pairing ----

func TestEngineRaiseBeforeWait(t *testing.T) {
	t.Parallel()
	// The workflow sleeps, then waits: the event may arrive before the
	// wait exists (buffered, then received by the wait at once) or after.
	wf := func(h *harness) replay.WorkflowFunc {
		return func(s *replay.State, _ json.RawMessage) (json.RawMessage, error) {
			if err := sleep(s); err != nil {
				return nil, err
			}
			return s.WaitEvent("approve", 0).Get()
		}
	}
	tests := []struct {
		name  string
		drive func(h *harness) *replay.Output
		// the final turn's history and fates
		kinds []history.Kind
		fates []string
	}{
		{"event then timer in the same turn", func(h *harness) *replay.Output {
			h.raise("approve", "e1", "")
			h.fireNext()
			return h.turn()
		}, []history.Kind{history.EventRaised, history.TimerFired, history.EventSubscribed, history.ExecutionCompleted},
			[]string{"e1:buffered@1", "e1:delivered#1@1"}},
		{"event in an earlier turn", func(h *harness) *replay.Output {
			h.raise("approve", "e1", "")
			out := h.turn()
			wantKinds(h.t, "event turn", out.NewEvents, history.EventRaised)
			wantFates(h.t, out, "e1:buffered@1")
			h.fireNext()
			return h.turn()
		}, []history.Kind{history.TimerFired, history.EventSubscribed, history.ExecutionCompleted},
			[]string{"e1:delivered#1@1"}},
		{"timer then event in the same turn (raise after wait)", func(h *harness) *replay.Output {
			h.fireNext()
			h.raise("approve", "e1", "")
			return h.turn()
		}, []history.Kind{history.TimerFired, history.EventSubscribed, history.EventRaised, history.ExecutionCompleted},
			[]string{"e1:delivered#1@1"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			h := newHarness(t, "", nil)
			h.wf = wf(h)
			wantKinds(t, "first turn", h.turn().NewEvents, history.TimerCreated)
			out := tt.drive(h)
			wantKinds(t, "last turn", out.NewEvents, tt.kinds...)
			wantFates(t, out, tt.fates...)
			wantResult(t, out, `"e1"`)
			wantFate(t, h, "e1", history.FateDelivered, "", 1, 1, 1)
			sub := h.find(history.EventSubscribed)[0]
			raised := h.find(history.EventRaised)[0]
			if raised.TaskSeq == 0 { // buffered: the subscription names the event
				if sub.EventID != "e1" || sub.WaitNumber != 1 {
					t.Fatalf("subscription %+v should carry the buffered event", sub)
				}
			} else if raised.TaskSeq != sub.Seq || raised.WaitNumber != 1 || sub.EventID != "" {
				t.Fatalf("event %+v should be delivered to subscription %+v", raised, sub)
			}
		})
	}
}

func TestEngineEventsOfOneNameInOrder(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name       string
		sleepFirst bool
		drive      func(h *harness)
	}{
		{"all raised before start", false, func(h *harness) {
			h.raise("x", "x1", "")
			h.raise("x", "x2", "")
			h.raise("x", "x3", "")
			h.turn()
		}},
		{"all raised in one turn while the workflow sleeps", true, func(h *harness) {
			h.turn()
			h.raise("x", "x1", "")
			h.raise("x", "x2", "")
			h.raise("x", "x3", "")
			h.turn()
			h.fireNext()
			h.turn()
		}},
		{"one per turn while the workflow waits", true, func(h *harness) {
			h.turn()
			h.fireNext()
			h.turn()
			for _, id := range []string{"x1", "x2", "x3"} {
				h.raise("x", id, "")
				h.turn()
			}
		}},
		{"timer and all events in one turn", true, func(h *harness) {
			h.turn()
			h.raise("x", "x1", "")
			h.fireNext()
			h.raise("x", "x2", "")
			h.raise("x", "x3", "")
			h.turn()
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			h := newHarness(t, "", nil)
			h.wf = func(s *replay.State, _ json.RawMessage) (json.RawMessage, error) {
				if tt.sleepFirst {
					if err := sleep(s); err != nil {
						return nil, err
					}
				}
				return waitAll(h, s, "x", "x", "x")
			}
			tt.drive(h)
			if h.status != heraldtype.StatusCompleted || string(h.result) != `["x1","x2","x3"]` {
				t.Fatalf("status %s result %s\n%s", h.status, h.result, dumpEvents(h.cur()))
			}
			for i, id := range []string{"x1", "x2", "x3"} {
				wantFate(t, h, id, history.FateDelivered, "", 1, 1, i+1)
			}
		})
	}
}

func TestEngineTwoOutstandingWaits(t *testing.T) {
	t.Parallel()
	h := newHarness(t, "", nil)
	h.wf = func(s *replay.State, _ json.RawMessage) (json.RawMessage, error) {
		w1 := s.WaitEvent("x", 0)
		w2 := s.WaitEvent("x", 0)
		v2, _ := w2.Get() // the younger wait is read first: pairing is by creation order
		v1, _ := w1.Get()
		return jsonOf([]string{unquote(h.t, v1), unquote(h.t, v2)}), nil
	}
	wantKinds(t, "first turn", h.turn().NewEvents, history.EventSubscribed, history.EventSubscribed)
	h.raise("x", "x1", "")
	out := h.turn()
	wantStatus(t, out, heraldtype.StatusRunning)
	if ev := out.NewEvents[0]; ev.TaskSeq != 2 || ev.WaitNumber != 1 {
		t.Fatalf("x1 went to %+v, want the first wait (seq 2)", ev)
	}
	h.raise("x", "x2", "")
	out = h.turn()
	wantResult(t, out, `["x1","x2"]`)
	wantFate(t, h, "x2", history.FateDelivered, "", 1, 1, 2)
}

func TestEngineEventsOfDifferentNames(t *testing.T) {
	t.Parallel()
	for _, before := range []bool{true, false} {
		t.Run(fmt.Sprint("before start ", before), func(t *testing.T) {
			t.Parallel()
			h := newHarness(t, "", nil)
			h.wf = func(s *replay.State, _ json.RawMessage) (json.RawMessage, error) {
				return waitAll(h, s, "b", "a", "c", "a")
			}
			if !before {
				h.turn()
			}
			h.raise("a", "a1", "")
			h.raise("b", "b1", "")
			h.raise("a", "a2", "")
			h.raise("c", "c1", "")
			out := h.turn()
			wantResult(t, out, `["b1","a1","c1","a2"]`)
			wantFate(t, h, "a1", history.FateDelivered, "", 1, 1, 1)
			wantFate(t, h, "a2", history.FateDelivered, "", 1, 1, 2)
			wantFate(t, h, "b1", history.FateDelivered, "", 1, 1, 1)
			wantFate(t, h, "c1", history.FateDelivered, "", 1, 1, 1)
		})
	}
}

// ---- rule 3: withdrawn waits ----

// selectThenWait is from seed 002's test plan, test 7b (docs/positional.md, rule 3): select(wait x, timer); when the timer
// wins the workflow is busy (sleeping) for a while, then waits for x again.
func selectThenWait(h *harness) replay.WorkflowFunc {
	return func(s *replay.State, _ json.RawMessage) (json.RawMessage, error) {
		w := s.WaitEvent("x", 0)
		tm := s.NewTimer(time.Minute)
		if s.Select(w, tm) == 0 {
			v, _ := w.Get()
			return jsonOf("first " + unquote(h.t, v)), nil
		}
		if _, err := w.Get(); !errors.Is(err, replay.ErrCanceled) {
			return nil, fmt.Errorf("the losing wait returned %v, want ErrCanceled", err)
		}
		if err := sleep(s); err != nil {
			return nil, err
		}
		v, err := s.WaitEvent("x", 0).Get()
		if err != nil {
			return nil, err
		}
		return jsonOf("second " + unquote(h.t, v)), nil
	}
}

func TestEngineWithdrawnWaitInSelect(t *testing.T) {
	t.Parallel()
	t.Run("late answer dropped, fresh event received", func(t *testing.T) {
		t.Parallel()
		h := newHarness(t, "", nil)
		h.wf = selectThenWait(h)
		out := h.turn()
		wantKinds(t, "turn 1", out.NewEvents, history.EventSubscribed, history.TimerCreated)
		sub := out.NewEvents[0].Seq

		h.fireNext()
		out = h.turn()
		wantKinds(t, "timer wins", out.NewEvents, history.TimerFired, history.EventSubscribedCancelled, history.TimerCreated)
		if c := out.NewEvents[1]; c.TaskSeq != sub || c.Name != "x" || c.Lane != history.LanePositional {
			t.Fatalf("cancellation breadcrumb %+v should name subscription %d", c, sub)
		}

		h.raise("x", "late", "")
		out = h.turn()
		wantKinds(t, "late answer", out.NewEvents, history.EventDropped)
		d := out.NewEvents[0]
		if d.EventID != "late" || d.Reason != history.DropWithdrawnWait || d.Name != "x" || d.OriginExecution != 1 || string(d.Payload) != `"late"` {
			t.Fatalf("breadcrumb %+v", d)
		}
		if len(out.Drops) != 1 || out.Drops[0].EventID != "late" || out.Drops[0].Seq != d.Seq {
			t.Fatalf("drops %+v", out.Drops)
		}
		wantFates(t, out, "late:dropped/withdrawn_wait@1")

		h.fireNext()
		out = h.turn()
		wantKinds(t, "wait again", out.NewEvents, history.TimerFired, history.EventSubscribed)
		second := out.NewEvents[1]
		if second.EventID != "" {
			t.Fatalf("the new wait received %s at once: the late answer was not dropped", second.EventID)
		}

		h.raise("x", "fresh", "")
		out = h.turn()
		wantResult(t, out, `"second fresh"`)
		if ev := out.NewEvents[0]; ev.Kind != history.EventRaised || ev.TaskSeq != second.Seq || ev.WaitNumber != 2 {
			t.Fatalf("fresh event %+v should be delivered to wait 2 (seq %d)", ev, second.Seq)
		}
		wantFate(t, h, "late", history.FateDropped, history.DropWithdrawnWait, 1, 1, 0)
		wantFate(t, h, "fresh", history.FateDelivered, "", 1, 1, 2)
	})
	t.Run("late and fresh in one turn while busy", func(t *testing.T) {
		t.Parallel()
		h := newHarness(t, "", nil)
		h.wf = selectThenWait(h)
		h.turn()
		h.fireNext()
		h.turn()
		h.raise("x", "late", "")
		h.raise("x", "fresh", "")
		out := h.turn()
		wantFates(t, out, "late:dropped/withdrawn_wait@1", "fresh:buffered@1")
		h.fireNext()
		out = h.turn()
		wantResult(t, out, `"second fresh"`)
		wantFates(t, out, "fresh:delivered#2@1")
	})
	t.Run("waiting again in the same turn: nothing is withdrawn", func(t *testing.T) {
		t.Parallel()
		h := newHarness(t, "", nil)
		h.wf = func(s *replay.State, _ json.RawMessage) (json.RawMessage, error) {
			w := s.WaitEvent("x", 0)
			if s.Select(w, s.NewTimer(time.Minute)) == 0 {
				return jsonOf("first"), nil
			}
			return s.WaitEvent("x", 0).Get()
		}
		h.turn()
		h.fireNext()
		h.raise("x", "e1", "")
		out := h.turn()
		wantKinds(t, "turn", out.NewEvents, history.TimerFired, history.EventSubscribedCancelled, history.EventSubscribed,
			history.EventRaised, history.ExecutionCompleted)
		wantResult(t, out, `"e1"`)
		wantFate(t, h, "e1", history.FateDelivered, "", 1, 1, 2)
	})
	t.Run("the wait wins: the timer is cancelled and its firing ignored", func(t *testing.T) {
		t.Parallel()
		h := newHarness(t, "", nil)
		h.wf = func(s *replay.State, _ json.RawMessage) (json.RawMessage, error) {
			w := s.WaitEvent("x", 0)
			tm := s.NewTimer(time.Minute)
			if s.Select(w, tm) != 0 {
				return nil, errors.New("timer won")
			}
			if _, err := tm.Get(); !errors.Is(err, replay.ErrCanceled) {
				return nil, fmt.Errorf("losing timer: %v", err)
			}
			return s.WaitEvent("y", 0).Get()
		}
		out := h.turn()
		timer := out.Timers[0].TaskSeq
		h.raise("x", "e1", "")
		out = h.turn()
		wantKinds(t, "wait wins", out.NewEvents, history.EventRaised, history.TimerCancelled, history.EventSubscribed)
		if !slices.Equal(out.CancelTimers, []int{timer}) || out.NewEvents[1].TaskSeq != timer {
			t.Fatalf("cancel timers %v, breadcrumb %+v; want timer %d", out.CancelTimers, out.NewEvents[1], timer)
		}
		h.fire(1, timer) // a firing that raced the cancellation
		out = h.turn()
		if len(out.NewEvents) != 0 || len(out.Consumed) != 1 {
			t.Fatalf("a cancelled timer's firing should be consumed and ignored: %+v", out)
		}
		h.raise("y", "y1", "")
		wantResult(t, h.turn(), `"y1"`)
	})
}

func TestEngineWaitTimeout(t *testing.T) {
	t.Parallel()
	wf := func(h *harness) replay.WorkflowFunc {
		return func(s *replay.State, _ json.RawMessage) (json.RawMessage, error) {
			v, err := s.WaitEvent("x", time.Minute).Get()
			if err == nil {
				return jsonOf("got " + unquote(h.t, v)), nil
			}
			if !errors.Is(err, replay.ErrEventTimeout) {
				return nil, err
			}
			if err := sleep(s); err != nil {
				return nil, err
			}
			v, err = s.WaitEvent("x", 0).Get()
			if err != nil {
				return nil, err
			}
			return jsonOf("timed out, then " + unquote(h.t, v)), nil
		}
	}
	t.Run("timeout withdraws the wait", func(t *testing.T) {
		t.Parallel()
		h := newHarness(t, "", nil)
		h.wf = wf(h)
		out := h.turn()
		wantKinds(t, "turn 1", out.NewEvents, history.EventSubscribed, history.TimerCreated)
		if got := out.Timers[0].FireAt; !got.Equal(t0.Add(time.Minute)) {
			t.Fatalf("timeout fires at %v, want %v", got, t0.Add(time.Minute))
		}
		h.fireNext()
		out = h.turn()
		wantKinds(t, "timeout", out.NewEvents, history.TimerFired, history.EventSubscribedCancelled, history.TimerCreated)
		h.raise("x", "late", "")
		out = h.turn()
		wantKinds(t, "late", out.NewEvents, history.EventDropped)
		wantFates(t, out, "late:dropped/withdrawn_wait@1")
		h.fireNext()
		h.raise("x", "fresh", "")
		out = h.turn()
		wantResult(t, out, `"timed out, then fresh"`)
		wantFate(t, h, "fresh", history.FateDelivered, "", 1, 1, 2)
	})
	t.Run("event before the timeout cancels the timer", func(t *testing.T) {
		t.Parallel()
		h := newHarness(t, "", nil)
		h.wf = wf(h)
		timer := h.turn().Timers[0].TaskSeq
		h.raise("x", "e1", "")
		out := h.turn()
		wantKinds(t, "turn 2", out.NewEvents, history.EventRaised, history.TimerCancelled, history.ExecutionCompleted)
		if !slices.Equal(out.CancelTimers, []int{timer}) {
			t.Fatalf("cancel timers %v, want [%d]", out.CancelTimers, timer)
		}
		wantResult(t, out, `"got e1"`)
	})
	t.Run("buffered event: no timer at all", func(t *testing.T) {
		t.Parallel()
		h := newHarness(t, "", nil)
		h.wf = wf(h)
		h.raise("x", "e1", "")
		out := h.turn()
		wantKinds(t, "turn 1", out.NewEvents, history.EventRaised, history.EventSubscribed, history.ExecutionCompleted)
		if len(out.Timers) != 0 {
			t.Fatalf("timers %+v", out.Timers)
		}
		wantResult(t, out, `"got e1"`)
	})
	t.Run("a select on a wait with timeout withdraws both", func(t *testing.T) {
		t.Parallel()
		h := newHarness(t, "", nil)
		h.wf = func(s *replay.State, _ json.RawMessage) (json.RawMessage, error) {
			w := s.WaitEvent("x", time.Hour)
			if s.Select(w, s.NewTimer(time.Minute)) == 0 {
				return nil, errors.New("wait won")
			}
			if _, err := w.Get(); !errors.Is(err, replay.ErrCanceled) {
				return nil, fmt.Errorf("loser: %v", err)
			}
			return s.WaitEvent("y", 0).Get()
		}
		out := h.turn()
		wantKinds(t, "turn 1", out.NewEvents, history.EventSubscribed, history.TimerCreated, history.TimerCreated)
		timeout, other := out.Timers[0].TaskSeq, out.Timers[1].TaskSeq
		h.fire(1, other)
		out = h.turn()
		wantKinds(t, "turn 2", out.NewEvents, history.TimerFired, history.EventSubscribedCancelled, history.TimerCancelled, history.EventSubscribed)
		if !slices.Equal(out.CancelTimers, []int{timeout}) {
			t.Fatalf("cancel timers %v, want the timeout %d", out.CancelTimers, timeout)
		}
		h.raise("x", "late", "")
		h.raise("y", "y1", "")
		out = h.turn()
		wantFates(t, out, "late:dropped/withdrawn_wait@1", "y1:delivered#1@1")
		wantResult(t, out, `"y1"`)
	})
}

// ---- rule 4: limit ----

func TestEngineLimit(t *testing.T) {
	t.Parallel()
	h := newHarness(t, "", nil)
	h.limits.MaxUnconsumedEvents = 2
	h.wf = func(s *replay.State, _ json.RawMessage) (json.RawMessage, error) {
		if err := sleep(s); err != nil {
			return nil, err
		}
		if _, err := waitAll(h, s, "x"); err != nil {
			return nil, err
		}
		if err := sleep(s); err != nil {
			return nil, err
		}
		return waitAll(h, s, "y", "x")
	}
	h.turn()
	h.raise("x", "x1", "")
	h.raise("y", "y1", "")
	h.raise("x", "x2", "")
	out := h.turn()
	wantFates(t, out, "x1:buffered@1", "y1:buffered@1", "x2:dropped/limit@1")
	if len(out.Drops) != 1 || out.Drops[0].Reason != history.DropLimit || out.Drops[0].EventID != "x2" {
		t.Fatalf("drops %+v", out.Drops)
	}
	h.fireNext() // the workflow consumes x1: room for one more
	h.raise("x", "x3", "")
	h.raise("x", "x4", "")
	out = h.turn()
	wantFates(t, out, "x1:delivered#1@1", "x3:buffered@1", "x4:dropped/limit@1")
	h.fireNext()
	wantResult(t, h.turn(), `["y1","x3"]`)
}

// ---- activities ----

func TestEngineActivity(t *testing.T) {
	t.Parallel()
	retry := heraldtype.RetryPolicy{MaxAttempts: 3, InitialInterval: time.Second}
	wf := func(s *replay.State, _ json.RawMessage) (json.RawMessage, error) {
		v, err := s.CallActivity("charge", json.RawMessage(`{"amount":5}`), retry).Get()
		if err != nil {
			var ae *replay.ActivityError
			if !errors.As(err, &ae) || ae.Name != "charge" || ae.Message != "card declined" {
				return nil, fmt.Errorf("unexpected activity error %#v", err)
			}
			return nil, fmt.Errorf("payment: %w", err)
		}
		return v, nil
	}
	tests := []struct {
		name   string
		finish func(h *harness, seq int)
		kind   history.Kind
		check  func(t *testing.T, out *replay.Output)
	}{
		{"completed", func(h *harness, seq int) { h.completeActivity(1, seq, `{"ok":true}`) }, history.ActivityCompleted,
			func(t *testing.T, out *replay.Output) { wantResult(t, out, `{"ok":true}`) }},
		{"failed", func(h *harness, seq int) { h.failActivity(1, seq, "card declined") }, history.ActivityFailed,
			func(t *testing.T, out *replay.Output) {
				wantStatus(t, out, heraldtype.StatusFailed)
				if out.Failure.Kind != replay.FailureActivity || !strings.Contains(out.Failure.Message, "payment: activity charge failed: card declined") {
					t.Fatalf("failure %+v", out.Failure)
				}
			}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			h := newHarness(t, "", wf)
			out := h.turn()
			want := storage.ActivityTask{InstanceID: h.id, Execution: 1, TaskSeq: 2, Name: "charge",
				Input: json.RawMessage(`{"amount":5}`), Attempt: 1, Retry: retry}
			if len(out.Activities) != 1 || fmt.Sprint(out.Activities[0]) != fmt.Sprint(want) {
				t.Fatalf("activities %+v, want [%+v]", out.Activities, want)
			}
			tt.finish(h, 2)
			out = h.turn()
			wantKinds(t, "result turn", out.NewEvents, tt.kind, map[history.Kind]history.Kind{
				history.ActivityCompleted: history.ExecutionCompleted, history.ActivityFailed: history.ExecutionFailed}[tt.kind])
			if ev := out.NewEvents[0]; ev.TaskSeq != 2 || ev.Name != "charge" {
				t.Fatalf("result event %+v", ev)
			}
			tt.check(t, out)
		})
	}
}

func TestEngineSelectLoserActivity(t *testing.T) {
	t.Parallel()
	h := newHarness(t, "", nil)
	h.wf = func(s *replay.State, _ json.RawMessage) (json.RawMessage, error) {
		a := s.CallActivity("slow", nil, heraldtype.RetryPolicy{})
		if s.Select(a, s.NewTimer(time.Minute)) != 1 {
			return nil, errors.New("the activity won")
		}
		if _, err := a.Get(); !errors.Is(err, replay.ErrCanceled) {
			return nil, fmt.Errorf("loser: %v", err)
		}
		return s.WaitEvent("x", 0).Get()
	}
	h.turn()
	h.fireNext()
	out := h.turn()
	wantKinds(t, "timer wins", out.NewEvents, history.TimerFired, history.ActivityCancelRequested, history.EventSubscribed)
	if c := out.NewEvents[1]; c.TaskSeq != 2 || c.Name != "slow" {
		t.Fatalf("cancel request %+v", c)
	}
	if !slices.Equal(out.CancelActivities, []int{2}) {
		t.Fatalf("cancel activities %v", out.CancelActivities)
	}
	// The activity finished anyway (at least once): its result is not wanted.
	h.completeActivity(1, 2, `"too late"`)
	out = h.turn()
	if len(out.NewEvents) != 0 || len(out.Consumed) != 1 {
		t.Fatalf("late result should be consumed and ignored: %+v", out)
	}
	h.raise("x", "e1", "")
	wantResult(t, h.turn(), `"e1"`)
}

// ---- rule 5: continue-as-new ----

type canInput struct {
	Drop bool `json:"drop,omitempty"`
	Last int  `json:"last,omitempty"` // the execution that stops continuing
}

// continuing sleeps and continues as new until execution in.Last, which
// waits for the named events.
func continuing(h *harness, names ...string) replay.WorkflowFunc {
	return func(s *replay.State, raw json.RawMessage) (json.RawMessage, error) {
		var in canInput
		if err := json.Unmarshal(raw, &in); err != nil {
			return nil, err
		}
		if s.Execution() < in.Last {
			if err := sleep(s); err != nil {
				return nil, err
			}
			return nil, &replay.ContinueAsNewError{Input: raw, DropUnconsumed: in.Drop}
		}
		return waitAll(h, s, names...)
	}
}

func TestEngineContinueAsNewCarriesBufferedEvents(t *testing.T) {
	t.Parallel()
	h := newHarness(t, `{"last":2}`, nil)
	h.wf = continuing(h, "x", "y", "x")
	h.turn()
	h.raise("x", "x1", "")
	h.raise("y", "y1", "")
	h.turn()
	h.fireNext()
	out := h.turn()
	wantKinds(t, "continue turn", out.NewEvents, history.TimerFired, history.ExecutionContinuedAsNew)
	if out.ContinueAsNew == nil || string(out.ContinueAsNew.Input) != `{"last":2}` {
		t.Fatalf("continue-as-new %+v", out.ContinueAsNew)
	}
	start := out.ContinueAsNew.StartEvents
	wantKinds(t, "start events", start, history.ExecutionStarted, history.EventRaised, history.EventRaised)
	for i, id := range []string{"x1", "y1"} {
		ev := start[i+1]
		if ev.EventID != id || !ev.AtStart || ev.OriginExecution != 1 || ev.TaskSeq != 0 || ev.Seq != i+2 || string(ev.Payload) != `"`+id+`"` {
			t.Fatalf("carried event %d: %+v", i, ev)
		}
	}
	if st := start[0]; st.Execution != 2 || st.Workflow != "wf" || string(st.Input) != `{"last":2}` {
		t.Fatalf("start %+v", st)
	}
	wantFates(t, out, "x1:buffered@2", "y1:buffered@2")
	wantFate(t, h, "x1", history.FateBuffered, "", 2, 1, 0)

	// An event raised before execution 2 first runs comes after the carried ones.
	h.raise("x", "x2", "")
	out = h.turn()
	wantResult(t, out, `["x1","y1","x2"]`)
	wantKinds(t, "execution 2", h.cur()[:5], history.ExecutionStarted, history.EventRaised, history.EventRaised, history.EventRaised, history.EventSubscribed)
	if ev := h.cur()[3]; ev.EventID != "x2" || !ev.AtStart || ev.OriginExecution != 2 {
		t.Fatalf("x2 %+v", ev)
	}
	wantFate(t, h, "x1", history.FateDelivered, "", 2, 1, 1)
	wantFate(t, h, "y1", history.FateDelivered, "", 2, 1, 1)
	wantFate(t, h, "x2", history.FateDelivered, "", 2, 2, 2)
}

func TestEngineCarryForwardLimit(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		maxCarry int
		// e1 is raised in execution 1, e2 in execution 2; the last
		// execution is 1+maxCarry+1, where e1 is one boundary too old.
		effective int
	}{
		{"default 5", 0, 5},
		{"1", 1, 1},
		{"2", 2, 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			last := tt.effective + 2
			h := newHarness(t, fmt.Sprintf(`{"last":%d}`, last), nil)
			h.limits.MaxCarryForwardExecutions = tt.maxCarry
			h.wf = continuing(h, "x")
			h.turn() // execution 1 sleeps
			h.raise("x", "e1", "")
			h.turn()
			for exec := 1; exec < last; exec++ {
				// Execution exec is sleeping; its timer makes it continue.
				if exec == 2 {
					h.raise("x", "e2", "")
				}
				h.fireNext()
				out := h.turn()
				next := exec + 1
				start := out.ContinueAsNew.StartEvents
				e1 := start[1]
				if e1.EventID != "e1" || e1.OriginExecution != 1 || !e1.AtStart {
					t.Fatalf("execution %d start: %+v", next, e1)
				}
				if next-1 <= tt.effective {
					if e1.Kind != history.EventRaised {
						t.Fatalf("e1 should be carried into execution %d: %+v", next, e1)
					}
					wantFate(t, h, "e1", history.FateBuffered, "", next, 1, 0)
				} else {
					if e1.Kind != history.EventDropped || e1.Reason != history.DropCarryForwardLimit {
						t.Fatalf("e1 should be dropped moving to execution %d: %+v", next, e1)
					}
					if len(out.Drops) != 1 || out.Drops[0].EventID != "e1" {
						t.Fatalf("drops %+v", out.Drops)
					}
					wantFate(t, h, "e1", history.FateDropped, history.DropCarryForwardLimit, next, 1, 0)
				}
				if exec >= 2 {
					if e2 := start[2]; e2.EventID != "e2" || e2.Kind != history.EventRaised || e2.OriginExecution != 2 {
						t.Fatalf("e2 should be carried into execution %d: %+v", next, e2)
					}
					wantFate(t, h, "e2", history.FateBuffered, "", next, 2, 0)
				}
				if next < last {
					h.turn() // the new execution's first turn: it sleeps
				}
			}
			if h.exec() != last {
				t.Fatalf("execution %d, want %d", h.exec(), last)
			}
			wantResult(t, h.turn(), `["e2"]`)
			wantFate(t, h, "e2", history.FateDelivered, "", last, 2, 1)
		})
	}
}

func TestEngineContinueAsNewDropUnconsumed(t *testing.T) {
	t.Parallel()
	h := newHarness(t, `{"last":2,"drop":true}`, nil)
	h.wf = continuing(h, "x")
	h.turn()
	h.raise("x", "old1", "")
	h.raise("y", "old2", "")
	h.turn()
	h.fireNext()
	out := h.turn()
	start := out.ContinueAsNew.StartEvents
	wantKinds(t, "start events", start, history.ExecutionStarted, history.EventDropped, history.EventDropped)
	for _, ev := range start[1:] {
		if ev.Reason != history.DropNotCarriedForward || ev.OriginExecution != 1 {
			t.Fatalf("breadcrumb %+v", ev)
		}
	}
	if len(out.Drops) != 2 {
		t.Fatalf("drops %+v", out.Drops)
	}
	wantFates(t, out, "old1:dropped/not_carried_forward@2", "old2:dropped/not_carried_forward@2")
	h.raise("x", "new", "")
	wantResult(t, h.turn(), `["new"]`)
}

func TestEngineMessagesAfterContinueAsNewStay(t *testing.T) {
	t.Parallel()
	h := newHarness(t, `{"last":2}`, nil)
	h.wf = continuing(h, "x", "x", "x")
	h.turn()
	h.raise("x", "before", "")
	h.fireNext()
	h.raise("x", "after", "")
	timerMsg := h.inbox[1].ID
	out := h.turn()
	if out.ContinueAsNew == nil {
		t.Fatalf("no continue-as-new: %+v", out)
	}
	if want := []int64{h.raised[0].msg, timerMsg}; !slices.Equal(out.Consumed, want) {
		t.Fatalf("consumed %v, want %v (the event after the continue-as-new must stay)", out.Consumed, want)
	}
	wantFates(t, out, "before:buffered@1", "before:buffered@2")
	wantFate(t, h, "after", history.FatePending, "", 0, 0, 0)
	h.raise("x", "later", "")
	out = h.turn()
	wantResult(t, out, `["before","after","later"]`)
	wantFate(t, h, "after", history.FateDelivered, "", 2, 2, 2)
}

func TestEngineContinueAsNewInFirstTurnConsumesKick(t *testing.T) {
	t.Parallel()
	h := newHarness(t, `{}`, nil)
	h.wf = func(s *replay.State, in json.RawMessage) (json.RawMessage, error) {
		if s.Execution() < 4 {
			return nil, &replay.ContinueAsNewError{Input: in}
		}
		return s.WaitEvent("x", 0).Get()
	}
	h.raise("x", "e1", "")
	for exec := 1; exec < 4; exec++ {
		out := h.turn()
		if out.ContinueAsNew == nil {
			t.Fatalf("execution %d did not continue", exec)
		}
		var kicks []int64
		for _, m := range h.inbox {
			if m.Kind == storage.MsgKick {
				kicks = append(kicks, m.ID)
			}
		}
		if len(kicks) != 1 || len(h.inbox) != 1 {
			t.Fatalf("execution %d: inbox %+v after consuming %v; want only the next execution's kick", exec, h.inbox, out.Consumed)
		}
		wantFate(t, h, "e1", history.FateBuffered, "", exec+1, 1, 0)
	}
	wantResult(t, h.turn(), `"e1"`)
}

func TestEngineStaleMessagesIgnored(t *testing.T) {
	t.Parallel()
	h := newHarness(t, `{}`, nil)
	h.wf = func(s *replay.State, _ json.RawMessage) (json.RawMessage, error) {
		if s.Execution() == 1 {
			s.CallActivity("old", nil, heraldtype.RetryPolicy{}) // seq 2
			s.NewTimer(time.Hour)                                // seq 3
			if err := sleep(s); err != nil {                     // seq 4
				return nil, err
			}
			return nil, &replay.ContinueAsNewError{Input: json.RawMessage(`{}`)}
		}
		// Execution 2 reuses seqs 2 and 3.
		a := s.CallActivity("new", nil, heraldtype.RetryPolicy{}) // seq 2
		tm := s.NewTimer(time.Hour)                               // seq 3
		if s.Select(a, tm) == 1 {
			return jsonOf("timer"), nil
		}
		return a.Get()
	}
	h.turn()
	h.fire(1, 4)
	if out := h.turn(); out.ContinueAsNew == nil {
		t.Fatalf("no continue-as-new")
	}
	out := h.turn()
	wantKinds(t, "execution 2", out.NewEvents, history.ActivityScheduled, history.TimerCreated)
	h.completeActivity(1, 2, `"stale result"`)
	h.failActivity(1, 2, "stale failure")
	h.fire(1, 3)
	out = h.turn()
	if len(out.NewEvents) != 0 || len(out.Consumed) != 3 || out.Status != heraldtype.StatusRunning {
		t.Fatalf("stale messages should be consumed and ignored: %+v\n%s", out, dumpEvents(out.NewEvents))
	}
	h.completeActivity(2, 2, `"fresh"`)
	wantResult(t, h.turn(), `"fresh"`)
}

// ---- rule 6: events before start ----

func TestEngineEventsBeforeStart(t *testing.T) {
	t.Parallel()
	h := newHarness(t, "", nil)
	var startedAt time.Time
	h.wf = func(s *replay.State, _ json.RawMessage) (json.RawMessage, error) {
		startedAt = s.Now()
		h.note("now %v", s.Now())
		w := s.WaitEvent("x", 0)
		if !w.Ready() {
			return nil, errors.New("the wait did not receive the buffered event at once")
		}
		if s.Select(w, s.NewTimer(time.Minute)) != 0 {
			return nil, errors.New("timer won")
		}
		return waitAll(h, s, "y")
	}
	h.raise("x", "x1", "")
	h.raise("y", "y1", "")
	out := h.turn()
	wantResult(t, out, `["y1"]`)
	wantKinds(t, "first turn", out.NewEvents, history.EventRaised, history.EventRaised,
		history.EventSubscribed, history.TimerCreated, history.TimerCancelled, history.EventSubscribed, history.ExecutionCompleted)
	for _, ev := range out.NewEvents[:2] {
		if !ev.AtStart || ev.TaskSeq != 0 || ev.OriginExecution != 1 || !ev.Time.Equal(h.now) {
			t.Fatalf("event raised before start: %+v", ev)
		}
	}
	if !startedAt.Equal(h.now) {
		t.Fatalf("code started at %v, want the turn's time %v (after the events it found)", startedAt, h.now)
	}
	if want := []int64{h.raised[0].msg, h.raised[1].msg, 1}; !slices.Equal(out.Consumed, want) {
		t.Fatalf("consumed %v, want both events and the kick %v", out.Consumed, want)
	}
	wantFates(t, out, "x1:buffered@1", "y1:buffered@1", "x1:delivered#1@1", "y1:delivered#1@1")
}

// ---- non-determinism ----

// orderWorkflow's variants differ from the original ("") at one point.
func orderWorkflow(variant string) replay.WorkflowFunc {
	return func(s *replay.State, _ json.RawMessage) (json.RawMessage, error) {
		name := "reserve"
		if variant == "rename" {
			name = "reserve-v2"
		}
		r := s.CallActivity(name, nil, heraldtype.RetryPolicy{})        // 2
		audit := s.CallActivity("audit", nil, heraldtype.RetryPolicy{}) // 3
		if variant == "wait-audit" {
			audit.Get()
		} else {
			r.Get() // result: 4
		}
		if variant == "extra" {
			s.CallActivity("extra", nil, heraldtype.RetryPolicy{})
		}
		if variant != "no-timer" {
			s.NewTimer(time.Minute).Get() // 5, fired: 6
		}
		event := "x"
		if variant == "other-name" {
			event = "y"
		}
		w := s.WaitEvent(event, 0) // 7, event: 8
		if variant == "select" {
			s.Select(w, s.NewTimer(time.Minute))
		}
		w.Get()
		if variant == "return-early" {
			return nil, nil
		}
		ship := s.CallActivity("ship", nil, heraldtype.RetryPolicy{}) // 9
		if variant == "extra-at-end" {
			s.CallActivity("notify", nil, heraldtype.RetryPolicy{})
		}
		return ship.Get()
	}
}

func TestEngineNondeterminism(t *testing.T) {
	t.Parallel()
	const waiting = "nothing (the workflow is waiting or has returned)"
	tests := []struct {
		variant  string
		seq      int
		expected string
		actual   string
	}{
		{"rename", 2, `ActivityScheduled "reserve"`, `ActivityScheduled "reserve-v2"`},
		{"wait-audit", 5, `TimerCreated`, waiting},
		{"extra", 5, `TimerCreated`, `ActivityScheduled "extra"`},
		{"no-timer", 5, `TimerCreated`, `EventSubscribed "x"`},
		{"other-name", 7, `EventSubscribed "x"`, `EventSubscribed "y"`},
		{"select", 8, `EventRaised "x" (of seq 7)`, `TimerCreated`},
		{"return-early", 9, `ActivityScheduled "ship"`, `ExecutionCompleted`},
		// A turn commits all its code did until it blocked: a decision past
		// the end of history is one the original code did not make.
		{"extra-at-end", 10, `end of history (the code was waiting here)`, `ActivityScheduled "notify"`},
	}
	for _, tt := range tests {
		t.Run(tt.variant, func(t *testing.T) {
			t.Parallel()
			h := newHarness(t, "", orderWorkflow(""))
			h.turn()
			h.completeActivity(1, 2, `"reserved"`)
			h.turn()
			h.fireNext()
			h.turn()
			h.raise("x", "e1", "")
			out := h.turn()
			wantKinds(t, "history", h.cur(), history.ExecutionStarted, history.ActivityScheduled, history.ActivityScheduled,
				history.ActivityCompleted, history.TimerCreated, history.TimerFired, history.EventSubscribed,
				history.EventRaised, history.ActivityScheduled)
			wantStatus(t, out, heraldtype.StatusRunning)

			h.wf = orderWorkflow(tt.variant)
			h.raise("x", "e2", "") // a message of the failing turn: consumed with it
			out = h.turn()
			wantStatus(t, out, heraldtype.StatusFailed)
			wantKinds(t, "failing turn", out.NewEvents, history.ExecutionFailed)
			if out.NewEvents[0].Seq != 10 || out.Failure != out.NewEvents[0].Failure || out.Failure.Kind != replay.FailureNondeterminism {
				t.Fatalf("failure event %+v, output failure %+v", out.NewEvents[0], out.Failure)
			}
			if len(out.Consumed) != 1 || len(out.Activities) != 0 || len(out.Timers) != 0 {
				t.Fatalf("failing turn output %+v", out)
			}
			var nd replay.NondeterminismError
			if err := json.Unmarshal(out.Failure.Detail, &nd); err != nil {
				t.Fatalf("detail %s: %v", out.Failure.Detail, err)
			}
			want := replay.NondeterminismError{InstanceID: h.id, Execution: 1, Seq: tt.seq, Expected: tt.expected, Actual: tt.actual}
			if nd != want {
				t.Fatalf("non-determinism\n  %+v\nwant\n  %+v", nd, want)
			}
			for _, s := range []string{fmt.Sprintf("seq %d", tt.seq), tt.expected, tt.actual} {
				if !strings.Contains(out.Failure.Message, s) {
					t.Fatalf("message %q does not mention %q", out.Failure.Message, s)
				}
			}
			wantFate(t, h, "e2", history.FateDropped, history.DropInstanceTerminal, 1, 0, 0)
		})
	}
}

// ---- determinism: time, UUIDs, replay flag ----

type stamp struct {
	Now  time.Time `json:"now"`
	UUID string    `json:"uuid"`
}

func TestEngineNowAndUUIDAreReplayed(t *testing.T) {
	t.Parallel()
	h := newHarness(t, "", nil)
	var seen []stamp // every Run appends what the code saw
	h.wf = func(s *replay.State, _ json.RawMessage) (json.RawMessage, error) {
		for i := range 3 {
			st := stamp{Now: s.Now(), UUID: s.NewUUID()}
			seen = append(seen, st)
			h.note("%d %v %s", i, st.Now, st.UUID)
			s.CallActivity("stamp", jsonOf(st), heraldtype.RetryPolicy{})
			if i == 0 {
				if err := sleep(s); err != nil {
					return nil, err
				}
			} else {
				if _, err := s.WaitEvent("x", 0).Get(); err != nil {
					return nil, err
				}
			}
		}
		return jsonOf(s.NewUUID()), nil
	}
	h.turn()
	h.fireNext()
	h.turn()
	turn2 := h.now
	h.raise("x", "e1", "")
	h.turn()
	turn3 := h.now

	var recorded []stamp
	for _, ev := range h.find(history.ActivityScheduled) {
		var st stamp
		if err := json.Unmarshal(ev.Input, &st); err != nil {
			t.Fatal(err)
		}
		recorded = append(recorded, st)
	}
	if len(recorded) != 3 {
		t.Fatalf("recorded %+v", recorded)
	}
	// First turn: no event arrived, the code runs at the start time.
	for i, want := range []time.Time{t0, turn2, turn3} {
		if !recorded[i].Now.Equal(want) {
			t.Fatalf("stamp %d at %v, want %v", i, recorded[i].Now, want)
		}
	}
	ids := map[string]bool{}
	for _, st := range recorded {
		if len(st.UUID) != 36 || ids[st.UUID] {
			t.Fatalf("uuid %q bad or repeated in %+v", st.UUID, recorded)
		}
		ids[st.UUID] = true
	}
	// The harness compared every replay's notes with the live turn's; here
	// the replayed stamps are compared with the inputs recorded in history.
	seen = nil
	out, err := replay.Run(&replay.Input{InstanceID: h.id, Workflow: h.wf, History: h.cur(), Now: turn3.Add(time.Hour)})
	if err != nil || len(out.NewEvents) != 0 {
		t.Fatalf("replay: %v %+v", err, out)
	}
	if len(seen) != 3 {
		t.Fatalf("replay saw %+v", seen)
	}
	for i := range seen {
		if !seen[i].Now.Equal(recorded[i].Now) || seen[i].UUID != recorded[i].UUID {
			t.Fatalf("replay saw %+v at %d, the first run %+v", seen[i], i, recorded[i])
		}
	}
	// Another instance gets other UUIDs.
	other := newHarness(t, "", h.wf)
	other.id = "inst-2"
	seen = nil
	other.turn()
	if seen[0].UUID == recorded[0].UUID {
		t.Fatalf("instances %s and %s share uuid %s", h.id, other.id, seen[0].UUID)
	}
}

func TestEngineIsReplaying(t *testing.T) {
	t.Parallel()
	h := newHarness(t, "", nil)
	var flags []bool
	h.wf = func(s *replay.State, _ json.RawMessage) (json.RawMessage, error) {
		flags = append(flags, s.IsReplaying())
		if err := sleep(s); err != nil {
			return nil, err
		}
		flags = append(flags, s.IsReplaying())
		return nil, sleep(s)
	}
	flags = nil
	h.turn()
	if !slices.Equal(flags[:1], []bool{false}) {
		t.Fatalf("first run: %v", flags)
	}
	h.fireNext()
	flags = nil
	h.turn() // the live turn runs first, then the harness replays it
	if !slices.Equal(flags, []bool{true, false, true, true}) {
		t.Fatalf("flags %v, want [true false] live then [true true] replayed", flags)
	}
}

func TestEnginePanic(t *testing.T) {
	t.Parallel()
	for _, afterTimer := range []bool{false, true} {
		t.Run(fmt.Sprint("after timer ", afterTimer), func(t *testing.T) {
			t.Parallel()
			h := newHarness(t, "", func(s *replay.State, _ json.RawMessage) (json.RawMessage, error) {
				if afterTimer {
					if err := sleep(s); err != nil {
						return nil, err
					}
				}
				var m map[string]int
				m["boom"]++ // nil map write
				return nil, nil
			})
			out := h.turn()
			if afterTimer {
				wantStatus(t, out, heraldtype.StatusRunning)
				h.fireNext()
				out = h.turn()
			}
			wantStatus(t, out, heraldtype.StatusFailed)
			if out.Failure.Kind != replay.FailurePanic || !strings.Contains(out.Failure.Message, "assignment to entry in nil map") ||
				!strings.Contains(out.Failure.Message, "engine_test.go") {
				t.Fatalf("failure %+v", out.Failure)
			}
			if last := out.NewEvents[len(out.NewEvents)-1]; last.Kind != history.ExecutionFailed || last.Failure.Kind != replay.FailurePanic {
				t.Fatalf("last event %+v", last)
			}
		})
	}
}

func TestEngineApplicationError(t *testing.T) {
	t.Parallel()
	h := newHarness(t, "", func(s *replay.State, _ json.RawMessage) (json.RawMessage, error) {
		return nil, errors.New("invalid order")
	})
	out := h.turn()
	wantStatus(t, out, heraldtype.StatusFailed)
	if out.Failure.Kind != replay.FailureApplication || out.Failure.Message != "invalid order" {
		t.Fatalf("failure %+v", out.Failure)
	}
}

func TestEngineMalformedInput(t *testing.T) {
	t.Parallel()
	wf := func(s *replay.State, _ json.RawMessage) (json.RawMessage, error) { return nil, nil }
	for name, in := range map[string]*replay.Input{
		"no history":  {Workflow: wf},
		"not started": {Workflow: wf, History: []history.Event{{Seq: 1, Kind: history.TimerFired}}},
		"no workflow": {History: []history.Event{{Seq: 1, Kind: history.ExecutionStarted}}},
	} {
		if _, err := replay.Run(in); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
}
