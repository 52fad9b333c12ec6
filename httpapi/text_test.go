package httpapi_test

import (
	"strings"
	"testing"

	"github.com/heraldwf/herald/httpapi/wire"
)

// TestText_PathSegmentIDsRefused: "." and ".." are no id or name (a client
// that cleans its paths, the CLI's, cannot reach them), nor is text with a
// control character or a bidirectional override or isolate, which would
// let one id pass for another in a listing. Refused with 400, nothing
// stored.
func TestText_PathSegmentIDsRefused(t *testing.T) {
	s := newServer(t)
	key := s.key("acme")
	s.do(key, "PUT", "/v1/scripts/s", wire.PutScriptRequest{Source: "return 1"}).ok(200, nil)
	for _, id := range []string{"%2e%2e", "%2E", "a%09b", "a%0Ab", "a%0Db", "invoice-%E2%80%AEfdp.exe", "x%E2%81%A6y", "c1%C2%85"} {
		p := s.do(key, "PUT", "/v1/scripts/"+id, wire.PutScriptRequest{Source: "return 1"}).problem(400, "invalid_argument")
		if !strings.Contains(p.Detail, "id") {
			t.Errorf("PUT /v1/scripts/%s: detail %q", id, p.Detail)
		}
		s.do(key, "PUT", "/v1/subscriptions/"+id, `{"pattern":"order.paid","target":{"kind":"script","script":"s"}}`).
			problem(400, "invalid_argument")
	}
	// The same requests with a plain id are taken.
	s.do(key, "PUT", "/v1/subscriptions/ok", `{"pattern":"order.paid","target":{"kind":"script","script":"s"}}`).ok(200, nil)
	var scripts wire.Page[*wire.ScriptInfo]
	s.do(key, "GET", "/v1/scripts", nil).ok(200, &scripts)
	var subs wire.Page[*wire.Subscription]
	s.do(key, "GET", "/v1/subscriptions", nil).ok(200, &subs)
	if len(scripts.Items) != 1 || len(subs.Items) != 1 {
		t.Fatalf("stored after a refusal: scripts %+v, subscriptions %+v", scripts.Items, subs.Items)
	}

	for _, id := range []string{"..", ".", "a\tb", "a\nb", "ab\u202ecd", "ab\u2069"} {
		s.do(key, "POST", "/v1/instances", wire.StartInstanceRequest{Workflow: "echo", ID: id}).problem(400, "invalid_argument")
	}
	s.do(key, "POST", "/v1/instances", wire.StartInstanceRequest{Workflow: "echo\u202e", ID: "i1"}).problem(400, "invalid_argument")
	var insts wire.Page[*wire.Instance]
	s.do(key, "GET", "/v1/instances", nil).ok(200, &insts)
	if len(insts.Items) != 0 {
		t.Fatalf("instances stored after a refusal: %+v", insts.Items)
	}
	// Names: an event's name is a path segment too.
	s.do(key, "POST", "/v1/instances", wire.StartInstanceRequest{Workflow: "echo", ID: "i1"}).ok(201, nil)
	s.do(key, "POST", "/v1/instances/i1/events/%2e%2e", wire.SendEventRequest{EventID: "e1"}).problem(400, "event_invalid")
	s.do(key, "POST", "/v1/instances/i1/events/go%0A", wire.SendEventRequest{EventID: "e2"}).problem(400, "event_invalid")
	s.do(key, "POST", "/v1/instances/i1/events/go", wire.SendEventRequest{EventID: "e\u202e3"}).problem(400, "event_invalid")
	s.do(key, "GET", "/v1/events/e1", nil).problem(404, "not_found")
	s.do(key, "GET", "/v1/events/e2", nil).problem(404, "not_found")
}

// TestText_TenantHeaderRefused: a tenant named in Herald-Tenant follows the
// same rules; nothing is registered for it.
func TestText_TenantHeaderRefused(t *testing.T) {
	s := newServer(t)
	for _, tenant := range []string{"..", ".", "ac\tme", "ac\u202eme", "ac\u2066me"} {
		p := s.do(s.admin, "PUT", "/v1/scripts/greet", wire.PutScriptRequest{Source: "return 1"}, "Herald-Tenant", tenant).
			problem(400, "invalid_argument")
		if !strings.Contains(p.Detail, "tenant") {
			t.Errorf("tenant %q: detail %q", tenant, p.Detail)
		}
		s.do(s.admin, "GET", "/v1/scripts/greet", nil, "Herald-Tenant", tenant).problem(400, "invalid_argument")
	}
	var tenants wire.Page[*wire.Tenant]
	s.do(s.admin, "GET", "/v1/tenants", nil).ok(200, &tenants)
	for _, tn := range tenants.Items {
		if tn.ID != "default" {
			t.Errorf("tenant %q registered after a refusal", tn.ID)
		}
	}
}

// TestBind_DuplicateMembersRefused: a member named twice in one object of
// a request body, at any depth, is refused with 400 naming it, not taken
// last-wins; nothing is stored.
func TestBind_DuplicateMembersRefused(t *testing.T) {
	s := newServer(t)
	key := s.key("acme")
	for _, c := range []struct{ path, body, member, where string }{
		{"/v1/instances", `{"workflow":"echo","id":"a","id":"b"}`, `"id"`, "in $"},
		{"/v1/instances", `{"workflow":"echo","\u0069d":"a","id":"b"}`, `"id"`, "in $"},
		{"/v1/instances", `{"workflow":"echo","id":"c","input":{"x":1,"y":[{"z":1},{"z":1,"z":2}]}}`, `"z"`, "in $.input.y[1]"},
	} {
		p := s.do(key, "POST", c.path, c.body).problem(400, "bad_request")
		if !strings.Contains(p.Detail, "the member "+c.member+" twice "+c.where) {
			t.Errorf("%s: detail %q, want it to name %s %s", c.body, p.Detail, c.member, c.where)
		}
	}
	for _, id := range []string{"a", "b", "c"} {
		s.do(key, "GET", "/v1/instances/"+id, nil).problem(404, "not_found")
	}
	s.do(key, "POST", "/v1/instances", `{"workflow":"echo","id":"i1","input":{"a":{"k":1},"b":{"k":1}}}`).ok(201, nil)
	p := s.do(key, "POST", "/v1/instances/i1/events/go", `{"event_id":"e1","payload":{"amount":1,"amount":1000000}}`).
		problem(400, "bad_request")
	if !strings.Contains(p.Detail, `"amount" twice in $.payload`) {
		t.Errorf("detail %q", p.Detail)
	}
	s.do(key, "GET", "/v1/events/e1", nil).problem(404, "not_found")
	s.do(key, "PUT", "/v1/scripts/greet", `{"source":"return 1","source":"return 2"}`).problem(400, "bad_request")
	s.do(key, "GET", "/v1/scripts/greet", nil).problem(404, "not_found")
}
