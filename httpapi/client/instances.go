package client

import (
	"context"
	"net/url"

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
	var out wire.Page[*wire.Instance]
	if err := c.Do(ctx, "GET", "/v1/instances", pageQuery(q, f.Limit, f.Cursor), nil, &out); err != nil {
		return nil, err
	}
	return &out, nil
}
