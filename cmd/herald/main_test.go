package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/heraldwf/herald"
	"github.com/heraldwf/herald/internal/storeurl"
	"github.com/heraldwf/herald/internal/testdb"
	"github.com/heraldwf/herald/internal/timeline"
)

var update = flag.Bool("update", false, "rewrite the golden files under testdata (the CLI tests) and record the demo's instances into internal/timeline/testdata (TestDemo_FreshRecreates)")

func TestMain(m *testing.M) {
	herald.ServeScriptChild() // the demo's scripts run in child processes of the test binary
	testdb.Main(m)
}

// result is what one run of the command did.
type result struct {
	code           int
	stdout, stderr string
}

func runCmd(t *testing.T, args ...string) result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var out, errOut bytes.Buffer
	code := run(ctx, args, &out, &errOut)
	return result{code, out.String(), errOut.String()}
}

func TestRun_UsageAndExitCodes(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		args []string
		code int
		// out: where the text goes ("stdout" or "stderr"); the other stays empty.
		out, want string
	}{
		{nil, exitUsage, "stderr", "usage:"},
		{[]string{"help"}, exitOK, "stdout", "usage:"},
		{[]string{"-h"}, exitOK, "stdout", "usage:"},
		{[]string{"--help"}, exitOK, "stdout", "usage:"},
		{[]string{"help", "demo"}, exitOK, "stdout", "usage: herald demo"},
		{[]string{"help", "nonsense"}, exitUsage, "stderr", `no help for`},
		{[]string{"demo", "-h"}, exitOK, "stdout", "usage: herald demo"},
		{[]string{"demo", "--help"}, exitOK, "stdout", "--fresh"},
		{[]string{"bogus"}, exitUsage, "stderr", `unknown command "bogus"`},
		{[]string{"version", "now"}, exitUsage, "stderr", "takes no arguments"},
		{[]string{"demo", "--bogus"}, exitUsage, "stderr", "flag provided but not defined: -bogus"},
		{[]string{"demo", "extra"}, exitUsage, "stderr", `unexpected argument "extra"`},
		{[]string{"demo", "--db", "a.db", "--postgres", "postgres://h/db"}, exitUsage, "stderr", "give one"},
		{[]string{"demo", "--postgres", "sqlite:a.db"}, exitUsage, "stderr", "wants a postgres:// URL"},
		{[]string{"demo", "--postgres", "postgres://u:secret@h/db?schema=a", "--schema", "b"}, exitUsage, "stderr", "differ"},
		{[]string{"demo", "--db", "a.db", "--schema", "s"}, exitUsage, "stderr", "--schema is for PostgreSQL"},
		{[]string{"demo", "--db", "mysql://u:secret@h/db"}, exitUsage, "stderr", "invalid store location"},
	} {
		r := runCmd(t, tc.args...)
		got, other := r.stdout, r.stderr
		if tc.out == "stderr" {
			got, other = other, got
		}
		if r.code != tc.code || !strings.Contains(got, tc.want) || other != "" {
			t.Errorf("herald %q: exit %d, stdout %q, stderr %q; want exit %d and %q on %s only",
				tc.args, r.code, r.stdout, r.stderr, tc.code, tc.want, tc.out)
		}
		if strings.Contains(r.stdout+r.stderr, "secret") {
			t.Errorf("herald %q shows a password: %s%s", tc.args, r.stdout, r.stderr)
		}
	}
}

