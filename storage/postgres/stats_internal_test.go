package postgres

import (
	"fmt"
	"testing"
	"time"

	"github.com/heraldwf/herald/storage"
)

// A table is outgrown when its live rows have doubled or halved since its
// statistics, by at least the least change (200 here).
func TestOutgrown(t *testing.T) {
	for _, c := range []struct {
		live   int64
		tuples float64
		want   bool
	}{
		{live: 400, tuples: 200, want: true},
		{live: 399, tuples: 200, want: false},
		{live: 1000, tuples: 900, want: false},
		{live: 150, tuples: 0, want: false}, // fewer than 200 more
		{live: 250, tuples: 0, want: true},
		{live: 0, tuples: 1000, want: true}, // halved
		{live: 600, tuples: 1000, want: false},
		{live: 500, tuples: 1000, want: true},
		{live: 50, tuples: 120, want: false}, // halved, but by fewer than 200
	} {
		if got := outgrown(c.live, c.tuples, 200); got != c.want {
			t.Errorf("outgrown(%d live, %v tuples) = %v, want %v", c.live, c.tuples, got, c.want)
		}
	}
}

// Once the warm-up is done, the store analyzes a table again when it has
// outgrown its statistics (see stats.go): instances analyzed at 300 rows
// are analyzed again after the table has grown past twice that (with the
// least change lowered from restatsMinRows to 300 rows).
func TestStatsFollowGrowth(t *testing.T) {
	ctx, s, url, schema := openInSchema(t, 30*time.Second)
	s.warm.minChange = 300
	conn := schemaConn(t, ctx, url, schema)
	create := func(from, to int) {
		t.Helper()
		for i := from; i < to; i++ {
			if _, err := s.InstanceCreate(ctx, &storage.InstanceCreateParams{Tenant: "t", ID: fmt.Sprint("i", i),
				Workflow: "wf", Now: time.Unix(0, 1)}); err != nil {
				t.Fatal(err)
			}
		}
	}
	create(0, 300)
	if _, err := conn.Exec(ctx, `ANALYZE instances; ANALYZE inbox; ANALYZE events; ANALYZE history`); err != nil {
		t.Fatal(err)
	}
	tuples := func() float64 {
		t.Helper()
		var n float64
		if err := conn.QueryRow(ctx, `SELECT reltuples::float8 FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
			WHERE n.nspname = $1 AND c.relname = 'instances'`, schema).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	if n := tuples(); n != 300 {
		t.Fatalf("instances analyzed at %v rows, want 300", n)
	}
	create(300, 1000)
	// The statistics the check reads reach pg_stat_user_tables within a
	// second or so, and the store checks at most once per restatsEvery:
	// write until it has analyzed, or the context ends.
	for i := 1000; ; i++ {
		create(i, i+1)
		if n := tuples(); n >= 1000 {
			t.Logf("analyzed again at %v rows", n)
			return
		}
		if ctx.Err() != nil {
			t.Fatalf("instances still analyzed at %v rows after %d were created", tuples(), i+1)
		}
	}
}

// The warm-up analyzes a table once its file spans warmMinPages pages, and
// not before: a table analyzed near empty makes plans that scan it for a
// key lookup, kept as it grows. Statistics taken while a table was small
// (here: events analyzed empty, as an earlier warm-up did) are taken again
// once it has grown, and the warm-up ends only when every core table has
// statistics from warmMinPages pages on.
func TestWarmUpWaitsForPages(t *testing.T) {
	ctx, s, url, schema := openInSchema(t, 30*time.Second)
	conn := schemaConn(t, ctx, url, schema)
	type stat struct {
		tuples float64
		pages  int64
	}
	stats := func() map[string]stat {
		t.Helper()
		rows, err := conn.Query(ctx, `SELECT c.relname, c.reltuples::float8, c.relpages::int8 FROM pg_class c
			JOIN pg_namespace n ON n.oid = c.relnamespace
			WHERE n.nspname = $1 AND c.relname = ANY($2::text[])`, schema, warmTables)
		if err != nil {
			t.Fatal(err)
		}
		defer rows.Close()
		m := map[string]stat{}
		for rows.Next() {
			var (
				name string
				st   stat
			)
			if err := rows.Scan(&name, &st.tuples, &st.pages); err != nil {
				t.Fatal(err)
			}
			m[name] = st
		}
		return m
	}
	// grow fills table with n rows through SQL, the way the store's writes
	// would, as far as the statistics are concerned.
	grow := func(q string, n int) {
		t.Helper()
		if _, err := conn.Exec(ctx, q, n); err != nil {
			t.Fatal(err)
		}
	}
	const (
		instances = `INSERT INTO instances (tenant, id, workflow, status, execution, created_at, updated_at)
			SELECT 't', 'i' || g, 'wf', 'running', 1, g, g FROM generate_series(1, $1) g`
		history = `INSERT INTO history (tenant, instance_id, execution, seq, kind, event)
			SELECT 't', 'i' || g, 1, 1, 'started', '{"kind":"started","input":"' || repeat('x', 200) || '"}' FROM generate_series(1, $1) g`
		inbox = `INSERT INTO inbox (tenant, instance_id, kind, visible_at, created_at)
			SELECT 't', 'i' || g, 'kick', g, g FROM generate_series(1, $1) g`
		events = `INSERT INTO events (tenant, event_id, instance_id, lane, name, fate, received_at, updated_at)
			SELECT 't', 'e' || g, 'i' || g, 'positional', 'go', 'delivered', g, g FROM generate_series(1, $1) g`
	)
	grow(instances, 10)
	if _, err := conn.Exec(ctx, `DELETE FROM instances`); err != nil { // the ids are taken again below
		t.Fatal(err)
	}
	s.warm.check()
	for name, st := range stats() {
		if st.tuples >= 0 {
			t.Errorf("%s analyzed at %d pages, %v rows", name, st.pages, st.tuples)
		}
	}
	// events is analyzed while empty (by someone else); the others grow.
	if _, err := conn.Exec(ctx, `ANALYZE events`); err != nil {
		t.Fatal(err)
	}
	grow(instances, 3000)
	grow(history, 3000)
	grow(inbox, 3000)
	s.warm.check()
	got := stats()
	for _, name := range []string{"instances", "history", "inbox"} {
		if st := got[name]; st.tuples < 1000 || st.pages < warmMinPages {
			t.Errorf("%s not analyzed at %d pages: %+v", name, warmMinPages, st)
		}
	}
	if st := got["events"]; st.tuples != 0 {
		t.Errorf("events analyzed again while empty: %+v", st)
	}
	for _, name := range []string{"activities", "correlated_waits"} {
		if st := got[name]; st.tuples >= 0 {
			t.Errorf("%s, never written, analyzed: %+v", name, st)
		}
	}
	if s.warm.done.Load() {
		t.Fatal("the warm-up ended with events' statistics taken while it was empty")
	}
	grow(events, 3000)
	s.warm.check()
	if st := stats()["events"]; st.tuples < 1000 || st.pages < warmMinPages {
		t.Errorf("events' statistics from when it was empty not taken again at %d pages: %+v", warmMinPages, st)
	}
	if !s.warm.done.Load() {
		t.Error("the warm-up is not done after every core table was analyzed at its size")
	}
}
