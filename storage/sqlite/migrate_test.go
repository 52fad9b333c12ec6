package sqlite

import (
	"context"
	"database/sql"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/heraldwf/herald/heraldtype"
	"github.com/heraldwf/herald/history"
	"github.com/heraldwf/herald/storage"
)

// A database written by a version-1 Herald is upgraded in place: its events
// kept for an instance that does not exist yet never expire, and the new
// tables and columns work.
func TestMigrateFromVersion1(t *testing.T) {
	ctx := context.Background()
	ms, err := loadMigrations()
	if err != nil {
		t.Fatal(err)
	}
	if ms[0].Version != 1 {
		t.Fatalf("first migration is %s", ms[0].Name)
	}
	// What a version-1 EventRaise wrote for an instance that does not exist.
	path := legacyDB(t, 2,
		`INSERT INTO events (tenant, event_id, instance_id, lane, name, fate, received_at, updated_at)
			VALUES ('t', 'old', 'later', 'positional', 'go', 'pending', 1, 1)`,
		`INSERT INTO inbox (tenant, instance_id, kind, lane, event_id, name, payload, visible_at, created_at)
			VALUES ('t', 'later', 'event', 'positional', 'old', 'go', '1', 1, 1)`)

	s, err := Open(ctx, path)
	if err != nil {
		t.Fatalf("Open of a version-1 database: %v", err)
	}
	defer s.Close()
	var versions int
	if err := s.rdb.QueryRowContext(ctx, `SELECT COUNT(*) FROM schema_migrations`).Scan(&versions); err != nil {
		t.Fatal(err)
	}
	if versions != len(ms) {
		t.Fatalf("%d migrations recorded, want %d", versions, len(ms))
	}
	now := time.Date(2040, 1, 1, 0, 0, 0, 0, time.UTC)
	if ids, err := s.EventExpire(ctx, &storage.EventExpireParams{Tenant: "t", Now: now}); err != nil || len(ids) != 0 {
		t.Fatalf("EventExpire: %v, %v; want nothing expired", ids, err)
	}
	if _, err := s.EventDefinitionPut(ctx, &storage.EventDefinitionPutParams{Tenant: "t",
		Definition: heraldtype.EventDefinition{Name: "go"}, Now: now,
	}); err != nil {
		t.Fatalf("EventDefinitionPut: %v", err)
	}
	if _, err := s.InstanceCreate(ctx, &storage.InstanceCreateParams{Tenant: "t", ID: "later", Workflow: "wf", Now: now}); err != nil {
		t.Fatal(err)
	}
	turns, err := s.TurnClaim(ctx, &storage.TurnClaimParams{Tenant: "t", Now: now})
	if err != nil || len(turns) != 1 {
		t.Fatalf("TurnClaim: %v, %v", turns, err)
	}
	if ms := turns[0].Messages; len(ms) != 2 || ms[0].EventID != "old" || ms[0].Latest || ms[0].Lane != history.LanePositional || ms[0].Key != "" {
		t.Fatalf("messages after the upgrade: %+v", ms)
	}
}

