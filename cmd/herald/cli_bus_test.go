package main

// The event bus's commands (publish, published, subs, scripts, executions,
// dlq) against a real server, human and --json (testdata/cli_bus.golden,
// cli_bus_json.golden), and a bulk publish that meets back-pressure.

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/heraldwf/herald"
	"github.com/heraldwf/herald/internal/apitest"
)

// eventually waits until cond holds (a minute at most); what names the
// condition in the failure.
func (s *apiServer) eventually(what string, cond func(ctx context.Context, c *herald.Client) (bool, error)) {
	s.t.Helper()
	c, err := s.rt.Client(herald.DefaultTenant)
	if err != nil {
		s.t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(s.t.Context(), time.Minute)
	defer cancel()
	apitest.Eventually(s.t, ctx, what, func() (bool, error) { return cond(s.t.Context(), c) })
}

// busDone waits until the published events ids have ended (fate done or
// another final one) with every execution in a final state.
func busDone(ids ...string) func(*apiServer) {
	return func(s *apiServer) {
		for _, id := range ids {
			s.eventually("published event "+id+" done", func(ctx context.Context, c *herald.Client) (bool, error) {
				ev, err := c.PublishedEvent(ctx, id)
				if err != nil {
					return false, err
				}
				return ev.Fate == herald.BusDone || ev.Fate == herald.BusNoMatch || ev.Fate == herald.BusFiltered, nil
			})
		}
	}
}

// deadLetters waits until n letters wait for a decision.
func deadLetters(n int) func(*apiServer) {
	return func(s *apiServer) {
		s.eventually(fmt.Sprint(n, " dead letters"), func(ctx context.Context, c *herald.Client) (bool, error) {
			page, err := c.DeadLetters(ctx, herald.DeadLetterFilter{})
			return err == nil && len(page.Letters) == n, err
		})
	}
}

// executionSucceeded waits until the execution of event id for
// subscription sub has succeeded.
func executionSucceeded(id, sub string) func(*apiServer) {
	return func(s *apiServer) {
		s.eventually("execution of "+id+" for "+sub, func(ctx context.Context, c *herald.Client) (bool, error) {
			ev, err := c.PublishedEvent(ctx, id)
			if err != nil {
				return false, err
			}
			for _, r := range ev.Routes {
				if r.Subscription == sub && r.Execution != nil && r.Execution.Status == herald.ExecSucceeded {
					return true, nil
				}
			}
			return false, nil
		})
	}
}

// busSteps exercise the bus's commands: scripts (a syntax error, a dry run
// that throws and one that returns), subscriptions from flags and from a
// file, publishing one event and a file of them, a script that throws
// filling the dead-letter queue, fixing it, reprocessing one letter and
// then all, deleting.
func busSteps() []step {
	order := `{"type": "order.paid", "data": {"order_id": "o-1", "amount": 5}}`
	return []step{
		{args: []string{"scripts", "validate", "--file", "testdata/bus/bad.js"}, code: exitFail},
		{args: []string{"scripts", "validate", "--file", "testdata/bus/throw.js"}},
		{args: []string{"scripts", "put", "audit", "--file", "testdata/bus/bad.js"}, code: exitFail},
		{args: []string{"scripts", "put", "audit", "--file", "testdata/bus/throw.js"}},
		{args: []string{"scripts", "put", "audit"}, code: exitUsage},
		{args: []string{"scripts", "list"}},
		{args: []string{"scripts", "test", "audit", "--event", order}, code: exitFail},
		{args: []string{"scripts", "test", "--file", "testdata/bus/fixed.js", "--event", order}},
		{args: []string{"scripts", "test", "audit", "--event", `{"kind": "x"}`}, code: exitUsage},
		{args: []string{"subs", "put", "audit", "--pattern", "order.>", "--target-script", "audit", "--max-retries", "0"}},
		{args: []string{"subs", "put", "big", "--file", "testdata/bus/sub.json"}},
		{args: []string{"subs", "put", "bad", "--pattern", "ord*er.paid", "--target", "signal"}, code: exitFail},
		{args: []string{"subs", "put", "big", "--file", "testdata/bus/sub.json", "--pattern", "x"}, code: exitUsage},
		{args: []string{"subs", "list"}},
		{args: []string{"subs", "show", "big"}},
		{args: []string{"subs", "disable", "big"}},
		{args: []string{"subs", "enable", "big"}},
		{args: []string{"subs", "show", "nope"}, code: exitNotFound},
		{args: []string{"publish", "order.paid", `{"order_id": "o-1", "amount": 5}`, "--id", "o-1-paid"}},
		{args: []string{"publish", "order.paid", `{"order_id": "o-1", "amount": 5}`, "--id", "o-1-paid"}},
		{args: []string{"publish", "order..paid", "--id", "bad"}, code: exitFail},
		{args: []string{"publish", "order.paid", "not json"}, code: exitUsage},
		// One at a time, after o-1-paid's execution ended: dead letters
		// and executions get their ids in a known order.
		{args: []string{"publish", "--file", "testdata/bus/events.jsonl", "--parallel", "1"}, before: busDone("o-1-paid"), code: exitFail},
		{args: []string{"published", "o-1-paid"}},
		{args: []string{"published", "o-2-paid"}, before: busDone("o-2-paid")},
		{args: []string{"published", "invoice-1-sent"}, before: busDone("invoice-1-sent")},
		{args: []string{"published", "nope"}, code: exitNotFound},
		{args: []string{"executions", "list", "--event", "o-1-paid"}},
		{args: []string{"executions", "list", "--subscription", "big"}},
		{args: []string{"executions", "list"}, code: exitUsage},
		{args: []string{"dlq", "list"}, before: deadLetters(2)},
		{args: []string{"dlq", "list", "--limit", "1"}},
		{args: []string{"dlq", "show", "1"}},
		{args: []string{"dlq", "show", "x"}, code: exitUsage},
		{args: []string{"scripts", "put", "audit", "--file", "testdata/bus/fixed.js"}},
		{args: []string{"scripts", "get", "audit"}},
		{args: []string{"scripts", "get", "audit", "--version", "1"}},
		{args: []string{"dlq", "reprocess", "1"}},
		{args: []string{"dlq", "reprocess", "1"}, code: exitFail},
		{args: []string{"published", "o-1-paid"}, before: executionSucceeded("o-1-paid", "audit")},
		{args: []string{"dlq", "reprocess"}, code: exitUsage},
		{args: []string{"dlq", "reprocess", "--all", "--subscription", "audit"}, code: exitUsage},
		{args: []string{"dlq", "reprocess", "--all"}},
		{args: []string{"dlq", "list", "--include-reprocessed"}},
		{args: []string{"executions", "list", "--event", "o-2-paid", "--subscription", "audit"}, before: executionSucceeded("o-2-paid", "audit")},
		{args: []string{"dlq", "delete", "--all", "--include-reprocessed"}},
		{args: []string{"dlq", "delete", "1"}, code: exitNotFound},
		{args: []string{"subs", "delete", "big"}},
		{args: []string{"subs", "delete", "big"}, code: exitNotFound},
		{args: []string{"scripts", "delete", "audit"}},
		{args: []string{"scripts", "get", "audit"}, code: exitNotFound},
	}
}

// TestCLI_Bus: the bus's commands, their tables, listings, errors and exit
// codes (testdata/cli_bus.golden).
func TestCLI_Bus(t *testing.T) {
	t.Parallel()
	golden(t, "cli_bus.golden", transcript(t, busSteps()))
}

// TestCLI_BusJSON: the same with --json (testdata/cli_bus_json.golden).
func TestCLI_BusJSON(t *testing.T) {
	t.Parallel()
	golden(t, "cli_bus_json.golden", transcript(t, busSteps(), "--json"))
}

// TestCLI_PublishBackPressure: a bulk publish past the bus's backlog cap
// waits and retries, and every line is accepted once the backlog drains.
// The runtime starts (and routes the backlog) only after the command said
// it is waiting.
func TestCLI_PublishBackPressure(t *testing.T) {
	t.Parallel()
	s := newAPIServerWith(t, func(c *herald.Config) { c.BusMaxBacklog = 2 }, false)
	var lines []string
	for i := range 5 {
		lines = append(lines, fmt.Sprintf(`{"type": "job.done", "data": {"n": %d}, "id": "job-%d"}`, i, i))
	}
	file := filepath.Join(t.TempDir(), "jobs.jsonl")
	if err := os.WriteFile(file, []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	stderr := &apitest.Buffer{}
	var stdout strings.Builder
	done := make(chan int, 1)
	go func() {
		e := env("HERALD_SERVER", s.url, "HERALD_API_KEY", s.admin)
		done <- runEnv(t.Context(), []string{"publish", "--file", file, "--parallel", "2", "--retry-for", "1m"}, &stdout, stderr, e)
	}()
	deadline := time.Now().Add(time.Minute)
	for !strings.Contains(stderr.String(), "429 back_pressure") {
		select {
		case code := <-done:
			t.Fatalf("publish ended (%d) without meeting back-pressure:\n%s%s", code, &stdout, stderr)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("no back-pressure within a minute:\n%s", stderr)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if err := s.rt.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	select {
	case code := <-done:
		if code != exitOK {
			t.Fatalf("publish: exit %d\n%s%s", code, &stdout, stderr)
		}
	case <-time.After(2 * time.Minute):
		t.Fatalf("publish did not end after the backlog drained:\n%s", stderr)
	}
	if got := stdout.String(); got != "accepted 5, duplicate 0, refused 0\n" {
		t.Errorf("summary %q", got)
	}
	if !regexp.MustCompile(`(?m)^publishing: 5/5$`).MatchString(stderr.String()) {
		t.Errorf("no final progress line:\n%s", stderr)
	}
	c, err := s.rt.Client(herald.DefaultTenant)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 5 {
		if _, err := c.PublishedEvent(t.Context(), fmt.Sprint("job-", i)); err != nil {
			t.Errorf("job-%d: %v", i, err)
		}
	}
}
