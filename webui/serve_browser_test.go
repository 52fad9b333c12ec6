package webui_test

// The UI through a real herald serve: the binary built from cmd/herald,
// serving a fresh store on a free port, signed into by headless chromium,
// with the instance started and decided by the built CLI.

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/heraldwf/herald/internal/apitest"
	"github.com/heraldwf/herald/internal/storeurl"
	"github.com/heraldwf/herald/internal/testdb"
)

// realServe is a herald serve started from the built binary.
type realServe struct {
	t      *testing.T
	bin    string
	url    string
	key    string
	log    *apitest.Buffer
	exited chan error
	stop   func() // SIGTERM, then exit status 0 wanted
}

// startRealServe builds cmd/herald into a temporary directory and starts
// herald serve from it on a free port: on a SQLite file in that directory,
// or with HERALD_TEST_BACKEND=postgres on a fresh PostgreSQL schema.
func startRealServe(t *testing.T) *realServe {
	t.Helper()
	dir := t.TempDir()
	bin := filepath.Join(dir, "herald")
	build := exec.CommandContext(t.Context(), "go", "build", "-o", bin, "github.com/heraldwf/herald/cmd/herald")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	store := []string{"--db", filepath.Join(dir, "herald.db")}
	if testdb.Backend() == "postgres" {
		url, err := storeurl.PostgresLocation(testdb.PostgresURL(t), testdb.NewSchema(t))
		if err != nil {
			t.Fatal(err)
		}
		store = []string{"--postgres", url}
	}
	t.Logf("herald serve %s", store[0])
	s := &realServe{t: t, bin: bin, key: "webui-serve-admin-key-0123456789abcdefghij", log: &apitest.Buffer{}, exited: make(chan error, 1)}
	serve := exec.Command(bin, append([]string{"serve", "--addr", "127.0.0.1:0", "--shutdown-timeout", "30s"}, store...)...)
	serve.Env = append(os.Environ(), "HERALD_ADMIN_KEY="+s.key, "HERALD_DB=", "HERALD_DATABASE_URL=", "HERALD_ADDR=", "HERALD_METRICS_ADDR=")
	serve.Stdout, serve.Stderr = s.log, s.log
	if err := serve.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { s.exited <- serve.Wait() }()
	stopped := false
	t.Cleanup(func() {
		if !stopped {
			serve.Process.Kill()
			<-s.exited
		}
	})
	listening := regexp.MustCompile(`listening on (http://[0-9.:]+)`)
	deadline := time.Now().Add(time.Minute)
	for {
		if m := listening.FindStringSubmatch(s.log.String()); m != nil {
			s.url = m[1]
			break
		}
		select {
		case err := <-s.exited:
			stopped = true
			t.Fatalf("herald serve ended before listening: %v\n%s", err, s.log)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("herald serve is not listening after a minute:\n%s", s.log)
		}
		time.Sleep(20 * time.Millisecond)
	}
	// stop sends SIGTERM and wants exit status 0.
	s.stop = func() {
		t.Helper()
		if err := serve.Process.Signal(syscall.SIGTERM); err != nil {
			t.Fatal(err)
		}
		select {
		case err := <-s.exited:
			stopped = true
			if err != nil {
				t.Fatalf("herald serve after SIGTERM: %v\n%s", err, s.log)
			}
		case <-time.After(time.Minute):
			t.Fatalf("herald serve did not stop within a minute of SIGTERM\n%s", s.log)
		}
		if !strings.Contains(s.log.String(), "herald serve: stopped") {
			t.Errorf("no clean stop in the log:\n%s", s.log)
		}
	}
	return s
}

// cli runs the built binary's command args against the server with the
// admin key and returns its stdout; a non-zero exit fails the test.
func (s *realServe) cli(args ...string) string {
	s.t.Helper()
	ctx, cancel := context.WithTimeout(s.t.Context(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, s.bin, args...)
	cmd.Env = append(os.Environ(), "HERALD_SERVER="+s.url, "HERALD_API_KEY="+s.key, "HERALD_TENANT=")
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	if err := cmd.Run(); err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			s.t.Fatalf("herald %q: exit %d\n%s%s", args, ee.ExitCode(), out.String(), errOut.String())
		}
		s.t.Fatalf("herald %q: %v", args, err)
	}
	return out.String()
}

// TestBrowser_RealServe: sign in to a real herald serve, start an approval
// with the CLI, open its page, decide it with the CLI and watch the page
// (never reloaded) show it completed; then SIGTERM stops the server with
// exit status 0.
func TestBrowser_RealServe(t *testing.T) {
	ctx := browser(t) // fails without chromium under CI=true
	s := startRealServe(t)
	signInBrowser(t, ctx, s.url, s.key)

	out := s.cli("instances", "start", "approval", "--id", "serve-order-1",
		"--input", `{"item":"desk","amount":5,"deadline":"1h","escalation":"1s"}`)
	if !strings.Contains(out, "serve-order-1") {
		t.Fatalf("instances start: %q", out)
	}
	run(t, ctx, "open the instance", chromedp.Navigate(s.url+"/instances/serve-order-1"))
	wait := waitText(t, ctx, "#wait", "Waiting on")
	if !strings.Contains(wait, "decision") || !strings.Contains(wait, "wait #1") || !strings.Contains(wait, "times out at") {
		t.Fatalf("wait line %q: want decision, wait #1 and its timeout", wait)
	}
	waitText(t, ctx, "#timeline", "EventSubscribed")
	if st := waitText(t, ctx, "#status", ""); strings.Contains(st, "completed") {
		t.Fatalf("status %q before the decision", st)
	}
	// A mark on the page's window: a reload or a navigation would lose it.
	run(t, ctx, "mark the page", chromedp.Evaluate(`window.heraldMark = "same page"; true`, nil))

	out = s.cli("events", "raise", "serve-order-1", "decision", `{"approved":true,"by":"ann"}`, "--id", "serve-decision-1")
	if !strings.Contains(out, "raised decision serve-decision-1 for serve-order-1") {
		t.Fatalf("events raise: %q", out)
	}
	waitText(t, ctx, "#status", "completed")
	waitText(t, ctx, "#timeline", "ExecutionCompleted")
	row := waitText(t, ctx, "#events", "serve-decision-1")
	if !strings.Contains(row, "delivered to wait #1 of execution 1") {
		t.Fatalf("events table %q: want serve-decision-1 delivered to wait #1 of execution 1", row)
	}
	waitText(t, ctx, "#ended", "has ended")
	var mark string
	run(t, ctx, "read the mark", chromedp.Evaluate(`window.heraldMark || ""`, &mark))
	if mark != "same page" {
		t.Fatalf("the page was reloaded or left (mark %q): the timeline must update by itself", mark)
	}

	s.stop()
}
