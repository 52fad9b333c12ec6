package herald

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/heraldwf/herald/history"
	"github.com/heraldwf/herald/internal/replay"
	"github.com/heraldwf/herald/storage"
)

// ErrQueryFailed: Client.Query got no answer from the workflow. The error
// is a *QueryError saying why.
var ErrQueryFailed = errors.New("herald: query failed")

// QueryErrorKind classifies a QueryError.
type QueryErrorKind string

// Kinds of QueryError.
const (
	// QueryUnknown: the workflow has no handler of that name where its
	// history ends; QueryError.Registered lists those it has.
	QueryUnknown QueryErrorKind = "unknown_query"
	// QueryBadArgs: the handler could not decode the query's arguments.
	QueryBadArgs QueryErrorKind = "bad_args"
	// QueryHandlerError: the handler returned an error (QueryError.Err),
	// or a result that cannot be encoded as JSON.
	QueryHandlerError QueryErrorKind = "handler_error"
	// QueryHandlerPanic: the handler panicked, or made a decision or
	// blocked (a query cannot).
	QueryHandlerPanic QueryErrorKind = "handler_panic"
	// QueryNotRegistered: no workflow code to run: the client has no
	// runtime (NewClient: use Runtime.Client), or its runtime has not
	// registered the instance's workflow. Matches ErrNotRegistered.
	QueryNotRegistered QueryErrorKind = "not_registered"
	// QueryNotReplayable: the workflow code no longer replays the
	// instance's history (non-determinism), or the history cannot be
	// replayed at all.
	QueryNotReplayable QueryErrorKind = "not_replayable"
)

// QueryError is why Client.Query got no answer. It matches
// ErrQueryFailed with errors.Is, and unwraps to the handler's own error
// (QueryHandlerError) or ErrNotRegistered (QueryNotRegistered).
type QueryError struct {
	InstanceID string
	Query      string
	Kind       QueryErrorKind
	// Registered lists the workflow's query handlers, sorted
	// (QueryUnknown).
	Registered []string
	// Message says what happened.
	Message string
	Err     error
}

func (e *QueryError) Error() string {
	return fmt.Sprintf("herald: query %.64q of %.64q: %s: %s", e.Query, e.InstanceID, e.Kind, e.Message)
}

// Is makes errors.Is(err, ErrQueryFailed) true.
func (e *QueryError) Is(target error) bool { return target == ErrQueryFailed }

// Unwrap returns the underlying error.
func (e *QueryError) Unwrap() error { return e.Err }

// queryArgsError is a handler's failure to decode its arguments.
type queryArgsError struct{ err error }

func (e *queryArgsError) Error() string { return e.err.Error() }

// SetQueryHandler registers fn as the handler of query name (replacing
// one of that name; a nil fn removes it). Client.Query calls it with the
// query's arguments (raw JSON, "null" for none) on the workflow's state as
// replayed from history, and returns its result encoded as JSON. A handler
// reads the workflow's variables; it must not change them, make decisions
// (call activities, wait, set timers or attributes) or block: that fails
// the query (QueryHandlerPanic), never the workflow. Registering writes no
// history, so a workflow may register handlers anywhere, and should do so
// before its first wait. It returns an *InvalidArgumentError for a
// malformed name (see MaxNameBytes).
func (c *Context) SetQueryHandler(name string, fn func(args json.RawMessage) (any, error)) error {
	if reasons := textReasons(nil, "query name", name, MaxNameBytes); len(reasons) > 0 {
		return &InvalidArgumentError{Op: "SetQueryHandler", Reasons: reasons}
	}
	if fn == nil {
		c.s.SetQueryHandler(name, nil)
		return nil
	}
	depth := c.rt.cfg.MaxPayloadDepth
	c.s.SetQueryHandler(name, func(args json.RawMessage) (json.RawMessage, error) {
		v, err := fn(args)
		if err != nil {
			return nil, err
		}
		return encodeResult("query "+name, v, depth)
	})
	return nil
}

// SetQuery registers a typed query handler (Context.SetQueryHandler): the
// arguments are decoded into A (a failure is a QueryBadArgs error; no
// arguments leave A's zero value), the result R is encoded as JSON.
//
//	herald.SetQuery(ctx, "progress", func(struct{}) (int, error) { return done, nil })
func SetQuery[A, R any](ctx *Context, name string, fn func(args A) (R, error)) error {
	if fn == nil {
		return ctx.SetQueryHandler(name, nil)
	}
	return ctx.SetQueryHandler(name, func(raw json.RawMessage) (any, error) {
		var a A
		if len(raw) > 0 && string(raw) != "null" {
			if err := json.Unmarshal(raw, &a); err != nil {
				return nil, &queryArgsError{fmt.Errorf("decode arguments into %T: %w", a, err)}
			}
		}
		return fn(a)
	})
}

