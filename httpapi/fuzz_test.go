package httpapi_test

// Fuzz tests of the request decoders: whatever the body (and the path
// segments a route takes), the answer is a success or a problem document
// with a 4xx status, never a panic or a 5xx. Each target runs one server
// for all its inputs.

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"

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

// fuzzAnswer sends a request and fails t unless the answer is a 2xx with a
// JSON (or empty) body or a 4xx problem document.
func fuzzAnswer(t *testing.T, s *server, key, method, path string, body []byte) {
	req, err := http.NewRequestWithContext(t.Context(), method, s.srv.URL+path, bytes.NewReader(body))
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+key)
	resp, err := s.srv.Client().Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	switch {
	case resp.StatusCode >= 200 && resp.StatusCode < 300:
		if len(b) > 0 && !json.Valid(b) {
			t.Fatalf("%s %s: %d with a body that is not JSON: %.200q", method, path, resp.StatusCode, b)
		}
	case resp.StatusCode >= 400 && resp.StatusCode < 500:
		var p wire.Problem
		if ct := resp.Header.Get("Content-Type"); ct != "application/problem+json" || json.Unmarshal(b, &p) != nil ||
			p.Status != resp.StatusCode || p.Code == "" || p.Type != wire.ProblemTypeBase+p.Code {
			t.Fatalf("%s %s: %d %q, not a problem document: %.300q", method, path, resp.StatusCode, ct, b)
		}
	default:
		t.Fatalf("%s %s (body %.200q): status %d: %.300q", method, path, body, resp.StatusCode, b)
	}
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
	s := newServer(f)
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
		fuzzAnswer(t, s, key, method, path(a, b), body)
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
