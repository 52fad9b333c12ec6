package replay_test

import (
	"encoding/json"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/heraldwf/herald/heraldtype"
	"github.com/heraldwf/herald/history"
	"github.com/heraldwf/herald/internal/replay"
	"github.com/heraldwf/herald/storage"
)

// dropLog renders drop reports as "first..last×count" (or "id").
func dropLog(ds []history.Event) []string {
	var out []string
	for _, d := range ds {
		s := d.EventID
		if d.Count != 0 {
			s += fmt.Sprintf("..%s×%d", d.LastEventID, d.Count)
		}
		out = append(out, s)
	}
	return out
}

func wantDrops(t *testing.T, what string, got []history.Event, want ...string) {
	t.Helper()
	if g := dropLog(got); !slices.Equal(g, want) {
		t.Fatalf("%s: %v, want %v", what, g, want)
	}
}

// TestEngineLimitBursts: limit drops of one lane and name in a row share one
// breadcrumb (history.Event.Count), across turns, while each event keeps
// its own fate.
func TestEngineLimitBursts(t *testing.T) {
	t.Parallel()
	raise := func(h *harness, name string, from, to int) {
		for i := from; i <= to; i++ {
			h.raise(name, fmt.Sprintf("%s%d", name, i), "")
		}
	}
	// The workflow sleeps twice, then takes one x, sleeps again forever.
	idle := func(h *harness) replay.WorkflowFunc {
		return func(s *replay.State, _ json.RawMessage) (json.RawMessage, error) {
			if err := sleep(s); err != nil {
				return nil, err
			}
			if _, err := waitAll(h, s, "x"); err != nil {
				return nil, err
			}
			return nil, sleep(s)
		}
	}
	t.Run("in a turn, across turns, across names, until the lane changes", func(t *testing.T) {
		t.Parallel()
		h := newHarness(t, "", nil)
		h.limits.MaxUnconsumedEvents = 1
		h.wf = idle(h)
		h.turn()

		// One turn: x1 buffered, x2..x5 one breadcrumb.
		raise(h, "x", 1, 5)
		out := h.turn()
		wantKinds(t, "first burst", out.NewEvents, history.EventRaised, history.EventDropped)
		if c := out.NewEvents[1]; c.EventID != "x2" || c.Count != 4 || c.LastEventID != "x5" || c.Reason != history.DropLimit {
			t.Fatalf("breadcrumb %+v", c)
		}
		wantFates(t, out, "x1:buffered@1", "x2:dropped/limit@1", "x3:dropped/limit@1", "x4:dropped/limit@1", "x5:dropped/limit@1")
		wantDrops(t, "drops", out.Drops, "x2..x5×4")
		if len(out.ContinuedDrops) != 0 {
			t.Fatalf("continued %v", dropLog(out.ContinuedDrops))
		}

		// Later turns: the burst goes on without a breadcrumb; drops of
		// another name of the lane open their own and close nothing.
		raise(h, "x", 6, 7)
		out = h.turn()
		if len(out.NewEvents) != 0 {
			t.Fatalf("new events\n%s", dumpEvents(out.NewEvents))
		}
		wantFates(t, out, "x6:dropped/limit@1", "x7:dropped/limit@1")
		wantDrops(t, "continued", out.ContinuedDrops, "x6..x7×2")
		h.raise("x", "x8", "")
		h.raise("y", "y1", "")
		h.raise("x", "x9", "")
		out = h.turn()
		wantKinds(t, "another name", out.NewEvents, history.EventDropped)
		wantDrops(t, "drops", out.Drops, "y1")
		wantDrops(t, "continued", out.ContinuedDrops, "x8..x9×2")

		// The timer fires: the workflow takes x1, the lane has room again;
		// the burst is over: x10 is buffered, x11 opens a new one.
		h.fireNext()
		h.turn()
		raise(h, "x", 10, 11)
		out = h.turn()
		wantKinds(t, "after the lane changed", out.NewEvents, history.EventRaised, history.EventDropped)
		wantDrops(t, "drops", out.Drops, "x11")
		if n := len(h.find(history.EventDropped)); n != 3 {
			t.Fatalf("%d breadcrumbs for 10 drops\n%s", n, dumpEvents(h.cur()))
		}
	})
	t.Run("before the start", func(t *testing.T) {
		t.Parallel()
		h := newHarness(t, "", nil)
		h.limits.MaxUnconsumedEvents = 1
		h.wf = idle(h)
		raise(h, "x", 1, 3)
		out := h.turn()
		wantKinds(t, "start", out.NewEvents, history.EventRaised, history.EventDropped, history.TimerCreated)
		if c := out.NewEvents[1]; !c.AtStart || c.Count != 2 || c.EventID != "x2" || c.LastEventID != "x3" {
			t.Fatalf("breadcrumb %+v", c)
		}
	})
	t.Run("queue lane", func(t *testing.T) {
		t.Parallel()
		h := newHarness(t, "", nil)
		h.limits.MaxQueuedEvents = 1
		h.wf = idle(h)
		h.turn()
		for i := 1; i <= 4; i++ {
			enqueue(h, "q", fmt.Sprintf("q%d", i), false)
		}
		out := h.turn()
		wantKinds(t, "burst", out.NewEvents, history.EventRaised, history.EventDropped)
		wantDrops(t, "drops", out.Drops, "q2..q4×3")
		enqueue(h, "q", "q5", false)
		out = h.turn()
		wantDrops(t, "continued", out.ContinuedDrops, "q5")
	})
	t.Run("a history with one breadcrumb per drop replays and goes on", func(t *testing.T) {
		t.Parallel()
		wf := func(s *replay.State, _ json.RawMessage) (json.RawMessage, error) { return nil, sleep(s) }
		crumb := func(seq int, id string) history.Event {
			return history.Event{Seq: seq, Time: t0, Kind: history.EventDropped, Lane: history.LanePositional, Name: "x",
				EventID: id, Payload: jsonOf(id), OriginExecution: 1, Reason: history.DropLimit}
		}
		old := []history.Event{
			{Seq: 1, Time: t0, Kind: history.ExecutionStarted, Workflow: "wf", Execution: 1},
			{Seq: 2, Time: t0, Kind: history.TimerCreated, FireAt: t0.Add(time.Minute)},
			{Seq: 3, Time: t0, Kind: history.EventRaised, Lane: history.LanePositional, Name: "x", EventID: "x1",
				Payload: jsonOf("x1"), OriginExecution: 1},
			crumb(4, "x2"), crumb(5, "x3"), crumb(6, "x4"),
		}
		out, err := replay.Run(&replay.Input{InstanceID: "i", Workflow: wf, History: old, Now: t0.Add(time.Second),
			Limits: replay.Limits{MaxUnconsumedEvents: 1},
			Messages: []storage.Message{{ID: 1, Kind: storage.MsgEvent, Lane: history.LanePositional, EventID: "x5", Name: "x",
				Payload: jsonOf("x5")}}})
		if err != nil {
			t.Fatal(err)
		}
		if out.Status != heraldtype.StatusRunning || len(out.NewEvents) != 0 {
			t.Fatalf("output %+v", out)
		}
		wantFates(t, out, "x5:dropped/limit@1")
		wantDrops(t, "continued", out.ContinuedDrops, "x5")
	})
}
