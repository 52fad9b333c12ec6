package client

import (
	"context"
	"encoding/json"
	"net/url"
	"strconv"

	"github.com/heraldwf/herald/httpapi/wire"
)

// StartInstance starts a workflow instance and returns its id.
func (c *Client) StartInstance(ctx context.Context, req wire.StartInstanceRequest) (string, error) {
	var out wire.StartInstanceResponse
	err := c.Do(ctx, "POST", "/v1/instances", nil, req, &out)
	return out.ID, err
}

// Instance returns an instance's status.
func (c *Client) Instance(ctx context.Context, id string) (*wire.Instance, error) {
	var out wire.Instance
	if err := c.Do(ctx, "GET", "/v1/instances/"+esc(id), nil, nil, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// InstanceFilter narrows ListInstances; zero fields do not filter.
type InstanceFilter struct {
	Workflow, Status            string
	CreatedAfter, CreatedBefore string // RFC 3339
	Limit                       int
	Cursor                      string
	// Attributes keeps instances whose searchable attribute KEY equals
	// VALUE, written as GET /v1/instances's attr.KEY=VALUE ("\"quoted\""
	// is a string; else true/false, a decimal integer, an RFC 3339 time).
	Attributes map[string]string
}

// ListInstances returns one page of instances, newest first.
func (c *Client) ListInstances(ctx context.Context, f InstanceFilter) (*wire.Page[*wire.Instance], error) {
	q := url.Values{}
	for k, v := range map[string]string{"workflow": f.Workflow, "status": f.Status,
		"created_after": f.CreatedAfter, "created_before": f.CreatedBefore} {
		if v != "" {
			q.Set(k, v)
		}
	}
	for k, v := range f.Attributes {
		q.Set("attr."+k, v)
	}
	var out wire.Page[*wire.Instance]
	if err := c.Do(ctx, "GET", "/v1/instances", pageQuery(q, f.Limit, f.Cursor), nil, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// History returns one execution's history (execution 0: the current one).
func (c *Client) History(ctx context.Context, id string, execution int) (*wire.History, error) {
	q := url.Values{}
	if execution != 0 {
		q.Set("execution", strconv.Itoa(execution))
	}
	var out wire.History
	if err := c.Do(ctx, "GET", "/v1/instances/"+esc(id)+"/history", q, nil, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// Timeline returns what the herald CLI's timeline shows of an instance: its
// outcome, every execution's history and every event's fate. Its JSON is
// the timeline renderer's input.
func (c *Client) Timeline(ctx context.Context, id string) (*wire.Timeline, error) {
	var out wire.Timeline
	if err := c.Do(ctx, "GET", "/v1/instances/"+esc(id)+"/timeline", nil, nil, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// Terminate ends a running instance at once (its pending and buffered
// events are dropped, instance_terminal) and returns its status after.
func (c *Client) Terminate(ctx context.Context, id, reason string) (*wire.Instance, error) {
	var out wire.Instance
	if err := c.Do(ctx, "POST", "/v1/instances/"+esc(id)+"/terminate", nil, wire.TerminateRequest{Reason: reason}, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// Cancel asks a running instance to cancel (the workflow sees ctx.Done,
// may clean up, and ends canceled; a second request changes nothing) and
// returns its status after the request.
func (c *Client) Cancel(ctx context.Context, id, reason string) (*wire.Instance, error) {
	var out wire.Instance
	if err := c.Do(ctx, "POST", "/v1/instances/"+esc(id)+"/cancel", nil, wire.CancelRequest{Reason: reason}, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// EventFilter narrows Events; zero fields do not filter.
type EventFilter struct {
	Lane, Name, Fate string
	// Limit: at most this many (1–1000; 0: 1000).
	Limit int
}

// Events lists the events sent to an instance with their fates, oldest
// first.
func (c *Client) Events(ctx context.Context, id string, f EventFilter) ([]*wire.EventRecord, error) {
	q := url.Values{}
	for k, v := range map[string]string{"lane": f.Lane, "name": f.Name, "fate": f.Fate} {
		if v != "" {
			q.Set(k, v)
		}
	}
	if f.Limit > 0 {
		q.Set("limit", strconv.Itoa(f.Limit))
	}
	var out wire.Page[*wire.EventRecord]
	if err := c.Do(ctx, "GET", "/v1/instances/"+esc(id)+"/events", q, nil, &out); err != nil {
		return nil, err
	}
	return out.Items, nil
}

// Query asks an instance's workflow the query name with args (any JSON
// value; nil for none) and returns the answer.
func (c *Client) Query(ctx context.Context, id, name string, args json.RawMessage) (json.RawMessage, error) {
	var body any
	if len(args) > 0 {
		body = args
	}
	var out wire.QueryResponse
	if err := c.Do(ctx, "POST", "/v1/instances/"+esc(id)+"/queries/"+esc(name), nil, body, &out); err != nil {
		return nil, err
	}
	return out.Result, nil
}
