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
	"strings"
	"testing"

	"github.com/heraldwf/herald"
	"github.com/heraldwf/herald/examples/approval"
	"github.com/heraldwf/herald/examples/mailbox"
	"github.com/heraldwf/herald/httpapi"
	"github.com/heraldwf/herald/httpapi/wire"
	"github.com/heraldwf/herald/internal/apitest"
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
	logs  *apitest.Buffer
	// pgApp is the application_name of the store's connections on
	// PostgreSQL ("" on SQLite).
	pgApp string
}

// serverOption adjusts the runtime's config or the API's options.
type serverOption func(*herald.Config, *httpapi.Options)

// newServer starts a runtime (the example workflows and "echo", which
// waits for an event "go", registered) and the API over it on a fresh
// store of the backend HERALD_TEST_BACKEND names, with an admin key
// (internal/apitest). t may be a fuzz target's *testing.F: one server for
// every input.
func newServer(t testing.TB, opts ...serverOption) *server {
	t.Helper()
	return newServerAt(t, "", opts...)
}

// newServerAt is newServer on the store at location ("": a fresh one).
func newServerAt(t testing.TB, location string, opts ...serverOption) *server {
	t.Helper()
	logs := &apitest.Buffer{}
	a := apitest.New(t, apitest.Options{
		Location: location,
		Logger:   slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
		Configure: func(cfg *herald.Config, o *httpapi.Options) {
			for _, opt := range opts {
				opt(cfg, o)
			}
		},
		Register: func(rt *herald.Runtime) {
			approval.Register(rt)
			mailbox.Register(rt)
			herald.RegisterWorkflow(rt, "echo", apitest.WaitGo)
			herald.RegisterWorkflow(rt, "tally", tally) // queries_test.go
		},
	})
	return &server{t: t, ctx: a.Ctx, store: a.Store, rt: a.Runtime, api: a.API, srv: a.HTTP, admin: a.Admin, logs: logs, pgApp: a.PostgresApp}
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
	apitest.Eventually(s.t, s.ctx, what, func() (bool, error) { return cond(), nil })
}
