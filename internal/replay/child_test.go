package replay_test

import (
	"encoding/json"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/heraldwf/herald/heraldtype"
	"github.com/heraldwf/herald/history"
	"github.com/heraldwf/herald/internal/replay"
	"github.com/heraldwf/herald/storage"
)

// childWF calls one child (id "" derives it) and returns its result, or
// the kind of its failure.
func childWF(id string) replay.WorkflowFunc {
	return func(s *replay.State, _ json.RawMessage) (json.RawMessage, error) {
		v, err := s.CallWorkflow("kid", id, json.RawMessage(`1`), storage.ParentCloseTerminate).Get()
		var ce *replay.ChildWorkflowError
		if errors.As(err, &ce) {
			return json.Marshal(ce.InstanceID + " " + ce.Failure.Kind)
		}
		return v, err
	}
}

func TestChild_StartResultAndReplay(t *testing.T) {
	h := newHarness(t, "", childWF(""))
	out := h.turn()
	if len(out.StartChildren) != 1 {
		t.Fatalf("StartChildren %+v", out.StartChildren)
	}
	c := out.StartChildren[0]
	if c.ID != "inst-1/1/2" || c.Workflow != "kid" || c.TaskSeq != 2 || string(c.Input) != "1" ||
		c.ClosePolicy != storage.ParentCloseTerminate {
		t.Fatalf("child %+v", c)
	}
	// A turn with nothing new starts nothing again.
	h.raise("noise", "n1", "")
	if out := h.turn(); len(out.StartChildren) != 0 {
		t.Fatalf("a replay started %+v", out.StartChildren)
	}
	// A result for another execution or seq is not the child's.
	h.push(storage.Message{Kind: storage.MsgChildCompleted, Execution: 7, TaskSeq: 2, Name: c.ID, Result: json.RawMessage(`9`)})
	h.push(storage.Message{Kind: storage.MsgChildCompleted, Execution: 1, TaskSeq: 3, Name: "x", Result: json.RawMessage(`9`)})
	if out := h.turn(); out.Status.Terminal() {
		t.Fatalf("ended on stray results: %s", out.Status)
	}
	h.push(storage.Message{Kind: storage.MsgChildCompleted, Execution: 1, TaskSeq: 2, Name: c.ID, Result: json.RawMessage(`42`)})
	out = h.turn()
	if out.Status != heraldtype.StatusCompleted || string(out.Result) != "42" {
		t.Fatalf("%s %s", out.Status, out.Result)
	}
	done := kindOf(h.cur(), history.ChildWorkflowCompleted)
	if len(done) != 1 || done[0].ChildID != c.ID || done[0].TaskSeq != 2 || done[0].Name != "kid" {
		t.Fatalf("history:%s", dumpEvents(h.cur()))
	}

	// Replayed under another instance id (ReplayHistory does), the
	// derived id is the recorded one.
	other, err := replay.Run(&replay.Input{InstanceID: "replay", Workflow: childWF(""), History: h.cur(), Now: h.now})
	if err != nil || len(other.NewEvents) != 0 || other.Failure != nil {
		t.Fatalf("replay under another id: %+v %v", other, err)
	}
	// A given id that changed is a non-determinism.
	changed, err := replay.Run(&replay.Input{InstanceID: h.id, Workflow: childWF("other"), History: h.cur(), Now: h.now})
	if err != nil || changed.Failure == nil || changed.Failure.Kind != replay.FailureNondeterminism {
		t.Fatalf("replay with another child id: %+v %v", changed.Failure, err)
	}
}

func TestChild_FailureAndTakenID(t *testing.T) {
	for _, kind := range []string{"application", heraldtype.FailureChildIDExists, heraldtype.FailureCanceled} {
		h := newHarness(t, "", childWF("k1"))
		h.turn()
		h.push(storage.Message{Kind: storage.MsgChildFailed, Execution: 1, TaskSeq: 2, Name: "k1",
			Failure: &history.Failure{Kind: kind, Message: "no"}})
		out := h.turn()
		if want := `"k1 ` + kind + `"`; string(out.Result) != want {
			t.Fatalf("%s: result %s, want %s", kind, out.Result, want)
		}
	}
	// The typed error matches what the failure was.
	err := &replay.ChildWorkflowError{InstanceID: "k", Failure: &history.Failure{Kind: heraldtype.FailureChildIDExists}}
	if !errors.Is(err, heraldtype.ErrInstanceExists) {
		t.Fatal("a taken id does not match ErrInstanceExists")
	}
	err = &replay.ChildWorkflowError{InstanceID: "k", Failure: &history.Failure{Kind: heraldtype.FailureCanceled, Message: "r"}}
	var ce *heraldtype.CanceledError
	if !errors.Is(err, heraldtype.ErrCanceled) || !errors.As(err, &ce) || ce.Reason != "r" {
		t.Fatal("a canceled child does not unwrap to a CanceledError")
	}
}

