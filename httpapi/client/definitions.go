package client

import (
	"context"

	"github.com/heraldwf/herald/httpapi/wire"
)

// PutDefinition creates or replaces the event definition of name.
func (c *Client) PutDefinition(ctx context.Context, name string, req wire.PutDefinitionRequest) (*wire.EventDefinition, error) {
	var out wire.EventDefinition
	if err := c.Do(ctx, "PUT", "/v1/definitions/"+esc(name), nil, req, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// Definition returns the event definition of name.
func (c *Client) Definition(ctx context.Context, name string) (*wire.EventDefinition, error) {
	var out wire.EventDefinition
	if err := c.Do(ctx, "GET", "/v1/definitions/"+esc(name), nil, nil, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// Definitions returns one page of event definitions, by name.
func (c *Client) Definitions(ctx context.Context, limit int, cursor string) (*wire.Page[*wire.EventDefinition], error) {
	var out wire.Page[*wire.EventDefinition]
	if err := c.Do(ctx, "GET", "/v1/definitions", pageQuery(nil, limit, cursor), nil, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// DeleteDefinition deletes the event definition of name.
func (c *Client) DeleteDefinition(ctx context.Context, name string) error {
	return c.Do(ctx, "DELETE", "/v1/definitions/"+esc(name), nil, nil, nil)
}
