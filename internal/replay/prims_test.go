package replay_test

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/heraldwf/herald/heraldtype"
	"github.com/heraldwf/herald/history"
	"github.com/heraldwf/herald/internal/replay"
	"github.com/heraldwf/herald/storage"
)

var tStart = time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)

func startEvent() history.Event {
	return history.Event{Seq: 1, Time: tStart, Kind: history.ExecutionStarted, Workflow: "w", Execution: 1}
}

func runOnce(t *testing.T, wf replay.WorkflowFunc, hist []history.Event, msgs ...storage.Message) *replay.Output {
	t.Helper()
	out, err := replay.Run(&replay.Input{InstanceID: "i", Workflow: wf, History: hist, Messages: msgs, Now: tStart.Add(time.Second)})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// A send is a decision: the first run emits it (id from the instance,
// execution and seq), a replay of the same history emits nothing.
func TestSendDecision(t *testing.T) {
	wf := func(s *replay.State, _ json.RawMessage) (json.RawMessage, error) {
		s.Send(history.LanePositional, "peer", "ping", "", json.RawMessage(`1`))
		s.Send(history.LaneQueue, "peer", "jobs", "mine", json.RawMessage(`2`))
		_, err := s.WaitEvent("pong", 0).Get()
		return nil, err
	}
	out := runOnce(t, wf, []history.Event{startEvent()})
	if len(out.Sends) != 2 || out.Sends[0].EventID != "i/1/2" || out.Sends[1].EventID != "mine" ||
		out.Sends[1].Lane != history.LaneQueue || out.Sends[0].InstanceID != "peer" {
		t.Fatalf("sends %+v", out.Sends)
	}
	hist := append([]history.Event{startEvent()}, out.NewEvents...)
	wantKinds(t, "history", hist, history.ExecutionStarted, history.EventSent, history.EventSent, history.EventSubscribed)
	msg := storage.Message{ID: 1, Kind: storage.MsgEvent, Lane: history.LanePositional, EventID: "p", Name: "pong", Payload: json.RawMessage(`0`)}
	out = runOnce(t, wf, hist, msg)
	wantStatus(t, out, heraldtype.StatusCompleted)
	if len(out.Sends) != 0 {
		t.Fatalf("replay sent again: %+v", out.Sends)
	}
	// Another target at that point is non-deterministic.
	other := func(s *replay.State, _ json.RawMessage) (json.RawMessage, error) {
		s.Send(history.LanePositional, "someone-else", "ping", "", json.RawMessage(`1`))
		return nil, nil
	}
	out = runOnce(t, other, hist)
	var nd *replay.NondeterminismError
	if out.Status != heraldtype.StatusFailed || !errors.As(out.Failure.Err(), &nd) || !strings.Contains(nd.Actual, "someone-else") {
		t.Fatalf("changed target: %s %+v", out.Status, out.Failure)
	}
}

// Version: new code records max once per change; a history without the
// marker gets min; a marker of a change the code no longer asks about is
// passed over; a recorded version outside the range is non-deterministic.
func TestVersionRules(t *testing.T) {
	versions := func(ask func(s *replay.State) []int) replay.WorkflowFunc {
		return func(s *replay.State, _ json.RawMessage) (json.RawMessage, error) {
			v := ask(s)
			s.NewTimer(time.Hour)
			_, err := s.WaitEvent("go", 0).Get()
			b, _ := json.Marshal(v)
			return b, err
		}
	}
	both := versions(func(s *replay.State) []int {
		return []int{s.Version("a", 0, 2), s.Version("b", 0, 1), s.Version("a", 0, 2)}
	})
	out := runOnce(t, both, []history.Event{startEvent()})
	hist := append([]history.Event{startEvent()}, out.NewEvents...)
	wantKinds(t, "new code", hist, history.ExecutionStarted, history.VersionMarker, history.VersionMarker,
		history.TimerCreated, history.EventSubscribed)
	if string(hist[1].Result) != "2" || hist[1].Name != "a" || string(hist[2].Result) != "1" {
		t.Fatalf("markers %+v %+v", hist[1], hist[2])
	}
	goMsg := storage.Message{ID: 1, Kind: storage.MsgEvent, Lane: history.LanePositional, EventID: "g", Name: "go"}
	if out := runOnce(t, both, hist, goMsg); string(out.Result) != "[2,1,2]" {
		t.Fatalf("replay: %s %+v", out.Result, out.Failure)
	}
	// Only b asked now: a's marker is passed over.
	onlyB := versions(func(s *replay.State) []int { return []int{s.Version("b", 0, 1)} })
	if out := runOnce(t, onlyB, hist, goMsg); string(out.Result) != "[1]" {
		t.Fatalf("a's marker not passed over: %s %+v", out.Result, out.Failure)
	}
	// A history from before both changes: min for each, nothing recorded.
	oldHist := []history.Event{startEvent(),
		{Seq: 2, Time: tStart, Kind: history.TimerCreated, FireAt: tStart.Add(time.Hour)},
		{Seq: 3, Time: tStart, Kind: history.EventSubscribed, Lane: history.LanePositional, Name: "go"}}
	out = runOnce(t, both, oldHist, goMsg)
	if string(out.Result) != "[0,0,0]" || len(out.NewEvents) != 2 {
		t.Fatalf("old history: %s %+v", out.Result, out.NewEvents)
	}
	// Out of range.
	narrow := versions(func(s *replay.State) []int { return []int{s.Version("a", 3, 4)} })
	out = runOnce(t, narrow, hist, goMsg)
	var nd *replay.NondeterminismError
	if out.Status != heraldtype.StatusFailed || !errors.As(out.Failure.Err(), &nd) || nd.Seq != 2 {
		t.Fatalf("out of range: %s %+v", out.Status, out.Failure)
	}
}

// SideEffect runs once and is read back; Random's seed is recorded.
func TestSideEffectRecorded(t *testing.T) {
	calls := 0
	wf := func(s *replay.State, _ json.RawMessage) (json.RawMessage, error) {
		v := s.SideEffect("", func() json.RawMessage { calls++; return json.RawMessage(`"x"`) })
		r := s.Random().Int64()
		_, err := s.WaitEvent("go", 0).Get()
		b, _ := json.Marshal([]any{string(v), r})
		return b, err
	}
	out := runOnce(t, wf, []history.Event{startEvent()})
	hist := append([]history.Event{startEvent()}, out.NewEvents...)
	wantKinds(t, "history", hist, history.ExecutionStarted, history.SideEffectRecorded, history.SideEffectRecorded, history.EventSubscribed)
	goMsg := storage.Message{ID: 1, Kind: storage.MsgEvent, Lane: history.LanePositional, EventID: "g", Name: "go"}
	a := runOnce(t, wf, hist, goMsg)
	b := runOnce(t, wf, hist, goMsg)
	if calls != 1 || string(a.Result) != string(b.Result) {
		t.Fatalf("calls %d, results %s and %s", calls, a.Result, b.Result)
	}
	// A damaged seed is non-determinism, not a panic of the engine.
	bad := append([]history.Event(nil), hist...)
	bad[2].Result = json.RawMessage(`"zz"`)
	out = runOnce(t, wf, bad, goMsg)
	if out.Status != heraldtype.StatusFailed || out.Failure.Kind != heraldtype.FailureNondeterminism {
		t.Fatalf("damaged seed: %s %+v", out.Status, out.Failure)
	}
}
