package httpapi_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/heraldwf/herald"
	"github.com/heraldwf/herald/httpapi"
	"github.com/heraldwf/herald/httpapi/wire"
)

// TestInstances_StartGetList: start, get and list instances, and the
// problems each documents.
func TestInstances_StartGetList(t *testing.T) {
	s := newServer(t)
	key := s.key("acme")

	var started wire.StartInstanceResponse
	s.do(key, "POST", "/v1/instances", wire.StartInstanceRequest{Workflow: "echo", ID: "i-1", Input: json.RawMessage(`{"a":1}`)}).ok(201, &started)
	if started.ID != "i-1" {
		t.Fatalf("started %q", started.ID)
	}
	s.do(key, "POST", "/v1/instances", wire.StartInstanceRequest{Workflow: "echo", ID: "i-1"}).problem(409, "instance_exists")
	s.do(key, "POST", "/v1/instances", wire.StartInstanceRequest{Workflow: "echo", ID: "i-1", IDReuse: "use_existing"}).ok(201, &started)
	s.do(key, "POST", "/v1/instances", wire.StartInstanceRequest{Workflow: "", ID: "i-2"}).problem(400, "invalid_argument")
	s.do(key, "POST", "/v1/instances", wire.StartInstanceRequest{Workflow: "echo", IDReuse: "maybe"}).problem(400, "invalid_argument")

	var inst wire.Instance
	s.do(key, "GET", "/v1/instances/i-1", nil).ok(200, &inst)
	if inst.ID != "i-1" || inst.Workflow != "echo" || string(inst.Input) != `{"a":1}` {
		t.Fatalf("instance %+v", inst)
	}
	s.do(key, "GET", "/v1/instances/nope", nil).problem(404, "not_found")

	for i := range 5 {
		s.do(key, "POST", "/v1/instances", wire.StartInstanceRequest{Workflow: "echo", ID: "p-" + string(rune('a'+i))}).ok(201, nil)
	}
	seen := map[string]bool{}
	cursor, pages := "", 0
	for {
		var page wire.Page[*wire.Instance]
		s.do(key, "GET", "/v1/instances?limit=2&workflow=echo&cursor="+cursor, nil).ok(200, &page)
		pages++
		for _, in := range page.Items {
			if seen[in.ID] {
				t.Fatalf("%s listed twice", in.ID)
			}
			seen[in.ID] = true
		}
		if page.NextCursor == "" {
			break
		}
		cursor = page.NextCursor
	}
	if len(seen) != 6 || pages != 3 {
		t.Fatalf("listed %d instances in %d pages, want 6 in 3", len(seen), pages)
	}
	s.do(key, "GET", "/v1/instances?limit=0", nil).problem(400, "invalid_argument")
	s.do(key, "GET", "/v1/instances?limit=1001", nil).problem(400, "invalid_argument")
	s.do(key, "GET", "/v1/instances?created_after=yesterday", nil).problem(400, "invalid_argument")
}

// TestRequests_Malformed: bodies that are not one JSON object of the
// request's type, too large, or of another media type are refused with a
// problem, and nothing is started.
func TestRequests_Malformed(t *testing.T) {
	s := newServer(t, func(_ *herald.Config, o *httpapi.Options) { o.MaxBodyBytes = 1 << 10 })
	key := s.key("acme")
	cases := []struct {
		body   string
		status int
		code   string
	}{
		{``, 400, "bad_request"},
		{`{`, 400, "bad_request"},
		{`[1,2]`, 400, "bad_request"},
		{`{"workflow":"echo","id":"m"} {}`, 400, "bad_request"},
		{`{"workflow":"echo","id":"m","extra":1}`, 400, "bad_request"},
		{`{"workflow":7}`, 400, "bad_request"},
		{`{"workflow":"echo","id":"m","input":"` + strings.Repeat("x", 2<<10) + `"}`, 413, "too_large"},
		{"{\"workflow\":\"echo\",\"id\":\"m\x00\"}", 400, "bad_request"},
	}
	for _, c := range cases {
		s.do(key, "POST", "/v1/instances", c.body).problem(c.status, c.code)
	}
	s.do(key, "POST", "/v1/instances", `{"workflow":"echo","id":"m"}`, "Content-Type", "text/plain").problem(415, "unsupported_media_type")
	s.do(key, "GET", "/v1/instances/m", nil).problem(404, "not_found")
}

