package heraldtype

import "errors"

// Sentinel errors, shared by the root package and the storage backends
// (which wrap them with context). Callers use errors.Is.
var (
	// ErrNotFound: no such instance, event, definition or tenant.
	ErrNotFound       = errors.New("herald: not found")
	ErrInstanceExists = errors.New("herald: instance already exists")
	// ErrAlreadyExists: an object other than an instance (an API key) with
	// that identity exists. Nothing was written.
	ErrAlreadyExists      = errors.New("herald: already exists")
	ErrInstanceNotRunning = errors.New("herald: instance is not running")
	// ErrLeaseLost: the caller's lock token no longer owns the work (its lease
	// expired and another worker took it over, or the instance was
	// terminated). Nothing was written.
	ErrLeaseLost = errors.New("herald: lease lost")
	// ErrEventIDConflict: an event id was reused for a different target, lane
	// or name. Nothing was written.
	ErrEventIDConflict = errors.New("herald: event id already used for another event")
	ErrClosed          = errors.New("herald: store closed")
	// ErrInvalidArgument: a parameter can never be valid (a malformed search
	// bookmark, an identifier that breaks the text rules). Nothing was
	// written.
	ErrInvalidArgument = errors.New("herald: invalid argument")
	// ErrUnavailable: the store could not be reached or dropped the
	// connection under the call (PostgreSQL: a terminated backend, a
	// connection failure). The call's effect is unknown for a write; a read
	// or an idempotent write (one that carries an event id) may be retried.
	ErrUnavailable = errors.New("herald: storage unavailable")
	// ErrCorrupt: a stored row cannot be decoded. It concerns one instance:
	// a claim hands that instance's turn out with Turn.Err set, and the
	// runtime fails the instance instead of the claim.
	ErrCorrupt = errors.New("herald: stored data cannot be decoded")
	// ErrStorageFull: the database has no room left (a full disk or file
	// system quota, a database or tablespace size limit). The write that
	// got it was not made; writes succeed again once room is made, without
	// reopening the store.
	ErrStorageFull = errors.New("herald: storage full")
	// ErrBackPressure: the tenant's bus backlog (published events not yet
	// routed plus executions not yet ended) is at its cap; Publish stored
	// nothing. Retry later (HTTP 429).
	ErrBackPressure = errors.New("herald: event bus backlog full")
)
