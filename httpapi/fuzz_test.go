package httpapi_test

// Fuzz tests of the request decoders: whatever the body (and the path
// segments a route takes), the answer is a success or a problem document
// with a 4xx status, never a panic or a 5xx. Each target runs one server
// for all its inputs.

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"net/http/httptest"
	"net/url"
	pathpkg "path"
	"strings"
	"testing"

	"github.com/heraldwf/herald"
	"github.com/heraldwf/herald/httpapi"
	"github.com/heraldwf/herald/httpapi/wire"
)

// fuzzBodies are seeds every target gets: valid and broken JSON, NUL
// bytes, invalid UTF-8, deep nesting, wrong types.
var fuzzBodies = []string{
	``, `{}`, `null`, `[]`, `"x"`, `{`, `}`, `{"payload":1}`, `{"payload":null}`,
	`{"event_id":"a\u0000b"}`, "{\"event_id\":\"a\x00b\"}", "{\"payload\":\"\xff\xfe\"}", "\xff\xfe",
	`{"payload":` + deepJSON(9999) + `}`, `{"payload":` + deepJSON(10000) + `}`, deepJSON(20000),
	`{"event_id":"` + strings.Repeat("e", 1000) + `"}`, `{"payload":1}{"payload":2}`, `{"unknown":1}`,
	`{"start_if_absent":{"workflow":"echo","input":{"a":1}}}`, `{"start_if_absent":{}}`, `{"start_if_absent":7}`,
	`{"workflow":"echo"}`, `{"workflow":"echo","id":"f","id_reuse":"use_existing"}`, `{"workflow":7}`,
	`{"reason":"r"}`, `{"reason":"\u0000"}`,
	`{"schema":{"type":"object"},"buffer":"latest","retention":"1h","correlation":{"ttl":"1m"}}`,
	`{"schema":{"$ref":"#"}}`, `{"retention":"-5s"}`, `{"retention":1e400}`, `{"max_payload_bytes":1e20}`,
	`{"schema":` + deepJSON(5000) + `}`, `{"payload":"` + strings.Repeat("x", 300<<10) + `"}`,
}

// fuzzServer is newServer for a whole fuzz run (a server per input would
// be too slow), its logs discarded (a fuzz run's would pile up).
func fuzzServer(f *testing.F, opts ...serverOption) *server {
	f.Helper()
	quiet := func(cfg *herald.Config, o *httpapi.Options) {
		discard := slog.New(slog.DiscardHandler)
		cfg.Logger, o.Logger = discard, discard
	}
	return newServer(f, append([]serverOption{quiet}, opts...)...)
}

// fuzz sends one request to the API in-process — u's path unescaped (and
// escaped, if RawPath is set) and query as a server would parse them
// from the request line — and fails tb unless the answer is a 2xx with a
// JSON body (or none, for 204), a redirect of an unclean path to the
// clean one, or a 4xx problem document whose status, code and type agree.
// It returns the status.
func (s *server) fuzz(tb testing.TB, key, method string, u *url.URL, body []byte) int {
	tb.Helper()
	req := httptest.NewRequest(method, "http://herald.test/", bytes.NewReader(body))
	req.URL.Path, req.URL.RawPath, req.URL.RawQuery = u.Path, u.RawPath, u.RawQuery
	req.RequestURI = req.URL.RequestURI()
	req.Header.Set("Authorization", "Bearer "+key)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	rec := httptest.NewRecorder()
	s.api.ServeHTTP(rec, req)
	code, b := rec.Code, rec.Body.Bytes()
	switch {
	case code >= 300 && code < 400 && pathpkg.Clean(u.Path) != u.Path && rec.Header().Get("Location") != "":
		// The mux redirects to the clean path ("a//b", "a/./b").
	case code >= 200 && code < 300:
		if code != 204 && !json.Valid(b) {
			tb.Fatalf("%s %s (body %.200q): %d with a body that is not JSON: %.200q", method, u, body, code, b)
		}
	case code >= 400 && code < 500:
		var p wire.Problem
		if ct := rec.Header().Get("Content-Type"); ct != "application/problem+json" || json.Unmarshal(b, &p) != nil ||
			p.Status != code || p.Code == "" || p.Type != wire.ProblemTypeBase+p.Code {
			tb.Fatalf("%s %s (body %.200q): %d %q, not a problem document: %.300q", method, u, body, code, ct, b)
		}
	default:
		tb.Fatalf("%s %s (body %.200q): status %d: %.300q", method, u, body, code, b)
	}
	return code
}

// fuzzPath is path (escaped, as a client sends it) as a URL for fuzz.
func fuzzPath(tb testing.TB, path string) *url.URL {
	tb.Helper()
	u, err := url.Parse(path)
	if err != nil {
		tb.Fatalf("%q: %v", path, err)
	}
	return u
}

// seg path-escapes one segment; the empty and dot segments, which the
// mux's path cleaning redirects, become "x".
func seg(s string) string {
	if s == "" || s == "." || s == ".." {
		return "x"
	}
	return url.PathEscape(s)
}

// fuzzTarget fuzzes one route: path gives the path for two fuzzed
// segments.
func fuzzTarget(f *testing.F, method string, path func(a, b string) string) {
	s := fuzzServer(f)
	key := s.key("fuzz")
	s.do(key, "PUT", "/v1/definitions/corr", `{"schema":{"type":"object"},"correlation":{}}`).ok(200, nil)
	s.do(key, "POST", "/v1/instances", wire.StartInstanceRequest{Workflow: "echo", ID: "run"}).ok(201, nil)
	for _, b := range fuzzBodies {
		f.Add("run", "go", []byte(b))
		f.Add("new", "corr", []byte(b))
	}
	f.Add("a\x00b", "\xff", []byte(`{}`))
	f.Add(strings.Repeat("i", 100<<10), strings.Repeat("n", 300), []byte(`{"payload":1}`))
	f.Fuzz(func(t *testing.T, a, b string, body []byte) {
		s.fuzz(t, key, method, fuzzPath(t, path(a, b)), body)
	})
}

func FuzzStartInstance(f *testing.F) {
	fuzzTarget(f, "POST", func(string, string) string { return "/v1/instances" })
}

func FuzzRaiseEvent(f *testing.F) {
	fuzzTarget(f, "POST", func(a, b string) string { return "/v1/instances/" + seg(a) + "/events/" + seg(b) })
}

func FuzzEnqueue(f *testing.F) {
	fuzzTarget(f, "POST", func(a, b string) string { return "/v1/instances/" + seg(a) + "/queues/" + seg(b) })
}

func FuzzTerminate(f *testing.F) {
	fuzzTarget(f, "POST", func(a, _ string) string { return "/v1/instances/" + seg(a) + "/terminate" })
}

func FuzzPutCorrelated(f *testing.F) {
	fuzzTarget(f, "PUT", func(a, b string) string { return "/v1/correlated/" + seg(b) + "/" + seg(a) })
}

func FuzzPutDefinition(f *testing.F) {
	fuzzTarget(f, "PUT", func(_, b string) string { return "/v1/definitions/" + seg(b) })
}