// EventExpire finds its rows through the partial index, not by scanning the
// inbox, and creating an instance clears expires_at (keeping that index to
// the events that may expire).
func TestEventExpireUsesIndex(t *testing.T) {
	ctx := context.Background()
	s := openTest(t)
	plan := strings.Split(queryPlan(t, s, expiredEventsQuery, "t", 1, 10), "\n")
	t.Logf("plan: %q", plan)
	if len(plan) == 0 || !strings.Contains(plan[0], "inbox_expiring") {
		t.Fatalf("query plan %q does not start with the inbox_expiring index", plan)
	}

	now := time.Unix(100, 0)
	if _, err := s.EventRaise(ctx, &storage.EventRaiseParams{
		Tenant: "t", InstanceID: "i", EventID: "e", Name: "go", Now: now, ExpiresAt: now.Add(time.Hour),
	}); err != nil {
		t.Fatal(err)
	}
	expiring := func() int {
		t.Helper()
		var n int
		if err := s.rdb.QueryRowContext(ctx, `SELECT COUNT(*) FROM inbox WHERE expires_at > 0`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	if n := expiring(); n != 1 {
		t.Fatalf("%d expiring messages before create, want 1", n)
	}
	if _, err := s.InstanceCreate(ctx, &storage.InstanceCreateParams{Tenant: "t", ID: "i", Workflow: "wf", Now: now}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.EventRaise(ctx, &storage.EventRaiseParams{
		Tenant: "t", InstanceID: "i", EventID: "e2", Name: "go", Now: now, ExpiresAt: now.Add(time.Hour),
	}); err != nil {
		t.Fatal(err)
	}
	if n := expiring(); n != 0 {
		t.Fatalf("%d expiring messages after create, want 0", n)
	}
}

// Migration 0013 sets the flags of the instances that already have activity
// tasks or correlation markers, and a claim of such an instance then ends
// it with its tasks deleted.
func TestMigrateInstanceFlags(t *testing.T) {
	ctx := context.Background()
	path := legacyDB(t, 13,
		`INSERT INTO instances (tenant, id, workflow, status, execution, created_at, updated_at)
			VALUES ('t', 'tasks', 'wf', 'running', 1, 1, 1), ('t', 'markers', 'wf', 'running', 1, 1, 1),
			       ('t', 'none', 'wf', 'running', 1, 1, 1)`,
		`INSERT INTO activities (tenant, instance_id, execution, task_seq, name, attempt, visible_at, created_at)
			VALUES ('t', 'tasks', 1, 2, 'a', 1, 1, 1)`,
		`INSERT INTO correlated_waits (tenant, instance_id, execution, task_seq, def, key, created_at)
			VALUES ('t', 'markers', 1, 2, 'd', 'k', 1)`)

	s, err := Open(ctx, path)
	if err != nil {
		t.Fatalf("Open of a version-12 database: %v", err)
	}
	t.Cleanup(func() { s.Close() })
	for id, want := range map[string][2]bool{"tasks": {true, false}, "markers": {false, true}, "none": {false, false}} {
		var got [2]bool
		if err := s.rdb.QueryRowContext(ctx, `SELECT has_tasks, has_markers FROM instances WHERE tenant = 't' AND id = ?`, id).
			Scan(&got[0], &got[1]); err != nil {
			t.Fatal(err)
		}
		if got != want {
			t.Errorf("%s: has_tasks, has_markers = %v, want %v", id, got, want)
		}
	}
	now := time.Unix(10, 0)
	if _, err := s.EventRaise(ctx, &storage.EventRaiseParams{Tenant: "t", InstanceID: "tasks", EventID: "e", Name: "go", Now: now}); err != nil {
		t.Fatal(err)
	}
	turns, err := s.TurnClaim(ctx, &storage.TurnClaimParams{Tenant: "t", Now: now})
	if err != nil || len(turns) != 1 {
		t.Fatalf("TurnClaim: %v, %v", turns, err)
	}
	if _, err := s.TurnCommit(ctx, &storage.TurnCommitParams{Tenant: "t", InstanceID: "tasks", LockToken: turns[0].LockToken,
		Execution: 1, Now: now, ConsumedMessages: []int64{turns[0].Messages[0].ID},
		Fates:     []storage.FateUpdate{{EventID: "e", Fate: history.FateDelivered}},
		NewEvents: []history.Event{{Seq: 1, Kind: history.ExecutionCompleted, Time: now}}, Status: heraldtype.StatusCompleted}); err != nil {
		t.Fatalf("TurnCommit: %v", err)
	}
	tasks, err := s.ActivityClaim(ctx, &storage.ActivityClaimParams{Tenant: "t", Now: now.Add(time.Hour), Max: 10})
	if err != nil || len(tasks) != 0 {
		t.Fatalf("ActivityClaim after the instance ended: %v, %v; want none", tasks, err)
	}
}

// legacyDB makes a database file in a temporary directory with the
// migrations before version before applied, runs stmts in it, and returns
// its path: what an older Herald left behind.
func legacyDB(t *testing.T, before int, stmts ...string) string {
	t.Helper()
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), fmt.Sprintf("v%d.db", before-1))
	ms, err := loadMigrations()
	if err != nil {
		t.Fatal(err)
	}
	db, err := sql.Open("sqlite", "file:"+path+"?_pragma=journal_mode(WAL)&_txlock=immediate")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.ExecContext(ctx, `CREATE TABLE schema_migrations (
		version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at INTEGER NOT NULL)`); err != nil {
		t.Fatal(err)
	}
	for _, m := range ms {
		if m.Version >= before {
			break
		}
		if err := applyMigration(ctx, db, m); err != nil {
			t.Fatal(err)
		}
	}
	for _, q := range stmts {
		if _, err := db.ExecContext(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	return path
}
