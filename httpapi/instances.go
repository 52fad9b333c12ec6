package httpapi

import (
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/heraldwf/herald"
	"github.com/heraldwf/herald/history"
	"github.com/heraldwf/herald/httpapi/wire"
	"github.com/heraldwf/herald/internal/timeline"
)

// instanceRoutes: workflow instances.
func (a *API) instanceRoutes() []*route {
	return []*route{
		{
			method: "POST", path: "/v1/instances", op: "startInstance", tag: "instances",
			summary: "Start a workflow instance",
			access:  tenantScoped, body: wire.StartInstanceRequest{}, resp: wire.StartInstanceResponse{},
			status: 201, errs: []string{"invalid_argument", "instance_exists"},
			handle: startInstance,
		},
		{
			method: "GET", path: "/v1/instances/{id}", op: "getInstance", tag: "instances",
			summary: "Get an instance's status",
			access:  tenantScoped, params: []param{idParam},
			resp: wire.Instance{}, errs: []string{"not_found"},
			handle: func(c *call) (any, error) {
				return c.client.Status(c.r.Context(), c.r.PathValue("id"))
			},
		},
		{
			method: "GET", path: "/v1/instances", op: "listInstances", tag: "instances",
			summary: "List instances, newest first",
			access:  tenantScoped,
			params: append([]param{
				{name: "workflow", in: "query", doc: "only instances of this workflow"},
				{name: "status", in: "query", doc: "pending, running, completed, failed, canceled or terminated"},
				{name: "created_after", in: "query", doc: "RFC 3339 time, inclusive"},
				{name: "created_before", in: "query", doc: "RFC 3339 time, exclusive"},
				{name: "attr.KEY", in: "query", doc: "only instances whose searchable attribute KEY equals the value " +
					"(repeat for more keys): \"quoted\" is a string; else true/false a bool, a decimal integer an int, " +
					"an RFC 3339 time a time, anything else a string"},
			}, pageParams...),
			resp: wire.Page[*wire.Instance]{}, errs: []string{"invalid_argument"},
			handle: listInstances,
		},
		{
			method: "GET", path: "/v1/instances/{id}/history", op: "getInstanceHistory", tag: "instances",
			summary: "Get one execution's history (default: the current one)",
			access:  tenantScoped,
			params: []param{idParam, {name: "execution", in: "query", typ: "integer",
				doc: "execution number, 1-based; 0 or omitted: the current one"}},
			resp: wire.History{}, errs: []string{"not_found", "invalid_argument"},
			handle: instanceHistory,
		},
		{
			method: "GET", path: "/v1/instances/{id}/timeline", op: "getInstanceTimeline", tag: "instances",
			summary: "Get what the CLI's timeline shows: the outcome, every execution's history and every event's fate",
			access:  tenantScoped, params: []param{idParam},
			resp: wire.Timeline{}, errs: []string{"not_found"},
			handle: instanceTimeline,
		},
		{
			method: "POST", path: "/v1/instances/{id}/terminate", op: "terminateInstance", tag: "instances",
			summary: "Terminate a running instance; its pending and buffered events are dropped (instance_terminal)",
			access:  tenantScoped, params: []param{idParam},
			body: wire.TerminateRequest{}, resp: wire.Instance{},
			errs:   []string{"not_found", "instance_not_running", "invalid_argument"},
			handle: terminateInstance,
		},
		{
			method: "POST", path: "/v1/instances/{id}/cancel", op: "cancelInstance", tag: "instances",
			summary: "Ask a running instance to cancel: the workflow sees ctx.Done, may clean up, and ends canceled (a second request changes nothing)",
			access:  tenantScoped, params: []param{idParam},
			body: wire.CancelRequest{}, resp: wire.Instance{},
			errs:   []string{"not_found", "instance_not_running", "invalid_argument"},
			handle: cancelInstance,
		},
		{
			method: "GET", path: "/v1/instances/{id}/events", op: "listInstanceEvents", tag: "instances",
			summary: "List the events sent to an instance with their fates, oldest first (an unknown instance has none)",
			access:  tenantScoped,
			params: []param{idParam,
				{name: "lane", in: "query", doc: "positional, queue or correlated"},
				{name: "name", in: "query", doc: "event name, queue name or event definition"},
				{name: "fate", in: "query", doc: "pending, buffered, delivered or dropped"},
				{name: "limit", in: "query", typ: "integer", doc: "at most this many, 1–1000 (default 1000); the list does not page"},
			},
			resp: wire.Page[*wire.EventRecord]{}, errs: []string{"invalid_argument"},
			handle: instanceEvents,
		},
	}
}

// idParam is the instance id in a path.
var idParam = param{name: "id", in: "path", required: true, doc: "instance id"}

func instanceHistory(c *call) (any, error) {
	id := c.r.PathValue("id")
	execution := 0
	if s := c.r.URL.Query().Get("execution"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 0 {
			return nil, badRequest("execution %.64q must be a non-negative integer", s)
		}
		execution = n
	}
	info, err := c.client.Status(c.r.Context(), id)
	if err != nil {
		return nil, err
	}
	if execution == 0 {
		execution = info.Execution
	}
	if execution > info.Execution {
		return nil, fmt.Errorf("instance %.64q has %d executions, not %d: %w", id, info.Execution, execution, herald.ErrNotFound)
	}
	evs, err := c.client.History(c.r.Context(), id, execution)
	if err != nil {
		return nil, err
	}
	return wire.History{InstanceID: id, Execution: execution, Events: nonNil(evs)}, nil
}

