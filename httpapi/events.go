package httpapi

import (
	"context"
	"encoding/json"

	"github.com/heraldwf/herald"
	"github.com/heraldwf/herald/httpapi/wire"
)

// eventRoutes: events sent to instances (the positional and queue lanes)
// and every event's fate.
func (a *API) eventRoutes() []*route {
	sendErrs := []string{"event_invalid", "payload_too_large", "schema_violation", "definition_invalid",
		"instance_not_running", "event_id_conflict"}
	return []*route{
		{
			method: "POST", path: "/v1/instances/{id}/events/{name}", op: "raiseEvent", tag: "events",
			summary: "Raise an event on the positional lane (the Nth event of a name meets the Nth wait for it); " +
				"an instance that does not exist yet keeps it until it starts",
			access: tenantScoped,
			params: []param{idParam, {name: "name", in: "path", required: true, doc: "event name"}},
			body:   wire.SendEventRequest{}, resp: wire.EventReceipt{}, status: 202, errs: sendErrs,
			handle: func(c *call) (any, error) {
				return sendEvent(c, c.r.PathValue("name"), c.client.RaiseEvent)
			},
		},
		{
			method: "POST", path: "/v1/instances/{id}/queues/{queue}", op: "enqueue", tag: "events",
			summary: "Put a message into one of an instance's queues (a durable FIFO mailbox; " +
				"a latest-value queue keeps only the newest)",
			access: tenantScoped,
			params: []param{idParam, {name: "queue", in: "path", required: true, doc: "queue name"}},
			body:   wire.SendEventRequest{}, resp: wire.EventReceipt{}, status: 202, errs: sendErrs,
			handle: func(c *call) (any, error) {
				return sendEvent(c, c.r.PathValue("queue"), c.client.Enqueue)
			},
		},
		{
			method: "GET", path: "/v1/events/{event_id}", op: "getEventFate", tag: "events",
			summary: "Get an event's fate: pending, buffered, delivered (wait number, execution) or dropped (reason); " +
				"for an event published to the bus, lane \"bus\" with its routes and executions",
			access: tenantScoped,
			params: []param{{name: "event_id", in: "path", required: true, doc: "event id"}},
			resp:   wire.EventRecord{}, errs: []string{"not_found"},
			handle: func(c *call) (any, error) {
				return c.client.EventFate(c.r.Context(), c.r.PathValue("event_id"))
			},
		},
	}
}

// sendFunc is Client.RaiseEvent or Client.Enqueue.
type sendFunc func(ctx context.Context, instanceID, name string, payload any, opts ...herald.RaiseOption) (*herald.EventReceipt, error)

func sendEvent(c *call, name string, send sendFunc) (any, error) {
	var req wire.SendEventRequest
	if err := c.bind(&req); err != nil {
		return nil, err
	}
	var opts []herald.RaiseOption
	if req.EventID != "" {
		opts = append(opts, herald.WithEventID(req.EventID))
	}
	if s := req.StartIfAbsent; s != nil {
		opts = append(opts, herald.StartIfAbsent(s.Workflow, jsonOrNull(s.Input)))
	}
	return send(c.r.Context(), c.r.PathValue("id"), name, jsonOrNull(req.Payload), opts...)
}

// jsonOrNull is a JSON value from a request: as it came, or null when it
// was omitted.
func jsonOrNull(raw []byte) any {
	if len(raw) == 0 {
		return nil
	}
	return json.RawMessage(raw)
}
