package httpapi

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/heraldwf/herald"
	"github.com/heraldwf/herald/httpapi/wire"
)

// problemKind is one row of the problem table: an HTTP status, a stable
// machine-readable code and a title.
type problemKind struct {
	status int
	code   string
	title  string
}

// Problem codes of the API's own making (not a Herald sentinel).
var (
	probUnauthorized  = problemKind{http.StatusUnauthorized, "unauthorized", "Missing, malformed, unknown or revoked API key"}
	probForbidden     = problemKind{http.StatusForbidden, "forbidden", "The API key may not do this"}
	probRouteNotFound = problemKind{http.StatusNotFound, "route_not_found", "No such route"}
	probMethod        = problemKind{http.StatusMethodNotAllowed, "method_not_allowed", "Method not allowed on this route"}
	probBadRequest    = problemKind{http.StatusBadRequest, "bad_request", "The request cannot be read"}
	probTooLarge      = problemKind{http.StatusRequestEntityTooLarge, "too_large", "Request body too large"}
	probMediaType     = problemKind{http.StatusUnsupportedMediaType, "unsupported_media_type", "Request body must be application/json"}
	probInternal      = problemKind{http.StatusInternalServerError, "internal", "Internal server error"}
	probTimeout       = problemKind{http.StatusServiceUnavailable, "timeout", "The request did not finish in time"}
)

// ownProblems are the API's own problem kinds.
var ownProblems = []problemKind{probUnauthorized, probForbidden, probRouteNotFound, probMethod, probBadRequest,
	probTooLarge, probMediaType, probInternal, probTimeout}

// problemTable is the ONE place where Herald's sentinel errors become HTTP
// statuses and problem codes. The first row whose sentinel matches
// (errors.Is; a row's err may instead be a matcher, see eventInvalid) wins,
// so more specific rows come first. An error that matches no row is a 500
// "internal" (and is logged).
var problemTable = []struct {
	err  error
	kind problemKind
}{
	// Queries (a *herald.QueryError by its kind), before the sentinels a
	// query handler's own error may wrap.
	{queryKind(herald.QueryUnknown), problemKind{http.StatusNotFound, "query_not_found", "The workflow has no handler for this query"}},
	{queryKind(herald.QueryBadArgs), problemKind{http.StatusBadRequest, "query_args_invalid", "The query handler cannot decode the arguments"}},
	{queryKind(herald.QueryHandlerError), problemKind{http.StatusUnprocessableEntity, "query_failed", "The query handler failed"}},
	{queryKind(herald.QueryHandlerPanic), problemKind{http.StatusUnprocessableEntity, "query_failed", "The query handler failed"}},
	{queryKind(herald.QueryNotReplayable), problemKind{http.StatusConflict, "query_not_replayable", "The workflow code no longer replays the instance's history"}},
	{queryKind(herald.QueryNotRegistered), problemKind{http.StatusNotImplemented, "query_unavailable", "This server's runtime does not have the instance's workflow registered"}},
	// Instances and events (the event lanes, correlated events,
	// definitions): an event refused for its size or by its definition's
	// schema, before the other refused events.
	{eventInvalid(herald.EventTooLarge), problemKind{http.StatusRequestEntityTooLarge, "payload_too_large", "Payload over its size cap"}},
	{eventInvalid(herald.EventSchemaViolation), problemKind{http.StatusUnprocessableEntity, "schema_violation", "Payload refused by its event definition's JSON Schema"}},
	{herald.ErrBackPressure, problemKind{http.StatusTooManyRequests, "back_pressure", "Event bus backlog full; retry later"}},
	{herald.ErrStorageFull, problemKind{http.StatusInsufficientStorage, "storage_full", "The store has no room left"}},
	{herald.ErrUnavailable, problemKind{http.StatusServiceUnavailable, "unavailable", "The store is unavailable"}},
	{herald.ErrClosed, problemKind{http.StatusServiceUnavailable, "unavailable", "The store is closed"}},
	{herald.ErrNotFound, problemKind{http.StatusNotFound, "not_found", "Not found"}},
	{herald.ErrInstanceExists, problemKind{http.StatusConflict, "instance_exists", "Instance already exists"}},
	{herald.ErrAlreadyExists, problemKind{http.StatusConflict, "already_exists", "Already exists"}},
	{herald.ErrEventIDConflict, problemKind{http.StatusConflict, "event_id_conflict", "Event id already used for another event"}},
	{herald.ErrInstanceNotRunning, problemKind{http.StatusConflict, "instance_not_running", "Instance is not running"}},
	{herald.ErrEventInvalid, problemKind{http.StatusBadRequest, "event_invalid", "Event invalid"}},
	{herald.ErrDefinitionInvalid, problemKind{http.StatusBadRequest, "definition_invalid", "Event definition invalid"}},
	// Bus group: a script that does not parse (reasons: "line L, column
	// C: message"); a dead letter reprocessed before.
	{herald.ErrScriptSyntax, problemKind{http.StatusBadRequest, "script_syntax", "Script does not parse"}},
	{errAlreadyReprocessed, problemKind{http.StatusConflict, "already_reprocessed", "Dead letter already reprocessed"}},
	{herald.ErrInvalidArgument, problemKind{http.StatusBadRequest, "invalid_argument", "Invalid argument"}},
	{context.DeadlineExceeded, probTimeout},
	// The client went away before the answer: nobody reads it, but the
	// access log says what happened (nginx's 499), not a server error.
	{context.Canceled, problemKind{499, "client_closed", "The client closed the request"}},
}

