package client

import (
	"context"
	"net/url"
	"strconv"
	"strings"

	"github.com/heraldwf/herald/httpapi/wire"
)

// The event bus (docs/bus.md).

// Publish publishes an event to the tenant's bus and returns its receipt
// (Duplicate when the id was published before).
func (c *Client) Publish(ctx context.Context, req wire.PublishRequest) (*wire.PublishReceipt, error) {
	var out wire.PublishReceipt
	if err := c.Do(ctx, "POST", "/v1/publish", nil, req, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// PublishedEvent returns a published event with its fate.
func (c *Client) PublishedEvent(ctx context.Context, eventID string) (*wire.PublishedEvent, error) {
	var out wire.PublishedEvent
	if err := c.Do(ctx, "GET", "/v1/published/"+esc(eventID), nil, nil, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// AttemptFilter selects attempt records: at least one of EventID,
// Subscription and Execution.
type AttemptFilter struct {
	EventID, Subscription string
	Execution             int64
	Limit                 int
	Cursor                string
}

// Attempts returns one page of attempt records (GET /v1/executions),
// oldest first.
func (c *Client) Attempts(ctx context.Context, f AttemptFilter) (*wire.Page[*wire.Attempt], error) {
	q := url.Values{}
	if f.EventID != "" {
		q.Set("event_id", f.EventID)
	}
	if f.Subscription != "" {
		q.Set("subscription", f.Subscription)
	}
	if f.Execution != 0 {
		q.Set("execution", strconv.FormatInt(f.Execution, 10))
	}
	var out wire.Page[*wire.Attempt]
	if err := c.Do(ctx, "GET", "/v1/executions", pageQuery(q, f.Limit, f.Cursor), nil, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// PutSubscription creates or replaces subscription id.
func (c *Client) PutSubscription(ctx context.Context, id string, req wire.PutSubscriptionRequest) (*wire.Subscription, error) {
	return c.subscription(ctx, "PUT", "/v1/subscriptions/"+esc(id), req)
}

// Subscription returns a subscription.
func (c *Client) Subscription(ctx context.Context, id string) (*wire.Subscription, error) {
	return c.subscription(ctx, "GET", "/v1/subscriptions/"+esc(id), nil)
}

// SetSubscriptionEnabled enables or disables a subscription.
func (c *Client) SetSubscriptionEnabled(ctx context.Context, id string, enabled bool) (*wire.Subscription, error) {
	action := "/disable"
	if enabled {
		action = "/enable"
	}
	return c.subscription(ctx, "POST", "/v1/subscriptions/"+esc(id)+action, nil)
}

func (c *Client) subscription(ctx context.Context, method, path string, body any) (*wire.Subscription, error) {
	var out wire.Subscription
	if err := c.Do(ctx, method, path, nil, body, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// ListSubscriptions returns one page of subscriptions, ordered by id.
func (c *Client) ListSubscriptions(ctx context.Context, limit int, cursor string) (*wire.Page[*wire.Subscription], error) {
	var out wire.Page[*wire.Subscription]
	if err := c.Do(ctx, "GET", "/v1/subscriptions", pageQuery(nil, limit, cursor), nil, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// DeleteSubscription deletes a subscription.
func (c *Client) DeleteSubscription(ctx context.Context, id string) error {
	return c.Do(ctx, "DELETE", "/v1/subscriptions/"+esc(id), nil, nil, nil)
}

// PutScript saves a new version of script id. A syntax error is an *Error
// with code "script_syntax" whose Reasons give "line L, column C: message".
func (c *Client) PutScript(ctx context.Context, id, source string) (*wire.Script, error) {
	var out wire.Script
	if err := c.Do(ctx, "PUT", "/v1/scripts/"+esc(id), nil, wire.PutScriptRequest{Source: source}, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// Script returns a version of a script (0: the latest).
func (c *Client) Script(ctx context.Context, id string, version int) (*wire.Script, error) {
	var q url.Values
	if version != 0 {
		q = url.Values{"version": {strconv.Itoa(version)}}
	}
	var out wire.Script
	if err := c.Do(ctx, "GET", "/v1/scripts/"+esc(id), q, nil, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// ListScripts returns one page of scripts (latest versions, without
// source), ordered by id.
func (c *Client) ListScripts(ctx context.Context, limit int, cursor string) (*wire.Page[*wire.ScriptInfo], error) {
	var out wire.Page[*wire.ScriptInfo]
	if err := c.Do(ctx, "GET", "/v1/scripts", pageQuery(nil, limit, cursor), nil, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// DeleteScript deletes every version of a script.
func (c *Client) DeleteScript(ctx context.Context, id string) error {
	return c.Do(ctx, "DELETE", "/v1/scripts/"+esc(id), nil, nil, nil)
}

// ValidateScript checks a script's syntax; nothing is stored.
func (c *Client) ValidateScript(ctx context.Context, source string) (*wire.ValidateScriptResponse, error) {
	var out wire.ValidateScriptResponse
	if err := c.Do(ctx, "POST", "/v1/scripts/validate", nil, wire.ValidateScriptRequest{Source: source}, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// TestScript dry-runs a script on a sample event in the bus's sandbox;
// nothing is stored.
func (c *Client) TestScript(ctx context.Context, req wire.TestScriptRequest) (*wire.TestScriptResponse, error) {
	var out wire.TestScriptResponse
	if err := c.Do(ctx, "POST", "/v1/scripts/test", nil, req, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// DeadLetterFilter narrows DeadLetters; zero fields do not filter.
type DeadLetterFilter struct {
	Subscription, EventType, ErrorKind string
	IDs                                []int64
	IncludeReprocessed                 bool
	Limit                              int
	Cursor                             string
}

// DeadLetters returns one page of dead letters, newest first.
func (c *Client) DeadLetters(ctx context.Context, f DeadLetterFilter) (*wire.Page[*wire.DeadLetter], error) {
	q := url.Values{}
	for k, v := range map[string]string{"subscription": f.Subscription, "event_type": f.EventType, "error_kind": f.ErrorKind} {
		if v != "" {
			q.Set(k, v)
		}
	}
	if len(f.IDs) > 0 {
		ids := make([]string, len(f.IDs))
		for i, id := range f.IDs {
			ids[i] = strconv.FormatInt(id, 10)
		}
		q.Set("ids", strings.Join(ids, ","))
	}
	if f.IncludeReprocessed {
		q.Set("include_reprocessed", "true")
	}
	var out wire.Page[*wire.DeadLetter]
	if err := c.Do(ctx, "GET", "/v1/dead-letters", pageQuery(q, f.Limit, f.Cursor), nil, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// DeadLetter returns one dead letter.
func (c *Client) DeadLetter(ctx context.Context, id int64) (*wire.DeadLetter, error) {
	var out wire.DeadLetter
	if err := c.Do(ctx, "GET", "/v1/dead-letters/"+strconv.FormatInt(id, 10), nil, nil, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// ReprocessDeadLetter queues a dead letter's execution again ("already_reprocessed"
// if it was).
func (c *Client) ReprocessDeadLetter(ctx context.Context, id int64) error {
	return c.Do(ctx, "POST", "/v1/dead-letters/"+strconv.FormatInt(id, 10)+"/reprocess", nil, nil, nil)
}

// ReprocessDeadLetters reprocesses the letters sel selects and returns
// how many. An empty selection is refused: set a filter, or All.
func (c *Client) ReprocessDeadLetters(ctx context.Context, sel wire.DeadLetterSelection) (int, error) {
	var out wire.ReprocessResponse
	err := c.Do(ctx, "POST", "/v1/dead-letters/reprocess", nil, sel, &out)
	return out.Reprocessed, err
}

// DeleteDeadLetter deletes one dead letter.
func (c *Client) DeleteDeadLetter(ctx context.Context, id int64) error {
	return c.Do(ctx, "DELETE", "/v1/dead-letters/"+strconv.FormatInt(id, 10), nil, nil, nil)
}

// DeleteDeadLetters deletes the letters sel selects and returns how many.
// An empty selection is refused: set a filter, or All.
func (c *Client) DeleteDeadLetters(ctx context.Context, sel wire.DeadLetterSelection) (int, error) {
	var out wire.DeleteResponse
	err := c.Do(ctx, "POST", "/v1/dead-letters/delete", nil, sel, &out)
	return out.Deleted, err
}
