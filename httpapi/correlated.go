package httpapi

import (
	"strconv"

	"github.com/heraldwf/herald"
	"github.com/heraldwf/herald/httpapi/wire"
)

// correlatedRoutes: correlated events, put under (event definition, key)
// for every instance waiting on the key.
func (a *API) correlatedRoutes() []*route {
	defParam := param{name: "def", in: "path", required: true, doc: "event definition name (with a correlation config)"}
	keyParam := param{name: "key", in: "path", required: true, doc: "correlation key (path-escaped)"}
	return []*route{
		{
			method: "PUT", path: "/v1/correlated/{def}/{key}", op: "putCorrelated", tag: "correlated",
			summary: "Put a correlated event (or update its payload) and deliver it to the instances waiting on the key",
			access:  tenantScoped, params: []param{defParam, keyParam},
			body: wire.PutCorrelatedRequest{}, resp: wire.CorrelatedEvent{},
			errs: []string{"event_invalid", "payload_too_large", "schema_violation", "definition_invalid"},
			handle: func(c *call) (any, error) {
				var req wire.PutCorrelatedRequest
				if err := c.bind(&req); err != nil {
					return nil, err
				}
				return c.client.PutCorrelatedEvent(c.r.Context(), c.r.PathValue("def"), c.r.PathValue("key"), jsonOrNull(req.Payload))
			},
		},
		{
			method: "GET", path: "/v1/correlated/{def}/{key}", op: "getCorrelated", tag: "correlated",
			summary: "Get a correlated event with the events it produced",
			access:  tenantScoped, params: []param{defParam, keyParam},
			resp: wire.CorrelatedEvent{}, errs: []string{"not_found"},
			handle: func(c *call) (any, error) {
				return c.client.GetCorrelatedEvent(c.r.Context(), c.r.PathValue("def"), c.r.PathValue("key"))
			},
		},
		{
			method: "DELETE", path: "/v1/correlated/{def}/{key}", op: "deleteCorrelated", tag: "correlated",
			summary: "Delete a correlated event (the events it produced keep their fates)",
			access:  tenantScoped, params: []param{defParam, keyParam},
			errs: []string{"not_found"},
			handle: func(c *call) (any, error) {
				return nil, c.client.DeleteCorrelatedEvent(c.r.Context(), c.r.PathValue("def"), c.r.PathValue("key"))
			},
		},
		{
			method: "GET", path: "/v1/correlated/{def}", op: "searchCorrelated", tag: "correlated",
			summary: "List a definition's correlated events, oldest first",
			access:  tenantScoped,
			params: append([]param{defParam,
				{name: "earliest", in: "query", doc: "RFC 3339 time: created at or after"},
				{name: "latest", in: "query", doc: "RFC 3339 time: created at or before"},
				{name: "has_correlated_events", in: "query", typ: "boolean",
					doc: "true: only those that produced an event; false: only orphans"},
			}, pageParams...),
			resp: wire.Page[*wire.CorrelatedEvent]{}, errs: []string{"invalid_argument"},
			handle: searchCorrelated,
		},
	}
}

func searchCorrelated(c *call) (any, error) {
	limit, cursor, err := c.page()
	if err != nil {
		return nil, err
	}
	q := c.r.URL.Query()
	s := herald.CorrelatedSearch{Limit: limit, Bookmark: cursor}
	if s.Earliest, err = queryTime(q.Get("earliest"), "earliest"); err != nil {
		return nil, err
	}
	if s.Latest, err = queryTime(q.Get("latest"), "latest"); err != nil {
		return nil, err
	}
	if v := q.Get("has_correlated_events"); v != "" {
		b, err := strconv.ParseBool(v)
		if err != nil {
			return nil, badRequest("has_correlated_events %.64q must be true or false", v)
		}
		s.HasCorrelatedEvents = &b
	}
	evs, next, err := c.client.SearchCorrelatedEvents(c.r.Context(), c.r.PathValue("def"), s)
	if err != nil {
		return nil, err
	}
	return wire.Page[*wire.CorrelatedEvent]{Items: nonNil(evs), NextCursor: next}, nil
}
