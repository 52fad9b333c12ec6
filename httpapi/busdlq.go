package httpapi

import (
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/heraldwf/herald"
	"github.com/heraldwf/herald/httpapi/wire"
)

// The bus's dead-letter queue: list, inspect, reprocess, delete. A bulk
// action needs a filter or an explicit {"all": true}: an empty selection
// never silently means every letter.

// errAlreadyReprocessed: a dead letter named by id was reprocessed before
// (a letter is reprocessed once). In the problem table (bus group).
var errAlreadyReprocessed = errors.New("the dead letter was already reprocessed")

func (a *API) deadLetterRoutes() []*route {
	idParam := []param{{name: "id", in: "path", typ: "integer", required: true, doc: "dead letter id"}}
	return []*route{
		{
			method: "GET", path: "/v1/dead-letters", op: "listDeadLetters", tag: "bus",
			summary: "List the tenant's dead letters, newest first (by default those waiting for a decision)",
			access:  tenantScoped,
			params: append([]param{
				{name: "subscription", in: "query", doc: "only this subscription's letters"},
				{name: "event_type", in: "query", doc: "only letters of events of this type"},
				{name: "error_kind", in: "query", doc: "timeout, runtime, resource, permanent, validation or permission"},
				{name: "ids", in: "query", doc: "only these letters: ids separated by commas (at most 1000)"},
				{name: "include_reprocessed", in: "query", typ: "boolean", doc: "list reprocessed letters too"},
			}, pageParams...),
			resp: wire.Page[*wire.DeadLetter]{}, errs: []string{"invalid_argument"},
			handle: listDeadLetters,
		},
		{
			method: "GET", path: "/v1/dead-letters/{id}", op: "getDeadLetter", tag: "bus",
			summary: "Get a dead letter: its error, stack trace, attempts, the event's type and data",
			access:  tenantScoped, params: idParam, resp: wire.DeadLetter{}, errs: []string{"invalid_argument", "not_found"},
			handle: func(c *call) (any, error) {
				id, err := pathID(c)
				if err != nil {
					return nil, err
				}
				return c.client.DeadLetterByID(c.r.Context(), id)
			},
		},
		{
			method: "POST", path: "/v1/dead-letters/{id}/reprocess", op: "reprocessDeadLetter", tag: "bus",
			summary: "Queue a dead letter's execution again (attempts from zero, the subscription's current target)",
			access:  tenantScoped, params: idParam, resp: wire.ReprocessResponse{},
			errs:   []string{"invalid_argument", "not_found", "already_reprocessed"},
			handle: reprocessDeadLetter,
		},
		{
			method: "POST", path: "/v1/dead-letters/reprocess", op: "reprocessDeadLetters", tag: "bus",
			summary: "Reprocess the dead letters a filter selects, or all with {\"all\": true}; says how many",
			access:  tenantScoped, body: wire.DeadLetterSelection{}, resp: wire.ReprocessResponse{},
			errs: []string{"invalid_argument"},
			handle: func(c *call) (any, error) {
				f, err := bindSelection(c)
				if err != nil {
					return nil, err
				}
				n, err := c.client.ReprocessDeadLetters(c.r.Context(), f)
				if err != nil {
					return nil, err
				}
				return wire.ReprocessResponse{Reprocessed: n}, nil
			},
		},
		{
			method: "DELETE", path: "/v1/dead-letters/{id}", op: "deleteDeadLetter", tag: "bus",
			summary: "Delete a dead letter (reprocessed or not); its execution stays dead-lettered",
			access:  tenantScoped, params: idParam, resp: wire.DeleteResponse{}, errs: []string{"invalid_argument", "not_found"},
			handle: func(c *call) (any, error) {
				id, err := pathID(c)
				if err != nil {
					return nil, err
				}
				n, err := c.client.DeleteDeadLetters(c.r.Context(), herald.DeadLetterFilter{IDs: []int64{id}, IncludeReprocessed: true})
				if err != nil {
					return nil, err
				}
				if n == 0 {
					return nil, deadLetterNotFound(id)
				}
				return wire.DeleteResponse{Deleted: n}, nil
			},
		},
		{
			method: "POST", path: "/v1/dead-letters/delete", op: "deleteDeadLetters", tag: "bus",
			summary: "Delete the dead letters a filter selects, or all with {\"all\": true}; says how many",
			access:  tenantScoped, body: wire.DeadLetterSelection{}, resp: wire.DeleteResponse{},
			errs: []string{"invalid_argument"},
			handle: func(c *call) (any, error) {
				f, err := bindSelection(c)
				if err != nil {
					return nil, err
				}
				n, err := c.client.DeleteDeadLetters(c.r.Context(), f)
				if err != nil {
					return nil, err
				}
				return wire.DeleteResponse{Deleted: n}, nil
			},
		},
	}
}

