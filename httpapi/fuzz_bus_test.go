package httpapi_test

import (
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/heraldwf/herald"
	"github.com/heraldwf/herald/httpapi"
)

// Fuzz targets of the bus routes' request decoders: whatever the body (or
// path and query), the answer is a success or a 4xx problem document with
// a code, never a panic or a 500.

// fuzzBusServer is one server for a whole fuzz run, with a short bus
// timeout so that fuzzed dry runs end quickly, and a script "s" for
// subscriptions and dry runs to name.
func fuzzBusServer(f *testing.F) *server {
	f.Helper()
	s := fuzzServer(f, func(cfg *herald.Config, o *httpapi.Options) {
		cfg.Bus.Timeout, cfg.Bus.ScriptMemory = 200*time.Millisecond, 32<<20
		o.MaxBodyBytes = 64 << 10
	})
	s.fuzz(f, s.admin, "PUT", &url.URL{Path: "/v1/scripts/s"}, []byte(`{"source":"return ctx.event.data"}`))
	return s
}

// busBodyRoutes are the bus routes that read a body.
var busBodyRoutes = []struct{ method, path string }{
	{"POST", "/v1/publish"},
	{"PUT", "/v1/subscriptions/f"},
	{"PUT", "/v1/scripts/f"},
	{"POST", "/v1/scripts/validate"},
	{"POST", "/v1/scripts/test"},
	{"POST", "/v1/dead-letters/reprocess"},
	{"POST", "/v1/dead-letters/delete"},
}

func FuzzBusBodies(f *testing.F) {
	s := fuzzBusServer(f)
	seeds := []string{
		`{"type":"a.b","data":{"x":[1,2,{"y":null}]},"event_id":"e1"}`,
		`{"type":"a.*"}`,
		`{"pattern":"a.>","target":{"kind":"script","script":"s"},"filter":{"logic":"AND","conditions":[{"field":"data.x","op":"in","value":[1,2]}]},"max_retries":0,"timeout":"1s"}`,
		`{"pattern":"a.b","target":{"kind":"workflow","workflow":"w","instance_id":"{data.id"}}`,
		`{"source":"return 1"}`,
		`{"source":"return (;"}`,
		`{"source":"log(ctx.event.type); return ctx.event.data","event":{"type":"a.b","data":{"n":1}},"timeout":"100ms"}`,
		`{"script":"s","version":1,"event":{"type":"a.b","id":"x","timestamp":"2024-01-01T00:00:00Z"}}`,
		`{"all":true}`, `{}`, `{"ids":[1,2,3]}`, `{"error_kind":"runtime","include_reprocessed":true}`,
		`[]`, `null`, `"x"`, `{"type":"\u0000"}`, "{\"type\":\"\xff\"}", `{"timeout":"-1s"}`,
		strings.Repeat(`{"a":`, 500) + `1` + strings.Repeat(`}`, 500),
		`{"data":` + strings.Repeat(`[`, 20000) + strings.Repeat(`]`, 20000) + `}`,
	}
	for i, s := range seeds {
		for r := range busBodyRoutes {
			f.Add(uint8(i+r), []byte(s))
		}
	}
	f.Fuzz(func(t *testing.T, which uint8, body []byte) {
		r := busBodyRoutes[int(which)%len(busBodyRoutes)]
		s.fuzz(t, s.admin, r.method, &url.URL{Path: r.path}, body)
	})
}

// FuzzBusPaths fuzzes the ids in paths and the query parameters of the
// bus's read routes.
func FuzzBusPaths(f *testing.F) {
	s := fuzzBusServer(f)
	for _, s := range []string{"x", "", "1", "-1", "99999999999999999999", "a\x00b", "\xff\xfe", strings.Repeat("z", 5000),
		"%2F..%2F", "1,2,x", "true", "1e3"} {
		f.Add(uint8(0), s)
		f.Add(uint8(7), s)
	}
	f.Fuzz(func(t *testing.T, which uint8, v string) {
		q := func(kv ...string) url.Values {
			out := url.Values{}
			for i := 0; i+1 < len(kv); i += 2 {
				out.Set(kv[i], kv[i+1])
			}
			return out
		}
		targets := []struct {
			method, path string
			query        url.Values
		}{
			{"GET", "/v1/published/" + v, nil},
			{"GET", "/v1/subscriptions/" + v, nil},
			{"POST", "/v1/subscriptions/" + v + "/enable", nil},
			{"DELETE", "/v1/subscriptions/" + v, nil},
			{"GET", "/v1/scripts/" + v, q("version", v)},
			{"DELETE", "/v1/scripts/" + v, nil},
			{"GET", "/v1/dead-letters/" + v, nil},
			{"POST", "/v1/dead-letters/" + v + "/reprocess", nil},
			{"DELETE", "/v1/dead-letters/" + v, nil},
			{"GET", "/v1/executions", q("event_id", v, "execution", v)},
			{"GET", "/v1/executions", q("subscription", "s", "cursor", v, "limit", v)},
			{"GET", "/v1/dead-letters", q("ids", v, "error_kind", v)},
			{"GET", "/v1/dead-letters", q("include_reprocessed", v, "cursor", v, "subscription", v)},
			{"GET", "/v1/subscriptions", q("limit", "2", "cursor", v)},
			{"GET", "/v1/scripts", q("cursor", v)},
		}
		tg := targets[int(which)%len(targets)]
		s.fuzz(t, s.admin, tg.method, &url.URL{Path: tg.path, RawQuery: tg.query.Encode()}, nil)
	})
}
