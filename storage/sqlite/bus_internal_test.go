package sqlite

import (
	"context"
	"encoding/json"
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/heraldwf/herald/heraldtype"
	"github.com/heraldwf/herald/storage"
)

// The bus's queries are index probes and range scans of indexes that lead
// with the tenant, never scans of a table (or of a whole index), and the
// pages and claims in index order need no sort.
func TestBusPlans(t *testing.T) {
	ctx := context.Background()
	s, err := Open(ctx, filepath.Join(t.TempDir(), "plans.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	plan := func(q string, args ...any) string { t.Helper(); return queryPlan(t, s, q, args...) }
	type check struct {
		name   string
		q      string
		args   []any
		uses   []string // indexes the plan must search (or a prefix of their names)
		noSort bool     // no temporary B-tree for ORDER BY
	}
	letterWhere := func(extra ...string) []string { return append([]string{"d.tenant = ?", "d.id < ?"}, extra...) }
	attemptWhere := func(extra ...string) []string { return append([]string{"tenant = ?", "id > ?"}, extra...) }
	checks := []check{
		{name: "route: unrouted events", q: busUnroutedSQL, args: []any{"t", 10},
			uses: []string{"bus_events_unrouted"}, noSort: true},
		{name: "claim: due executions", q: busDueSQL, args: []any{"t", 1, 10},
			uses: []string{"bus_routes_queued_fq", "bus_routes_retrying_due", "bus_routes_running"}},
		{name: "fair queueing: lowest number", q: busLowSQL, args: []any{"t"},
			uses: []string{"bus_routes_queued_fq", "bus_routes_retrying_fq"}},
		{name: "TenantsReady", q: `SELECT tn.id FROM tenants tn WHERE ` + readyBusSQL, args: []any{1},
			uses: []string{"bus_events_unrouted", "bus_routes_queued_due", "bus_routes_retrying_due", "bus_routes_running"}},
		{name: "NextWake", q: nextWakeSQL, args: []any{"t", 1},
			uses: []string{"instances_ready", "bus_routes_queued_due", "bus_routes_retrying_due", "bus_routes_running"}},
		{name: "backlog", q: busBacklogSQL, args: []any{"t", 100},
			uses: []string{"bus_events_unrouted", "bus_routes_queued", "bus_routes_retrying", "bus_routes_running"}},
		{name: "prune", q: busPrunableSQL, args: []any{"t", 1, 10},
			uses: []string{"bus_events_routed", "sqlite_autoindex_bus_routes_1"}, noSort: true},
		{name: "dead letters: a page", q: letterListSQL(letterWhere()), args: []any{"t", 1, 10},
			uses: []string{"bus_dead_letters_tenant"}, noSort: true},
		{name: "dead letters: a page of a subscription", q: letterListSQL(letterWhere("d.subscription = ?")),
			args: []any{"t", 1, "s", 10}, uses: []string{"bus_dead_letters_subscription"}, noSort: true},
		{name: "dead letters: a page of an event type", q: letterListSQL(letterWhere("d.event_type = ?")),
			args: []any{"t", 1, "x", 10}, uses: []string{"bus_dead_letters_type"}, noSort: true},
		{name: "attempts: a page of an execution", q: attemptListSQL(attemptWhere("execution = ?")),
			args: []any{"t", 1, 2, 10}, uses: []string{"bus_attempts_execution"}, noSort: true},
		{name: "attempts: a page of an event", q: attemptListSQL(attemptWhere("event_id = ?")),
			args: []any{"t", 1, "e", 10}, uses: []string{"bus_attempts_event"}, noSort: true},
		{name: "attempts: a page of a subscription", q: attemptListSQL(attemptWhere("subscription = ?")),
			args: []any{"t", 1, "s", 10}, uses: []string{"bus_attempts_subscription"}, noSort: true},
	}
	for _, c := range checks {
		p := plan(c.q, c.args...)
		for _, idx := range c.uses {
			if !strings.Contains(p, "USING INDEX "+idx) && !strings.Contains(p, "USING COVERING INDEX "+idx) {
				t.Errorf("%s does not search %s:\n%s", c.name, idx, p)
			}
		}
		for _, line := range strings.Split(p, "\n") {
			line = strings.TrimSpace(line)
			if strings.HasPrefix(line, "SCAN bus_") || strings.HasPrefix(line, "SCAN tenants") && !strings.Contains(c.name, "TenantsReady") ||
				strings.HasPrefix(line, "SCAN d") || strings.HasPrefix(line, "SCAN e ") {
				t.Errorf("%s scans: %q\n%s", c.name, line, p)
			}
		}
		if c.noSort && strings.Contains(p, "TEMP B-TREE") {
			t.Errorf("%s sorts:\n%s", c.name, p)
		}
		if testing.Verbose() {
			t.Logf("%s:\n%s", c.name, p)
		}
	}
}

// The refusals this store adds to the contract's (see bus.go) change
// nothing either.
func TestBusOwnRefusals(t *testing.T) {
	ctx := context.Background()
	s, err := Open(ctx, filepath.Join(t.TempDir(), "refusals.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	now := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	want := func(what string, err error) {
		t.Helper()
		if !errors.Is(err, heraldtype.ErrInvalidArgument) {
			t.Errorf("%s: %v, want ErrInvalidArgument", what, err)
		}
	}
	_, err = s.BusPublish(ctx, &storage.BusPublishParams{Tenant: "t", Now: now, Event: storage.BusPublishEvent{ID: "e", Type: "a"}})
	want("BusPublish without data", err)
	_, err = s.BusPublish(ctx, &storage.BusPublishParams{Tenant: "t", Now: now, Event: storage.BusPublishEvent{ID: "e", Type: "a",
		Data: json.RawMessage(`1`), Source: "workflow:" + strings.Repeat("x", storage.MaxIDBytes+1)}})
	want("BusPublish with a source over the cap", err)
	if _, err := s.BusPublish(ctx, &storage.BusPublishParams{Tenant: "t", Now: now, Event: storage.BusPublishEvent{ID: "e", Type: "a",
		Data: json.RawMessage(`1`), Source: "workflow:" + strings.Repeat("x", storage.MaxIDBytes)}}); err != nil {
		t.Fatalf("BusPublish with a source at the cap: %v", err)
	}
	if n, err := s.BusRoute(ctx, &storage.BusRouteParams{Tenant: "t", Now: now, Route: func(*storage.BusEvent) []storage.BusRouteDecision {
		return []storage.BusRouteDecision{{Subscription: "s", Matched: true}}
	}}); n != 1 || err != nil {
		t.Fatalf("BusRoute: %d, %v", n, err)
	}
	cs, err := s.BusClaim(ctx, &storage.BusClaimParams{Tenant: "t", Now: now})
	if err != nil || len(cs) != 1 {
		t.Fatalf("BusClaim: %v, %v", cs, err)
	}
	want("BusHeartbeat with a zero LeaseUntil", s.BusHeartbeat(ctx, &storage.BusHeartbeatParams{Tenant: "t",
		Execution: cs[0].Execution.ID, LockToken: cs[0].LockToken}))
	neg := -1
	for what, sub := range map[string]heraldtype.Subscription{
		"a filter that is not JSON": {ID: "s", Pattern: "a", Filter: json.RawMessage(`{"all":`)},
		"a negative MaxRetries":     {ID: "s", Pattern: "a", MaxRetries: &neg},
		"a negative Timeout":        {ID: "s", Pattern: "a", Timeout: heraldtype.Duration(-time.Second)},
		"an empty pattern":          {ID: "s"},
		"a NUL in the pattern":      {ID: "s", Pattern: "a\x00"},
	} {
		_, err := s.BusSubscriptionPut(ctx, &storage.BusSubscriptionPutParams{Tenant: "t", Subscription: sub, Now: now})
		want("BusSubscriptionPut with "+what, err)
	}
	for what, src := range map[string]string{"a NUL": "return '\x00'", "invalid UTF-8": "return '\xff'"} {
		_, err := s.BusScriptPut(ctx, &storage.BusScriptPutParams{Tenant: "t", ID: "js", Source: src, Now: now})
		want("BusScriptPut with "+what+" in the source", err)
	}
	// Nothing was written by the refusals; the lease is the claim's.
	if g, err := s.BusSubscriptionGeneration(ctx, &storage.BusTenantParams{Tenant: "t"}); g != 0 || err != nil {
		t.Errorf("generation %d, %v", g, err)
	}
	if ss, err := s.BusScriptList(ctx, &storage.BusTenantParams{Tenant: "t"}); len(ss) != 0 || err != nil {
		t.Errorf("scripts %d, %v", len(ss), err)
	}
	if n, err := s.BusBacklog(ctx, &storage.BusBacklogParams{Tenant: "t"}); n != 1 || err != nil {
		t.Errorf("backlog %d, %v; want the claimed execution only", n, err)
	}
	at, ok, err := s.NextWake(ctx, &storage.NextWakeParams{Tenant: "t", Now: now})
	if err != nil || !ok || !at.Equal(cs[0].Execution.UpdatedAt.Add(time.Minute)) {
		t.Errorf("NextWake = %v, %v, %v; want the claim's lease end", at, ok, err)
	}
}
