package postgres

import (
	"context"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/heraldwf/herald/internal/testdb"
)

// openInSchema opens a store in a new schema of the test database, with a
// context that ends after timeout; the test's cleanup closes both. It
// returns the database URL and the schema for direct connections.
func openInSchema(t *testing.T, timeout time.Duration, opts ...Option) (context.Context, *Store, string, string) {
	t.Helper()
	url := testdb.PostgresURL(t)
	schema := testdb.NewSchema(t)
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	t.Cleanup(cancel)
	s, err := Open(ctx, url, append([]Option{WithSchema(schema)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return ctx, s, url, schema
}

// The statements of the event round trip (raise, claim, commit) and of the
// worker's idle loop get, on a new schema whose tables are empty and were
// never analyzed, a generic plan that never scans a tenant's whole index
// for what is a lookup by key: PostgreSQL keeps that plan, made after a few
// executions, until the tables are analyzed (see the package comment,
// Plans). An index scan whose only condition is the tenant is what such a
// scan looks like. The API key statements (a table without a tenant; every
// request looks its key up by hash) must each be a probe of one index.
func TestHotPlansOnEmptySchema(t *testing.T) {
	ctx, s, url, schema := openInSchema(t, time.Minute)
	s.Close()
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	if _, err := conn.Exec(ctx, `SET search_path TO "`+schema+`"`); err != nil {
		t.Fatal(err)
	}

	const (
		plain = "SELECT set_config('plan_cache_mode', 'force_generic_plan', false)"
		scans = "SELECT set_config('enable_bitmapscan', 'off', false), set_config('enable_seqscan', 'off', false), " +
			"set_config('plan_cache_mode', 'force_generic_plan', false)"
	)
	probes := map[string]string{"key by hash": "api_keys_hash_key", "key touch": "api_keys_pkey", "key revoke": "api_keys_pkey"}
	for _, c := range []struct {
		name, settings, sql string
	}{
		{"raise", plain, raiseSQL},
		{"raise with hand-off", plain, raiseClaimSQL},
		{"create", plain, createInstanceSQL},
		{"definition", plain, defGetSQL},
		{"fence", plain, `SELECT lock_token, status, execution FROM instances WHERE tenant = $1 AND id = $2 FOR NO KEY UPDATE`},
		{"history", plain, insertHistorySQL},
		{"claim", scans, claimTurnsSQL},
		{"claim history", scans, claimHistorySQL},
		{"claim messages", scans, claimMessagesSQL},
		{"read histories", plain, readHistoriesSQL},
		{"late messages", plain, lateMessagesSQL},
		{"next wake", scans, nextWakeSQL},
		{"activity claim", scans, claimActivitiesSQL},
		{"bus publish", plain, publishSQL},
		{"bus turn publish", plain, publishTurnSQL},
		{"bus route insert", scans, routeInsertSQL},
		{"bus route mark", scans, routeMarkSQL},
		{"bus claim", scans, busClaimSQL},
		{"bus finish lock", scans, busFinishLockSQL},
		{"bus finish", scans, busFinishSQL},
		{"bus heartbeat", plain, busHeartbeatSQL},
		{"bus event", plain, busEventGetSQL},
		{"bus prune lock", scans, busPruneLockSQL},
		{"bus prune", scans, busPruneSQL},
		{"bus reprocess", scans, busReprocessSQL},
		{"key by hash", plain, keyByHashSQL},
		{"key touch", plain, keyTouchSQL},
		{"key revoke", plain, keyRevokeSQL},
	} {
		t.Run(c.name, func(t *testing.T) {
			if _, err := conn.Exec(ctx, "RESET ALL", pgx.QueryExecModeSimpleProtocol); err != nil {
				t.Fatal(err)
			}
			if _, err := conn.Exec(ctx, `SET search_path TO "`+schema+`"`); err != nil {
				t.Fatal(err)
			}
			if _, err := conn.Exec(ctx, c.settings, pgx.QueryExecModeSimpleProtocol); err != nil {
				t.Fatal(err)
			}
			if _, err := conn.Exec(ctx, "DEALLOCATE ALL", pgx.QueryExecModeSimpleProtocol); err != nil {
				t.Fatal(err)
			}
			if _, err := conn.Exec(ctx, "PREPARE p AS "+c.sql, pgx.QueryExecModeSimpleProtocol); err != nil {
				t.Fatal(err)
			}
			n := 0
			for _, m := range regexp.MustCompile(`\$(\d+)`).FindAllStringSubmatch(c.sql, -1) {
				k, _ := strconv.Atoi(m[1])
				n = max(n, k)
			}
			args := strings.Repeat("NULL,", n)
			q := "EXPLAIN (COSTS OFF) EXECUTE p"
			if n > 0 {
				q += "(" + strings.TrimSuffix(args, ",") + ")"
			}
			rows, err := conn.Query(ctx, q, pgx.QueryExecModeSimpleProtocol)
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
			// Tables without a tenant column: the lookup must be a probe of
			// the named index (a request's key, KeyByHash, above all).
			if ix, ok := probes[c.name]; ok && !strings.Contains(strings.Join(plan, "\n"), "Index Scan using "+ix+" ") {
				t.Fatalf("not a probe of %s:\n%s", ix, strings.Join(plan, "\n"))
			}
			tenantOnly := regexp.MustCompile(`Index Cond: \(tenant = \$1\)\s*$`)
			for _, line := range plan {
				if tenantOnly.MatchString(line) {
					t.Fatalf("an index scan on the tenant alone:\n%s", strings.Join(plan, "\n"))
				}
			}
		})
	}
}
