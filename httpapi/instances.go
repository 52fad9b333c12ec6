package httpapi

import (
	"time"

	"github.com/heraldwf/herald"
	"github.com/heraldwf/herald/httpapi/wire"
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
			access:  tenantScoped, params: []param{{name: "id", in: "path", required: true, doc: "instance id"}},
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
				{name: "status", in: "query", doc: "pending, running, completed, failed or terminated"},
				{name: "created_after", in: "query", doc: "RFC 3339 time, inclusive"},
				{name: "created_before", in: "query", doc: "RFC 3339 time, exclusive"},
			}, pageParams...),
			resp: wire.Page[*wire.Instance]{}, errs: []string{"invalid_argument"},
			handle: listInstances,
		},
	}
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