func instanceTimeline(c *call) (any, error) {
	in, err := timeline.Load(c.r.Context(), c.client, c.r.PathValue("id"))
	if err != nil {
		return nil, err
	}
	out := wire.Timeline{ID: in.ID, Workflow: in.Workflow, Status: in.Status, Output: in.Output, Error: in.Error,
		Executions: nonNil(in.Executions)}
	for _, e := range in.Events {
		out.Events = append(out.Events, wire.TimelineEvent(e))
	}
	return out, nil
}

func terminateInstance(c *call) (any, error) {
	var req wire.TerminateRequest
	if err := c.bindOptional(&req); err != nil {
		return nil, err
	}
	id := c.r.PathValue("id")
	if err := c.client.Terminate(c.r.Context(), id, req.Reason); err != nil {
		return nil, err
	}
	return c.client.Status(c.r.Context(), id)
}

func cancelInstance(c *call) (any, error) {
	var req wire.CancelRequest
	if err := c.bindOptional(&req); err != nil {
		return nil, err
	}
	id := c.r.PathValue("id")
	if err := c.client.CancelWorkflow(c.r.Context(), id, req.Reason); err != nil {
		return nil, err
	}
	return c.client.Status(c.r.Context(), id)
}

func instanceEvents(c *call) (any, error) {
	q := c.r.URL.Query()
	f := herald.EventFilter{Lane: history.Lane(q.Get("lane")), Name: q.Get("name"), Fate: history.Fate(q.Get("fate")),
		Limit: herald.MaxListLimit}
	switch f.Lane {
	case "", history.LanePositional, history.LaneQueue, history.LaneCorrelated:
	default:
		return nil, badRequest("lane %.64q must be positional, queue or correlated", f.Lane)
	}
	switch f.Fate {
	case "", history.FatePending, history.FateBuffered, history.FateDelivered, history.FateDropped:
	default:
		return nil, badRequest("fate %.64q must be pending, buffered, delivered or dropped", f.Fate)
	}
	if s := q.Get("limit"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 || n > herald.MaxListLimit {
			return nil, badRequest("limit %.64q must be an integer from 1 to %d", s, herald.MaxListLimit)
		}
		f.Limit = n
	}
	recs, err := c.client.Events(c.r.Context(), c.r.PathValue("id"), f)
	if err != nil {
		return nil, err
	}
	return wire.Page[*wire.EventRecord]{Items: nonNil(recs)}, nil
}

// bindOptional is bind for a body that may be omitted (no Content-Length,
// or zero): v is then left as it is.
func (c *call) bindOptional(v any) error {
	if c.r.ContentLength == 0 || c.r.Body == nil || c.r.Body == http.NoBody {
		return nil
	}
	return c.bind(v)
}

func startInstance(c *call) (any, error) {
	var req wire.StartInstanceRequest
	if err := c.bind(&req); err != nil {
		return nil, err
	}
	var opts []herald.StartOption
	if req.ID != "" {
		opts = append(opts, herald.WithInstanceID(req.ID))
	}
	switch req.IDReuse {
	case "", "fail":
	case "use_existing":
		opts = append(opts, herald.WithIDReusePolicy(herald.IDReuseUseExisting))
	default:
		return nil, badRequest("id_reuse %q must be \"fail\" or \"use_existing\"", req.IDReuse)
	}
	var input any
	if len(req.Input) > 0 {
		input = req.Input
	}
	id, err := c.client.StartWorkflow(c.r.Context(), req.Workflow, input, opts...)
	if err != nil {
		return nil, err
	}
	return wire.StartInstanceResponse{ID: id}, nil
}

func listInstances(c *call) (any, error) {
	limit, cursor, err := c.page()
	if err != nil {
		return nil, err
	}
	q := c.r.URL.Query()
	f := herald.InstanceFilter{Workflow: q.Get("workflow"), Status: herald.Status(q.Get("status")), Limit: limit, Cursor: cursor}
	if f.Attributes, err = attrFilter(q); err != nil {
		return nil, err
	}
	if f.CreatedAfter, err = queryTime(q.Get("created_after"), "created_after"); err != nil {
		return nil, err
	}
	if f.CreatedBefore, err = queryTime(q.Get("created_before"), "created_before"); err != nil {
		return nil, err
	}
	page, err := c.client.ListInstances(c.r.Context(), f)
	if err != nil {
		return nil, err
	}
	return wire.Page[*wire.Instance]{Items: nonNil(page.Instances), NextCursor: page.Next}, nil
}

// queryTime parses an optional RFC 3339 query parameter.
func queryTime(s, name string) (time.Time, error) {
	if s == "" {
		return time.Time{}, nil
	}
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return time.Time{}, badRequest("%s %q is not an RFC 3339 time", name, s)
	}
	return t, nil
}

// nonNil makes an empty list encode as [] rather than null.
func nonNil[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}
