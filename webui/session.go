package webui

import (
	"crypto/rand"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/heraldwf/herald"
	"github.com/heraldwf/herald/httpapi"
)

// Cookie names.
const (
	sessionCookie = "herald_session"
	// signinCookie carries the sign-in form's CSRF token (double submit):
	// there is no session yet to hold it.
	signinCookie = "herald_signin"
)

// maxSessions bounds the in-process session table; the oldest sessions
// are dropped first when it is full.
const maxSessions = 10000

// session is a signed-in browser. It holds the key's hash (never its
// secret), checked again on every request.
type session struct {
	token   string
	keyHash []byte
	keyID   string
	admin   bool
	tenant  string // the tenant pages act on
	// client is the tenant's client, set per request by authed (get
	// returns each request its own copy of the session).
	client  *herald.Client
	csrf    string
	created time.Time
	expires time.Time
}

// Tenant is the tenant the session acts on.
func (s *session) Tenant() string { return s.tenant }

// Admin reports an admin key's session.
func (s *session) Admin() bool { return s.admin }

// KeyID is the signed-in key's public id.
func (s *session) KeyID() string { return s.keyID }

// sessionStore keeps the sessions of this process (sticky sessions are
// needed behind a load balancer).
type sessionStore struct {
	ttl time.Duration
	now func() time.Time

	mu sync.Mutex
	m  map[string]*session
}

func newSessionStore(ttl time.Duration, now func() time.Time) *sessionStore {
	return &sessionStore{ttl: ttl, now: now, m: map[string]*session{}}
}

func randomToken() string {
	var b [32]byte
	_, _ = rand.Read(b[:])
	return base64.RawURLEncoding.EncodeToString(b[:])
}

func (st *sessionStore) create(keyHash []byte, keyID string, admin bool, tenant string) *session {
	now := st.now()
	s := &session{token: randomToken(), keyHash: keyHash, keyID: keyID, admin: admin, tenant: tenant,
		csrf: randomToken(), created: now, expires: now.Add(st.ttl)}
	st.mu.Lock()
	defer st.mu.Unlock()
	for t, old := range st.m {
		if !now.Before(old.expires) {
			delete(st.m, t)
		}
	}
	for len(st.m) >= maxSessions {
		var oldest *session
		for _, o := range st.m {
			if oldest == nil || o.created.Before(oldest.created) {
				oldest = o
			}
		}
		delete(st.m, oldest.token)
	}
	st.m[s.token] = s
	return s
}

// get returns the live session of token, or nil.
func (st *sessionStore) get(token string) *session {
	st.mu.Lock()
	defer st.mu.Unlock()
	s := st.m[token]
	if s == nil {
		return nil
	}
	if !st.now().Before(s.expires) {
		delete(st.m, token)
		return nil
	}
	c := *s
	return &c
}

func (st *sessionStore) delete(token string) {
	st.mu.Lock()
	defer st.mu.Unlock()
	delete(st.m, token)
}

func (st *sessionStore) setTenant(token, tenant string) {
	st.mu.Lock()
	defer st.mu.Unlock()
	if s := st.m[token]; s != nil {
		s.tenant = tenant
	}
}

// secure reports whether r came over TLS (directly, or through a proxy
// that says so).
func secure(r *http.Request) bool {
	return r.TLS != nil || strings.EqualFold(r.Header.Get("X-Forwarded-Proto"), "https")
}

func setCookie(w http.ResponseWriter, r *http.Request, name, value string, maxAge int) {
	http.SetCookie(w, &http.Cookie{Name: name, Value: value, Path: "/", MaxAge: maxAge,
		HttpOnly: true, Secure: secure(r), SameSite: http.SameSiteStrictMode})
}