// problemFor returns the table's row for err, and whether one matched.
func problemFor(err error) (problemKind, bool) {
	for _, row := range problemTable {
		if m, ok := row.err.(matcher); ok {
			if m.matches(err) {
				return row.kind, true
			}
			continue
		}
		if errors.Is(err, row.err) {
			return row.kind, true
		}
	}
	return probInternal, false
}

// matcher is a problem table row's err that matches a typed error by its
// fields rather than a sentinel.
type matcher interface {
	error
	matches(err error) bool
}

// eventInvalid matches an *herald.EventInvalidError of one Kind.
type eventInvalid herald.EventInvalidKind

func (k eventInvalid) Error() string {
	return "herald: event invalid: " + herald.EventInvalidKind(k).String()
}

func (k eventInvalid) matches(err error) bool {
	var ei *herald.EventInvalidError
	return errors.As(err, &ei) && ei.Kind == herald.EventInvalidKind(k)
}

// problemReasons extracts the reasons of Herald's typed errors.
func problemReasons(err error) []string {
	var ia *herald.InvalidArgumentError
	var ei *herald.EventInvalidError
	var di *herald.DefinitionInvalidError
	var si *herald.SubscriptionInvalidError
	var se *herald.ScriptSyntaxError
	var qe *herald.QueryError
	switch {
	case errors.As(err, &qe):
		if qe.Kind == herald.QueryUnknown {
			return []string{"registered queries: " + strings.Join(qe.Registered, ", ")}
		}
		return nil
	case errors.As(err, &si):
		return si.Reasons
	case errors.As(err, &se):
		return []string{fmt.Sprintf("line %d, column %d: %s", se.Err.Line, se.Err.Column, se.Err.Message)}
	case errors.As(err, &ei):
		return ei.Reasons
	case errors.As(err, &di):
		return di.Reasons
	case errors.As(err, &ia):
		return ia.Reasons
	}
	return nil
}

// newProblem builds the problem body for kind.
func newProblem(kind problemKind, detail string, r *http.Request) *wire.Problem {
	p := &wire.Problem{
		Type:   wire.ProblemTypeBase + kind.code,
		Title:  kind.title,
		Status: kind.status,
		Detail: detail,
		Code:   kind.code,
	}
	if r != nil {
		p.Instance = r.URL.Path
		p.RequestID = requestID(r.Context())
	}
	return p
}
