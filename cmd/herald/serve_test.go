package main

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/heraldwf/herald"
	"github.com/heraldwf/herald/internal/apitest"
	"github.com/heraldwf/herald/internal/storeurl"
	"github.com/heraldwf/herald/internal/testdb"
)

// served is a herald serve running in-process.
type served struct {
	t      *testing.T
	stderr *apitest.Buffer
	url    string // http://host:port of the API
	// metrics is http://host:port of /metrics.
	metrics string
	stop    func() int // cancels the context (SIGTERM) and returns the exit code
}

// startServe runs herald serve with args (plus --addr 127.0.0.1:0) and
// waits until it listens.
func startServe(t *testing.T, getenv func(string) string, args ...string) *served {
	t.Helper()
	ctx, cancel := context.WithCancel(t.Context())
	stderr := &apitest.Buffer{}
	done := make(chan int, 1)
	go func() {
		done <- runEnv(ctx, append([]string{"serve", "--addr", "127.0.0.1:0", "--shutdown-timeout", "20s"}, args...), io.Discard, stderr, getenv)
	}()
	s := &served{t: t, stderr: stderr}
	stopped := false
	code := 0
	s.stop = func() int {
		if !stopped {
			stopped = true
			cancel()
			select {
			case code = <-done:
			case <-time.After(time.Minute):
				t.Fatalf("herald serve did not stop within a minute\n%s", stderr)
			}
		}
		return code
	}
	t.Cleanup(func() { s.stop() })
	listening := regexp.MustCompile(`listening on (http://[0-9.:]+)[^\n]*?metrics\W+(http://[0-9.:]+)/metrics`)
	deadline := time.Now().Add(time.Minute)
	for {
		if m := listening.FindStringSubmatch(stderr.String()); m != nil {
			s.url, s.metrics = m[1], m[2]
			return s
		}
		select {
		case code := <-done:
			t.Fatalf("herald serve ended with %d before listening:\n%s", code, stderr)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("herald serve is not listening after a minute:\n%s", stderr)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// get returns the status and body of GET url with key (none if "").
func get(t *testing.T, url, key string) (int, string) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), "GET", url, nil)
	if err != nil {
		t.Fatal(err)
	}
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, string(b)
}

var printedKey = regexp.MustCompile(`HERALD_API_KEY=(hk_\S+)`)

