// Package apitest starts the HTTP API (package httpapi) for tests: a
// runtime on a fresh real store — a SQLite file, or a fresh PostgreSQL
// schema with HERALD_TEST_BACKEND=postgres (internal/testdb) — the API
// over it with an admin key, served by httptest. The tests of httpapi and
// of the herald command's client commands share it.
package apitest

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/heraldwf/herald"
	"github.com/heraldwf/herald/httpapi"
	"github.com/heraldwf/herald/internal/storeurl"
	"github.com/heraldwf/herald/internal/testdb"
	"github.com/heraldwf/herald/storage"
)

// Options adjust the server New starts. The zero value is a started
// runtime with nothing registered and logs discarded.
type Options struct {
	// Logger logs for the runtime and the API; nil discards.
	Logger *slog.Logger
	// Configure changes the runtime's config and the API's options before
	// they are used (the API's Runtime is set afterwards).
	Configure func(*herald.Config, *httpapi.Options)
	// Register registers workflows and handlers before the runtime
	// starts.
	Register func(*herald.Runtime)
	// NoStart leaves the runtime unstarted: the test starts it
	// (Runtime.Start). It is stopped at cleanup all the same.
	NoStart bool
	// Location is the store to open (a storeurl location) instead of a
	// fresh one of the backend HERALD_TEST_BACKEND names: a SQLite file on
	// a file system the test controls (internal/crashfs).
	Location string
}

// Server is a running API on a real store.
type Server struct {
	// Ctx ends with the test, or after two minutes; a fuzz target's
	// server (t a *testing.F) has no such limit, since a fuzzing worker
	// runs as long as -fuzztime.
	Ctx     context.Context
	Store   storage.Store
	Runtime *herald.Runtime
	API     *httpapi.API
	HTTP    *httptest.Server
	// URL is HTTP.URL.
	URL string
	// Admin is the admin key's secret.
	Admin string
	// PostgresApp is the application_name of the store's connections on
	// PostgreSQL ("" on SQLite), unique to the server: a test kills them
	// with pg_terminate_backend without touching anyone else's.
	PostgresApp string
}

// New starts a runtime and the API over it on a fresh store of the backend
// HERALD_TEST_BACKEND names, with an admin key. Everything is stopped and
// closed when t ends. t may be a fuzz target's *testing.F: one server for
// every input.
func New(t testing.TB, o Options) *Server {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	if _, fuzz := t.(*testing.F); fuzz {
		ctx, cancel = context.WithCancel(t.Context())
	}
	t.Cleanup(cancel)
	loc, app := o.Location, ""
	if loc == "" {
		loc, app = location(t)
	}
	st, err := storeurl.Open(ctx, loc)
	if err != nil {
		t.Fatalf("open store: %v", err)
	}
	t.Cleanup(func() { st.Close() })

	logger := o.Logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	cfg := &herald.Config{ClientConfig: herald.ClientConfig{Logger: logger}, PollInterval: 20 * time.Millisecond}
	apiOpts := httpapi.Options{Keys: st, Logger: logger}
	if o.Configure != nil {
		o.Configure(cfg, &apiOpts)
	}
	rt, err := herald.NewRuntime(st, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if o.Register != nil {
		o.Register(rt)
	}
	if !o.NoStart {
		if err := rt.Start(ctx); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() {
		sctx, c := context.WithTimeout(context.Background(), 30*time.Second)
		defer c()
		rt.Stop(sctx)
	})
	apiOpts.Runtime = rt
	api, err := httpapi.New(apiOpts)
	if err != nil {
		t.Fatal(err)
	}
	admin, err := httpapi.EnsureAdminKey(ctx, st, "", time.Now())
	if err != nil || admin == "" {
		t.Fatalf("admin key: %q, %v", admin, err)
	}
	srv := httptest.NewServer(api)
	t.Cleanup(srv.Close)
	return &Server{Ctx: ctx, Store: st, Runtime: rt, API: api, HTTP: srv, URL: srv.URL, Admin: admin, PostgresApp: app}
}

// location is a fresh store's location on the backend HERALD_TEST_BACKEND
// names: a file in t's temporary directory, or a fresh schema on the
// server HERALD_TEST_POSTGRES_URL names (dropped when t ends), whose
// connections carry the application_name app.
func location(t testing.TB) (loc, app string) {
	t.Helper()
	if testdb.Backend() != "postgres" {
		return filepath.Join(t.TempDir(), "herald.db"), ""
	}
	schema := testdb.NewSchema(t)
	loc, err := storeurl.PostgresLocation(testdb.PostgresURL(t), schema)
	if err != nil {
		t.Fatal(err)
	}
	u, err := url.Parse(loc)
	if err != nil {
		t.Fatal(err)
	}
	app = "herald-" + schema
	q := u.Query()
	q.Set("application_name", app)
	u.RawQuery = q.Encode()
	return u.String(), app
}

// WaitGo is a workflow that waits for an event "go" and returns its
// payload: an instance that stays running until the test raises it.
func WaitGo(ctx *herald.Context, _ json.RawMessage) (json.RawMessage, error) {
	var out json.RawMessage
	err := ctx.WaitEvent("go").Get(&out)
	return out, err
}

// Buffer is a buffer that many goroutines write (a server's logs or
// stderr) while a test reads it.
type Buffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *Buffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *Buffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

// Eventually polls cond until it holds, failing t when ctx ends first;
// what names the condition, and the failure repeats cond's last error.
func Eventually(t testing.TB, ctx context.Context, what string, cond func() (bool, error)) {
	t.Helper()
	for {
		ok, err := cond()
		if ok {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatalf("%s: not reached before the deadline (last error: %v)", what, err)
		case <-time.After(10 * time.Millisecond):
		}
	}
}