// Query asks instance's workflow the query name with args (encoded as
// JSON; nil for none) and decodes the answer into out (nil discards it;
// a *json.RawMessage keeps it raw). The answer comes from the workflow's
// state replayed from the current execution's history — of a running
// instance, as of its last committed turn; of a finished one, as it ended:
// the query writes no history, takes no lease, sends nothing and does not
// wait for the instance's turns. Only workflow code can answer, so the
// client must belong to a Runtime (Runtime.Client) that has the workflow
// registered.
//
// Errors: ErrNotFound (no such instance); an *InvalidArgumentError for a
// malformed query name or args that cannot be encoded, are over
// MaxPayloadBytes or nest too deeply; a *QueryError (ErrQueryFailed) for
// an unknown query, arguments the handler cannot decode, the handler's own
// error or panic, no runtime or workflow to run (also ErrNotRegistered), or
// a history the code no longer replays; an error decoding the answer into
// out; ctx's error if ctx ends first (a handler that never returns holds
// a goroutine, not the caller: workflow code cannot be stopped).
func (c *Client) Query(ctx context.Context, instanceID, name string, args any, out any) error {
	raw, err := c.query(ctx, instanceID, name, args)
	if err != nil {
		return err
	}
	if out == nil {
		return nil
	}
	if err := json.Unmarshal(raw, out); err != nil {
		return fmt.Errorf("herald: query %.64q of %.64q: decode the answer into %T: %w", name, instanceID, out, err)
	}
	return nil
}

func (c *Client) query(ctx context.Context, instanceID, name string, args any) (json.RawMessage, error) {
	if !textOK(instanceID, MaxIDBytes) {
		return nil, notFound("query of", instanceID)
	}
	lim := c.door.limitsFor(ctx, c.tenant)
	reasons := textReasons(nil, "query name", name, MaxNameBytes)
	in, reasons := encodeJSON(reasons, "query arguments", args, lim.maxPayloadDepth)
	if len(in) > lim.maxPayloadBytes {
		reasons = append(reasons, fmt.Sprintf("query arguments are %d bytes, over the %d-byte cap", len(in), lim.maxPayloadBytes))
	}
	if len(reasons) > 0 {
		return nil, &InvalidArgumentError{Op: "Query", Reasons: reasons}
	}
	qerr := func(kind QueryErrorKind, msg string, err error) *QueryError {
		return &QueryError{InstanceID: instanceID, Query: name, Kind: kind, Message: msg, Err: err}
	}
	if c.rt == nil {
		return nil, qerr(QueryNotRegistered, "this client has no runtime to run workflow code (a client of NewClient cannot answer queries; use Runtime.Client)", ErrNotRegistered)
	}
	evs, err := idempotent(ctx, func() ([]history.Event, error) {
		return c.store.HistoryList(ctx, &storage.HistoryListParams{Tenant: c.tenant, InstanceID: instanceID})
	})
	if err != nil {
		return nil, fmt.Errorf("query %s of %s: %w", name, instanceID, err)
	}
	if len(evs) == 0 || evs[0].Kind != history.ExecutionStarted {
		return nil, qerr(QueryNotReplayable, "the instance's history does not start with ExecutionStarted", nil)
	}
	wf := c.rt.workflow(evs[0].Workflow)
	if wf == nil {
		return nil, qerr(QueryNotRegistered, fmt.Sprintf("the runtime has no workflow %q registered", evs[0].Workflow), ErrNotRegistered)
	}
	tl := c.rt.limits.get(ctx, c.tenant)
	q := &replay.Query{Name: name, Args: in}
	// The replay runs the workflow's code and the handler, which cannot be
	// stopped: on a goroutine of its own, so that a handler that never
	// returns does not hold the caller past ctx.
	type replayed struct {
		out *replay.Output
		err error
	}
	done := make(chan replayed, 1)
	replayIn := &replay.Input{
		InstanceID: instanceID,
		Workflow:   wf,
		History:    evs,
		Now:        c.rt.cfg.Clock.Now(),
		Limits:     c.rt.replayLimits(tl),
		Query:      q,
	}
	go func() {
		out, err := runReplay(replayIn)
		done <- replayed{out, err}
	}()
	var rout *replay.Output
	select {
	case r := <-done:
		rout, err = r.out, r.err
	case <-ctx.Done():
		return nil, fmt.Errorf("query %s of %s: %w (the handler runs on until it returns: workflow code cannot be stopped)",
			name, instanceID, ctx.Err())
	}
	switch {
	case err != nil:
		return nil, qerr(QueryNotReplayable, err.Error(), nil)
	case !q.Answered:
		msg := "the replay did not reach the end of the history"
		if rout != nil && rout.Failure != nil {
			msg = rout.Failure.Message
		}
		return nil, qerr(QueryNotReplayable, msg, nil)
	}
	var (
		pe *replay.QueryPanicError
		ae *queryArgsError
	)
	switch {
	case q.Err == nil:
		return q.Result, nil
	case errors.Is(q.Err, replay.ErrUnknownQuery):
		e := qerr(QueryUnknown, "the workflow has no such query handler (registered: "+strings.Join(q.Names, ", ")+")", nil)
		e.Registered = q.Names
		return nil, e
	case errors.As(q.Err, &pe):
		return nil, qerr(QueryHandlerPanic, pe.Value, nil)
	case errors.As(q.Err, &ae):
		return nil, qerr(QueryBadArgs, ae.err.Error(), ae.err)
	default:
		return nil, qerr(QueryHandlerError, q.Err.Error(), q.Err)
	}
}
