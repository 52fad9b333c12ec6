package httpapi

import (
	"encoding/json"
	"errors"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/heraldwf/herald"
	"github.com/heraldwf/herald/httpapi/wire"
)

// queryRoutes: queries answered from a workflow's replayed state.
func (a *API) queryRoutes() []*route {
	return []*route{
		{
			method: "POST", path: "/v1/instances/{id}/queries/{name}", op: "queryInstance", tag: "instances",
			summary: "Ask an instance's workflow a query (the body, any JSON value, is its arguments; may be omitted); " +
				"answered from the state replayed from history, writing nothing",
			access: tenantScoped,
			params: []param{idParam, {name: "name", in: "path", required: true, doc: "query name"}},
			body:   json.RawMessage{}, resp: wire.QueryResponse{},
			errs: []string{"not_found", "invalid_argument", "query_not_found", "query_args_invalid", "query_failed",
				"query_not_replayable", "query_unavailable"},
			handle: queryInstance,
		},
	}
}

func queryInstance(c *call) (any, error) {
	var args json.RawMessage
	if err := c.bindOptional(&args); err != nil {
		return nil, err
	}
	var arg any
	if len(args) > 0 {
		arg = args
	}
	var out json.RawMessage
	if err := c.client.Query(c.r.Context(), c.r.PathValue("id"), c.r.PathValue("name"), arg, &out); err != nil {
		return nil, err
	}
	return wire.QueryResponse{Result: out}, nil
}

// queryKind matches a *herald.QueryError of one kind.
type queryKind herald.QueryErrorKind

func (k queryKind) Error() string { return "herald: query failed: " + string(k) }

func (k queryKind) matches(err error) bool {
	var qe *herald.QueryError
	return errors.As(err, &qe) && qe.Kind == herald.QueryErrorKind(k)
}

// attrFilter reads the attr.KEY=VALUE parameters of GET /v1/instances. A
// value in double quotes is a JSON string; otherwise true and false are
// bools, a decimal integer is an int, an RFC 3339 time is a time, and
// anything else is a string.
func attrFilter(q url.Values) (map[string]any, error) {
	var out map[string]any
	for name, vs := range q {
		key, ok := strings.CutPrefix(name, "attr.")
		if !ok {
			continue
		}
		if len(vs) != 1 {
			return nil, badRequest("%.80s is given %d times", name, len(vs))
		}
		if out == nil {
			out = map[string]any{}
		}
		out[key] = attrValue(vs[0])
	}
	return out, nil
}

func attrValue(s string) any {
	if strings.HasPrefix(s, `"`) {
		var str string
		if json.Unmarshal([]byte(s), &str) == nil {
			return str
		}
		return s
	}
	switch s {
	case "true":
		return true
	case "false":
		return false
	}
	if n, err := strconv.ParseInt(s, 10, 64); err == nil {
		return n
	}
	if t, err := time.Parse(time.RFC3339Nano, s); err == nil {
		return t
	}
	return s
}
