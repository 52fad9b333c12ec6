package main

// The instance lanes' commands (events, correlated, defs, instances
// history/timeline/events/terminate, and show with its timeline) against a
// real server, human and --json (testdata/cli_lanes.golden,
// cli_lanes_json.golden).

import (
	"context"
	"testing"

	"github.com/heraldwf/herald"
	"github.com/heraldwf/herald/history"
)

// waiting waits until instance id (default tenant) waits for event name.
func waiting(id, name string) func(*apiServer) {
	return func(s *apiServer) {
		s.eventually(id+" waits for "+name, func(ctx context.Context, c *herald.Client) (bool, error) {
			evs, err := c.History(ctx, id, 1)
			for _, ev := range evs {
				if ev.Kind == history.EventSubscribed && ev.Name == name {
					return true, nil
				}
			}
			return false, err
		})
	}
}

// reached waits until instance id (default tenant) has status.
func reached(id string, status herald.Status) func(*apiServer) {
	return func(s *apiServer) { s.waitStatus(herald.DefaultTenant, id, status) }
}

// fate waits until event id (default tenant) has fate f.
func fate(id string, f history.Fate) func(*apiServer) {
	return func(s *apiServer) {
		s.eventually(id+" "+string(f), func(ctx context.Context, c *herald.Client) (bool, error) {
			r, err := c.EventFate(ctx, id)
			return err == nil && r.Fate == f, err
		})
	}
}

// laneSteps exercise the lanes' commands: definitions (a schema refusing
// a payload), an approval decided by a raised event and its timeline, a
// signal-with-start, a queue message, an event dropped by a terminate,
// correlated events.
func laneSteps() []step {
	approvalInput := `{"item": "desk", "amount": 5, "deadline": "1h", "escalation": "1s"}`
	return []step{
		{args: []string{"defs", "put", "decision", "--file", "testdata/lanes/decision.json"}},
		{args: []string{"defs", "put", "--file", "testdata/lanes/signature.json"}},
		{args: []string{"defs", "put", "other", "--file", "testdata/lanes/signature.json"}, code: exitUsage},
		{args: []string{"defs", "put", "--file", "testdata/lanes/decision.json"}, code: exitUsage},
		{args: []string{"defs", "list"}},
		{args: []string{"defs", "get", "signature"}},
		{args: []string{"instances", "start", "approval", "--id", "ap-1", "--input", approvalInput}},
		{args: []string{"events", "raise", "ap-1", "decision", `{"approved": "yes"}`}, before: waiting("ap-1", "decision"), code: exitFail},
		{args: []string{"events", "raise", "ap-1", "decision", `{"approved": true, "by": "ann"}`, "--id", "d-1"}},
		{args: []string{"events", "raise", "ap-1", "decision", `{"approved": true, "by": "ann"}`, "--id", "d-1"}},
		{args: []string{"events", "fate", "d-1"}, before: reached("ap-1", herald.StatusCompleted)},
		{args: []string{"instances", "show", "ap-1"}},
		{args: []string{"instances", "history", "ap-1"}},
		{args: []string{"instances", "history", "ap-1", "--execution", "2"}, code: exitNotFound},
		{args: []string{"events", "raise", "ap-1", "decision", `{"approved": false, "by": "bob"}`, "--id", "d-late"}, code: exitFail},
		{args: []string{"instances", "events", "ap-1"}},
		{args: []string{"events", "list", "ap-1", "--fate", "dropped"}},
		{args: []string{"events", "raise", "ap-2", "decision", `{"approved": false, "by": "bob"}`, "--id", "d-2",
			"--start-if-absent", "approval", "--input", approvalInput}},
		{args: []string{"instances", "timeline", "ap-2"}, before: reached("ap-2", herald.StatusCompleted)},
		{args: []string{"events", "raise", "ap-3", "decision", "--input", "{}"}, code: exitUsage},
		{args: []string{"events", "enqueue", "in-1", "orders", `"order-7"`, "--id", "m-1", "--start-if-absent", "inbox"}},
		{args: []string{"events", "list", "in-1"}, before: reached("in-1", herald.StatusCompleted)},
		{args: []string{"events", "fate", "nope"}, code: exitNotFound},
		{args: []string{"instances", "start", "wait", "--id", "w-1"}},
		{args: []string{"events", "raise", "w-1", "other", "1", "--id", "x-1"}, before: waiting("w-1", "go")},
		{args: []string{"events", "fate", "x-1"}, before: fate("x-1", history.FateBuffered)},
		{args: []string{"instances", "terminate", "w-1", "--reason", "no longer needed"}},
		{args: []string{"instances", "terminate", "w-1"}, code: exitFail},
		{args: []string{"instances", "events", "w-1", "--fate", "dropped"}, before: fate("x-1", history.FateDropped)},
		{args: []string{"instances", "start", "wait", "--id", "w-2"}},
		{args: []string{"instances", "cancel", "w-2", "--reason", "changed my mind"}, before: waiting("w-2", "go")},
		{args: []string{"instances", "cancel", "w-2"}},
		{args: []string{"events", "raise", "w-2", "go", `"done"`, "--id", "g-2"}},
		{args: []string{"instances", "show", "w-2"}, before: reached("w-2", herald.StatusCanceled)},
		{args: []string{"instances", "cancel", "w-2"}, code: exitFail},
		{args: []string{"instances", "cancel", "nope"}, code: exitNotFound},
		{args: []string{"correlated", "put", "signature", "doc-7", `{"signed_by": "ann"}`}},
		{args: []string{"correlated", "put", "signature", "doc-8"}},
		{args: []string{"correlated", "put", "decision", "doc-7", "{}"}, code: exitFail},
		{args: []string{"correlated", "get", "signature", "doc-7"}},
		{args: []string{"correlated", "search", "signature"}},
		{args: []string{"correlated", "search", "signature", "--limit", "1", "--all"}},
		{args: []string{"correlated", "search", "signature", "--produced", "maybe"}, code: exitUsage},
		{args: []string{"correlated", "delete", "signature", "doc-7"}},
		{args: []string{"correlated", "get", "signature", "doc-7"}, code: exitNotFound},
		{args: []string{"defs", "delete", "decision"}},
		{args: []string{"defs", "get", "decision"}, code: exitNotFound},
	}
}

// TestCLI_Lanes: the lanes' commands, their tables, listings, timelines,
// errors and exit codes (testdata/cli_lanes.golden).
func TestCLI_Lanes(t *testing.T) {
	t.Parallel()
	golden(t, "cli_lanes.golden", transcript(t, laneSteps()))
}

// TestCLI_LanesJSON: the same with --json (testdata/cli_lanes_json.golden).
func TestCLI_LanesJSON(t *testing.T) {
	t.Parallel()
	golden(t, "cli_lanes_json.golden", transcript(t, laneSteps(), "--json"))
}
