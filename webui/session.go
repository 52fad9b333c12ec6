package webui

import (
	"container/list"
	"crypto/rand"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
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

// Session limits: what one key, one tenant and the whole process may
// hold, and how fast one key may sign in. One key's sign-ins only ever
// end that key's own older sessions, one tenant's only that tenant's:
// nobody can sign another tenant (or the admin) out by signing in.
const (
	// DefaultSessionsPerKey is Options.SessionsPerKey's default.
	DefaultSessionsPerKey = 64
	// DefaultSessionsPerTenant is Options.SessionsPerTenant's default.
	DefaultSessionsPerTenant = 1000
	// maxSessions bounds the process's session table. When it is full a
	// sign-in is refused (503) until a session expires or signs out:
	// ending someone else's session to make room is what let one tenant
	// sign every user out.
	maxSessions = 10000
	// signinBurst sign-ins with one key go through at once; after that,
	// one per signinEvery (a token bucket per key). A refused sign-in is
	// answered 429 with Retry-After.
	signinBurst = 20
	signinEvery = 3 * time.Second
)

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
	expires time.Time

	// The store's bookkeeping (only on the stored session, under its
	// lock): the session's place in the process's list, its key's and
	// its owner's.
	owner                owner
	inAll, inKey, inOwnr *list.Element
}

// Tenant is the tenant the session acts on.
func (s *session) Tenant() string { return s.tenant }

// Admin reports an admin key's session.
func (s *session) Admin() bool { return s.admin }

// KeyID is the signed-in key's public id.
func (s *session) KeyID() string { return s.keyID }

// owner is whose sessions count together against SessionsPerTenant: a
// tenant's keys, or the admin keys (whose sessions can switch tenant).
type owner struct {
	admin  bool
	tenant string
}

// keyState is one key's sessions, oldest first, and its sign-in bucket.
type keyState struct {
	sessions list.List
	tokens   float64   // sign-ins allowed now, at most signinBurst
	at       time.Time // when tokens was computed
}

// refill brings the bucket to now.
func (k *keyState) refill(now time.Time) {
	if d := now.Sub(k.at); d > 0 {
		k.tokens = min(signinBurst, k.tokens+float64(d)/float64(signinEvery))
		k.at = now
	}
}

// signinRefused is a sign-in the store turned away; RetryAfter is when
// trying again can succeed.
type signinRefused struct {
	status     int // 429 (this key signs in too fast) or 503 (the table is full)
	RetryAfter time.Duration
}

func (e *signinRefused) Error() string {
	if e.status == http.StatusTooManyRequests {
		return "too many sign-ins with this key"
	}
	return "the server holds as many sessions as it can"
}

// sessionStore keeps the sessions of this process (sticky sessions are
// needed behind a load balancer). Every session is on three lists, oldest
// first: the process's (TTL is one for all, so that is also expiry order:
// expired sessions are dropped from its front), its key's and its owner's
// (the oldest of those is what a sign-in over the cap ends). Creating a
// session is O(1).
type sessionStore struct {
	ttl               time.Duration
	now               func() time.Time
	perKey, perTenant int

	mu     sync.Mutex
	m      map[string]*session
	all    list.List
	keys   map[string]*keyState
	owners map[owner]*list.List
}

func newSessionStore(ttl time.Duration, now func() time.Time, perKey, perTenant int) *sessionStore {
	return &sessionStore{ttl: ttl, now: now, perKey: perKey, perTenant: perTenant, m: map[string]*session{},
		keys: map[string]*keyState{}, owners: map[owner]*list.List{}}
}

func randomToken() string {
	var b [32]byte
	_, _ = rand.Read(b[:])
	return base64.RawURLEncoding.EncodeToString(b[:])
}

