package replay

import (
	"encoding/json"
	"fmt"

	"github.com/google/uuid"

	"github.com/heraldwf/herald/heraldtype"
	"github.com/heraldwf/herald/history"
	"github.com/heraldwf/herald/storage"
)

// ChildWorkflowError is the error a child workflow's future returns when
// the child did not complete.
type ChildWorkflowError = heraldtype.ChildWorkflowError

// ChildID derives a child workflow's instance id from its parent's
// instance id, execution and the seq of the decision that starts it: the
// same on every replay, unique within the parent. An id that would be
// longer than storage.MaxIDBytes is a name-based UUID of it instead.
func ChildID(parent string, execution, seq int) string {
	id := fmt.Sprintf("%s/%d/%d", parent, execution, seq)
	if len(id) > storage.MaxIDBytes {
		id = uuid.NewSHA1(uuidNamespace, []byte(id)).String()
	}
	return id
}

// CallWorkflow starts a child workflow as a decision: the child instance
// (id, or ChildID's derived id when id is "") is created with the turn
// (Output.StartChildren), and the future resolves with the child's result,
// or a *ChildWorkflowError, when the child ends (its end writes a message
// to this instance's inbox). If the future loses a Select the child is
// asked to cancel (ChildWorkflowCancelRequested) and its result, when it
// comes, is not wanted.
func (s *State) CallWorkflow(workflow, id string, input json.RawMessage, policy storage.ParentClosePolicy) *Future {
	if id == "" {
		seq := s.nextSeq // the seq the decision gets if it is new
		if s.cursor < len(s.hist) {
			h := s.hist[s.cursor]
			seq = h.Seq
			if h.Kind == history.ChildWorkflowScheduled && h.Name == workflow {
				// Recorded under another instance id (ReplayHistory):
				// the recorded child is this one.
				id = h.ChildID
			}
		}
		if id == "" {
			id = ChildID(s.in.InstanceID, s.execution, seq)
		}
	}
	seq, isNew := s.decide(history.Event{Kind: history.ChildWorkflowScheduled, Name: workflow, ChildID: id, Input: input})
	if isNew {
		s.out.StartChildren = append(s.out.StartChildren, storage.ChildStart{ID: id, Workflow: workflow, Input: input,
			TaskSeq: seq, ClosePolicy: policy})
	}
	f := s.newFuture(seq, workflow)
	f.child = id
	f.cancel = func() {
		ev := history.Event{Kind: history.ChildWorkflowCancelRequested, Name: workflow, TaskSeq: seq, ChildID: id}
		if _, isNew := s.decide(ev); isNew {
			s.out.CancelChildren = append(s.out.CancelChildren, id)
		}
		f.resolve(nil, ErrCanceled)
	}
	return f
}

// applyStoredChild replays a child's end.
func (s *State) applyStoredChild(ev history.Event) {
	f := s.futures[ev.TaskSeq]
	if f == nil || f.done || f.child == "" {
		panic(nondeterminism{s.nondeterminism(ev, "no pending child workflow with that seq")})
	}
	s.resolveChild(f, ev)
}

// applyNewChild records a child's end, unless the future no longer wants
// it (it lost a Select) or it is for an earlier execution.
func (s *State) applyNewChild(m storage.Message) {
	if m.Execution != s.execution {
		return
	}
	f := s.futures[m.TaskSeq]
	if f == nil || f.done || f.child == "" {
		return
	}
	ev := history.Event{Kind: history.ChildWorkflowCompleted, TaskSeq: m.TaskSeq, Name: f.name, ChildID: f.child,
		Result: m.Result}
	if m.Kind == storage.MsgChildFailed {
		ev.Kind, ev.Result, ev.Failure = history.ChildWorkflowFailed, nil, m.Failure
		if ev.Failure == nil {
			ev.Failure = &history.Failure{Message: "the child workflow failed"}
		}
	}
	s.record(ev)
	s.resolveChild(f, ev)
}

func (s *State) resolveChild(f *Future, ev history.Event) {
	if ev.Kind == history.ChildWorkflowFailed {
		f.resolve(nil, &ChildWorkflowError{InstanceID: ev.ChildID, Workflow: ev.Name, Failure: ev.Failure})
		return
	}
	res := ev.Result
	if res == nil {
		res = json.RawMessage("null")
	}
	f.resolve(res, nil)
}

// Failed returns a future that has failed with err: no decision, for a
// call refused before it was made.
func (s *State) Failed(err error) *Future {
	f := s.newFuture(0, "")
	f.resolve(nil, err)
	return f
}