// TestServe: herald serve on a new SQLite file prints a generated admin
// key once, answers /healthz, /readyz and /metrics (with the engine's and
// the bus's metrics once the bus has routed an event), serves the API to
// that key, and stops on cancellation with exit 0; a second start on the
// same file prints no key.
func TestServe(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	db := filepath.Join(dir, "herald.db")
	s := startServe(t, env(), "--db", db)

	keys := printedKey.FindAllStringSubmatch(s.stderr.String(), -1)
	if len(keys) != 1 {
		t.Fatalf("want the admin key printed once, got %d times:\n%s", len(keys), s.stderr)
	}
	admin := keys[0][1]
	if !strings.Contains(s.stderr.String(), "store SQLite file "+db+" (new)") {
		t.Errorf("the start does not say which store:\n%s", s.stderr)
	}
	if code, body := get(t, s.url+"/healthz", ""); code != 200 || !strings.Contains(body, `"ok"`) {
		t.Errorf("/healthz: %d %s", code, body)
	}
	if code, body := get(t, s.url+"/readyz", ""); code != 200 || !strings.Contains(body, `"ok"`) {
		t.Errorf("/readyz: %d %s", code, body)
	}
	if code, body := get(t, s.url+"/v1/keys", admin); code != 200 || !strings.Contains(body, `"admin": true`) && !strings.Contains(body, `"admin":true`) {
		t.Errorf("/v1/keys with the printed key: %d %s", code, body)
	}
	if code, _ := get(t, s.url+"/v1/keys", ""); code != 401 {
		t.Errorf("/v1/keys without a key: %d", code)
	}
	// The CLI against it, with the printed key.
	var out, errOut bytes.Buffer
	if code := runEnv(t.Context(), []string{"keys", "list", "--server", s.url}, &out, &errOut, env("HERALD_API_KEY", admin)); code != exitOK ||
		!strings.Contains(out.String(), "admin (generated at first start)") {
		t.Errorf("herald keys list: exit %d\n%s%s", code, &out, &errOut)
	}
	out.Reset()
	if code := runEnv(t.Context(), []string{"instances", "start", "approval", "--id", "order-1", "--input",
		`{"item": "desk", "amount": 800, "deadline": 3600000000000, "escalation": 1000000000}`},
		&out, &errOut, env("HERALD_SERVER", s.url, "HERALD_API_KEY", admin)); code != exitOK || out.String() != "order-1\n" {
		t.Errorf("herald instances start: exit %d\n%s%s", code, &out, &errOut)
	}

	// A subscription and an event, written by another client of the same
	// store: the server's bus routes and runs it, and /metrics shows it.
	withClient(t, db, func(ctx context.Context, c *herald.Client) {
		if _, err := c.PutSubscription(ctx, herald.Subscription{ID: "sales", Pattern: "order.*", Enabled: true,
			Target: herald.Target{Kind: herald.TargetHandler, Handler: "notify-sales"}}); err != nil {
			t.Fatal(err)
		}
		if _, err := c.Publish(ctx, "order.paid", map[string]int{"amount": 10}); err != nil {
			t.Fatal(err)
		}
	})
	want := []string{"events_matched_total{", "executions_queued_total{", "executions_success_total{",
		"execution_duration_histogram_bucket{", "herald_turns_total", "go_goroutines"}
	deadline := time.Now().Add(time.Minute)
	for {
		_, body := get(t, s.url+"/metrics", "")
		missing := ""
		for _, w := range want {
			if !strings.Contains(body, w) {
				missing = w
				break
			}
		}
		if missing == "" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("/metrics lacks %s after a minute:\n%s", missing, body)
		}
		time.Sleep(20 * time.Millisecond)
	}

	if code := s.stop(); code != exitOK {
		t.Fatalf("herald serve stopped with %d:\n%s", code, s.stderr)
	}
	if !strings.Contains(s.stderr.String(), "herald serve: stopped") {
		t.Errorf("no stop line:\n%s", s.stderr)
	}

	// Again on the same store: no key printed, the first one still works.
	s2 := startServe(t, env(), "--db", db)
	if strings.Contains(s2.stderr.String(), "HERALD_API_KEY=") || !strings.Contains(s2.stderr.String(), "(existing)") {
		t.Errorf("second start:\n%s", s2.stderr)
	}
	if code, _ := get(t, s2.url+"/v1/keys", admin); code != 200 {
		t.Errorf("the first start's key on the second: %d", code)
	}
	if code := s2.stop(); code != exitOK {
		t.Fatalf("second herald serve stopped with %d:\n%s", code, s2.stderr)
	}
}

