package main

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/heraldwf/herald"
	"github.com/heraldwf/herald/history"
)

// TestCLI_Query: herald instances query asks a workflow a query, and
// instances list --attr filters on searchable attributes.
func TestCLI_Query(t *testing.T) {
	t.Parallel()
	s := newAPIServerWith(t, nil, false)
	herald.RegisterWorkflow(s.rt, "scored", func(ctx *herald.Context, in struct{ Team string }) (int, error) {
		score := 0
		if err := herald.SetQuery(ctx, "score", func(bonus int) (map[string]int, error) {
			return map[string]int{"score": score, "with_bonus": score + bonus}, nil
		}); err != nil {
			return 0, err
		}
		if err := ctx.SetAttributes(map[string]any{"team": in.Team, "rank": 1}); err != nil {
			return 0, err
		}
		for {
			var n int
			if err := ctx.WaitEvent("point").Get(&n); err != nil {
				return 0, err
			}
			score += n
		}
	})
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	if err := s.rt.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.rt.Stop(context.Background()) })
	run := func(code int, args ...string) result {
		t.Helper()
		r := s.cli(args)
		if r.code != code {
			t.Fatalf("herald %s: exit %d, want %d\nstdout %s\nstderr %s", strings.Join(args, " "), r.code, code, r.stdout, r.stderr)
		}
		return r
	}
	run(0, "instances", "start", "scored", "--id", "s-1", "--input", `{"Team":"red"}`)
	run(0, "instances", "start", "scored", "--id", "s-2", "--input", `{"Team":"blue"}`)
	c, err := s.rt.Client(herald.DefaultTenant)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.RaiseEvent(t.Context(), "s-1", "point", 7); err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"s-1", "s-2"} {
		for {
			evs, err := c.History(t.Context(), id, 0)
			if err != nil {
				t.Fatal(err)
			}
			n := 0
			for _, ev := range evs {
				if ev.Kind == history.EventSubscribed {
					n++
				}
			}
			if (id == "s-1" && n == 2) || (id == "s-2" && n == 1) {
				break
			}
			time.Sleep(5 * time.Millisecond) // polls a real runtime
		}
	}

	r := run(0, "instances", "query", "s-1", "score", "--args", "3")
	var got map[string]int
	if err := json.Unmarshal([]byte(r.stdout), &got); err != nil || got["score"] != 7 || got["with_bonus"] != 10 {
		t.Fatalf("query: %q, %v", r.stdout, err)
	}
	r = run(0, "instances", "query", "s-1", "score", "--json")
	var resp struct{ Result map[string]int }
	if err := json.Unmarshal([]byte(r.stdout), &resp); err != nil || resp.Result["score"] != 7 {
		t.Fatalf("query --json: %q, %v", r.stdout, err)
	}
	if r := run(exitFail, "instances", "query", "s-1", "nope"); !strings.Contains(r.stderr, "query_not_found") || !strings.Contains(r.stderr, "registered queries: score") {
		t.Fatalf("unknown query: %q", r.stderr)
	}
	run(exitFail, "instances", "query", "s-1", "score", "--args", `"x"`)
	run(exitNotFound, "instances", "query", "nope", "score")
	run(exitUsage, "instances", "query", "s-1", "score", "--args", "not json")
	run(exitUsage, "instances", "query", "s-1")

	r = run(0, "instances", "list", "--attr", "team=red")
	if !strings.Contains(r.stdout, "s-1") || strings.Contains(r.stdout, "s-2") {
		t.Fatalf("list --attr team=red:\n%s", r.stdout)
	}
	r = run(0, "instances", "list", "--attr", "rank=1", "--attr", "team=blue")
	if !strings.Contains(r.stdout, "s-2") || strings.Contains(r.stdout, "s-1") {
		t.Fatalf("list --attr rank=1 --attr team=blue:\n%s", r.stdout)
	}
	r = run(0, "instances", "list", "--attr", `rank="1"`)
	if strings.Contains(r.stdout, "s-1") || strings.Contains(r.stdout, "s-2") {
		t.Fatalf("list --attr rank=\"1\" (a string) matched an int:\n%s", r.stdout)
	}
	run(exitUsage, "instances", "list", "--attr", "nokey")
	run(exitFail, "instances", "list", "--attr", "bad key=1")
}