// create signs key keyID in: a *signinRefused when the key signs in too
// fast or the table is full. Over the key's cap its oldest session ends,
// over its owner's cap the owner's oldest; nobody else's.
func (st *sessionStore) create(keyHash []byte, keyID string, admin bool, tenant string) (*session, error) {
	now := st.now()
	st.mu.Lock()
	defer st.mu.Unlock()
	for e := st.all.Front(); e != nil && !now.Before(e.Value.(*session).expires); e = st.all.Front() {
		st.removeLocked(e.Value.(*session), now)
	}
	k := st.keys[keyID]
	if k == nil {
		k = &keyState{tokens: signinBurst, at: now}
		st.keys[keyID] = k
	}
	k.refill(now)
	if k.tokens < 1 {
		return nil, &signinRefused{status: http.StatusTooManyRequests,
			RetryAfter: time.Duration((1 - k.tokens) * float64(signinEvery))}
	}
	o := owner{admin: admin}
	if !admin {
		o.tenant = tenant
	}
	for k.sessions.Len() >= st.perKey {
		st.removeLocked(k.sessions.Front().Value.(*session), now)
	}
	ol := st.owners[o]
	for ol != nil && ol.Len() >= st.perTenant {
		st.removeLocked(ol.Front().Value.(*session), now)
		ol = st.owners[o]
	}
	if len(st.m) >= maxSessions {
		return nil, &signinRefused{status: http.StatusServiceUnavailable,
			RetryAfter: st.all.Front().Value.(*session).expires.Sub(now)}
	}
	k.tokens--
	st.keys[keyID] = k // again: ending its last session may have dropped it
	if ol == nil {
		ol = &list.List{}
		st.owners[o] = ol
	}
	s := &session{token: randomToken(), keyHash: keyHash, keyID: keyID, admin: admin, tenant: tenant,
		csrf: randomToken(), expires: now.Add(st.ttl), owner: o}
	s.inAll, s.inKey, s.inOwnr = st.all.PushBack(s), k.sessions.PushBack(s), ol.PushBack(s)
	st.m[s.token] = s
	c := *s
	return &c, nil
}

// removeLocked ends s. A key's state goes once it has no session and a
// full bucket (nothing left to remember).
func (st *sessionStore) removeLocked(s *session, now time.Time) {
	delete(st.m, s.token)
	st.all.Remove(s.inAll)
	if k := st.keys[s.keyID]; k != nil {
		k.sessions.Remove(s.inKey)
		if k.refill(now); k.sessions.Len() == 0 && k.tokens >= signinBurst {
			delete(st.keys, s.keyID)
		}
	}
	if ol := st.owners[s.owner]; ol != nil {
		if ol.Remove(s.inOwnr); ol.Len() == 0 {
			delete(st.owners, s.owner)
		}
	}
}

// get returns the live session of token, or nil.
func (st *sessionStore) get(token string) *session {
	st.mu.Lock()
	defer st.mu.Unlock()
	s := st.m[token]
	if s == nil {
		return nil
	}
	if now := st.now(); !now.Before(s.expires) {
		st.removeLocked(s, now)
		return nil
	}
	c := *s
	return &c
}

func (st *sessionStore) delete(token string) {
	st.mu.Lock()
	defer st.mu.Unlock()
	if s := st.m[token]; s != nil {
		st.removeLocked(s, st.now())
	}
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
	s, err := u.sessions.create(k.Hash, k.ID, k.Admin, tenant)
	var refused *signinRefused
	if errors.As(err, &refused) {
		secs := int64((refused.RetryAfter + time.Second - 1) / time.Second)
		secs = max(secs, 1)
		w.Header().Set("Retry-After", strconv.FormatInt(secs, 10))
		msg := fmt.Sprintf("Too many sign-ins with this key: try again in %s.", formatDuration(time.Duration(secs)*time.Second))
		if refused.status == http.StatusServiceUnavailable {
			msg = fmt.Sprintf("The server holds as many sessions as it can: try again in %s, or sign out elsewhere.", formatDuration(time.Duration(secs)*time.Second))
		}
		tok := randomToken()
		setCookie(w, r, signinCookie, tok, 3600)
		u.render(w, r, refused.status, "signin", nil, &pageData{Title: "Sign in", Error: msg,
			Data: signinData{Next: next, Token: tok}})
		return
	}
	if err != nil {
		u.fail(w, r, err)
		return
	}
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
