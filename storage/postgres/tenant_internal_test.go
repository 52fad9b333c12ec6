package postgres

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/heraldwf/herald/heraldtype"
	"github.com/heraldwf/herald/internal/testdb"
	"github.com/heraldwf/herald/storage"
	"github.com/heraldwf/herald/storage/internal/backend"
)

// schemaConn connects to the test database with search_path on schema.
func schemaConn(t *testing.T, ctx context.Context, url, schema string) *pgx.Conn {
	t.Helper()
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close(context.Background()) })
	if _, err := conn.Exec(ctx, `SET search_path TO "`+schema+`"`); err != nil {
		t.Fatal(err)
	}
	return conn
}

// A schema made before the tenant registry (migration 0006) is upgraded in
// place: every tenant it held data of is registered.
// legacySchema makes a fresh schema as a Herald that knew only the
// migrations before version applied it, and returns a connection to it
// (search_path set), the database's URL and the schema's name.
func legacySchema(t *testing.T, ctx context.Context, version int) (*pgx.Conn, string, string) {
	t.Helper()
	url := testdb.PostgresURL(t)
	schema := testdb.NewSchema(t)
	conn := schemaConn(t, ctx, url, schema)
	ms, err := loadMigrations()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Exec(ctx, `CREATE SCHEMA IF NOT EXISTS "`+schema+`"; SET search_path TO "`+schema+`";
		CREATE TABLE schema_migrations (version integer PRIMARY KEY, name text NOT NULL, applied_at bigint NOT NULL)`,
		pgx.QueryExecModeSimpleProtocol); err != nil {
		t.Fatal(err)
	}
	for _, m := range ms {
		if m.Version >= version {
			break
		}
		if _, err := conn.Exec(ctx, m.SQL, pgx.QueryExecModeSimpleProtocol); err != nil {
			t.Fatalf("migration %s: %v", m.Name, err)
		}
		if _, err := conn.Exec(ctx, `INSERT INTO schema_migrations VALUES ($1, $2, 0)`, m.Version, m.Name); err != nil {
			t.Fatal(err)
		}
	}
	return conn, url, schema
}

