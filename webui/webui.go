// Package webui is Herald's web admin UI: server-rendered pages (html/template,
// so everything shown is escaped) over a Runtime, for operators who want to
// see where an event went without reading JSON. `herald serve` mounts it at
// / next to the HTTP API (see Mount).
//
//	ui, err := webui.New(webui.Options{Runtime: rt, Keys: store, Metrics: registry})
//	webui.Mount(mux, api, ui)
//
// Signing in takes an API key (a tenant key, or the admin key, which can
// switch tenant); it is checked as the API checks a bearer key
// (httpapi.Authenticate). Sessions live in the process's memory: behind a
// load balancer that spreads requests over several servers, use sticky
// sessions (or sign in again after a move). A session ends when it expires
// (Options.SessionTTL), at sign-out, at the first request after its key
// is revoked, or when a later sign-in with the same key or tenant goes over
// Options.SessionsPerKey or SessionsPerTenant (the oldest of that key's or
// tenant's ends: one tenant's sign-ins never end another's sessions).
// Sign-in is rate-limited per key (429 with Retry-After). Every state-changing form carries a CSRF token; a POST
// without it is refused with 403.
//
// Every page acts through the signed-in tenant's herald.Client, never the
// store, so another tenant's ids are "not found". Pages load one page of a
// list at a time. The assets (CSS, a few lines of JavaScript for the
// polling of live parts) are embedded; there is no build step.
package webui

import (
	"embed"
	"errors"
	"fmt"
	"html/template"
	"io/fs"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/heraldwf/herald"
	"github.com/heraldwf/herald/storage"
)

//go:embed templates/*.html
var templateFS embed.FS

//go:embed static
var staticFS embed.FS

// DefaultSessionTTL is how long a session lasts when Options.SessionTTL is
// zero.
const DefaultSessionTTL = 12 * time.Hour

// pageSize is how many rows a list page shows.
const pageSize = 50

// Options configure the UI.
type Options struct {
	// Runtime runs the workflows; every page acts through its tenant
	// clients. Required.
	Runtime *herald.Runtime
	// Keys stores the API keys the sign-in checks. Required.
	Keys storage.KeyStore
	// Metrics is the registry /metrics serves (the runtime's Observer
	// writes into it): the overview reads its numbers there. Nil: the
	// overview says metrics are not configured.
	Metrics prometheus.Gatherer
	// Logger receives the errors behind 500 pages (never payloads or
	// keys). Nil: slog.Default().
	Logger *slog.Logger
	// SessionTTL is how long a session lasts after sign-in; zero means
	// DefaultSessionTTL.
	SessionTTL time.Duration
	// SessionsPerKey caps the sessions of one API key: a sign-in over it
	// ends that key's oldest session (never anyone else's). Zero means
	// DefaultSessionsPerKey.
	SessionsPerKey int
	// SessionsPerTenant caps the sessions of one tenant's keys (the admin
	// keys count as one more tenant): a sign-in over it ends that tenant's
	// oldest session. Zero means DefaultSessionsPerTenant.
	SessionsPerTenant int
	// Now is the clock of sessions, of the sign-in rate limit, of the
	// overview and of the times pages show relative to now; nil means
	// time.Now.
	Now func() time.Time
}

// UI is the web admin UI. It is an http.Handler.
type UI struct {
	rt       *herald.Runtime
	keys     storage.KeyStore
	metrics  prometheus.Gatherer
	logger   *slog.Logger
	now      func() time.Time
	sessions *sessionStore
	pages    map[string]*template.Template
	mux      *http.ServeMux
	overview *sampler
}

// New returns the UI over opts.Runtime.
func New(opts Options) (*UI, error) {
	if opts.Runtime == nil {
		return nil, errors.New("webui: Options.Runtime is required")
	}
	if opts.Keys == nil {
		return nil, errors.New("webui: Options.Keys is required")
	}
	if opts.SessionTTL < 0 {
		return nil, errors.New("webui: Options.SessionTTL is negative")
	}
	if opts.SessionsPerKey < 0 || opts.SessionsPerTenant < 0 {
		return nil, errors.New("webui: Options.SessionsPerKey and SessionsPerTenant must not be negative")
	}
	u := &UI{rt: opts.Runtime, keys: opts.Keys, metrics: opts.Metrics, logger: opts.Logger, now: opts.Now,
		mux: http.NewServeMux()}
	if u.logger == nil {
		u.logger = slog.Default()
	}
	if u.now == nil {
		u.now = time.Now
	}
	ttl := opts.SessionTTL
	if ttl == 0 {
		ttl = DefaultSessionTTL
	}
	perKey, perTenant := opts.SessionsPerKey, opts.SessionsPerTenant
	if perKey == 0 {
		perKey = DefaultSessionsPerKey
	}
	if perTenant == 0 {
		perTenant = DefaultSessionsPerTenant
	}
	u.sessions = newSessionStore(ttl, u.now, perKey, perTenant)
	u.overview = newSampler(u.metrics, u.now)
	u.overview.sample() // the first point of "the last minutes"
	pages, err := parsePages()
	if err != nil {
		return nil, err
	}
	u.pages = pages
	u.routes()
	return u, nil
}

// Mount puts the API and the UI on mux as `herald serve` serves them: the
// API at /v1/, /healthz and /readyz, the UI at everything else.
func Mount(mux *http.ServeMux, api, ui http.Handler) {
	mux.Handle("/v1/", api)
	mux.Handle("/healthz", api)
	mux.Handle("/readyz", api)
	mux.Handle("/", ui)
}

