package webui_test

import (
	"fmt"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/heraldwf/herald"
	"github.com/heraldwf/herald/examples/approval"
	"github.com/heraldwf/herald/storage"
)

// A state-changing form posted without its CSRF token (or with another)
// is refused with 403 and changes nothing; with the token it goes through.
func TestCSRFRefused(t *testing.T) {
	s := newServer(t)
	c := s.client(herald.DefaultTenant)
	id, err := c.StartWorkflow(s.ctx(), "approval", approval.Request{Item: "lamp", Amount: 5, Deadline: herald.Duration(time.Hour)})
	if err != nil {
		t.Fatal(err)
	}
	b := s.signIn(s.api.Admin)
	path := "/instances/" + id + "/terminate"
	for _, token := range []string{"", "not-the-token"} {
		form := url.Values{"confirm": {"yes"}, "reason": {"x"}}
		if token != "" {
			form.Set("csrf", token)
		}
		if a := b.post(path, form); a.code != http.StatusForbidden {
			t.Fatalf("terminate with csrf %q: %d, want 403\n%s", token, a.code, a.body)
		}
	}
	if a := b.post("/signout", nil); a.code != http.StatusForbidden {
		t.Fatalf("sign-out without csrf: %d, want 403", a.code)
	}
	info, err := c.Status(s.ctx(), id)
	if err != nil || info.Status.Terminal() {
		t.Fatalf("after refused posts: %v, %v; want still running", info, err)
	}
	// The sign-in form has its own token (double submit).
	jar, _ := cookiejar.New(nil)
	anon := &browserless{t: t, s: s, http: &http.Client{Jar: jar}}
	anon.get("/signin", http.StatusOK)
	if a := anon.post("/signin", url.Values{"key": {s.api.Admin}}); a.code != http.StatusForbidden {
		t.Fatalf("sign-in without csrf: %d, want 403", a.code)
	}
	// Without confirm=yes a terminate only asks; with it, it terminates.
	if a := b.post(path, url.Values{"csrf": {b.csrf}, "reason": {"x"}}); a.code != http.StatusOK || !strings.Contains(a.body, `id="confirm"`) {
		t.Fatalf("terminate without confirmation: %d, want the confirmation page", a.code)
	}
	if a := b.post(path, url.Values{"csrf": {b.csrf}, "reason": {"x"}, "confirm": {"yes"}}); a.code != http.StatusOK || !strings.Contains(a.body, "Terminated.") {
		t.Fatalf("confirmed terminate: %d\n%s", a.code, a.body)
	}
	if info, _ := c.Status(s.ctx(), id); info.Status != herald.StatusTerminated {
		t.Fatalf("status %s, want terminated", info.Status)
	}
}