// TestAuth_Keys: missing, malformed, unknown and revoked keys get 401;
// tenant keys cannot reach admin routes; an admin key acts on the tenant it
// names.
func TestAuth_Keys(t *testing.T) {
	s := newServer(t)
	key := s.key("acme")
	for _, h := range []string{"", "Basic abc", "Bearer ", "Bearer hk_nope", "bearer" + key} {
		a := s.do("", "GET", "/v1/instances", nil, "Authorization", h)
		a.problem(401, "unauthorized")
		if a.Header.Get("WWW-Authenticate") == "" {
			t.Errorf("401 without WWW-Authenticate for %q", h)
		}
		if strings.Contains(string(a.Body), key) {
			t.Fatal("a problem echoes the key")
		}
	}
	s.do(key, "GET", "/v1/keys", nil).problem(403, "forbidden")
	s.do(key, "GET", "/v1/instances", nil, httpapi.TenantHeader, "other").problem(403, "forbidden")
	s.do(key, "GET", "/v1/instances", nil, httpapi.TenantHeader, "acme").ok(200, nil)

	// The admin key acts on the tenant it names.
	s.do(s.admin, "POST", "/v1/instances", wire.StartInstanceRequest{Workflow: "echo", ID: "x"}, httpapi.TenantHeader, "acme").ok(201, nil)
	s.do(key, "GET", "/v1/instances/x", nil).ok(200, nil)
	s.do(s.admin, "GET", "/v1/instances/x", nil).problem(404, "not_found") // tenant "default"

	var keys wire.Page[*wire.APIKey]
	s.do(s.admin, "GET", "/v1/keys?tenant=acme", nil).ok(200, &keys)
	if len(keys.Items) != 1 || keys.Items[0].Tenant != "acme" || strings.Contains(string(s.do(s.admin, "GET", "/v1/keys", nil).Body), "hash") {
		t.Fatalf("keys %+v", keys.Items)
	}
	var revoked wire.APIKey
	s.do(s.admin, "DELETE", "/v1/keys/"+keys.Items[0].ID, nil).ok(200, &revoked)
	if revoked.RevokedAt.IsZero() {
		t.Fatal("revoked key without revoked_at")
	}
	s.do(key, "GET", "/v1/instances", nil).problem(401, "unauthorized")
	s.do(s.admin, "DELETE", "/v1/keys/nope", nil).problem(404, "not_found")
	if strings.Contains(s.logs.String(), key) {
		t.Fatal("the logs hold a key's secret")
	}
}

// TestOpenAPI_EveryRouteDocumented: the document lists every route, and
// every documented route answers (with a key, never the mux's 404 or 405).
func TestOpenAPI_EveryRouteDocumented(t *testing.T) {
	s := newServer(t)
	var doc struct {
		OpenAPI string                               `json:"openapi"`
		Paths   map[string]map[string]map[string]any `json:"paths"`
	}
	s.do("", "GET", "/v1/openapi.json", nil).ok(200, &doc)
	if doc.OpenAPI != "3.1.0" || len(doc.Paths) == 0 {
		t.Fatalf("document %q with %d paths", doc.OpenAPI, len(doc.Paths))
	}
	n := 0
	for path, ops := range doc.Paths {
		for method := range ops {
			n++
			a := s.do(s.admin, strings.ToUpper(method), strings.NewReplacer("{", "", "}", "").Replace(path), nil)
			if a.Status == http.StatusMethodNotAllowed || strings.Contains(string(a.Body), "route_not_found") {
				t.Errorf("%s %s is documented but not served: %d %s", method, path, a.Status, a.Body)
			}
		}
	}
	if n < 10 {
		t.Fatalf("only %d operations documented", n)
	}
	s.do(s.admin, "GET", "/v1/nothing-here", nil).problem(404, "route_not_found")
	a := s.do(s.admin, "PATCH", "/v1/instances", nil)
	a.problem(405, "method_not_allowed")
	if allow := a.Header.Get("Allow"); allow != "GET, POST" {
		t.Fatalf("Allow %q", allow)
	}
}
