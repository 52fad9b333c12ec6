package postgres

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/heraldwf/herald/heraldtype"
	"github.com/heraldwf/herald/history"
	"github.com/heraldwf/herald/internal/testdb"
	"github.com/heraldwf/herald/storage"
)

// A database made by a Herald of schema version 20 (herald_commit still
// there, the functions as its migrations wrote them) upgrades on Open:
// migration 0021 drops herald_commit, functions.sql replaces the others,
// and a simple commit (a herald_commit_many call of one) goes through.
func TestMigrateUpgradesFromVersion20(t *testing.T) {
	url := testdb.PostgresURL(t)
	schema := testdb.NewSchema(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	pool, err := pgxpool.New(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	ms, err := loadMigrations()
	if err != nil {
		t.Fatal(err)
	}
	if err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		for _, q := range []string{`CREATE SCHEMA IF NOT EXISTS "` + schema + `"`, `SET LOCAL search_path TO "` + schema + `"`,
			`CREATE TABLE schema_migrations (version integer PRIMARY KEY, name text NOT NULL, applied_at bigint NOT NULL)`} {
			if _, err := tx.Exec(ctx, q); err != nil {
				return err
			}
		}
		for _, m := range ms {
			if m.Version > 20 {
				break
			}
			if _, err := tx.Exec(ctx, m.SQL, pgx.QueryExecModeSimpleProtocol); err != nil {
				return err
			}
			if _, err := tx.Exec(ctx, `INSERT INTO schema_migrations VALUES ($1, $2, 0)`, m.Version, m.Name); err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	functions := func() map[string]int {
		t.Helper()
		rows, err := pool.Query(ctx, `SELECT p.proname, count(*) FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace
			WHERE n.nspname = $1 GROUP BY p.proname`, schema)
		if err != nil {
			t.Fatal(err)
		}
		out := map[string]int{}
		for rows.Next() {
			var (
				name string
				n    int
			)
			if err := rows.Scan(&name, &n); err != nil {
				t.Fatal(err)
			}
			out[name] = n
		}
		if rows.Err() != nil {
			t.Fatal(rows.Err())
		}
		return out
	}
	if fs := functions(); fs["herald_commit"] != 1 {
		t.Fatalf("version 20's functions: %v, want herald_commit among them", fs)
	}

	s, err := Open(ctx, url, WithSchema(schema))
	if err != nil {
		t.Fatalf("Open of a version-20 schema: %v", err)
	}
	defer s.Close()
	want := map[string]int{"herald_fence": 1, "herald_end": 1, "herald_send": 1, "herald_bus_numbers": 1, "herald_commit_many": 1}
	if fs := functions(); len(fs) != len(want) || fs["herald_commit"] != 0 {
		t.Fatalf("functions after the upgrade: %v, want %v", fs, want)
	} else {
		for name, n := range want {
			if fs[name] != n {
				t.Fatalf("functions after the upgrade: %v, want %v", fs, want)
			}
		}
	}
	var body string
	if err := pool.QueryRow(ctx, `SELECT p.prosrc FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace
		WHERE n.nspname = $1 AND p.proname = 'herald_commit_many'`, schema).Scan(&body); err != nil {
		t.Fatal(err)
	}
	fns, err := renderFunctions(functionsSQL)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(fns, body) {
		t.Fatalf("herald_commit_many is not functions.sql's body:\n%s", body)
	}

	if _, err := s.InstanceCreate(ctx, &storage.InstanceCreateParams{Tenant: "t", ID: "i", Workflow: "w", Now: hoNow}); err != nil {
		t.Fatal(err)
	}
	turns, err := s.TurnClaim(ctx, &storage.TurnClaimParams{Tenant: "t", Now: hoNow, Lease: time.Minute})
	if err != nil || len(turns) != 1 {
		t.Fatalf("claim: %v, %d turns", err, len(turns))
	}
	tr := turns[0]
	if _, err := s.TurnCommit(ctx, &storage.TurnCommitParams{Tenant: "t", InstanceID: "i", LockToken: tr.LockToken,
		Execution: 1, Now: hoNow, Status: heraldtype.StatusCompleted, ConsumedMessages: []int64{tr.Messages[0].ID},
		NewEvents: []history.Event{{Seq: len(tr.History) + 1, Kind: history.ExecutionCompleted, Time: hoNow}}}); err != nil {
		t.Fatalf("commit after the upgrade: %v", err)
	}
	if in, err := s.InstanceGet(ctx, &storage.InstanceGetParams{Tenant: "t", ID: "i"}); err != nil || in.Status != heraldtype.StatusCompleted {
		t.Fatalf("after the commit: %+v, %v", in, err)
	}
}
