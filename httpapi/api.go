// Package httpapi is Herald's HTTP JSON API: an http.Handler over a
// Runtime, which `herald serve` mounts and which users embed in their own
// binaries to serve their own workflows.
//
//	api, err := httpapi.New(httpapi.Options{Runtime: rt, Keys: store})
//	http.ListenAndServe(addr, api)
//
// Routes live under /v1 and need `Authorization: Bearer <key>` (see
// auth.go); /healthz, /readyz and /v1/openapi.json need none. Request and
// response bodies are the types of package wire. Errors are RFC 9457
// problem documents whose status and code come from one table
// (problem.go). The route table (routes.go) is also the source of the
// OpenAPI 3.1 document served at /v1/openapi.json.
package httpapi

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"time"

	"github.com/heraldwf/herald"
	"github.com/heraldwf/herald/storage"
)

// DefaultMaxBodyBytes is the request body cap when Options.MaxBodyBytes is
// zero: the engine's default payload cap plus room for the envelope.
const DefaultMaxBodyBytes = herald.DefaultMaxPayloadBytes + 64<<10

// Options configure the API.
type Options struct {
	// Runtime runs the workflows; the API acts through its tenant clients.
	// Required.
	Runtime *herald.Runtime
	// Keys stores the API keys (usually the runtime's store). Required.
	Keys storage.KeyStore
	// Ready reports whether the server can serve (/readyz): typically a
	// ping of the store. Nil: always ready.
	Ready func(ctx context.Context) error
	// Logger receives access logs (one line per request, without payloads
	// or secrets) and the errors behind 500 answers. Nil: slog.Default().
	Logger *slog.Logger
	// MaxBodyBytes caps a request body; zero means DefaultMaxBodyBytes. A
	// larger body is refused with 413.
	MaxBodyBytes int64
	// Now is the clock keys' times come from; nil means time.Now.
	Now func() time.Time
}

// API is the HTTP API. It is an http.Handler.
type API struct {
	rt      *herald.Runtime
	keys    storage.KeyStore
	ready   func(ctx context.Context) error
	logger  *slog.Logger
	maxBody int64
	now     func() time.Time
	auth    *authenticator
	routes  []*route
	mux     *http.ServeMux
	handler http.Handler
}

// New returns the API over opts.Runtime. It refuses a nil Runtime or Keys
// and a negative MaxBodyBytes.
func New(opts Options) (*API, error) {
	if opts.Runtime == nil {
		return nil, errors.New("httpapi: Options.Runtime is required")
	}
	if opts.Keys == nil {
		return nil, errors.New("httpapi: Options.Keys is required")
	}
	if opts.MaxBodyBytes < 0 {
		return nil, errors.New("httpapi: Options.MaxBodyBytes is negative")
	}
	a := &API{
		rt:      opts.Runtime,
		keys:    opts.Keys,
		ready:   opts.Ready,
		logger:  opts.Logger,
		maxBody: opts.MaxBodyBytes,
		now:     opts.Now,
		mux:     http.NewServeMux(),
	}
	if a.logger == nil {
		a.logger = slog.Default()
	}
	if a.maxBody == 0 {
		a.maxBody = DefaultMaxBodyBytes
	}
	if a.now == nil {
		a.now = time.Now
	}
	a.auth = newAuthenticator(a.keys, a.now)
	a.register()
	a.handler = a.withRecover(a.withAccessLog(a.mux))
	a.handler = a.withTracing(a.handler) // OpenTelemetry server spans (tracing.go)
	return a, nil
}

// ServeHTTP serves the API.
func (a *API) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	a.handler.ServeHTTP(w, r)
}