func listDeadLetters(c *call) (any, error) {
	limit, cursor, err := c.page()
	if err != nil {
		return nil, err
	}
	q := c.r.URL.Query()
	f := herald.DeadLetterFilter{Subscription: q.Get("subscription"), EventType: q.Get("event_type"), Limit: limit}
	if f.ErrorKind, err = errorKind(q.Get("error_kind")); err != nil {
		return nil, err
	}
	if s := q.Get("include_reprocessed"); s != "" {
		if f.IncludeReprocessed, err = strconv.ParseBool(s); err != nil {
			return nil, badRequest("include_reprocessed %.64q must be true or false", s)
		}
	}
	if s := q.Get("ids"); s != "" {
		for part := range strings.SplitSeq(s, ",") {
			if len(f.IDs) == MaxPageLimit {
				return nil, badRequest("ids names more than %d letters", MaxPageLimit)
			}
			id, err := queryID(part, "ids element")
			if err != nil {
				return nil, err
			}
			f.IDs = append(f.IDs, id)
		}
	}
	if f.Cursor, err = queryCursor(cursor); err != nil {
		return nil, err
	}
	page, err := c.client.DeadLetters(c.r.Context(), f)
	if err != nil {
		return nil, err
	}
	return wire.Page[*wire.DeadLetter]{Items: nonNil(page.Letters), NextCursor: intCursor(page.NextCursor)}, nil
}

func reprocessDeadLetter(c *call) (any, error) {
	id, err := pathID(c)
	if err != nil {
		return nil, err
	}
	ctx := c.r.Context()
	d, err := c.client.DeadLetterByID(ctx, id)
	if err != nil {
		return nil, err
	}
	if !d.ReprocessedAt.IsZero() {
		return nil, errAlreadyReprocessed
	}
	n, err := c.client.ReprocessDeadLetters(ctx, herald.DeadLetterFilter{IDs: []int64{id}})
	if err != nil {
		return nil, err
	}
	if n == 0 {
		// Reprocessed (or deleted) by someone else in between.
		if _, err := c.client.DeadLetterByID(ctx, id); err != nil {
			return nil, err
		}
		return nil, errAlreadyReprocessed
	}
	return wire.ReprocessResponse{Reprocessed: n}, nil
}

// bindSelection reads a bulk action's selection: at least one filter, or
// all (and then no filter).
func bindSelection(c *call) (herald.DeadLetterFilter, error) {
	var sel wire.DeadLetterSelection
	if err := c.bind(&sel); err != nil {
		return herald.DeadLetterFilter{}, err
	}
	kind, err := errorKind(sel.ErrorKind)
	if err != nil {
		return herald.DeadLetterFilter{}, err
	}
	filtered := sel.Subscription != "" || sel.EventType != "" || sel.ErrorKind != "" || len(sel.IDs) > 0
	switch {
	case !filtered && !sel.All:
		return herald.DeadLetterFilter{}, badRequest(`name a filter (subscription, event_type, error_kind, ids), or {"all": true} for every letter`)
	case filtered && sel.All:
		return herald.DeadLetterFilter{}, badRequest(`"all": true acts on every letter; it cannot come with a filter`)
	}
	for _, id := range sel.IDs {
		if id <= 0 {
			return herald.DeadLetterFilter{}, badRequest("ids holds %d; letter ids are positive", id)
		}
	}
	return herald.DeadLetterFilter{Subscription: sel.Subscription, EventType: sel.EventType, ErrorKind: kind,
		IDs: sel.IDs, IncludeReprocessed: sel.IncludeReprocessed}, nil
}

// errorKind checks an error kind filter ("" for none).
func errorKind(s string) (herald.ErrorKind, error) {
	switch k := herald.ErrorKind(s); k {
	case "", herald.ErrorTimeout, herald.ErrorRuntime, herald.ErrorResource, herald.ErrorPermanent,
		herald.ErrorValidation, herald.ErrorPermission:
		return k, nil
	}
	return "", badRequest("error_kind %.64q is not one of timeout, runtime, resource, permanent, validation, permission", s)
}

// pathID reads the {id} of a dead letter.
func pathID(c *call) (int64, error) {
	s := c.r.PathValue("id")
	id, err := strconv.ParseInt(s, 10, 64)
	if err != nil || id <= 0 {
		return 0, badRequest("dead letter id %.64q must be a positive integer", s)
	}
	return id, nil
}

// deadLetterNotFound is the not-found error of a letter.
func deadLetterNotFound(id int64) error {
	return fmt.Errorf("dead letter %d: %w", id, herald.ErrNotFound)
}
