package herald

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/heraldwf/herald/history"
	"github.com/heraldwf/herald/internal/replay"
	"github.com/heraldwf/herald/storage"
)

// Sentinel errors. Compare with errors.Is.
var (
	// ErrNotFound: no such instance or event.
	ErrNotFound = storage.ErrNotFound
	// ErrInstanceExists: StartWorkflow with an instance id already taken.
	ErrInstanceExists = storage.ErrInstanceExists
	// ErrInstanceNotRunning: the instance has completed, failed or been
	// terminated; an event sent to it is refused and nothing is stored.
	ErrInstanceNotRunning = storage.ErrInstanceNotRunning
	// ErrEventIDConflict: an event id was reused for a different instance,
	// lane or name.
	ErrEventIDConflict = storage.ErrEventIDConflict
	// ErrLeaseLost: a worker's claim on an instance or activity was taken
	// over; its stale result was not written.
	ErrLeaseLost = storage.ErrLeaseLost
	// ErrStorageFull: the store has no room left (full disk or quota); the
	// write was not made. Once room is made, the running store goes on.
	ErrStorageFull = storage.ErrStorageFull
	// ErrEventInvalid: an event was refused synchronously (empty name, payload
	// not JSON, over the size cap); nothing was stored. The error is an
	// *EventInvalidError with the reasons.
	ErrEventInvalid = errors.New("herald: event invalid")
	// ErrEventTimeout: a wait's timeout elapsed first (SPEC §3).
	ErrEventTimeout = replay.ErrEventTimeout
	// ErrCanceled: the future lost a Select.
	ErrCanceled = replay.ErrCanceled
	// ErrNotRegistered: no workflow or activity of that name is registered.
	ErrNotRegistered = errors.New("herald: not registered")
	// ErrInvalidArgument: a call was refused because an argument can never
	// be valid: an empty or malformed workflow name or instance id, an
	// input that cannot be encoded as JSON or nests too deeply, a malformed
	// search bookmark. Nothing was stored. Detail comes as an
	// *InvalidArgumentError where Herald itself checked the argument.
	// (Events refused at the door report ErrEventInvalid instead.)
	ErrInvalidArgument = storage.ErrInvalidArgument
	// ErrUnavailable: the store could not be reached or lost its connection
	// under the call, and Herald's own bounded retries did not get through.
	// Reads and event sends (idempotent by event id) are retried inside
	// Herald before this is returned; for other writes the outcome is
	// unknown.
	ErrUnavailable = storage.ErrUnavailable
	// ErrCorrupt: a stored row of an instance cannot be decoded. The
	// runtime fails that instance (failure kind "corrupt"); nothing else is
	// affected.
	ErrCorrupt = storage.ErrCorrupt
	// ErrRuntimeStarted: Start on a runtime that is running (or whose Stop
	// is still waiting for in-flight work).
	ErrRuntimeStarted = errors.New("herald: runtime already started")
)

// InvalidArgumentError lists why a call's argument was refused. It matches
// ErrInvalidArgument with errors.Is.
type InvalidArgumentError struct {
	// Op is the call ("StartWorkflow").
	Op      string
	Reasons []string
}

func (e *InvalidArgumentError) Error() string {
	return fmt.Sprintf("herald: %s: invalid argument: %s", e.Op, strings.Join(e.Reasons, "; "))
}

// Is makes errors.Is(err, ErrInvalidArgument) true.
func (e *InvalidArgumentError) Is(target error) bool { return target == ErrInvalidArgument }

// NondeterminismError: the workflow code no longer matches its history. The
// instance fails with it; errors.As finds it in the error an
// InstanceInfo reports.
type NondeterminismError = replay.NondeterminismError

// ActivityError: an activity failed after its last attempt.
type ActivityError = replay.ActivityError

// EventInvalidError lists why an event was refused. It matches
// ErrEventInvalid with errors.Is.
type EventInvalidError struct {
	Name    string
	Reasons []string
}

func (e *EventInvalidError) Error() string {
	// The name may be what was refused: a megabyte of it helps nobody.
	return fmt.Sprintf("herald: event %.64q invalid: %s", e.Name, strings.Join(e.Reasons, "; "))
}

// Is makes errors.Is(err, ErrEventInvalid) true.
func (e *EventInvalidError) Is(target error) bool { return target == ErrEventInvalid }

// WorkflowError is a workflow's failure as recorded: its kind
// ("application", "activity", "panic", "terminated") and message.
type WorkflowError struct {
	Kind    string
	Message string
}

func (e *WorkflowError) Error() string { return fmt.Sprintf("workflow %s: %s", e.Kind, e.Message) }

// failureError turns a stored failure back into a typed error.
func failureError(f *history.Failure) error {
	if f == nil {
		return nil
	}
	if f.Kind == replay.FailureNondeterminism && len(f.Detail) > 0 {
		var nd NondeterminismError
		if json.Unmarshal(f.Detail, &nd) == nil {
			return &nd
		}
	}
	return &WorkflowError{Kind: f.Kind, Message: f.Message}
}
