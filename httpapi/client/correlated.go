package client

import (
	"context"
	"encoding/json"
	"net/url"
	"strconv"

	"github.com/heraldwf/herald/httpapi/wire"
)

// PutCorrelated puts a correlated event under (def, key) with payload (a
// JSON value; nil: null) and delivers it to the instances waiting on key.
func (c *Client) PutCorrelated(ctx context.Context, def, key string, payload json.RawMessage) (*wire.CorrelatedEvent, error) {
	var out wire.CorrelatedEvent
	if err := c.Do(ctx, "PUT", correlatedPath(def, key), nil, wire.PutCorrelatedRequest{Payload: payload}, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// Correlated returns the correlated event under (def, key).
func (c *Client) Correlated(ctx context.Context, def, key string) (*wire.CorrelatedEvent, error) {
	var out wire.CorrelatedEvent
	if err := c.Do(ctx, "GET", correlatedPath(def, key), nil, nil, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// DeleteCorrelated deletes the correlated event under (def, key).
func (c *Client) DeleteCorrelated(ctx context.Context, def, key string) error {
	return c.Do(ctx, "DELETE", correlatedPath(def, key), nil, nil, nil)
}

// CorrelatedSearch narrows SearchCorrelated; zero fields do not filter.
type CorrelatedSearch struct {
	// Earliest and Latest bound the creation time (RFC 3339, inclusive).
	Earliest, Latest string
	// HasCorrelatedEvents keeps those that did (true) or did not (false)
	// produce an event.
	HasCorrelatedEvents *bool
	Limit               int
	Cursor              string
}

// SearchCorrelated returns one page of def's correlated events, oldest
// first.
func (c *Client) SearchCorrelated(ctx context.Context, def string, s CorrelatedSearch) (*wire.Page[*wire.CorrelatedEvent], error) {
	q := url.Values{}
	if s.Earliest != "" {
		q.Set("earliest", s.Earliest)
	}
	if s.Latest != "" {
		q.Set("latest", s.Latest)
	}
	if s.HasCorrelatedEvents != nil {
		q.Set("has_correlated_events", strconv.FormatBool(*s.HasCorrelatedEvents))
	}
	var out wire.Page[*wire.CorrelatedEvent]
	if err := c.Do(ctx, "GET", "/v1/correlated/"+esc(def), pageQuery(q, s.Limit, s.Cursor), nil, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

func correlatedPath(def, key string) string { return "/v1/correlated/" + esc(def) + "/" + esc(key) }