// The session cookie is HttpOnly and SameSite=Strict (Secure over TLS,
// see TestSessionCookieSecureOverTLS); pages need it; a revoked key's
// session ends at its next request; sign-out ends it.
func TestSession(t *testing.T) {
	s := newServer(t)
	resp, err := http.Get(s.URL + "/instances")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.Request.URL.Path != "/signin" {
		t.Fatalf("without a session /instances ended at %s, want /signin", resp.Request.URL)
	}
	keyID, secret := s.key("acme")
	b := s.signIn(secret)
	u, _ := url.Parse(s.URL)
	var found bool
	for _, ck := range b.http.Jar.Cookies(u) {
		found = found || ck.Name == "herald_session"
	}
	if !found {
		t.Fatal("no session cookie after sign-in")
	}
	if body := b.get("/instances", http.StatusOK); !strings.Contains(body, `id="tenant">acme<`) {
		t.Fatalf("signed in as acme's key, the page does not say tenant acme")
	}
	// A tenant key cannot switch tenant.
	if a := b.post("/tenant", url.Values{"csrf": {b.csrf}, "tenant": {"other"}}); a.code != http.StatusForbidden {
		t.Fatalf("tenant key switching tenant: %d, want 403", a.code)
	}
	if _, err := s.api.Store.KeyRevoke(s.ctx(), &storage.KeyRevokeParams{ID: keyID, Now: time.Now()}); err != nil {
		t.Fatal(err)
	}
	req, _ := http.NewRequest(http.MethodGet, s.URL+"/instances", nil)
	b.http.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	if a := b.do(req); a.code != http.StatusSeeOther {
		t.Fatalf("revoked key's session: %d, want a redirect to sign in", a.code)
	}

	// Sign-out.
	b2 := s.signIn(s.api.Admin)
	if a := b2.post("/signout", url.Values{"csrf": {b2.csrf}}); a.code != http.StatusOK || !strings.Contains(a.body, `id="signin"`) {
		t.Fatalf("sign-out: %d", a.code)
	}
	b2.http.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	req, _ = http.NewRequest(http.MethodGet, s.URL+"/", nil)
	if a := b2.do(req); a.code != http.StatusSeeOther {
		t.Fatalf("after sign-out: %d, want a redirect to sign in", a.code)
	}
	// A wrong key is refused.
	jar, _ := cookiejar.New(nil)
	anon := &browserless{t: t, s: s, http: &http.Client{Jar: jar}}
	tok := csrfRe.FindStringSubmatch(anon.get("/signin", http.StatusOK))[1]
	if a := anon.post("/signin", url.Values{"csrf": {tok}, "key": {"hk_nope"}}); a.code != http.StatusUnauthorized {
		t.Fatalf("unknown key: %d, want 401", a.code)
	}
}

