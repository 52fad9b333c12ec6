package httpapi_test

// The API tests' harness, written once: a server on a real store (SQLite
// file, or a fresh PostgreSQL schema with HERALD_TEST_BACKEND=postgres),
// keys, requests, and assertions on answers and problem documents.

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/heraldwf/herald"
	"github.com/heraldwf/herald/examples/approval"
	"github.com/heraldwf/herald/examples/mailbox"
	"github.com/heraldwf/herald/httpapi"
	"github.com/heraldwf/herald/httpapi/wire"
	"github.com/heraldwf/herald/internal/storeurl"
	"github.com/heraldwf/herald/internal/testdb"
	"github.com/heraldwf/herald/storage"
)

func TestMain(m *testing.M) {
	herald.ServeScriptChild() // bus scripts run in child processes of the test binary
	testdb.Main(m)
}

// server is a running API on a real store.
type server struct {
	t     testing.TB
	ctx   context.Context
	store storage.Store
	rt    *herald.Runtime
	api   *httpapi.API
	srv   *httptest.Server
	// admin is the admin key's secret.
	admin string
	logs  *logBuffer
}

// serverOption adjusts the runtime's config or the API's options.
type serverOption func(*herald.Config, *httpapi.Options)

// newServer starts a runtime (the example workflows and "echo" registered)
// and the API over it on a fresh store of the backend HERALD_TEST_BACKEND
// names, with an admin key. t may be a fuzz target's *testing.F: one
// server for every input.
func newServer(t testing.TB, opts ...serverOption) *server {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	t.Cleanup(cancel)
	var loc string
	switch testdb.Backend() {
	case "postgres":
		l, err := storeurl.PostgresLocation(testdb.PostgresURL(t), testdb.NewSchema(t))
		if err != nil {
			t.Fatal(err)
		}
		loc = l
	default:
		loc = filepath.Join(t.TempDir(), "herald.db")
	}
	st, err := storeurl.Open(ctx, loc)
	if err != nil {
		t.Fatalf("open store: %v", err)
	}
	t.Cleanup(func() { st.Close() })

	logs := &logBuffer{}
	logger := slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	cfg := &herald.Config{ClientConfig: herald.ClientConfig{Logger: logger}, PollInterval: 20 * time.Millisecond}
	apiOpts := httpapi.Options{Keys: st, Logger: logger}
	for _, o := range opts {
		o(cfg, &apiOpts)
	}
	rt, err := herald.NewRuntime(st, cfg)
	if err != nil {
		t.Fatal(err)
	}
	approval.Register(rt)
	mailbox.Register(rt)
	herald.RegisterWorkflow(rt, "echo", func(ctx *herald.Context, in json.RawMessage) (json.RawMessage, error) {
		var out json.RawMessage
		err := ctx.WaitEvent("go").Get(&out)
		return out, err
	})
	if err := rt.Start(ctx); err != nil {
		t.Fatal(err)
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
	return &server{t: t, ctx: ctx, store: st, rt: rt, api: api, srv: srv, admin: admin, logs: logs}
}

// key creates a key of tenant through the API and returns its secret.
func (s *server) key(tenant string) string {
	s.t.Helper()
	var out wire.CreateKeyResponse
	s.do(s.admin, "POST", "/v1/keys", wire.CreateKeyRequest{Tenant: tenant, Name: "test " + tenant}).ok(201, &out)
	if out.Secret == "" || out.Key.Tenant != tenant {
		s.t.Fatalf("key for %s: %+v", tenant, out)
	}
	return out.Secret
}

// answer is an HTTP answer, read whole.
type answer struct {
	t      testing.TB
	req    string // "POST /v1/…", for messages
	Status int
	Header http.Header
	Body   []byte
}

// do sends a request with key (none if ""), body (nil: none; []byte or
// string: sent as is; anything else: encoded as JSON) and header pairs
// ("Name", "value", …).
func (s *server) do(key, method, path string, body any, header ...string) *answer {
	s.t.Helper()
	var rd io.Reader
	switch b := body.(type) {
	case nil:
	case []byte:
		rd = bytes.NewReader(b)
	case string:
		rd = strings.NewReader(b)
	default:
		j, err := json.Marshal(b)
		if err != nil {
			s.t.Fatal(err)
		}
		rd = bytes.NewReader(j)
	}
	req, err := http.NewRequestWithContext(s.ctx, method, s.srv.URL+path, rd)
	if err != nil {
		s.t.Fatal(err)
	}
	if rd != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := s.srv.Client().Do(req)
	if err != nil {
		s.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		s.t.Fatal(err)
	}
	return &answer{t: s.t, req: method + " " + path, Status: resp.StatusCode, Header: resp.Header, Body: b}
}

// ok fails the test unless the answer has status; it decodes the body into
// out (if not nil).
func (a *answer) ok(status int, out any) *answer {
	a.t.Helper()
	if a.Status != status {
		a.t.Fatalf("%s: status %d, want %d; body %s", a.req, a.Status, status, a.Body)
	}
	if out != nil {
		if err := json.Unmarshal(a.Body, out); err != nil {
			a.t.Fatalf("%s: body %s: %v", a.req, a.Body, err)
		}
	}
	return a
}

// problem fails the test unless the answer is a problem document with
// status and code, and returns it.
func (a *answer) problem(status int, code string) *wire.Problem {
	a.t.Helper()
	if ct := a.Header.Get("Content-Type"); ct != "application/problem+json" {
		a.t.Fatalf("%s: Content-Type %q, want application/problem+json; status %d body %s", a.req, ct, a.Status, a.Body)
	}
	var p wire.Problem
	if err := json.Unmarshal(a.Body, &p); err != nil {
		a.t.Fatalf("%s: problem body %s: %v", a.req, a.Body, err)
	}
	if a.Status != status || p.Status != status || p.Code != code {
		a.t.Fatalf("%s: status %d, problem %d %q, want %d %q; body %s", a.req, a.Status, p.Status, p.Code, status, code, a.Body)
	}
	if p.Type != wire.ProblemTypeBase+code || p.Title == "" {
		a.t.Fatalf("%s: problem type %q title %q", a.req, p.Type, p.Title)
	}
	return &p
}

// eventually retries cond until it is true or the test's context ends.
func (s *server) eventually(what string, cond func() bool) {
	s.t.Helper()
	for !cond() {
		select {
		case <-s.ctx.Done():
			s.t.Fatalf("%s: not reached before the deadline", what)
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// logBuffer collects log lines written by many goroutines.
type logBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}