func TestVersionLine(t *testing.T) {
	info := func(settings ...debug.BuildSetting) func() (*debug.BuildInfo, bool) {
		return func() (*debug.BuildInfo, bool) {
			return &debug.BuildInfo{Main: debug.Module{Version: "v1.4.0"}, Settings: settings}, true
		}
	}
	goVer := runtime.Version() + " " + runtime.GOOS + "/" + runtime.GOARCH
	if got, want := versionLine(info(
		debug.BuildSetting{Key: "vcs.revision", Value: "019f8232d5e8b0c1a2b3c4d5e6f708192a3b4c5d"},
		debug.BuildSetting{Key: "vcs.time", Value: "2026-11-22T02:41:00Z"},
		debug.BuildSetting{Key: "vcs.modified", Value: "true"},
	)), "herald v1.4.0, revision 019f8232d5e8 (2026-11-22T02:41:00Z), modified, "+goVer; got != want {
		t.Errorf("versionLine = %q, want %q", got, want)
	}
	if got := versionLine(info()); !strings.Contains(got, "herald v1.4.0, revision unknown") {
		t.Errorf("versionLine without VCS = %q", got)
	}
	if got := versionLine(func() (*debug.BuildInfo, bool) { return nil, false }); !strings.HasPrefix(got, "herald (unknown), ") {
		t.Errorf("versionLine without build info = %q", got)
	}

	// The ldflags version wins over the module's.
	old := version
	version = "v2.0.0-rc1"
	defer func() { version = old }()
	if got := versionLine(info()); !strings.HasPrefix(got, "herald v2.0.0-rc1, ") {
		t.Errorf("versionLine with -X main.version = %q", got)
	}

	r := runCmd(t, "version")
	if r.code != exitOK || !strings.HasPrefix(r.stdout, "herald v2.0.0-rc1, ") || !strings.Contains(r.stdout, goVer) {
		t.Errorf("herald version: exit %d, %q", r.code, r.stdout)
	}
}

// checkDemo asserts the lines CI greps for (.ci/run's check_demo).
func checkDemo(t *testing.T, out string) {
	t.Helper()
	for _, want := range []string{
		"order-3/late .*dropped: withdrawn_wait",
		"meter-1 (meter) completed",
		"mailbox-1/settings-1 .*dropped: superseded",
		"mailbox-1/order-5 .*delivered to receive #1 of execution 3 (arrived in execution 1)",
		"webhook: put document-signed/DOC-7 → reached 3 waiting instances",
		"sign-dave (onboard) completed",
		"published bus-2 order.paid .*→ done",
		"big-orders filtered out by $.conditions[0] (data.amount gte): value",
		"published bus-4 user.signed_up .*→ no_match",
		"dead letter .*order.paid bus-3 via fraud after 1 attempt(s): permanent: amount 9000 needs a human",
		"fraud      succeeded after 1 attempt(s), reprocessed",
	} {
		before, after, ok := strings.Cut(want, ".*")
		found := false
		for _, line := range strings.Split(out, "\n") {
			if i := strings.Index(line, before); i >= 0 && (!ok || strings.Contains(line[i+len(before):], after)) {
				found = true
				break
			}
		}
		if !found {
			t.Errorf("demo output lacks %q", want)
		}
	}
}

var demoIDs = []string{"order-1", "order-2", "order-3", "meter-1", "mailbox-1", "sign-alice", "sign-bob", "sign-carol", "sign-dave"}

