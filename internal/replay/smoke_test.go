package replay

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/heraldwf/herald/history"
	"github.com/heraldwf/herald/storage"
)

func TestSmokeWaitThenRaise(t *testing.T) {
	wf := func(s *State, in json.RawMessage) (json.RawMessage, error) {
		v, err := s.WaitEvent("approval", 0).Get()
		if err != nil {
			return nil, err
		}
		return v, nil
	}
	t0 := time.Unix(1000, 0)
	h := []history.Event{{Seq: 1, Time: t0, Kind: history.ExecutionStarted, Workflow: "w", Execution: 1}}
	out, err := Run(&Input{InstanceID: "i", Workflow: wf, History: h, Now: t0,
		Messages: []storage.Message{{ID: 1, Kind: storage.MsgKick}}})
	if err != nil {
		t.Fatal(err)
	}
	if out.Status != storage.StatusRunning || len(out.NewEvents) != 1 || out.NewEvents[0].Kind != history.EventSubscribed {
		t.Fatalf("turn 1: %+v", out)
	}
	h = append(h, out.NewEvents...)
	out, err = Run(&Input{InstanceID: "i", Workflow: wf, History: h, Now: t0.Add(time.Second),
		Messages: []storage.Message{{ID: 2, Kind: storage.MsgEvent, EventID: "e1", Name: "approval", Payload: json.RawMessage(`"yes"`)}}})
	if err != nil {
		t.Fatal(err)
	}
	if out.Status != storage.StatusCompleted || string(out.Result) != `"yes"` {
		t.Fatalf("turn 2: %+v", out)
	}
	if len(out.Fates) != 1 || out.Fates[0].Fate != history.FateDelivered || out.Fates[0].WaitNumber != 1 {
		t.Fatalf("fates: %+v", out.Fates)
	}
}

func TestSmokeSelectTimerWins(t *testing.T) {
	wf := func(s *State, in json.RawMessage) (json.RawMessage, error) {
		w := s.WaitEvent("x", 0)
		tm := s.NewTimer(time.Minute)
		if s.Select(w, tm) == 1 {
			if _, err := s.NewTimer(time.Minute).Get(); err != nil {
				return nil, err
			}
			v, err := s.WaitEvent("x", 0).Get()
			return v, err
		}
		return json.RawMessage(`"first"`), nil
	}
	t0 := time.Unix(1000, 0)
	h := []history.Event{{Seq: 1, Time: t0, Kind: history.ExecutionStarted, Workflow: "w", Execution: 1}}
	turn := func(msgs ...storage.Message) *Output {
		t.Helper()
		out, err := Run(&Input{InstanceID: "i", Workflow: wf, History: h, Now: t0, Messages: msgs})
		if err != nil {
			t.Fatal(err)
		}
		h = append(h, out.NewEvents...)
		return out
	}
	out := turn(storage.Message{ID: 1, Kind: storage.MsgKick})
	if len(out.Timers) != 1 {
		t.Fatalf("timers %+v", out)
	}
	out = turn(storage.Message{ID: 2, Kind: storage.MsgTimerFired, Execution: 1, TaskSeq: out.Timers[0].TaskSeq})
	second := out.Timers[0].TaskSeq
	// late answer to the withdrawn wait is dropped, fresh one delivered
	out = turn(storage.Message{ID: 3, Kind: storage.MsgEvent, EventID: "late", Name: "x", Payload: json.RawMessage(`1`)},
		storage.Message{ID: 4, Kind: storage.MsgEvent, EventID: "fresh", Name: "x", Payload: json.RawMessage(`2`)})
	if out.Status != storage.StatusRunning || out.Fates[0].Reason != history.DropWithdrawnWait || out.Fates[1].Fate != history.FateBuffered {
		t.Fatalf("%+v", out.Fates)
	}
	out = turn(storage.Message{ID: 5, Kind: storage.MsgTimerFired, Execution: 1, TaskSeq: second})
	if out.Status != storage.StatusCompleted || string(out.Result) != "2" {
		t.Fatalf("%+v", out)
	}
	for _, e := range h {
		t.Logf("%d %s %s %s %d", e.Seq, e.Kind, e.Name, e.EventID, e.TaskSeq)
	}
}