// A child that loses a Select is asked to cancel; its late result is not
// recorded.
func TestChild_SelectLoserAskedToCancel(t *testing.T) {
	h := newHarness(t, "", func(s *replay.State, _ json.RawMessage) (json.RawMessage, error) {
		child := s.CallWorkflow("kid", "", nil, storage.ParentCloseAbandon)
		if s.Select(child, s.NewTimer(time.Hour)) == 1 {
			_, err := child.Get()
			return json.Marshal(errors.Is(err, replay.ErrCanceled))
		}
		return json.Marshal("child")
	})
	h.turn()
	h.fireNext()
	out := h.turn()
	if !slices.Equal(out.CancelChildren, []string{"inst-1/1/2"}) || string(out.Result) != "true" {
		t.Fatalf("CancelChildren %v, result %s", out.CancelChildren, out.Result)
	}
	if n := len(kindOf(h.cur(), history.ChildWorkflowCancelRequested)); n != 1 {
		t.Fatalf("history:%s", dumpEvents(h.cur()))
	}
}

// Cancellation: Done resolves once, a second request records nothing, the
// instance ends canceled with the reason, keeping what it returned.
func TestCancel_DoneErrAndEnd(t *testing.T) {
	h := newHarness(t, "", func(s *replay.State, _ json.RawMessage) (json.RawMessage, error) {
		if s.Err() != nil {
			return nil, errors.New("canceled before it began")
		}
		if s.Select(s.WaitEvent("go", 0), s.Done()) == 1 {
			h2 := s.Done() // the same future
			_, err := h2.Get()
			var ce *replay.CanceledError
			if !errors.As(s.Err(), &ce) || err != nil {
				return nil, errors.New("no CanceledError")
			}
			return json.Marshal("cleaned up after " + ce.Reason)
		}
		return json.Marshal("went")
	})
	h.turn()
	h.push(storage.Message{Kind: storage.MsgCancel, Name: "stop"})
	h.push(storage.Message{Kind: storage.MsgCancel, Name: "stop again"})
	out := h.turn()
	if out.Status != heraldtype.StatusCanceled || string(out.Result) != `"cleaned up after stop"` ||
		out.Failure == nil || out.Failure.Kind != replay.FailureCanceled || out.Failure.Message != "stop" {
		t.Fatalf("%s %s %+v", out.Status, out.Result, out.Failure)
	}
	if n := len(kindOf(h.cur(), history.ExecutionCancelRequested)); n != 1 {
		t.Fatalf("history:%s", dumpEvents(h.cur()))
	}
	if last := h.cur()[len(h.cur())-1]; last.Kind != history.ExecutionCanceled {
		t.Fatalf("last %s", last.Kind)
	}
}

// A workflow that ignores the request and fails still ends canceled, the
// error added to the reason; a panic fails it.
func TestCancel_ErrorAndPanic(t *testing.T) {
	for _, tc := range []struct {
		name   string
		fail   func() error
		status heraldtype.Status
	}{
		{"error", func() error { return errors.New("oops") }, heraldtype.StatusCanceled},
		{"panic", func() error { panic("bug") }, heraldtype.StatusFailed},
	} {
		h := newHarness(t, "", func(s *replay.State, _ json.RawMessage) (json.RawMessage, error) {
			if _, err := s.WaitEvent("go", 0).Get(); err != nil {
				return nil, err
			}
			return nil, tc.fail()
		})
		h.turn()
		h.push(storage.Message{Kind: storage.MsgCancel, Name: "stop"})
		h.turn()
		h.raise("go", "g", "")
		out := h.turn()
		if out.Status != tc.status {
			t.Fatalf("%s: %s %+v", tc.name, out.Status, out.Failure)
		}
		if tc.status == heraldtype.StatusCanceled && out.Failure.Message != "stop (the workflow returned: oops)" {
			t.Fatalf("%s: failure %q", tc.name, out.Failure.Message)
		}
	}
}
