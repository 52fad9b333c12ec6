package httpapi

import (
	"cmp"
	"slices"
	"strconv"

	"github.com/heraldwf/herald"
	"github.com/heraldwf/herald/httpapi/wire"
)

// The event bus (docs/bus.md): publishing, published events, subscriptions
// and attempt records here; scripts in busscripts.go, dead letters in
// busdlq.go. Every route acts through the tenant's client.

// busRoutes are the event bus's routes.
func (a *API) busRoutes() []*route {
	var rs []*route
	rs = append(rs, a.publishRoutes()...)
	rs = append(rs, a.subscriptionRoutes()...)
	rs = append(rs, a.scriptRoutes()...)
	rs = append(rs, a.deadLetterRoutes()...)
	return rs
}

func (a *API) publishRoutes() []*route {
	return []*route{
		{
			method: "POST", path: "/v1/publish", op: "publish", tag: "bus",
			summary: "Publish an event to the tenant's bus; routing and execution happen behind the receipt",
			access:  tenantScoped, body: wire.PublishRequest{}, resp: wire.PublishReceipt{}, status: 202,
			errs:   []string{"event_invalid", "event_id_conflict", "back_pressure"},
			handle: publish,
		},
		{
			method: "GET", path: "/v1/published/{event_id}", op: "getPublishedEvent", tag: "bus",
			summary: "Get a published event with its fate: routes, executions, results, dead letters",
			access:  tenantScoped, params: []param{{name: "event_id", in: "path", required: true, doc: "the published event's id"}},
			resp: wire.PublishedEvent{}, errs: []string{"not_found"},
			handle: func(c *call) (any, error) {
				return c.client.PublishedEvent(c.r.Context(), c.r.PathValue("event_id"))
			},
		},
		{
			method: "GET", path: "/v1/executions", op: "listExecutionAttempts", tag: "bus",
			summary: "List the attempt records of executions, oldest first: name an event, a subscription or an execution",
			access:  tenantScoped,
			params: append([]param{
				{name: "event_id", in: "query", doc: "attempts of this published event's executions"},
				{name: "subscription", in: "query", doc: "attempts of this subscription's executions"},
				{name: "execution", in: "query", typ: "integer", doc: "attempts of this execution"},
			}, pageParams...),
			resp: wire.Page[*wire.Attempt]{}, errs: []string{"invalid_argument"},
			handle: listAttempts,
		},
	}
}

func publish(c *call) (any, error) {
	var req wire.PublishRequest
	if err := c.bind(&req); err != nil {
		return nil, err
	}
	var data any
	if len(req.Data) > 0 {
		data = req.Data
	}
	var opts []herald.RaiseOption
	if req.EventID != "" {
		opts = append(opts, herald.WithEventID(req.EventID))
	}
	return c.client.Publish(c.r.Context(), req.Type, data, opts...)
}

func listAttempts(c *call) (any, error) {
	limit, cursor, err := c.page()
	if err != nil {
		return nil, err
	}
	q := c.r.URL.Query()
	f := herald.AttemptFilter{EventID: q.Get("event_id"), Subscription: q.Get("subscription"), Limit: limit}
	if f.Execution, err = queryID(q.Get("execution"), "execution"); err != nil {
		return nil, err
	}
	if f.Cursor, err = queryCursor(cursor); err != nil {
		return nil, err
	}
	page, err := c.client.Attempts(c.r.Context(), f)
	if err != nil {
		return nil, err
	}
	return wire.Page[*wire.Attempt]{Items: nonNil(page.Attempts), NextCursor: intCursor(page.NextCursor)}, nil
}

