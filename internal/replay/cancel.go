package replay

import (
	"errors"
	"time"

	"github.com/heraldwf/herald/heraldtype"
	"github.com/heraldwf/herald/history"
	"github.com/heraldwf/herald/storage"
)

// CanceledError is the error of a canceled instance, and what State.Err
// returns once cancellation was requested.
type CanceledError = heraldtype.CanceledError

// FailureCanceled is the failure kind of a canceled instance.
const FailureCanceled = heraldtype.FailureCanceled

// cancelState is an execution's cancellation: requested (an
// ExecutionCancelRequested in history), its reason, and the future Done
// returns.
type cancelState struct {
	requested bool
	reason    string
	done      *Future
}

// Done returns a future that resolves (with no value and no error) once
// cancellation is requested. It is the same future on every call; it is no
// decision, so asking for it records nothing, and it is never cancelled
// as a Select loser.
func (s *State) Done() *Future {
	if s.cancel.done == nil {
		s.cancel.done = s.newFuture(0, "")
		if s.cancel.requested {
			s.cancel.done.resolve(nil, nil)
		}
	}
	return s.cancel.done
}

// Err returns a *CanceledError once cancellation is requested, else nil.
func (s *State) Err() error {
	if !s.cancel.requested {
		return nil
	}
	return &CanceledError{Reason: s.cancel.reason}
}

// cancelRequested applies an ExecutionCancelRequested, stored or new.
func (s *State) cancelRequested(ev history.Event) {
	if s.cancel.requested {
		return
	}
	s.cancel.requested = true
	if ev.Failure != nil {
		s.cancel.reason = ev.Failure.Message
	}
	if s.cancel.done != nil {
		s.cancel.done.resolve(nil, nil)
	}
}

// applyNewCancel records a cancel request; a second one changes nothing.
func (s *State) applyNewCancel(m storage.Message) {
	if s.cancel.requested {
		return
	}
	ev := s.record(history.Event{Kind: history.ExecutionCancelRequested,
		Failure: &history.Failure{Kind: FailureCanceled, Message: m.Name}})
	s.cancelRequested(ev)
}

// completeCanceled ends the execution canceled if cancellation was
// requested and the workflow returned (a result or an error), and reports
// whether it did. Continue-as-new carries the request into the next
// execution instead (carryCancel); a panic or a non-determinism is a bug,
// and fails the instance as ever.
func (s *State) completeCanceled(res []byte, err error) bool {
	if !s.cancel.requested {
		return false
	}
	var (
		can *ContinueAsNewError
		pe  *PanicError
		nd  *NondeterminismError
	)
	if errors.As(err, &can) || errors.As(err, &pe) || errors.As(err, &nd) {
		return false
	}
	f := &history.Failure{Kind: FailureCanceled, Message: s.cancel.reason}
	var ce *CanceledError
	if err != nil && !errors.As(err, &ce) {
		f.Message += " (the workflow returned: " + err.Error() + ")"
	}
	ev := history.Event{Kind: history.ExecutionCanceled, Failure: f}
	if err == nil && res != nil {
		ev.Result = res
	}
	s.decide(ev)
	s.out.Status, s.out.Failure, s.out.Result = heraldtype.StatusCanceled, f, ev.Result
	return true
}

// carryCancel carries a cancel request into the next execution's start
// events.
func (s *State) carryCancel(start []history.Event, now time.Time) []history.Event {
	if !s.cancel.requested {
		return start
	}
	return append(start, history.Event{Seq: len(start) + 1, Time: now, Kind: history.ExecutionCancelRequested,
		AtStart: true, Failure: &history.Failure{Kind: FailureCanceled, Message: s.cancel.reason}})
}
