package herald

import (
	"errors"
	"fmt"
	"strings"

	"github.com/heraldwf/herald/heraldtype"
	"github.com/heraldwf/herald/internal/replay"
)

// Sentinel errors. Compare with errors.Is.
var (
	// ErrNotFound: no such instance, event, event definition, correlated
	// event or (Runtime.TenantLimits) registered tenant.
	ErrNotFound = heraldtype.ErrNotFound
	// ErrInstanceExists: StartWorkflow with an instance id already taken.
	ErrInstanceExists = heraldtype.ErrInstanceExists
	// ErrAlreadyExists: an object other than an instance (an API key) with
	// that identity exists.
	ErrAlreadyExists = heraldtype.ErrAlreadyExists
	// ErrInstanceNotRunning: the instance has completed, failed or been
	// terminated; an event sent to it is refused and nothing is stored.
	ErrInstanceNotRunning = heraldtype.ErrInstanceNotRunning
	// ErrEventIDConflict: an event id was reused for a different instance,
	// lane or name.
	ErrEventIDConflict = heraldtype.ErrEventIDConflict
	// ErrLeaseLost: a worker's claim on an instance or activity was taken
	// over; its stale result was not written.
	ErrLeaseLost = heraldtype.ErrLeaseLost
	// ErrStorageFull: the store has no room left (full disk or quota); the
	// write was not made. Once room is made, the running store goes on.
	ErrStorageFull = heraldtype.ErrStorageFull
	// ErrEventInvalid: an event was refused synchronously (empty name, payload
	// not JSON, over the size cap); nothing was stored. The error is an
	// *EventInvalidError with the reasons.
	ErrEventInvalid = errors.New("herald: event invalid")
	// ErrEventTimeout: a wait's timeout elapsed first (docs/events.md, Wait timeouts).
	ErrEventTimeout = replay.ErrEventTimeout
	// ErrCanceled: the future lost a Select.
	ErrCanceled = replay.ErrCanceled
	// ErrNotRegistered: ReplayHistory was given the history of a workflow
	// the runtime has not registered. (A start of an unregistered workflow
	// is not refused: another runtime may have it; InstanceInfo.Blocked
	// says why the instance waits.)
	ErrNotRegistered = errors.New("herald: not registered")
	// ErrInvalidArgument: a call was refused because an argument can never
	// be valid: an empty or malformed workflow name or instance id, an
	// input that cannot be encoded as JSON or nests too deeply, a malformed
	// search bookmark. Nothing was stored. Detail comes as an
	// *InvalidArgumentError where Herald itself checked the argument.
	// (Events refused at the door report ErrEventInvalid instead.)
	ErrInvalidArgument = heraldtype.ErrInvalidArgument
	// ErrUnavailable: the store could not be reached or lost its connection
	// under the call, and Herald's own bounded retries did not get through.
	// Reads and event sends (idempotent by event id) are retried inside
	// Herald before this is returned; for other writes the outcome is
	// unknown.
	ErrUnavailable = heraldtype.ErrUnavailable
	// ErrCorrupt: a stored row of an instance cannot be decoded. The
	// runtime fails that instance (failure kind "corrupt"); nothing else is
	// affected.
	ErrCorrupt = heraldtype.ErrCorrupt
	// ErrClosed: the store was closed; calls through it fail.
	ErrClosed = heraldtype.ErrClosed
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

// EventInvalidError lists why an event was refused. It matches
// ErrEventInvalid with errors.Is.
type EventInvalidError struct {
	Name string
	// Kind says which check refused the event: a malformed event (the
	// zero value), a payload over its size cap, or a payload its
	// definition's JSON Schema refuses. The HTTP API answers them with
	// 400, 413 and 422.
	Kind    EventInvalidKind
	Reasons []string
}

// EventInvalidKind classifies an EventInvalidError.
type EventInvalidKind int

const (
	// EventMalformed: a malformed instance id, name, event id or type, a
	// payload that is not JSON, not UTF-8 or nested too deep, no usable
	// definition for a correlated put (and the like). The zero value.
	EventMalformed EventInvalidKind = iota
	// EventTooLarge: the payload is over its size cap (the definition's,
	// the tenant's or the client's); its only reason.
	EventTooLarge
	// EventSchemaViolation: the payload does not satisfy its definition's
	// JSON Schema; the reasons say where and why.
	EventSchemaViolation
)

func (k EventInvalidKind) String() string {
	switch k {
	case EventMalformed:
		return "malformed"
	case EventTooLarge:
		return "too_large"
	case EventSchemaViolation:
		return "schema_violation"
	}
	return fmt.Sprintf("EventInvalidKind(%d)", int(k))
}

func (e *EventInvalidError) Error() string {
	// The name may be what was refused: a megabyte of it helps nobody.
	return fmt.Sprintf("herald: event %.64q invalid: %s", e.Name, strings.Join(e.Reasons, "; "))
}

// Is makes errors.Is(err, ErrEventInvalid) true.
func (e *EventInvalidError) Is(target error) bool { return target == ErrEventInvalid }

// PermanentError marks an error as permanent: an activity returning it
// fails at once, a bus target returning it sends its execution straight
// to the dead-letter queue; neither is retried. It is found through
// wrapping: fmt.Errorf("…: %w", Permanent(err)) is permanent too.
type PermanentError = heraldtype.PermanentError

// Permanent wraps err so that the activity or bus target returning it is
// not retried (PermanentError). Permanent(nil) is nil.
func Permanent(err error) error {
	if err == nil {
		return nil
	}
	return &PermanentError{Err: err}
}

// NonRetryable is Permanent, under the name activities used.
//
// Deprecated: use Permanent, which activities and bus targets both honour.
func NonRetryable(err error) error { return Permanent(err) }