func (a *API) subscriptionRoutes() []*route {
	idParam := []param{{name: "id", in: "path", required: true, doc: "subscription id"}}
	setEnabled := func(enabled bool) func(c *call) (any, error) {
		return func(c *call) (any, error) {
			return c.client.SetSubscriptionEnabled(c.r.Context(), c.r.PathValue("id"), enabled)
		}
	}
	return []*route{
		{
			method: "PUT", path: "/v1/subscriptions/{id}", op: "putSubscription", tag: "bus",
			summary: "Create a subscription or replace every field of it (its version goes up); refusals list every reason",
			access:  tenantScoped, params: idParam, body: wire.PutSubscriptionRequest{}, resp: wire.Subscription{},
			errs: []string{"invalid_argument"}, handle: putSubscription,
		},
		{
			method: "GET", path: "/v1/subscriptions/{id}", op: "getSubscription", tag: "bus",
			summary: "Get a subscription", access: tenantScoped, params: idParam,
			resp: wire.Subscription{}, errs: []string{"not_found"},
			handle: func(c *call) (any, error) {
				return c.client.Subscription(c.r.Context(), c.r.PathValue("id"))
			},
		},
		{
			method: "GET", path: "/v1/subscriptions", op: "listSubscriptions", tag: "bus",
			summary: "List the tenant's subscriptions, ordered by id", access: tenantScoped, params: pageParams,
			resp: wire.Page[*wire.Subscription]{}, errs: []string{"invalid_argument"},
			handle: func(c *call) (any, error) {
				limit, cursor, err := c.page()
				if err != nil {
					return nil, err
				}
				subs, err := c.client.Subscriptions(c.r.Context())
				if err != nil {
					return nil, err
				}
				items, next := pageByID(subs, func(s *wire.Subscription) string { return s.ID }, limit, cursor)
				return wire.Page[*wire.Subscription]{Items: items, NextCursor: next}, nil
			},
		},
		{
			method: "POST", path: "/v1/subscriptions/{id}/enable", op: "enableSubscription", tag: "bus",
			summary: "Enable a subscription: it matches events published from now on", access: tenantScoped,
			params: idParam, resp: wire.Subscription{}, errs: []string{"not_found"}, handle: setEnabled(true),
		},
		{
			method: "POST", path: "/v1/subscriptions/{id}/disable", op: "disableSubscription", tag: "bus",
			summary: "Disable a subscription without deleting it: it matches no new event (queued executions still run)",
			access:  tenantScoped, params: idParam, resp: wire.Subscription{}, errs: []string{"not_found"},
			handle: setEnabled(false),
		},
		{
			method: "DELETE", path: "/v1/subscriptions/{id}", op: "deleteSubscription", tag: "bus",
			summary: "Delete a subscription (its executions, attempt records and dead letters stay)",
			access:  tenantScoped, params: idParam, errs: []string{"not_found"},
			handle: func(c *call) (any, error) {
				return nil, c.client.DeleteSubscription(c.r.Context(), c.r.PathValue("id"))
			},
		},
	}
}

func putSubscription(c *call) (any, error) {
	var req wire.PutSubscriptionRequest
	if err := c.bind(&req); err != nil {
		return nil, err
	}
	s := herald.Subscription{ID: c.r.PathValue("id"), Pattern: req.Pattern, Filter: req.Filter, Target: req.Target,
		Enabled: req.Enabled == nil || *req.Enabled, MaxRetries: req.MaxRetries, Timeout: req.Timeout}
	return c.client.PutSubscription(c.r.Context(), s)
}

// pageByID pages through a list the engine returns whole: items ordered
// by id, the cursor the last id of the previous page.
func pageByID[T any](all []T, id func(T) string, limit int, cursor string) ([]T, string) {
	slices.SortFunc(all, func(a, b T) int { return cmp.Compare(id(a), id(b)) })
	start := 0
	if cursor != "" {
		start, _ = slices.BinarySearchFunc(all, cursor, func(x T, c string) int {
			if id(x) <= c {
				return -1
			}
			return 1
		})
	}
	end := min(start+limit, len(all))
	items := all[start:end]
	next := ""
	if end < len(all) && len(items) > 0 {
		next = id(items[len(items)-1])
	}
	return nonNil(items), next
}

// queryID parses an optional positive integer id query parameter (0 when
// absent).
func queryID(s, name string) (int64, error) {
	if s == "" {
		return 0, nil
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n <= 0 {
		return 0, badRequest("%s %.64q must be a positive integer", name, s)
	}
	return n, nil
}

// queryCursor parses an integer cursor (a next_cursor of the engine's
// integer-keyed lists).
func queryCursor(s string) (int64, error) {
	if s == "" {
		return 0, nil
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n <= 0 {
		return 0, badRequest("cursor %.64q is not a next_cursor of this list", s)
	}
	return n, nil
}

// intCursor is an integer next cursor as the page's string ("" for none).
func intCursor(n int64) string {
	if n == 0 {
		return ""
	}
	return strconv.FormatInt(n, 10)
}