// ServeHTTP serves the UI.
func (u *UI) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	h.Set("Content-Security-Policy", "default-src 'self'; style-src 'self'; script-src 'self'; img-src 'self' data:; frame-ancestors 'none'; form-action 'self'")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("X-Frame-Options", "DENY")
	h.Set("Referrer-Policy", "same-origin")
	defer func() {
		if p := recover(); p != nil {
			if p == http.ErrAbortHandler {
				panic(p)
			}
			u.logger.Error("webui: panic", "path", r.URL.Path, "panic", fmt.Sprint(p))
			http.Error(w, "internal error", http.StatusInternalServerError)
		}
	}()
	u.mux.ServeHTTP(w, r)
}

func (u *UI) routes() {
	static, _ := fs.Sub(staticFS, "static")
	fileServer := http.StripPrefix("/static/", http.FileServerFS(static))
	u.mux.Handle("GET /static/", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Cache-Control", "public, max-age=3600")
		fileServer.ServeHTTP(w, r)
	}))
	u.mux.HandleFunc("GET /signin", u.signinPage)
	u.mux.HandleFunc("POST /signin", u.signin)
	u.mux.HandleFunc("POST /signout", u.authed(u.signout))
	u.mux.HandleFunc("POST /tenant", u.authed(u.switchTenant))

	u.mux.HandleFunc("GET /{$}", u.authed(u.overviewPage))
	u.mux.HandleFunc("GET /overview/live", u.authed(u.overviewLive))

	u.mux.HandleFunc("GET /instances", u.authed(u.instancesPage))
	u.mux.HandleFunc("GET /instances/{id}", u.authed(u.instancePage))
	u.mux.HandleFunc("GET /instances/{id}/live", u.authed(u.instanceLive))
	u.mux.HandleFunc("POST /instances/{id}/raise", u.authed(u.instanceSend))
	u.mux.HandleFunc("POST /instances/{id}/enqueue", u.authed(u.instanceSend))
	u.mux.HandleFunc("POST /instances/{id}/terminate", u.authed(u.instanceTerminate))

	u.mux.HandleFunc("GET /events", u.authed(u.eventPage))

	u.mux.HandleFunc("GET /correlated", u.authed(u.correlatedPage))
	u.mux.HandleFunc("GET /correlated/event", u.authed(u.correlatedEventPage))
	u.mux.HandleFunc("POST /correlated/delete", u.authed(u.correlatedDelete))

	u.mux.HandleFunc("GET /definitions", u.authed(u.definitionsPage))
	u.mux.HandleFunc("GET /definitions/{name}", u.authed(u.definitionPage))
	u.mux.HandleFunc("POST /definitions/{name}", u.authed(u.definitionSave))
	u.mux.HandleFunc("POST /definitions/{name}/delete", u.authed(u.definitionDelete))

	u.mux.HandleFunc("GET /dead-letters", u.authed(u.deadLettersPage))
	u.mux.HandleFunc("GET /dead-letters/{id}", u.authed(u.deadLetterPage))
	u.mux.HandleFunc("POST /dead-letters/reprocess", u.authed(u.deadLettersAct))
	u.mux.HandleFunc("POST /dead-letters/delete", u.authed(u.deadLettersAct))

	u.mux.HandleFunc("GET /scripts", u.authed(u.scriptsPage))
	u.mux.HandleFunc("GET /scripts/{id}", u.authed(u.scriptPage))
	u.mux.HandleFunc("POST /scripts/{id}", u.authed(u.scriptSave))

	u.mux.HandleFunc("GET /subscriptions", u.authed(u.subscriptionsPage))
	u.mux.HandleFunc("GET /subscriptions/{id}", u.authed(u.subscriptionPage))
	u.mux.HandleFunc("POST /subscriptions/{id}", u.authed(u.subscriptionSave))
	u.mux.HandleFunc("POST /subscriptions/{id}/enabled", u.authed(u.subscriptionEnable))

	u.mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		u.render(w, r, http.StatusNotFound, "error", nil, &pageData{Title: "Not found", Error: "There is no page at this address."})
	})
}

// pageData is what every page's template gets: the layout's fields and the
// page's own (Data).
type pageData struct {
	Title   string
	Nav     string
	Session *session
	CSRF    string
	Error   string
	Notice  string
	Data    any
}

// render executes page name with d into w with status. A fragment ("live"
// parts polled by the page) is rendered without the layout.
func (u *UI) render(w http.ResponseWriter, r *http.Request, status int, name string, s *session, d *pageData) {
	t := u.pages[name]
	if t == nil {
		u.fail(w, r, fmt.Errorf("no template %q", name))
		return
	}
	d.Session = s
	if s != nil {
		d.CSRF = s.csrf
	}
	var b strings.Builder
	if err := t.ExecuteTemplate(&b, "root", d); err != nil {
		u.fail(w, r, err)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_, _ = w.Write([]byte(b.String()))
}

// fail answers 500 and logs err (an engine or store error: never a payload).
func (u *UI) fail(w http.ResponseWriter, r *http.Request, err error) {
	u.logger.Error("webui: request failed", "method", r.Method, "path", r.URL.Path, "err", err)
	http.Error(w, "internal error: see the server's log", http.StatusInternalServerError)
}

// errorPage renders err as a page: not found (also for another tenant's
// ids), a refused argument, or a failure.
func (u *UI) errorPage(w http.ResponseWriter, r *http.Request, s *session, err error) {
	switch {
	case errors.Is(err, herald.ErrNotFound):
		u.render(w, r, http.StatusNotFound, "error", s, &pageData{Title: "Not found", Error: "Not found."})
	case errors.Is(err, herald.ErrInvalidArgument), errors.Is(err, herald.ErrEventInvalid):
		u.render(w, r, http.StatusBadRequest, "error", s, &pageData{Title: "Refused", Error: err.Error()})
	default:
		u.fail(w, r, err)
	}
}
