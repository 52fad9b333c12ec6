package postgres

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/heraldwf/herald/storage"
)

// busMinNumberSQL is herald_bus_numbers's probe of the lowest fair-queueing
// number of tenant $1's queue (it must be one index probe).
const busMinNumberSQL = `SELECT fq FROM bus_routes WHERE tenant = $1 AND status IN ('queued', 'retrying') ORDER BY fq LIMIT 1`

// busMaxNumberSQL is herald_bus_numbers's probe of the highest
// fair-queueing number tenant $1 ever gave.
const busMaxNumberSQL = `SELECT last FROM bus_fq WHERE tenant = $1 AND last >= 0 ORDER BY last DESC LIMIT 1`

// The bus's statements cost what they touch, not what the tenant holds:
// checked on tables holding 100k queued executions, 100k dead letters and
// 100k attempt records of one tenant, before and after they are analyzed
// (a generic plan may be made either way). A claim, a routing, the lowest
// fair-queueing number, a dead-letter page, an attempt page, the backlog
// up to a limit, and the NextWake and TenantsReady probes each read a
// bounded number of buffers.
func TestBusPlansAtScale(t *testing.T) {
	ctx, s, url, schema := openInSchema(t, 3*time.Minute)
	for _, tn := range []string{"big", "small", "idle"} {
		if err := s.TenantEnsure(ctx, &storage.TenantEnsureParams{Tenant: tn}); err != nil {
			t.Fatal(err)
		}
	}
	conn := schemaConn(t, ctx, url, schema)
	const n = 100_000
	for _, q := range []string{
		// Routed events, each with a queued execution due at g (fair-queueing
		// number g), a running one (leases until n+g) every 100th.
		`INSERT INTO bus_events (tenant, id, type, data, published_at, routed_at)
			SELECT 'big', 'e' || g, 'order.created', '{}', g, g FROM generate_series(1, $1) g`,
		`INSERT INTO bus_routes (tenant, event_id, subscription, status, fq, due_at, lock_token, lease_until, created_at, updated_at)
			SELECT 'big', 'e' || g, 's' || (g % 3), CASE WHEN g % 100 = 0 THEN 'running' ELSE 'queued' END, g, g,
				CASE WHEN g % 100 = 0 THEN 'tok' || g END, CASE WHEN g % 100 = 0 THEN $1 + g ELSE 0 END, g, g
			FROM generate_series(1, $1) g`,
		`INSERT INTO bus_dead_letters (tenant, execution, event_id, subscription, target, event_type, error_kind, attempts, failed_at, created_at)
			SELECT 'big', g, 'e' || g, 's' || (g % 3), '{}', 'order.created', 'permanent', 1, g, g FROM generate_series(1, $1) g`,
		`INSERT INTO bus_attempts (tenant, execution, event_id, subscription, number, succeeded, started_at, duration_ns)
			SELECT 'big', g, 'e' || g, 's' || (g % 3), 1, false, g, 1 FROM generate_series(1, $1) g`,
		// A few unrouted events.
		`INSERT INTO bus_events (tenant, id, type, data, published_at)
			SELECT 'big', 'u' || g, 'order.created', '{}', $1 + g FROM generate_series(1, 10) g`,
	} {
		if _, err := conn.Exec(ctx, q, n); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	if _, err := s.BusPublish(ctx, &storage.BusPublishParams{Tenant: "small", Now: time.Unix(0, 1),
		Event: storage.BusPublishEvent{ID: "one", Type: "x", Data: []byte(`1`)}}); err != nil {
		t.Fatal(err)
	}
	now := int64(n / 2)
	for _, analyzed := range []bool{false, true} {
		if analyzed {
			if _, err := conn.Exec(ctx, `ANALYZE bus_events; ANALYZE bus_routes; ANALYZE bus_dead_letters; ANALYZE bus_attempts; ANALYZE tenants`); err != nil {
				t.Fatal(err)
			}
		}
		t.Run(fmt.Sprintf("analyzed=%v", analyzed), func(t *testing.T) {
			for _, c := range []struct {
				name, settings, sql string
				args                []any
				max                 int // buffers
				not                 []string
			}{
				{"claim", claimSettings, busClaimSQL, []any{"big", now, 10, now + 60}, 300, nil},
				{"route", scanSettings, routeSelectSQL, []any{"big", 100}, 100, nil},
				{"lowest number", "", busMinNumberSQL, []any{"big"}, 10, nil},
				{"dead letters", scanSettings, `SELECT ` + deadLetterCols + ` FROM bus_dead_letters d WHERE d.tenant = $1
					AND d.id < $2 ORDER BY d.id DESC LIMIT 101`, []any{"big", int64(n / 2)}, 100, []string{"Sort"}},
				{"dead letters of a subscription", scanSettings, `SELECT ` + deadLetterCols + ` FROM bus_dead_letters d WHERE d.tenant = $1
					AND d.subscription = $2 AND d.id > 0 AND d.id < $3 ORDER BY d.id DESC LIMIT 101`, []any{"big", "s1", int64(n / 2)}, 200, []string{"Sort"}},
				{"attempts of an event", scanSettings, `SELECT ` + attemptCols + ` FROM bus_attempts a WHERE a.tenant = $1
					AND a.event_id <> '' AND a.event_id = $2 ORDER BY a.id LIMIT 101`, []any{"big", "e500"}, 20, nil},
				{"attempts of a subscription", scanSettings, `SELECT ` + attemptCols + ` FROM bus_attempts a WHERE a.tenant = $1
					AND a.subscription <> '' AND a.subscription = $2 AND a.id > $3 ORDER BY a.id LIMIT 101`, []any{"big", "s2", int64(n / 2)}, 200, []string{"Sort"}},
				{"backlog", scanSettings, busBacklogSQL, []any{"big", int64(100)}, 400, nil},
				{"next wake", scanSettings, nextWakeSQL, []any{"big", now}, 100, nil},
				{"prune", scanSettings, busPruneLockSQL, []any{"big", int64(10), 100}, 100, nil},
				{"event", "", busEventGetSQL, []any{"big", "e77"}, 20, nil},
				{"tenants ready", scanSettings, tenantsReadySQL(storage.WorkBus, false), []any{now}, 100, nil},
				{"tenants ready, listed", scanSettings, tenantsReadySQL(storage.WorkBus, true), []any{now, []string{"big", "small", "idle"}}, 100, nil},
			} {
				plan := explain(t, ctx, conn, c.settings, c.sql, c.args...)
				if strings.Contains(plan, "Seq Scan on bus_") || strings.Contains(plan, "Bitmap") {
					t.Fatalf("%s: a scan of a tenant's rows:\n%s", c.name, plan)
				}
				for _, bad := range c.not {
					if strings.Contains(plan, bad) {
						t.Fatalf("%s: %s in the plan:\n%s", c.name, bad, plan)
					}
				}
				if b := topBuffers(t, plan); b > c.max {
					t.Fatalf("%s: %d buffers, want at most %d:\n%s", c.name, b, c.max, plan)
				}
				t.Logf("%s:\n%s", c.name, plan)
			}
		})
	}
	// The statements did what their plans say.
	ready, err := s.TenantsReady(ctx, &storage.TenantsReadyParams{Kinds: storage.WorkBus, Now: time.Unix(0, now)})
	if err != nil || fmt.Sprint(ready) != "[big small]" {
		t.Fatalf("TenantsReady: %q, %v", ready, err)
	}
	cs, err := s.BusClaim(ctx, &storage.BusClaimParams{Tenant: "big", Max: 3, Now: time.Unix(0, now)})
	if err != nil || len(cs) != 3 || cs[0].Execution.EventID != "e1" || cs[2].Execution.EventID != "e3" {
		t.Fatalf("BusClaim: %v, %v", cs, err)
	}
}

// The bus's ordered scans get, on a new schema whose tables are empty and
// never analyzed, the generic plan that walks the partial index made for
// them in its order and stops at the limit: the routing walks
// bus_events_unrouted, the lowest fair-queueing number bus_routes_queue,
// the highest number given bus_fq_last, the claim bus_routes_queue and
// bus_routes_running, the backlog all three
// (TestHotPlansOnEmptySchema checks the lookups).
func TestBusQueuePlansOnEmptySchema(t *testing.T) {
	ctx, s, url, schema := openInSchema(t, time.Minute)
	s.Close()
	conn := schemaConn(t, ctx, url, schema)
	for _, c := range []struct {
		name, sql string
		want      []string
	}{
		{"route", routeSelectSQL, []string{"Index Scan using bus_events_unrouted"}},
		{"lowest number", busMinNumberSQL, []string{"using bus_routes_queue"}},
		{"highest number", busMaxNumberSQL, []string{"using bus_fq_last"}},
		{"claim", busClaimSQL, []string{"Index Scan using bus_routes_queue", "Index Scan using bus_routes_running", "Tid Scan"}},
		{"backlog", busBacklogSQL, []string{"using bus_events_unrouted", "using bus_routes_queue", "using bus_routes_running"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			for _, q := range []string{"RESET ALL", `SET search_path TO "` + schema + `"`, "DEALLOCATE ALL",
				"SELECT " + strings.ReplaceAll(scanPlans, "true)", "false)"), "PREPARE p AS " + c.sql} {
				if _, err := conn.Exec(ctx, q, pgx.QueryExecModeSimpleProtocol); err != nil {
					t.Fatalf("%s: %v", q, err)
				}
			}
			n := 1
			for strings.Contains(c.sql, fmt.Sprintf("$%d", n+1)) {
				n++
			}
			args := strings.TrimSuffix(strings.Repeat("NULL,", n), ",")
			rows, err := conn.Query(ctx, "EXPLAIN (COSTS OFF) EXECUTE p("+args+")", pgx.QueryExecModeSimpleProtocol)
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
			text := strings.Join(plan, "\n")
			for _, w := range c.want {
				if !strings.Contains(text, w) {
					t.Fatalf("no %q in the plan:\n%s", w, text)
				}
			}
			bad := []string{"Seq Scan", "Bitmap"}
			if c.name != "claim" { // the claim reads each claimed execution's event by its key
				bad = append(bad, "bus_routes_pkey", "bus_events_pkey")
			}
			for _, bad := range bad {
				if strings.Contains(text, bad) {
					t.Fatalf("%s in the plan:\n%s", bad, text)
				}
			}
			if c.name != "claim" && strings.Contains(text, "Sort") {
				t.Fatalf("a sort in the plan:\n%s", text)
			}
		})
	}
}

// The store analyzes the bus's busiest tables itself once they hold a few
// hundred changed rows (see stats.go), even after the workflows' tables
// have been analyzed: the statements that read them are then planned with
// statistics.
func TestBusTablesWarmUp(t *testing.T) {
	ctx, s, url, schema := openInSchema(t, time.Minute)
	conn := schemaConn(t, ctx, url, schema)
	if _, err := conn.Exec(ctx, `ANALYZE instances; ANALYZE inbox; ANALYZE events; ANALYZE history`); err != nil {
		t.Fatal(err)
	}
	s.warm.done.Store(true) // as after the workflows' warm-up
	// Publish and route until both tables are analyzed (the statistics the
	// warm-up reads reach pg_stat_user_tables within a second or so).
	for i := 0; ; i++ {
		if _, err := s.BusPublish(ctx, &storage.BusPublishParams{Tenant: "t", Now: time.Unix(0, 1),
			Event: storage.BusPublishEvent{ID: fmt.Sprint("e", i), Type: "x", Data: []byte(`1`)}}); err != nil {
			t.Fatal(err)
		}
		if _, err := s.BusRoute(ctx, &storage.BusRouteParams{Tenant: "t", Max: 1, Now: time.Unix(0, 1),
			Route: func(*storage.BusEvent) []storage.BusRouteDecision {
				return []storage.BusRouteDecision{{Subscription: "s", Matched: true}}
			}}); err != nil {
			t.Fatal(err)
		}
		if i < 300 {
			continue
		}
		var n int
		if err := conn.QueryRow(ctx, `SELECT count(*) FROM pg_stat_user_tables WHERE schemaname = $1
			AND relname IN ('bus_events', 'bus_routes') AND last_analyze IS NOT NULL`, schema).Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n == 2 {
			t.Logf("analyzed after %d events", i+1)
			return
		}
		if ctx.Err() != nil {
			t.Fatalf("%d of bus_events and bus_routes analyzed by the store after %d events", n, i+1)
		}
	}
}

// Every mask of work kinds, WorkBus included, survives a NOTIFY payload.
func TestNotifyPayloadKinds(t *testing.T) {
	for k := storage.WorkKind(1); k <= storage.WorkAll; k++ {
		for _, tenant := range []string{"t", "", "t\x01x", "é€"} {
			got, kinds := parsePayload(notifyPayload(tenant, k))
			if got != tenant || kinds != k {
				t.Fatalf("kinds %03b, tenant %q: parsed %q, %03b", k, tenant, got, kinds)
			}
		}
	}
}
