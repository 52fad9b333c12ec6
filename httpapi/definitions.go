package httpapi

import (
	"encoding/base64"
	"sort"
	"unicode/utf8"

	"github.com/heraldwf/herald/httpapi/wire"
)

// definitionRoutes: event definitions (schema, buffering, retention,
// payload cap, correlated-lane config of an event name).
func (a *API) definitionRoutes() []*route {
	nameParam := param{name: "name", in: "path", required: true, doc: "event name (also a queue name, a correlated definition, a bus event type)"}
	return []*route{
		{
			method: "PUT", path: "/v1/definitions/{name}", op: "putDefinition", tag: "definitions",
			summary: "Create or replace an event definition; it applies to events sent from now on",
			access:  tenantScoped, params: []param{nameParam},
			body: wire.PutDefinitionRequest{}, resp: wire.EventDefinition{},
			errs: []string{"definition_invalid"},
			handle: func(c *call) (any, error) {
				var req wire.PutDefinitionRequest
				if err := c.bind(&req); err != nil {
					return nil, err
				}
				d, err := c.client.PutEventDefinition(c.r.Context(), req.Definition(c.r.PathValue("name")))
				if err != nil {
					return nil, err
				}
				return wire.DefinitionOf(d), nil
			},
		},
		{
			method: "GET", path: "/v1/definitions/{name}", op: "getDefinition", tag: "definitions",
			summary: "Get an event definition",
			access:  tenantScoped, params: []param{nameParam},
			resp: wire.EventDefinition{}, errs: []string{"not_found"},
			handle: func(c *call) (any, error) {
				d, err := c.client.GetEventDefinition(c.r.Context(), c.r.PathValue("name"))
				if err != nil {
					return nil, err
				}
				return wire.DefinitionOf(d), nil
			},
		},
		{
			method: "GET", path: "/v1/definitions", op: "listDefinitions", tag: "definitions",
			summary: "List event definitions by name",
			access:  tenantScoped, params: pageParams,
			resp: wire.Page[*wire.EventDefinition]{}, errs: []string{"invalid_argument"},
			handle: listDefinitions,
		},
		{
			method: "DELETE", path: "/v1/definitions/{name}", op: "deleteDefinition", tag: "definitions",
			summary: "Delete an event definition (events already stored keep their fates)",
			access:  tenantScoped, params: []param{nameParam},
			errs: []string{"not_found"},
			handle: func(c *call) (any, error) {
				return nil, c.client.DeleteEventDefinition(c.r.Context(), c.r.PathValue("name"))
			},
		},
	}
}

// listDefinitions pages through the tenant's definitions by name. The
// engine lists them all (a tenant has few); the cursor is the last name
// of the previous page, base64url-encoded.
func listDefinitions(c *call) (any, error) {
	limit, cursor, err := c.page()
	if err != nil {
		return nil, err
	}
	after := ""
	if cursor != "" {
		b, err := base64.RawURLEncoding.DecodeString(cursor)
		if err != nil || len(b) == 0 || !utf8.Valid(b) {
			return nil, badRequest("cursor %.64q is not a next_cursor this listing returned", cursor)
		}
		after = string(b)
	}
	ds, err := c.client.ListEventDefinitions(c.r.Context())
	if err != nil {
		return nil, err
	}
	sort.Slice(ds, func(i, j int) bool { return ds[i].Name < ds[j].Name })
	i := sort.Search(len(ds), func(i int) bool { return ds[i].Name > after })
	if cursor == "" {
		i = 0
	}
	page := wire.Page[*wire.EventDefinition]{Items: []*wire.EventDefinition{}}
	for ; i < len(ds) && len(page.Items) < limit; i++ {
		page.Items = append(page.Items, wire.DefinitionOf(ds[i]))
	}
	if i < len(ds) {
		page.NextCursor = base64.RawURLEncoding.EncodeToString([]byte(ds[i-1].Name))
	}
	return page, nil
}