// TestDemo_RefusesExistingFile: a file the demo did not create is left as
// it is, byte for byte, without --fresh; with --fresh only a Herald store is
// deleted.
func TestDemo_RefusesExistingFile(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	notes := filepath.Join(dir, "notes.db")
	if err := os.WriteFile(notes, []byte("my notes, not a database\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	heraldDB := filepath.Join(dir, "herald.db")
	leftover(t, heraldDB)
	entries := dirList(t, dir)
	heraldBytes, err := os.ReadFile(heraldDB)
	if err != nil {
		t.Fatal(err)
	}

	for _, tc := range []struct {
		args []string
		file string
		want string
	}{
		{[]string{"--db", notes}, notes, "already exists"},
		{[]string{"--db", "sqlite:" + notes}, notes, "--fresh"},
		{[]string{"--db", heraldDB}, heraldDB, "already exists"},
		{[]string{"--db", notes, "--fresh"}, notes, "not a Herald store"},
	} {
		before, _ := os.ReadFile(tc.file)
		r := runCmd(t, append([]string{"demo"}, tc.args...)...)
		if r.code != exitFail || !strings.Contains(r.stderr, tc.want) {
			t.Errorf("demo %q: exit %d, stderr %q; want exit 1 saying %q", tc.args, r.code, r.stderr, tc.want)
		}
		if after, err := os.ReadFile(tc.file); err != nil || !bytes.Equal(after, before) {
			t.Errorf("demo %q changed %s (%v)", tc.args, tc.file, err)
		}
		if strings.Contains(r.stdout, "━━") {
			t.Errorf("demo %q ran anyway:\n%s", tc.args, r.stdout)
		}
	}
	if after, _ := os.ReadFile(heraldDB); !bytes.Equal(after, heraldBytes) {
		t.Error("the Herald store changed")
	}
	if after := dirList(t, dir); after != entries {
		t.Errorf("a refused demo changed the directory: %s, was %s", after, entries)
	}
}

// dirList names the files in dir.
func dirList(t *testing.T, dir string) string {
	t.Helper()
	es, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range es {
		names = append(names, e.Name())
	}
	return strings.Join(names, " ")
}

// leftover creates a Herald store at loc holding an instance "leftover" the
// demo knows nothing about.
func leftover(t *testing.T, loc string) {
	t.Helper()
	withClient(t, loc, func(ctx context.Context, c *herald.Client) {
		if _, err := c.StartWorkflow(ctx, "not-the-demo", 1, herald.WithInstanceID("leftover")); err != nil {
			t.Fatal(err)
		}
	})
}

// withClient opens the store at loc, calls f with a client of the default
// tenant, and closes the store.
func withClient(t *testing.T, loc string, f func(ctx context.Context, c *herald.Client)) {
	t.Helper()
	ctx := t.Context()
	st, err := storeurl.Open(ctx, loc)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	c, err := herald.NewClient(st, herald.DefaultTenant, nil)
	if err != nil {
		t.Fatal(err)
	}
	f(ctx, c)
}

// TestDemo_FreshRecreates: --fresh deletes a Herald store and the demo
// runs on a new one, which it leaves behind. With -update it records the
// demo's instances for internal/timeline's golden test.
func TestDemo_FreshRecreates(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "demo.db")
	leftover(t, path)
	r := runCmd(t, "demo", "--db", path, "--fresh")
	if r.code != exitOK {
		t.Fatalf("demo --fresh: exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	if first, _, _ := strings.Cut(r.stdout, "\n"); first != "Herald demo on SQLite file "+path+" (deleted and created again: --fresh)" {
		t.Errorf("first line %q does not say which store", first)
	}
	checkDemo(t, r.stdout)

	withClient(t, path, func(ctx context.Context, c *herald.Client) {
		if _, err := c.Status(ctx, "leftover"); !errors.Is(err, herald.ErrNotFound) {
			t.Errorf("the old store's instance is still there (%v)", err)
		}
		for _, id := range demoIDs {
			in, err := timeline.Load(ctx, c, id)
			if err != nil {
				t.Fatal(err)
			}
			if in.Status != string(herald.StatusCompleted) {
				t.Errorf("%s is %s", id, in.Status)
			}
			var text bytes.Buffer
			if err := timeline.Write(&text, in); err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(r.stdout, text.String()) {
				t.Errorf("the demo did not print %s's timeline as timeline.Write does:\n%s", id, text.String())
			}
			if *update {
				if err := os.WriteFile(filepath.Join("..", "..", "internal", "timeline", "testdata", id+".json"), fixtureJSON(t, in), 0o644); err != nil {
					t.Fatal(err)
				}
			}
		}
	})
}

// fixtureJSON encodes in with one history event or fate per line, each as
// compact as the store keeps it (json.MarshalIndent would re-indent the
// payloads inside, and the timeline would show them so).
func fixtureJSON(t *testing.T, in *timeline.Instance) []byte {
	t.Helper()
	enc := func(v any) string {
		data, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		return string(data)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "{\n  \"id\": %s,\n  \"workflow\": %s,\n  \"status\": %s,\n", enc(in.ID), enc(in.Workflow), enc(in.Status))
	if len(in.Output) > 0 {
		fmt.Fprintf(&b, "  \"output\": %s,\n", enc(in.Output))
	}
	if in.Error != "" {
		fmt.Fprintf(&b, "  \"error\": %s,\n", enc(in.Error))
	}
	b.WriteString("  \"executions\": [\n")
	for i, evs := range in.Executions {
		b.WriteString("    [\n")
		for j, ev := range evs {
			fmt.Fprintf(&b, "      %s%s\n", enc(ev), comma(j, len(evs)))
		}
		fmt.Fprintf(&b, "    ]%s\n", comma(i, len(in.Executions)))
	}
	b.WriteString("  ],\n  \"events\": [\n")
	for i, r := range in.Events {
		fmt.Fprintf(&b, "    %s%s\n", enc(r), comma(i, len(in.Events)))
	}
	b.WriteString("  ]\n}\n")
	return []byte(b.String())
}

func comma(i, n int) string {
	if i < n-1 {
		return ","
	}
	return ""
}

// TestDemo_TemporaryByDefault: with no store named, the demo makes its own
// file and removes it; HERALD_DATABASE_URL does not move it to PostgreSQL.
func TestDemo_TemporaryByDefault(t *testing.T) {
	t.Setenv("HERALD_DATABASE_URL", "postgres://u:secret@127.0.0.1:1/nowhere")
	r := runCmd(t, "demo")
	if r.code != exitOK {
		t.Fatalf("demo: exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	first, _, _ := strings.Cut(r.stdout, "\n")
	path, ok := strings.CutPrefix(first, "Herald demo on SQLite file ")
	if !ok {
		t.Fatalf("first line %q does not name a SQLite file", first)
	}
	path, _, _ = strings.Cut(path, " (new, in a temporary directory")
	if _, err := os.Stat(filepath.Dir(path)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the demo's temporary directory %s is still there (%v)", filepath.Dir(path), err)
	}
	if !strings.Contains(r.stderr, "HERALD_DATABASE_URL is set but the demo does not read it") {
		t.Errorf("no note about HERALD_DATABASE_URL on stderr: %q", r.stderr)
	}
	if strings.Contains(r.stdout+r.stderr, "secret") {
		t.Error("the output shows HERALD_DATABASE_URL's password")
	}
	checkDemo(t, r.stdout)
}

// TestDemo_PostgresRefusesExistingSchema: on a real server, a schema the
// demo did not create is left alone; --fresh drops only a Herald schema.
func TestDemo_PostgresRefusesExistingSchema(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	url := testdb.PostgresURL(t)
	foreign, mine := testdb.NewSchema(t), testdb.NewSchema(t)

	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, `CREATE SCHEMA `+foreign+`; CREATE TABLE `+foreign+`.precious (x int); INSERT INTO `+foreign+`.precious VALUES (42)`); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{
		{"--postgres", url, "--schema", foreign},
		{"--postgres", url, "--schema", foreign, "--fresh"},
		{"--db", url, "--schema", foreign, "--fresh"},
	} {
		r := runCmd(t, append([]string{"demo"}, args...)...)
		if r.code != exitFail || strings.Contains(r.stdout, "━━") {
			t.Errorf("demo %q: exit %d, want 1 and no demo\n%s\n%s", args, r.code, r.stdout, r.stderr)
		}
		var x int
		if err := conn.QueryRow(ctx, `SELECT x FROM `+foreign+`.precious`).Scan(&x); err != nil || x != 42 {
			t.Fatalf("demo %q touched schema %s: %d, %v", args, foreign, x, err)
		}
	}

	withSchema, err := storeurl.PostgresLocation(url, mine)
	if err != nil {
		t.Fatal(err)
	}
	leftover(t, withSchema)
	r := runCmd(t, "demo", "--postgres", withSchema)
	if r.code != exitFail || !strings.Contains(r.stderr, "schema "+mine+" already exists") {
		t.Errorf("demo on an existing Herald schema: exit %d, stderr %q", r.code, r.stderr)
	}
	r = runCmd(t, "demo", "--postgres", url, "--schema", mine, "--fresh")
	if r.code != exitOK {
		t.Fatalf("demo --fresh: exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	if first, _, _ := strings.Cut(r.stdout, "\n"); !strings.HasPrefix(first, "Herald demo on PostgreSQL database ") ||
		!strings.HasSuffix(first, ", schema "+mine+" (deleted and created again: --fresh)") {
		t.Errorf("first line %q does not say which store", first)
	}
	checkDemo(t, r.stdout)
	var n int
	if err := conn.QueryRow(ctx, `SELECT count(*) FROM `+mine+`.instances WHERE id = 'leftover'`).Scan(&n); err != nil || n != 0 {
		t.Errorf("the old schema's instance: %d rows, %v", n, err)
	}
}
