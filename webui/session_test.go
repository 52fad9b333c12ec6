package webui_test

import (
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/heraldwf/herald/clock"
	"github.com/heraldwf/herald/webui"
)

// attacker signs in again and again with one key and one sign-in form's
// cookie/token pair, as a script would, without following redirects.
type attacker struct {
	t            testing.TB
	s            *server
	http         *http.Client
	cookie, csrf string
	key          string
}

func (s *server) attacker(key string) *attacker {
	s.t.Helper()
	b := &browserless{t: s.t, s: s, http: &http.Client{}}
	req, _ := http.NewRequest(http.MethodGet, s.URL+"/signin", nil)
	resp, err := b.http.Do(req)
	if err != nil {
		s.t.Fatal(err)
	}
	resp.Body.Close()
	a := &attacker{t: s.t, s: s, key: key,
		http: &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}}
	for _, c := range resp.Cookies() {
		if c.Name == "herald_signin" {
			a.cookie = c.Value
		}
	}
	a.csrf = a.cookie // the form's token is the cookie's (double submit)
	if a.cookie == "" {
		s.t.Fatal("no sign-in cookie")
	}
	return a
}

// signIn posts the sign-in form once: the status, the session cookie ("" if
// none), Retry-After and the body.
func (a *attacker) signIn() (code int, session, retryAfter, body string) {
	a.t.Helper()
	form := url.Values{"csrf": {a.csrf}, "key": {a.key}, "next": {"/instances"}}
	req, _ := http.NewRequest(http.MethodPost, a.s.URL+"/signin", strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.AddCookie(&http.Cookie{Name: "herald_signin", Value: a.cookie})
	resp, err := a.http.Do(req)
	if err != nil {
		a.t.Fatal(err)
	}
	defer resp.Body.Close()
	var sb strings.Builder
	buf := make([]byte, 32<<10)
	for {
		n, err := resp.Body.Read(buf)
		sb.Write(buf[:n])
		if err != nil {
			break
		}
	}
	for _, c := range resp.Cookies() {
		if c.Name == "herald_session" && c.MaxAge > 0 {
			session = c.Value
		}
	}
	return resp.StatusCode, session, resp.Header.Get("Retry-After"), sb.String()
}

// alive reports whether the session cookie still opens a page (a dead one
// is sent to sign in).
func (a *attacker) alive(session string) bool {
	a.t.Helper()
	req, _ := http.NewRequest(http.MethodGet, a.s.URL+"/instances", nil)
	req.AddCookie(&http.Cookie{Name: "herald_session", Value: session})
	resp, err := a.http.Do(req)
	if err != nil {
		a.t.Fatal(err)
	}
	resp.Body.Close()
	switch resp.StatusCode {
	case http.StatusOK:
		return true
	case http.StatusSeeOther:
		return false
	}
	a.t.Fatalf("GET /instances: %d", resp.StatusCode)
	return false
}

// TestSignInStorm: one tenant key signing in 10,500 times (the issue's
// storm, the clock stepped by the sign-in rate limit's Retry-After between
// sign-ins so that every one succeeds) ends only that key's own older
// sessions: the admin's and another tenant's sessions stay signed in, and
// the key keeps at most webui.DefaultSessionsPerKey. Signing in faster
// than the limit is refused with 429, Retry-After and the reason on the
// sign-in page, and creates no session.
func TestSignInStorm(t *testing.T) {
	vc := clock.NewVirtual(time.Date(2026, 3, 1, 9, 0, 0, 0, time.UTC))
	s := newServerWith(t, func(o *webui.Options) { o.Now = vc.Now })
	admin := s.signIn(s.api.Admin)
	_, betaKey := s.key("beta")
	beta := s.signIn(betaKey)
	_, alphaKey := s.key("alpha")
	alphaFirst := s.signIn(alphaKey) // a real user of the attacking tenant's key

	a := s.attacker(alphaKey)
	// Burst first: the limit's allowance goes through, then 429s.
	var step time.Duration
	var ok []string
	for i := 0; i < 100; i++ {
		code, session, retry, body := a.signIn()
		switch code {
		case http.StatusSeeOther:
			if session == "" {
				t.Fatalf("sign-in %d: 303 without a session cookie", i)
			}
			ok = append(ok, session)
		case http.StatusTooManyRequests:
			n, err := strconv.Atoi(retry)
			if err != nil || n < 1 {
				t.Fatalf("sign-in %d: 429 with Retry-After %q", i, retry)
			}
			if session != "" || !strings.Contains(body, `role="alert"`) || !strings.Contains(body, "Too many sign-ins with this key: try again in") ||
				!strings.Contains(body, `id="signin"`) {
				t.Fatalf("sign-in %d: 429 page (session %q):\n%s", i, session, body)
			}
			step = time.Duration(n) * time.Second
		default:
			t.Fatalf("sign-in %d: %d\n%s", i, code, body)
		}
	}
	if len(ok) == 0 || len(ok) >= 100 || step == 0 {
		t.Fatalf("burst of 100 sign-ins: %d went through (Retry-After %v); want a limit", len(ok), step)
	}
	// The storm, each sign-in as soon as the limit allows it.
	const storm = 10500
	for i := 0; i < storm; i++ {
		vc.Advance(step)
		code, session, _, body := a.signIn()
		if code != http.StatusSeeOther || session == "" {
			t.Fatalf("storm sign-in %d after Retry-After: %d\n%s", i, code, body)
		}
		ok = append(ok, session)
	}
	for _, b := range []struct {
		who string
		b   *browserless
	}{{"admin", admin}, {"tenant beta", beta}} {
		if body := b.b.get("/instances", 0); !strings.Contains(body, `id="instances"`) {
			t.Fatalf("%s signed out by tenant alpha's sign-in storm:\n%s", b.who, body)
		}
	}
	// Only the key's own oldest sessions ended; it keeps its cap's worth.
	if body := alphaFirst.get("/instances", 0); strings.Contains(body, `id="instances"`) {
		t.Fatal("the key's first session survived 10,500 later sign-ins with the key: no per-key cap")
	}
	live := 0
	for _, session := range ok[len(ok)-webui.DefaultSessionsPerKey-5:] {
		if a.alive(session) {
			live++
		}
	}
	if live != webui.DefaultSessionsPerKey {
		t.Fatalf("%d of the key's last %d sessions are alive, want the cap, %d", live, webui.DefaultSessionsPerKey+5, webui.DefaultSessionsPerKey)
	}
	if !a.alive(ok[len(ok)-1]) || a.alive(ok[0]) {
		t.Fatal("the newest session ended or the oldest lives")
	}
}

// TestSignInTenantCap: a tenant's many keys together keep at most
// SessionsPerTenant sessions, the tenant's oldest ending first; another
// tenant's and the admin's are untouched.
func TestSignInTenantCap(t *testing.T) {
	vc := clock.NewVirtual(time.Date(2026, 3, 1, 9, 0, 0, 0, time.UTC))
	s := newServerWith(t, func(o *webui.Options) {
		o.Now = vc.Now
		o.SessionsPerKey, o.SessionsPerTenant = 3, 5
	})
	admin := s.signIn(s.api.Admin)
	_, betaKey := s.key("beta")
	beta := s.signIn(betaKey)
	var sessions []string
	var as []*attacker
	for k := 0; k < 4; k++ {
		_, key := s.key("alpha")
		as = append(as, s.attacker(key))
	}
	for round := 0; round < 50; round++ {
		vc.Advance(time.Minute) // well within the rate limit
		for _, a := range as {
			code, session, _, body := a.signIn()
			if code != http.StatusSeeOther {
				t.Fatalf("round %d: %d\n%s", round, code, body)
			}
			sessions = append(sessions, session)
		}
	}
	for who, b := range map[string]*browserless{"admin": admin, "tenant beta": beta} {
		if body := b.get("/instances", 0); !strings.Contains(body, `id="instances"`) {
			t.Fatalf("%s signed out by tenant alpha's sign-ins", who)
		}
	}
	live := 0
	for i, session := range sessions {
		alive := as[0].alive(session)
		if alive {
			live++
		}
		if newest := i >= len(sessions)-5; alive != newest {
			t.Fatalf("alpha session %d of %d: alive %v; want only the tenant's newest 5", i, len(sessions), alive)
		}
	}
	if live != 5 {
		t.Fatalf("%d alpha sessions alive, want 5", live)
	}
}

// TestSignInOptionsRefused: negative caps are refused.
func TestSignInOptionsRefused(t *testing.T) {
	s := newServer(t)
	for _, o := range []webui.Options{{SessionsPerKey: -1}, {SessionsPerTenant: -1}} {
		o.Runtime, o.Keys = s.api.Runtime, s.api.Store
		if _, err := webui.New(o); err == nil {
			t.Errorf("webui.New(%+v): no error", o)
		}
	}
}