// TestServe_EnvAdminKeyAndMetricsAddr: HERALD_ADMIN_KEY becomes the admin
// key (nothing printed), HERALD_DB names the store, and --metrics-addr
// moves /metrics off the API's address.
func TestServe_EnvAdminKeyAndMetricsAddr(t *testing.T) {
	t.Parallel()
	db := filepath.Join(t.TempDir(), "env.db")
	adminKey := strings.Repeat("k", 40)
	s := startServe(t, env("HERALD_ADMIN_KEY", adminKey, "HERALD_DB", db, "HERALD_LOG_FORMAT", "json"), "--metrics-addr", "127.0.0.1:0")
	if printedKey.MatchString(s.stderr.String()) {
		t.Errorf("a key was printed although HERALD_ADMIN_KEY is set:\n%s", s.stderr)
	}
	if !strings.Contains(s.stderr.String(), `"msg":"herald serve: store SQLite file `+db+` (new)"`) {
		t.Errorf("no JSON start line naming the store:\n%s", s.stderr)
	}
	if code, _ := get(t, s.url+"/v1/keys", adminKey); code != 200 {
		t.Errorf("HERALD_ADMIN_KEY is not the admin key: %d", code)
	}
	if s.metrics == s.url {
		t.Fatalf("/metrics is on the API's address %s", s.url)
	}
	if code, body := get(t, s.metrics+"/metrics", ""); code != 200 || !strings.Contains(body, "go_goroutines") {
		t.Errorf("/metrics on --metrics-addr: %d", code)
	}
	if code, _ := get(t, s.url+"/metrics", ""); code != 404 {
		t.Errorf("/metrics on the API's address with --metrics-addr: %d, want 404", code)
	}
	if code := s.stop(); code != exitOK {
		t.Fatalf("exit %d:\n%s", code, s.stderr)
	}
}

// TestServe_UsageErrors: bad serve command lines exit 2 before opening a
// store.
func TestServe_UsageErrors(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		args []string
		env  []string
		want string
	}{
		{[]string{"serve", "--db", "a.db", "--postgres", "postgres://h/db"}, nil, "give one"},
		{[]string{"serve", "--postgres", "sqlite:a.db"}, nil, "wants a postgres:// URL"},
		{[]string{"serve", "--log-format", "xml"}, nil, "want text or json"},
		{[]string{"serve", "--shutdown-timeout", "0s"}, nil, "must be positive"},
		{[]string{"serve", "extra"}, nil, `unexpected argument "extra"`},
		{[]string{"serve", "--db", "mysql://u:secret@h/db"}, nil, "invalid store location"},
		{[]string{"serve"}, []string{"HERALD_DB", "a.db", "HERALD_DATABASE_URL", "postgres://h/db"}, "both name a store"},
	} {
		var out, errOut bytes.Buffer
		code := runEnv(t.Context(), tc.args, &out, &errOut, env(tc.env...))
		if code != exitUsage || !strings.Contains(errOut.String(), tc.want) || out.Len() > 0 {
			t.Errorf("herald %q: exit %d, stderr %q; want 2 and %q", tc.args, code, errOut.String(), tc.want)
		}
		if strings.Contains(errOut.String(), "secret") {
			t.Errorf("herald %q shows a password", tc.args)
		}
	}
}

// TestServe_Postgres: two herald serve on one PostgreSQL schema: the first
// prints the generated admin key, the second none, both are ready and
// serve the API with that key.
func TestServe_Postgres(t *testing.T) {
	t.Parallel()
	url, err := storeurl.PostgresLocation(testdb.PostgresURL(t), testdb.NewSchema(t))
	if err != nil {
		t.Fatal(err)
	}
	a := startServe(t, env("HERALD_DATABASE_URL", url))
	keys := printedKey.FindAllStringSubmatch(a.stderr.String(), -1)
	if len(keys) != 1 || !strings.Contains(a.stderr.String(), "store PostgreSQL database ") {
		t.Fatalf("first start:\n%s", a.stderr)
	}
	b := startServe(t, env(), "--postgres", url)
	if printedKey.MatchString(b.stderr.String()) {
		t.Errorf("the second server printed a key:\n%s", b.stderr)
	}
	for _, s := range []*served{a, b} {
		if code, body := get(t, s.url+"/readyz", ""); code != 200 {
			t.Errorf("/readyz: %d %s", code, body)
		}
		if code, _ := get(t, s.url+"/v1/instances", keys[0][1]); code != 200 {
			t.Errorf("/v1/instances with the key: %d", code)
		}
	}
	for _, s := range []*served{a, b} {
		if code := s.stop(); code != exitOK {
			t.Errorf("exit %d:\n%s", code, s.stderr)
		}
	}
}