func TestSessionCookieAttributes(t *testing.T) {
	s := newServer(t)
	for _, proto := range []string{"", "https"} {
		req, _ := http.NewRequest(http.MethodGet, s.URL+"/signin", nil)
		if proto != "" {
			req.Header.Set("X-Forwarded-Proto", proto)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		sc := resp.Header.Get("Set-Cookie")
		if !strings.Contains(sc, "HttpOnly") || !strings.Contains(sc, "SameSite=Strict") {
			t.Fatalf("cookie %q: want HttpOnly and SameSite=Strict", sc)
		}
		if got := strings.Contains(sc, "Secure"); got != (proto == "https") {
			t.Fatalf("cookie %q over %q: Secure %v", sc, proto, got)
		}
	}
}

// Tenant A's session sees nothing of tenant B: B's instance, event and
// dead-letter URLs answer "not found", exactly as an unknown id.
func TestCrossTenant(t *testing.T) {
	s := newServer(t)
	cb := s.client("beta")
	const secretID = "beta-secret-instance"
	if _, err := cb.StartWorkflow(s.ctx(), "approval", approval.Request{Item: "beta-item", Amount: 1, Deadline: herald.Duration(time.Hour)},
		herald.WithInstanceID(secretID)); err != nil {
		t.Fatal(err)
	}
	rec, err := cb.RaiseEvent(s.ctx(), secretID, "decision", approval.Decision{Approved: true, By: "beta-approver"})
	if err != nil {
		t.Fatal(err)
	}
	_, alpha := s.key("alpha")
	a := s.signIn(alpha)
	unknown := map[string]string{}
	for _, path := range []string{"/instances/" + secretID, "/instances/" + secretID + "/live", "/events?id=" + url.QueryEscape(rec.EventID)} {
		body := a.get(path, http.StatusNotFound)
		if strings.Contains(body, "beta-item") || strings.Contains(body, "beta-approver") || strings.Contains(body, "approval") {
			t.Fatalf("%s shows tenant beta's data:\n%s", path, body)
		}
		unknown[path] = body
	}
	if body := a.get("/instances", http.StatusOK); strings.Contains(body, secretID) {
		t.Fatal("alpha's instance list shows beta's instance")
	}
	// Not found reads the same as for an id no tenant has.
	if got, want := a.get("/instances/no-such-instance", http.StatusNotFound), unknown["/instances/"+secretID]; got != want {
		t.Fatalf("beta's instance and an unknown one answer differently:\n%s\n---\n%s", got, want)
	}
	if a2 := a.post("/instances/"+secretID+"/terminate", url.Values{"csrf": {a.csrf}, "confirm": {"yes"}}); a2.code != http.StatusNotFound {
		t.Fatalf("alpha terminating beta's instance: %d, want 404", a2.code)
	}
	if info, _ := cb.Status(s.ctx(), secretID); info.Status.Terminal() && info.Status != herald.StatusCompleted {
		t.Fatalf("beta's instance %s after alpha's attempt", info.Status)
	}
}

// Everything shown is escaped: an instance id and payload with markup
// come back as text.
func TestEscaping(t *testing.T) {
	s := newServer(t)
	c := s.client(herald.DefaultTenant)
	id := `<script>alert(1)</script>`
	if _, err := c.StartWorkflow(s.ctx(), "approval", approval.Request{Item: `<img src=x onerror=alert(2)>`, Deadline: herald.Duration(time.Hour)},
		herald.WithInstanceID(id)); err != nil {
		t.Fatal(err)
	}
	b := s.signIn(s.api.Admin)
	eventually(t, "the instance to run", func() bool {
		info, _ := c.Status(s.ctx(), id)
		return info != nil && info.Status == herald.StatusRunning
	})
	for _, path := range []string{"/instances", "/instances/" + url.PathEscape(id)} {
		body := b.get(path, http.StatusOK)
		if strings.Contains(body, "<script>alert") || strings.Contains(body, "<img src=x") {
			t.Fatalf("%s renders markup unescaped", path)
		}
		if !strings.Contains(body, "&lt;script&gt;alert(1)&lt;/script&gt;") {
			t.Fatalf("%s does not show the escaped id", path)
		}
	}
}

// The pages answer 200 with a few instances: the list (first page, a
// filtered one, the next page), an instance page and the overview. How
// fast they answer with 100,000 instances is BenchmarkPages' job
// (bench_test.go): speed targets live in benchmarks, not in timed tests.
func TestPagesAnswer(t *testing.T) {
	s := newServer(t)
	c := s.client("pages")
	const n = pageSizeForTest + 5
	for i := range n {
		wf := "wf-even"
		if i%2 == 1 {
			wf = "wf-odd"
		}
		if _, err := c.StartWorkflow(s.ctx(), wf, nil, herald.WithInstanceID(fmt.Sprintf("inst-%03d", i))); err != nil {
			t.Fatal(err)
		}
	}
	_, key := s.key("pages")
	b := s.signIn(key)
	body := b.get("/instances", http.StatusOK)
	// Newest first.
	if !strings.Contains(body, ">inst-054<") || strings.Contains(body, ">inst-000<") || !strings.Contains(body, `id="next"`) {
		t.Fatalf("first page: want inst-054, not inst-000, and a next link\n%s", body)
	}
	m := nextLinkRe.FindStringSubmatch(body)
	if m == nil {
		t.Fatal("no next link")
	}
	page2 := b.get(strings.ReplaceAll(m[1], "&amp;", "&"), http.StatusOK)
	if strings.Contains(page2, ">inst-054<") || !strings.Contains(page2, ">inst-000<") {
		t.Fatalf("second page repeats the first or is empty\n%s", page2)
	}
	filtered := b.get("/instances?workflow=wf-odd&status=pending", http.StatusOK)
	if !strings.Contains(filtered, ">inst-053<") || strings.Contains(filtered, ">inst-054<") {
		t.Fatalf("filtered page: want wf-odd's instances only\n%s", filtered)
	}
	b.get("/instances/inst-001", http.StatusOK)
	b.get("/", http.StatusOK)
}

// pageSizeForTest is the UI's page size (webui.pageSize).
const pageSizeForTest = 50

var nextLinkRe = regexp.MustCompile(`href="([^"]+)" id="next"`)