// authed wraps a page that needs a session: without one (or when its key
// has been revoked since) it sends the browser to sign in; a POST must
// carry the session's CSRF token (403 otherwise).
func (u *UI) authed(h func(http.ResponseWriter, *http.Request, *session)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		var s *session
		if c, err := r.Cookie(sessionCookie); err == nil {
			s = u.sessions.get(c.Value)
		}
		if s != nil {
			_, err := httpapi.AuthenticateHash(r.Context(), u.keys, s.keyHash)
			switch {
			case errors.Is(err, httpapi.ErrKeyRejected):
				u.sessions.delete(s.token)
				s = nil
			case err != nil:
				u.fail(w, r, err)
				return
			}
		}
		if s == nil {
			if r.Method != http.MethodGet {
				http.Error(w, "signed out: sign in again", http.StatusUnauthorized)
				return
			}
			setCookie(w, r, sessionCookie, "", -1)
			http.Redirect(w, r, "/signin?next="+url.QueryEscape(r.URL.RequestURI()), http.StatusSeeOther)
			return
		}
		if r.Method == http.MethodPost {
			if !sameToken(r.PostFormValue("csrf"), s.csrf) {
				http.Error(w, "forbidden: the form's CSRF token is missing or wrong; reload the page", http.StatusForbidden)
				return
			}
		}
		c, err := u.rt.Client(s.tenant)
		if err != nil {
			u.errorPage(w, r, s, err)
			return
		}
		s.client = c
		h(w, r, s)
	}
}

func sameToken(got, want string) bool {
	return got != "" && want != "" && subtle.ConstantTimeCompare([]byte(got), []byte(want)) == 1
}

// safeNext keeps a post-sign-in redirect on this site.
func safeNext(next string) string {
	if !strings.HasPrefix(next, "/") || strings.HasPrefix(next, "//") || strings.HasPrefix(next, "/\\") {
		return "/"
	}
	return next
}

type signinData struct {
	Next  string
	Token string
}

func (u *UI) signinPage(w http.ResponseWriter, r *http.Request) {
	tok := randomToken()
	setCookie(w, r, signinCookie, tok, 3600)
	u.render(w, r, http.StatusOK, "signin", nil, &pageData{Title: "Sign in",
		Data: signinData{Next: safeNext(r.URL.Query().Get("next")), Token: tok}})
}

func (u *UI) signin(w http.ResponseWriter, r *http.Request) {
	r.Body = http.MaxBytesReader(w, r.Body, 16<<10)
	c, err := r.Cookie(signinCookie)
	if err != nil || !sameToken(r.PostFormValue("csrf"), c.Value) {
		http.Error(w, "forbidden: the sign-in form's CSRF token is missing or wrong; reload the page", http.StatusForbidden)
		return
	}
	next := safeNext(r.PostFormValue("next"))
	k, err := httpapi.Authenticate(r.Context(), u.keys, strings.TrimSpace(r.PostFormValue("key")))
	if errors.Is(err, httpapi.ErrKeyRejected) {
		tok := randomToken()
		setCookie(w, r, signinCookie, tok, 3600)
		u.render(w, r, http.StatusUnauthorized, "signin", nil, &pageData{Title: "Sign in",
			Error: "That key is unknown or revoked.", Data: signinData{Next: next, Token: tok}})
		return
	}
	if err != nil {
		u.fail(w, r, err)
		return
	}
	tenant := k.Tenant
	if k.Admin {
		tenant = herald.DefaultTenant
	}
	s := u.sessions.create(k.Hash, k.ID, k.Admin, tenant)
	setCookie(w, r, signinCookie, "", -1)
	setCookie(w, r, sessionCookie, s.token, int(u.sessions.ttl/time.Second))
	http.Redirect(w, r, next, http.StatusSeeOther)
}

func (u *UI) signout(w http.ResponseWriter, r *http.Request, s *session) {
	u.sessions.delete(s.token)
	setCookie(w, r, sessionCookie, "", -1)
	http.Redirect(w, r, "/signin", http.StatusSeeOther)
}

// switchTenant lets an admin session act on another tenant.
func (u *UI) switchTenant(w http.ResponseWriter, r *http.Request, s *session) {
	if !s.admin {
		http.Error(w, "forbidden: only an admin key can switch tenant", http.StatusForbidden)
		return
	}
	tenant := strings.TrimSpace(r.PostFormValue("tenant"))
	if _, err := u.rt.Client(tenant); err != nil {
		u.errorPage(w, r, s, err)
		return
	}
	u.sessions.setTenant(s.token, tenant)
	http.Redirect(w, r, "/", http.StatusSeeOther)
}
