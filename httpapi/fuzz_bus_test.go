package httpapi_test

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	pathpkg "path"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/heraldwf/herald"
	"github.com/heraldwf/herald/httpapi"
	"github.com/heraldwf/herald/httpapi/wire"
	"github.com/heraldwf/herald/internal/storeurl"
)

// Fuzz targets of the bus routes' request decoders: whatever the body (or
// path and query), the answer is a success or a 4xx problem document with
// a code, never a panic or a 500.

// fuzzAPI is one API on a SQLite store for a whole fuzz run (a server per
// input would be too slow), with a short bus timeout so that fuzzed dry
// runs end quickly.
func fuzzAPI(f *testing.F) (http.Handler, string) {
	f.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	f.Cleanup(cancel)
	st, err := storeurl.Open(ctx, filepath.Join(f.TempDir(), "herald.db"))
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { st.Close() })
	logger := slog.New(slog.DiscardHandler)
	rt, err := herald.NewRuntime(st, &herald.Config{ClientConfig: herald.ClientConfig{Logger: logger},
		PollInterval: 20 * time.Millisecond, Bus: herald.BusConfig{Timeout: 200 * time.Millisecond, ScriptMemory: 32 << 20}})
	if err != nil {
		f.Fatal(err)
	}
	if err := rt.Start(ctx); err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() {
		sctx, c := context.WithTimeout(context.Background(), 30*time.Second)
		defer c()
		rt.Stop(sctx)
	})
	api, err := httpapi.New(httpapi.Options{Runtime: rt, Keys: st, Logger: logger, MaxBodyBytes: 64 << 10})
	if err != nil {
		f.Fatal(err)
	}
	admin, err := httpapi.EnsureAdminKey(ctx, st, "", time.Now())
	if err != nil {
		f.Fatal(err)
	}
	// A script for subscriptions and dry runs to name.
	serveFuzz(f, api, admin, "PUT", "/v1/scripts/s", nil, []byte(`{"source":"return ctx.event.data"}`))
	return api, admin
}

// serveFuzz sends one request (path unescaped: the URL escapes it as a
// client would; query as encoded) and checks the answer: 2xx, or a 4xx
// problem document whose status and code agree.
func serveFuzz(tb testing.TB, h http.Handler, key, method, path string, query url.Values, body []byte) int {
	tb.Helper()
	req := httptest.NewRequest(method, "http://herald.test/", bytes.NewReader(body))
	req.URL.Path, req.URL.RawQuery = path, query.Encode()
	req.Header.Set("Authorization", "Bearer "+key)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	if rec.Code < 400 {
		if rec.Code >= 300 && pathpkg.Clean(path) != path && rec.Header().Get("Location") != "" {
			return rec.Code // the mux redirects to the clean path ("a//b", "a/./b")
		}
		if rec.Code >= 300 || (rec.Code != 204 && !json.Valid(rec.Body.Bytes())) {
			tb.Fatalf("%s %q ?%s %q: %d %s", method, path, req.URL.RawQuery, body, rec.Code, rec.Body)
		}
		return rec.Code
	}
	var p wire.Problem
	if rec.Code >= 500 || rec.Header().Get("Content-Type") != "application/problem+json" ||
		json.Unmarshal(rec.Body.Bytes(), &p) != nil || p.Code == "" || p.Status != rec.Code {
		tb.Fatalf("%s %q ?%s %q: %d %s", method, path, req.URL.RawQuery, body, rec.Code, rec.Body)
	}
	return rec.Code
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
	h, admin := fuzzAPI(f)
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
		serveFuzz(t, h, admin, r.method, r.path, nil, body)
	})
}

// FuzzBusPaths fuzzes the ids in paths and the query parameters of the
// bus's read routes.
func FuzzBusPaths(f *testing.F) {
	h, admin := fuzzAPI(f)
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
		serveFuzz(t, h, admin, tg.method, tg.path, tg.query, nil)
	})
}