func TestMigrateRegistersExistingTenants(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	conn, url, schema := legacySchema(t, ctx, 6)
	for _, q := range []string{
		`INSERT INTO instances (tenant, id, workflow, status, execution, created_at, updated_at) VALUES ('t-inst', 'i', 'wf', 'pending', 1, 1, 1)`,
		`INSERT INTO inbox (tenant, instance_id, kind, visible_at, created_at) VALUES ('t-inbox', 'i', 'event', 1, 1)`,
		`INSERT INTO events (tenant, event_id, instance_id, lane, name, fate, received_at, updated_at) VALUES ('t-event', 'e', 'i', 'positional', 'go', 'pending', 1, 1)`,
		`INSERT INTO correlated_events (tenant, def, key, created_at, updated_at) VALUES ('t-corr', 'd', 'k', 1, 1)`,
		`INSERT INTO event_definitions (tenant, name, buffer, version, created_at, updated_at) VALUES ('t-def', 'n', 'fifo', 1, 1, 1)`,
		`INSERT INTO instances (tenant, id, workflow, status, execution, created_at, updated_at) VALUES ('t-inst', 'j', 'wf', 'pending', 1, 1, 1)`,
	} {
		if _, err := conn.Exec(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	s, err := Open(ctx, url, WithSchema(schema))
	if err != nil {
		t.Fatalf("Open of a version-5 schema: %v", err)
	}
	defer s.Close()
	list, err := s.TenantList(ctx, &storage.TenantListParams{})
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, tn := range list {
		ids = append(ids, tn.ID)
		if tn.CreatedAt.IsZero() || tn.Limits != (heraldtype.TenantLimits{}) {
			t.Errorf("migrated tenant %+v", tn)
		}
	}
	if want := []string{"t-corr", "t-def", "t-event", "t-inbox", "t-inst"}; !slices.Equal(ids, want) {
		t.Fatalf("tenants after the migration: %q, want %q", ids, want)
	}
	insts, _, err := s.InstanceList(ctx, &storage.InstanceListParams{Tenant: "t-inst"})
	if err != nil || len(insts) != 2 || insts[0].ID != "j" || insts[0].Blocked != "" {
		t.Fatalf("InstanceList after the migration: %v, %v", insts, err)
	}
}

// explain returns the plan of q (run with args) after settings, with
// EXPLAIN (ANALYZE, BUFFERS), as one string.
func explain(t *testing.T, ctx context.Context, conn *pgx.Conn, settings, q string, args ...any) string {
	t.Helper()
	tx, err := conn.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	if settings != "" {
		if _, err := tx.Exec(ctx, settings); err != nil {
			t.Fatal(err)
		}
	}
	rows, err := tx.Query(ctx, "EXPLAIN (ANALYZE, BUFFERS, COSTS OFF) "+q, args...)
	if err != nil {
		t.Fatal(err)
	}
	var plan []string
	for rows.Next() {
		var line string
		if err := rows.Scan(&line); err != nil {
			t.Fatal(err)
		}
		plan = append(plan, line)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return strings.Join(plan, "\n")
}

// topBuffers returns the shared buffers the plan's top node touched.
func topBuffers(t *testing.T, plan string) int {
	t.Helper()
	for _, line := range strings.Split(plan, "\n") {
		if i := strings.Index(line, "Buffers: shared hit="); i >= 0 {
			var hit int
			fmt.Sscanf(line[i+len("Buffers: shared hit="):], "%d", &hit)
			if j := strings.Index(line, "read="); j >= 0 {
				var read int
				fmt.Sscanf(line[j+len("read="):], "%d", &read)
				hit += read
			}
			return hit
		}
	}
	t.Fatalf("no buffer counts in the plan:\n%s", plan)
	return 0
}

// TenantsReady costs a few index probes per tenant and an InstanceList page
// is one index range scan, however many rows a tenant has: checked on a
// table holding 100k ready instances of one tenant, before and after the
// table is analyzed (a generic plan may be made either way).
func TestTenantsReadyAndListPlans(t *testing.T) {
	ctx, s, url, schema := openInSchema(t, 2*time.Minute)
	for _, tn := range []string{"big", "small", "idle"} {
		if err := s.TenantEnsure(ctx, &storage.TenantEnsureParams{Tenant: tn}); err != nil {
			t.Fatal(err)
		}
	}
	conn := schemaConn(t, ctx, url, schema)
	const n = 100_000
	if _, err := conn.Exec(ctx, `INSERT INTO instances (tenant, id, workflow, status, execution, created_at, updated_at, ready_at)
		SELECT 'big', 'i' || g, 'wf', 'pending', 1, g, g, g FROM generate_series(1, $1) g`, n); err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Exec(ctx, `INSERT INTO activities (tenant, instance_id, execution, task_seq, name, attempt, visible_at, created_at)
		SELECT 'big', 'i' || g, 1, 2, 'a', 1, g, g FROM generate_series(1, $1) g`, n); err != nil {
		t.Fatal(err)
	}
	now := int64(2 * n)
	if _, err := s.InstanceCreate(ctx, &storage.InstanceCreateParams{Tenant: "small", ID: "one", Workflow: "wf", Now: time.Unix(0, n)}); err != nil {
		t.Fatal(err)
	}
	for _, analyzed := range []bool{false, true} {
		if analyzed {
			if _, err := conn.Exec(ctx, `ANALYZE instances; ANALYZE activities; ANALYZE tenants`); err != nil {
				t.Fatal(err)
			}
		}
		t.Run(fmt.Sprintf("analyzed=%v", analyzed), func(t *testing.T) {
			ready, err := s.TenantsReady(ctx, &storage.TenantsReadyParams{Now: time.Unix(0, now)})
			if err != nil || !slices.Equal(ready, []string{"big", "small"}) {
				t.Fatalf("TenantsReady: %q, %v", ready, err)
			}
			for _, c := range []struct {
				name  string
				kinds storage.WorkKind
				list  bool
			}{{"turns", storage.WorkTurns, false}, {"activities", storage.WorkActivities, false},
				{"all", storage.WorkAll, false}, {"listed", storage.WorkAll, true}} {
				args := []any{now}
				if c.list {
					args = append(args, []string{"big", "small", "idle"})
				}
				plan := explain(t, ctx, conn, scanSettings, tenantsReadySQL(c.kinds, c.list), args...)
				if strings.Contains(plan, "Seq Scan on instances") || strings.Contains(plan, "Seq Scan on activities") ||
					strings.Contains(plan, "Bitmap") {
					t.Fatalf("%s: a scan of a tenant's rows:\n%s", c.name, plan)
				}
				if b := topBuffers(t, plan); b > 100 {
					t.Fatalf("%s: %d buffers for 3 tenants:\n%s", c.name, b, plan)
				}
				t.Logf("TenantsReady %s:\n%s", c.name, plan)
			}
			plan := explain(t, ctx, conn, scanSettings, nextWakeAllSQL, int64(0))
			if b := topBuffers(t, plan); b > 100 {
				t.Fatalf("NextWake(AllTenants): %d buffers for 3 tenants:\n%s", b, plan)
			}

			// A page in the middle of the big tenant, with a cursor.
			var page1 []*storage.Instance
			page1, next, err := s.InstanceList(ctx, &storage.InstanceListParams{Tenant: "big", Limit: 50})
			if err != nil || len(page1) != 50 || page1[0].ID != "i100000" || next == "" {
				t.Fatalf("InstanceList page 1: %d, %q, %v", len(page1), next, err)
			}
			createdAt, id, _, _ := listCursorOf(t, next)
			q := `SELECT ` + shownInstanceCols + ` FROM instances WHERE tenant = $1 AND rid > 0 AND status = $2
				AND (created_at, id COLLATE "C") < ($3, $4) ORDER BY created_at DESC, id COLLATE "C" DESC LIMIT 51`
			plan = explain(t, ctx, conn, scanSettings, q, "big", "pending", createdAt, id)
			if !strings.Contains(plan, "instances_created") || strings.Contains(plan, "Sort") {
				t.Fatalf("InstanceList page: not a range scan of instances_created:\n%s", plan)
			}
			if b := topBuffers(t, plan); b > 400 {
				t.Fatalf("InstanceList page of 50: %d buffers:\n%s", b, plan)
			}
			t.Logf("InstanceList page:\n%s", plan)
		})
	}
}

func listCursorOf(t *testing.T, next string) (int64, string, bool, error) {
	t.Helper()
	c, id, ok, err := backendListCursor(next)
	if err != nil || !ok {
		t.Fatalf("cursor %q: %v", next, err)
	}
	return c, id, ok, err
}

// SubscribeAll hears the writes of another store on the same schema
// (through NOTIFY), for every tenant.
func TestSubscribeAllAcrossStores(t *testing.T) {
	url := testdb.PostgresURL(t)
	schema := testdb.NewSchema(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	s1, err := Open(ctx, url, WithSchema(schema))
	if err != nil {
		t.Fatal(err)
	}
	defer s1.Close()
	s2, err := Open(ctx, url, WithSchema(schema))
	if err != nil {
		t.Fatal(err)
	}
	defer s2.Close()
	ch, drain, cancelSub := s1.SubscribeAll(storage.WorkTurns)
	defer cancelSub()
	acts, drainActs, cancelActs := s1.SubscribeAll(storage.WorkActivities)
	defer cancelActs()
	for _, tn := range []string{"x", "y"} {
		if _, err := s2.InstanceCreate(ctx, &storage.InstanceCreateParams{Tenant: tn, ID: "i", Workflow: "wf", Input: json.RawMessage(`1`)}); err != nil {
			t.Fatal(err)
		}
	}
	seen := map[string]bool{}
	for len(seen) < 2 {
		select {
		case <-ch:
		case <-ctx.Done():
			t.Fatalf("only %v reached the other store's SubscribeAll", seen)
		}
		for _, tn := range drain() {
			if tn != "x" && tn != "y" {
				t.Fatalf("drain reported %q", tn)
			}
			seen[tn] = true
		}
	}
	select {
	case <-acts:
		t.Fatalf("an activity subscriber was woken by new turns: %q", drainActs())
	default:
	}
}

var backendListCursor = backend.ListCursor
