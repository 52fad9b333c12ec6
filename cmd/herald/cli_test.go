package main

// The client commands against a real server: the HTTP API (package
// httpapi) over a runtime on a real store (SQLite, or PostgreSQL with
// HERALD_TEST_BACKEND=postgres), served by httptest, and the cobra root
// called in-process with captured stdout and stderr.

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/heraldwf/herald"
	"github.com/heraldwf/herald/httpapi"
	"github.com/heraldwf/herald/internal/apitest"
)

// apiServer is a running API on a real store.
type apiServer struct {
	t     *testing.T
	url   string
	admin string // the admin key's secret
	rt    *herald.Runtime
}

// newAPIServer starts a runtime (the examples, "wait", which waits for an
// event "go", and "inbox", which takes one message from queue "orders")
// and the API over it on a fresh store, with an admin key.
func newAPIServer(t *testing.T) *apiServer {
	t.Helper()
	return newAPIServerWith(t, nil, true)
}

// newAPIServerWith is newAPIServer with configure changing the runtime's
// configuration; with start false the runtime is not started (the test
// starts it: s.rt.Start).
func newAPIServerWith(t *testing.T, configure func(*herald.Config), start bool) *apiServer {
	t.Helper()
	a := apitest.New(t, apitest.Options{
		Configure: func(cfg *herald.Config, _ *httpapi.Options) {
			if configure != nil {
				configure(cfg)
			}
		},
		Register: func(rt *herald.Runtime) {
			registerExamples(rt)
			herald.RegisterWorkflow(rt, "wait", apitest.WaitGo)
			herald.RegisterWorkflow(rt, "inbox", func(ctx *herald.Context, in json.RawMessage) (json.RawMessage, error) {
				var out json.RawMessage
				err := ctx.Dequeue("orders").Get(&out)
				return out, err
			})
		},
		NoStart: !start,
	})
	return &apiServer{t: t, url: a.URL, admin: a.Admin, rt: a.Runtime}
}

// env returns a getenv over pairs ("NAME", "value", …).
func env(pairs ...string) func(string) string {
	m := map[string]string{}
	for i := 0; i+1 < len(pairs); i += 2 {
		m[pairs[i]] = pairs[i+1]
	}
	return func(k string) string { return m[k] }
}

// cli runs herald with args against s, the admin key coming from the
// environment (HERALD_SERVER, HERALD_API_KEY) unless extra env pairs
// replace them.
func (s *apiServer) cli(args []string, extraEnv ...string) result {
	s.t.Helper()
	ctx, cancel := context.WithTimeout(s.t.Context(), time.Minute)
	defer cancel()
	var out, errOut bytes.Buffer
	e := env(append([]string{"HERALD_SERVER", s.url, "HERALD_API_KEY", s.admin}, extraEnv...)...)
	code := runEnv(ctx, args, &out, &errOut, e)
	return result{code, out.String(), errOut.String()}
}

