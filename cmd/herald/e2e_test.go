package main

// End to end through the built binary: go build the herald command, run
// herald serve on a fresh SQLite file and a free port, and drive it only
// with the binary's client commands (and a plain GET of /metrics).

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/heraldwf/herald/httpapi/wire"
	"github.com/heraldwf/herald/internal/apitest"
)

// e2e is a herald serve started from the built binary.
type e2e struct {
	t      *testing.T
	bin    string
	dir    string
	url    string
	key    string
	stderr *apitest.Buffer
}

// herald runs the binary's command args against the server and returns
// its stdout; a non-zero exit fails the test.
func (e *e2e) herald(args ...string) string {
	e.t.Helper()
	out, code, stderr := e.run(args...)
	if code != 0 {
		e.t.Fatalf("herald %q: exit %d\n%s%s", args, code, out, stderr)
	}
	return out
}

// run runs the binary's command args and returns stdout, the exit code
// and stderr.
func (e *e2e) run(args ...string) (string, int, string) {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(e.t.Context(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, e.bin, args...)
	cmd.Env = append(os.Environ(), "HERALD_SERVER="+e.url, "HERALD_API_KEY="+e.key, "HERALD_TENANT=")
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	var ee *exec.ExitError
	switch {
	case err == nil:
		return out.String(), 0, errOut.String()
	case errors.As(err, &ee):
		return out.String(), ee.ExitCode(), errOut.String()
	}
	e.t.Fatalf("herald %q: %v", args, err)
	return "", 0, ""
}

// jsonOf runs a command with --json and decodes its answer into v.
func (e *e2e) jsonOf(v any, args ...string) {
	e.t.Helper()
	out := e.herald(append(args, "--json")...)
	if err := json.Unmarshal([]byte(out), v); err != nil {
		e.t.Fatalf("herald %q --json: %v\n%s", args, err, out)
	}
}

// poll calls cond until it holds, for a minute at most.
func (e *e2e) poll(what string, cond func() bool) {
	e.t.Helper()
	deadline := time.Now().Add(time.Minute)
	for !cond() {
		if time.Now().After(deadline) {
			e.t.Fatalf("%s: not within a minute\nserver log:\n%s", what, e.stderr)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// write writes a file into the test's directory and returns its path.
func (e *e2e) write(name, content string) string {
	e.t.Helper()
	p := filepath.Join(e.dir, name)
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		e.t.Fatal(err)
	}
	return p
}

// TestE2E_Binary: an approval decided by a raised event, a published event
// whose script throws landing in the dead-letter queue, the script fixed
// and the letter reprocessed into a success, the metrics that counted it
// all, and a SIGTERM that stops the server cleanly.
func TestE2E_Binary(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	bin := filepath.Join(dir, "herald")
	build := exec.CommandContext(t.Context(), "go", "build", "-o", bin, ".")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}

	// herald serve on a new SQLite file and a port the kernel picks.
	key := "e2e-admin-key-0123456789abcdefghijklmnop"
	serve := exec.Command(bin, "serve", "--addr", "127.0.0.1:0", "--db", filepath.Join(dir, "herald.db"), "--shutdown-timeout", "30s")
	serve.Env = append(os.Environ(), "HERALD_ADMIN_KEY="+key, "HERALD_DB=", "HERALD_DATABASE_URL=", "HERALD_ADDR=", "HERALD_METRICS_ADDR=")
	e := &e2e{t: t, bin: bin, dir: dir, key: key, stderr: &apitest.Buffer{}}
	serve.Stderr, serve.Stdout = e.stderr, e.stderr
	if err := serve.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- serve.Wait() }()
	stopped := false
	t.Cleanup(func() {
		if !stopped {
			serve.Process.Kill()
			<-exited
		}
	})
	listening := regexp.MustCompile(`listening on (http://[0-9.:]+)`)
	e.poll("herald serve listening", func() bool {
		select {
		case err := <-exited:
			stopped = true
			t.Fatalf("herald serve ended before listening: %v\n%s", err, e.stderr)
		default:
		}
		if m := listening.FindStringSubmatch(e.stderr.String()); m != nil {
			e.url = m[1]
			return true
		}
		return false
	})

	// An approval, decided by a raised event.
	e.herald("instances", "start", "approval", "--id", "e2e-1",
		"--input", `{"item":"desk","amount":5,"deadline":"1h","escalation":"1s"}`)
	out := e.herald("events", "raise", "e2e-1", "decision", `{"approved":true,"by":"ann"}`, "--id", "decision-1")
	if !strings.Contains(out, "raised decision decision-1 for e2e-1") {
		t.Errorf("events raise: %q", out)
	}
	e.poll("e2e-1 completed", func() bool {
		var in wire.Instance
		e.jsonOf(&in, "instances", "show", "e2e-1")
		return in.Status == "completed"
	})
	show := e.herald("instances", "show", "e2e-1")
	for _, want := range []string{
		`status:     completed`,
		`━━ e2e-1 (approval) completed → "desk (5) approved by ann"`,
		`"decision" id=decision-1 payload={"approved":true,"by":"ann"} → delivered to #1`,
		`decision-1               positional decision   delivered to wait #1 of execution 1`,
	} {
		if !strings.Contains(show, want) {
			t.Errorf("instances show lacks %q:\n%s", want, show)
		}
	}

	// A script that throws: its execution lands in the dead-letter queue.
	e.herald("scripts", "put", "audit", "--file", e.write("throw.js", `throw new Error("audit store unreachable");`))
	e.herald("subs", "put", "audit", "--pattern", "order.>", "--target-script", "audit", "--max-retries", "0")
	e.herald("publish", "order.paid", `{"order_id":"o-1","amount":5}`, "--id", "o-1")
	var letter *wire.DeadLetter
	e.poll("a dead letter for o-1", func() bool {
		var page wire.Page[*wire.DeadLetter]
		e.jsonOf(&page, "dlq", "list")
		for _, d := range page.Items {
			if d.EventID == "o-1" {
				letter = d
			}
		}
		return letter != nil
	})
	if letter.Subscription != "audit" || letter.ErrorKind != "runtime" || !strings.Contains(letter.Error, "audit store unreachable") {
		t.Errorf("dead letter %+v", letter)
	}
	if out := e.herald("dlq", "list"); !strings.Contains(out, "audit store unreachable") {
		t.Errorf("dlq list: %q", out)
	}

	// Fixed, reprocessed: the execution succeeds.
	out = e.herald("scripts", "put", "audit", "--file", e.write("fixed.js", `return {audited: ctx.event.data.order_id};`))
	if !strings.Contains(out, "saved script audit version 2") {
		t.Errorf("scripts put: %q", out)
	}
	id := letter.ID
	if out := e.herald("dlq", "reprocess", strconv.FormatInt(id, 10)); !strings.Contains(out, "reprocessed dead letter "+strconv.FormatInt(id, 10)) {
		t.Errorf("dlq reprocess: %q", out)
	}
	e.poll("o-1's execution succeeded", func() bool {
		var ev wire.PublishedEvent
		e.jsonOf(&ev, "published", "o-1")
		for _, r := range ev.Routes {
			if r.Subscription == "audit" && r.Execution != nil && r.Execution.Status == "succeeded" {
				return compactJSON(r.Execution.Result) == `{"audited":"o-1"}`
			}
		}
		return false
	})
	var attempts wire.Page[*wire.Attempt]
	e.jsonOf(&attempts, "executions", "list", "--event", "o-1")
	if n := len(attempts.Items); n != 2 || attempts.Items[0].Succeeded || !attempts.Items[1].Succeeded {
		t.Errorf("attempts of o-1: want a failure then a success, got %d: %s", n, e.herald("executions", "list", "--event", "o-1"))
	}

	// The metrics counted it.
	status, body := get(t, e.url+"/metrics", "")
	if status != 200 {
		t.Fatalf("/metrics: %d", status)
	}
	for _, name := range []string{"events_matched_total", "executions_success_total", "executions_failed_total",
		"dlq_events_total", "queue_depth_gauge", "execution_duration_histogram_bucket"} {
		if !regexp.MustCompile(`(?m)^` + name + `[{ ]`).MatchString(body) {
			t.Errorf("/metrics lacks %s", name)
		}
	}

	// SIGTERM: the server stops and exits 0.
	if err := serve.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-exited:
		stopped = true
		if err != nil {
			t.Fatalf("herald serve after SIGTERM: %v\n%s", err, e.stderr)
		}
	case <-time.After(time.Minute):
		t.Fatalf("herald serve did not stop within a minute of SIGTERM\n%s", e.stderr)
	}
	if !strings.Contains(e.stderr.String(), "herald serve: stopped") {
		t.Errorf("no clean stop in the log:\n%s", e.stderr)
	}
}
