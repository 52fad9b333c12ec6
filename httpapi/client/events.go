package client

import (
	"context"

	"github.com/heraldwf/herald/httpapi/wire"
)

// RaiseEvent sends event name to instance id on the positional lane. An
// instance that does not exist yet keeps it until it starts (or
// req.StartIfAbsent starts it).
func (c *Client) RaiseEvent(ctx context.Context, id, name string, req wire.SendEventRequest) (*wire.EventReceipt, error) {
	var out wire.EventReceipt
	if err := c.Do(ctx, "POST", "/v1/instances/"+esc(id)+"/events/"+esc(name), nil, req, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// Enqueue puts a message into queue of instance id.
func (c *Client) Enqueue(ctx context.Context, id, queue string, req wire.SendEventRequest) (*wire.EventReceipt, error) {
	var out wire.EventReceipt
	if err := c.Do(ctx, "POST", "/v1/instances/"+esc(id)+"/queues/"+esc(queue), nil, req, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// EventFate returns where an event stands (an event sent to an instance, or
// one published to the bus: lane "bus").
func (c *Client) EventFate(ctx context.Context, eventID string) (*wire.EventRecord, error) {
	var out wire.EventRecord
	if err := c.Do(ctx, "GET", "/v1/events/"+esc(eventID), nil, nil, &out); err != nil {
		return nil, err
	}
	return &out, nil
}