// waitStatus waits until the instance of tenant has status.
func (s *apiServer) waitStatus(tenant, id string, status herald.Status) {
	s.t.Helper()
	c, err := s.rt.Client(tenant)
	if err != nil {
		s.t.Fatal(err)
	}
	deadline := time.Now().Add(time.Minute)
	for {
		in, err := c.Status(s.t.Context(), id)
		if err == nil && in.Status == status {
			return
		}
		if time.Now().After(deadline) {
			s.t.Fatalf("%s/%s did not reach %s: %v %v", tenant, id, status, in, err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// normalise replaces what varies between runs (times, key ids and secrets,
// paging cursors) with placeholders; each distinct key id gets its own.
func normalise(s string, ids map[string]string) string {
	s = regexp.MustCompile(`hk_[a-z2-7]{16}_[a-z2-7]+`).ReplaceAllString(s, "<SECRET>")
	s = regexp.MustCompile(`\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?(Z|[+-]\d\d:\d\d)`).ReplaceAllString(s, "<TIME>")
	s = regexp.MustCompile(`(--cursor |"next_cursor": ")[^\s"]+`).ReplaceAllStringFunc(s, func(m string) string {
		if strings.HasSuffix(m, " string") || strings.HasSuffix(m, " on") { // a command's help
			return m
		}
		return m[:strings.LastIndexAny(m, ` "`)+1] + "<CURSOR>"
	})
	s = regexp.MustCompile(`\b[a-z2-7]{16}\b`).ReplaceAllStringFunc(s, func(id string) string {
		if _, ok := ids[id]; !ok {
			ids[id] = fmt.Sprintf("<KEY%d>", len(ids)+1)
		}
		return ids[id]
	})
	// Progress lines but the last of a run (how many are drawn depends on
	// time).
	s = regexp.MustCompile(`(?m)^((?:fetching [\w ]+|publishing|reprocessing dead letters|deleting dead letters): [\d/]+\n)+`).
		ReplaceAllStringFunc(s, func(run string) string {
			lines := strings.SplitAfter(strings.TrimSuffix(run, "\n"), "\n")
			return lines[len(lines)-1] + "\n"
		})
	// Published event ids the server chose, durations of script runs and
	// attempts, times in a timeline relative to its start.
	s = regexp.MustCompile(`\b[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\b`).ReplaceAllString(s, "<UUID>")
	s = regexp.MustCompile(`(?m)^ +[+-]\d+\.\d{3}s  #`).ReplaceAllString(s, "      +T.TTTs  #")
	s = regexp.MustCompile(`\b\d+(\.\d+)?(µs|ms|ns)\b|\b\d+\.\d+s\b|\b0s\b`).ReplaceAllString(s, "<DUR>")
	// The stores word two not-found errors differently (SQLite first,
	// PostgreSQL second); the transcripts show SQLite's.
	s = strings.NewReplacer(
		`get bus event "`, `get published event "`,
		`get correlated event "`, `get correlated event: correlated event "`,
	).Replace(s)
	// A table's columns are as wide as the durations that were replaced:
	// in a command's output that shows one, runs of spaces inside a line
	// become two.
	blocks := strings.SplitAfter(s, "\n\n$ herald ")
	for i, b := range blocks {
		if strings.Contains(b, "<DUR>") {
			blocks[i] = regexp.MustCompile(`(\S) {2,}`).ReplaceAllString(b, "$1  ")
		}
	}
	return strings.Join(blocks, "")
}

// golden compares got with testdata/name, or rewrites it with -update.
func golden(t *testing.T, name, got string) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.MkdirAll("testdata", 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (go test -run %s -update writes it)", err, t.Name())
	}
	if got != string(want) {
		t.Errorf("%s differs from the output (go test -run %s -update rewrites it):\n--- got\n%s\n--- want\n%s", path, t.Name(), got, want)
	}
}

// step is one command line of a transcript. Arguments "{name}" are
// replaced by what an earlier step's capture recorded under name.
type step struct {
	args    []string
	env     []string
	before  func(s *apiServer) // e.g. wait for an instance's status
	capture func(t *testing.T, stdout string, vars map[string]string)
	code    int
}

// placeholder is an argument naming a captured value.
var placeholder = regexp.MustCompile(`^\{[a-z_]+\}$`)

// transcript runs steps against a fresh server, with extra args after
// each step's, and returns the normalised transcript.
func transcript(t *testing.T, steps []step, extra ...string) string {
	s := newAPIServer(t)
	ids := map[string]string{}
	vars := map[string]string{}
	var b strings.Builder
	for _, st := range steps {
		if st.before != nil {
			st.before(s)
		}
		var args []string
		for _, a := range append(append([]string(nil), st.args...), extra...) {
			if placeholder.MatchString(a) {
				a = vars[a[1:len(a)-1]]
			}
			args = append(args, a)
		}
		var envs []string
		for i, e := range st.env {
			if i%2 == 1 && placeholder.MatchString(e) {
				e = vars[e[1:len(e)-1]]
			}
			envs = append(envs, e)
		}
		r := s.cli(args, envs...)
		shown := make([]string, len(args))
		for i, a := range args {
			shown[i] = a
			if a == "" || strings.ContainsAny(a, " \"'{}*$") {
				shown[i] = "'" + a + "'"
			}
		}
		fmt.Fprintf(&b, "$ herald %s\n%s", strings.Join(shown, " "), r.stdout)
		if r.stderr != "" {
			fmt.Fprintf(&b, "[stderr]\n%s", r.stderr)
		}
		fmt.Fprintf(&b, "[exit %d]\n\n", r.code)
		if r.code != st.code {
			t.Errorf("herald %q: exit %d, want %d\n%s%s", args, r.code, st.code, r.stdout, r.stderr)
		}
		if slices.Contains(extra, "--json") && r.code == exitOK && !json.Valid([]byte(r.stdout)) {
			t.Errorf("herald %q --json printed what is not JSON: %q", args, r.stdout)
		}
		if st.capture != nil && r.code == exitOK {
			st.capture(t, r.stdout, vars)
		}
	}
	return normalise(b.String(), ids)
}

// cliSteps exercise every client command, its output and its errors.
func cliSteps() []step {
	running := func(ids ...string) func(*apiServer) {
		return func(s *apiServer) {
			for _, id := range ids {
				s.waitStatus("acme", id, herald.StatusRunning)
			}
		}
	}
	captureKey := func(t *testing.T, out string, vars map[string]string) {
		secret := regexp.MustCompile(`hk_[a-z2-7]+_[a-z2-7]+`).FindString(out)
		id := regexp.MustCompile(`(?:created key |"id": ")([a-z2-7]{16})`).FindStringSubmatch(out)
		if secret == "" || id == nil {
			t.Fatalf("no key in %q", out)
		}
		vars["acme_key"], vars["acme_key_id"] = secret, id[1]
	}
	acme := []string{"HERALD_API_KEY", "{acme_key}"}
	return []step{
		{args: []string{"tenants", "set-limits", "acme", "--max-payload-bytes", "65536", "--event-retention", "720h"}},
		{args: []string{"tenants", "set-limits", "acme", "--max-payload-depth", "8"}},
		{args: []string{"tenants", "set-limits", "beta", "--max-queued-events", "10"}},
		{args: []string{"tenants", "list"}},
		{args: []string{"tenants", "show", "acme"}},
		{args: []string{"tenants", "show", "nobody"}, code: exitNotFound},
		{args: []string{"keys", "create", "acme", "--name", "acme ops"}, capture: captureKey},
		{args: []string{"keys", "create", "--admin", "--name", "second admin"}},
		{args: []string{"keys", "list"}},
		{args: []string{"keys", "list", "acme"}},
		{args: []string{"instances", "start", "wait", "--id", "w-1", "--input", `{"n": 1}`, "--tenant", "acme"}},
		{args: []string{"instances", "start", "wait", "--id", "w-2"}, env: acme},
		{args: []string{"instances", "start", "wait", "--id", "w-2", "--tenant", "acme"}, code: exitFail},
		{args: []string{"instances", "start", "wait", "--input", "not json", "--tenant", "acme"}, code: exitUsage},
		{args: []string{"instances", "list", "--tenant", "acme"}, before: running("w-1", "w-2")},
		{args: []string{"instances", "list", "--limit", "1"}, env: acme},
		{args: []string{"instances", "list", "--limit", "1", "--all"}, env: acme},
		{args: []string{"instances", "list", "--status", "completed"}, env: acme},
		{args: []string{"instances", "list", "--status", "bogus"}, env: acme, code: exitFail},
		{args: []string{"instances", "show", "w-1", "--tenant", "acme"}},
		{args: []string{"instances", "show", "nope"}, env: acme, code: exitNotFound},
		{args: []string{"instances", "list", "--tenant", "beta"}, env: acme, code: exitAuth},
		{args: []string{"tenants", "list"}, env: acme, code: exitAuth},
		{args: []string{"instances", "list"}, env: []string{"HERALD_API_KEY", ""}, code: exitAuth},
		{args: []string{"instances", "list", "--api-key", "hk_notakey"}, code: exitAuth},
		{args: []string{"keys", "revoke", "{acme_key_id}"}},
		{args: []string{"instances", "list"}, env: acme, code: exitAuth},
		{args: []string{"keys", "list", "acme", "--revoked"}},
		{args: []string{"keys", "revoke", "nokey"}, code: exitNotFound},
		{args: []string{"tenants", "show", "acme", "--server", "ftp://nowhere"}, code: exitUsage},
	}
}

// TestCLI_Human: every client command's tables and listings, its errors
// and exit codes (testdata/cli.golden).
func TestCLI_Human(t *testing.T) {
	t.Parallel()
	golden(t, "cli.golden", transcript(t, cliSteps()))
}

// TestCLI_JSON: the same commands with --json print the API's JSON
// (testdata/cli_json.golden).
func TestCLI_JSON(t *testing.T) {
	t.Parallel()
	out := transcript(t, cliSteps(), "--json")
	golden(t, "cli_json.golden", out)
}
