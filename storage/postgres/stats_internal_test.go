package postgres

import (
	"testing"
	"time"
)

// The warm-up analyzes a table once its file spans warmMinPages pages, and
// not before: a table analyzed near empty makes plans that scan it for a
// key lookup, kept as it grows. Statistics taken while a table was small
// (here: events analyzed empty, as an earlier warm-up did) are taken again
// once it has grown, and the warm-up ends only when every core table has
// statistics from warmMinPages pages on. After that, growth does not make
// the store analyze a table again.
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
	// From then on growth is autovacuum's business: every ANALYZE makes
	// every session replan, and plans made at warmMinPages pages stay
	// sound as the table grows.
	before := stats()["events"]
	if _, err := conn.Exec(ctx, `INSERT INTO events (tenant, event_id, instance_id, lane, name, fate, received_at, updated_at)
		SELECT 't', 'f' || g, 'i' || g, 'positional', 'go', 'delivered', g, g FROM generate_series(1, 30000) g`); err != nil {
		t.Fatal(err)
	}
	s.warm.check()
	if st := stats()["events"]; st != before {
		t.Errorf("events analyzed again as it grew tenfold: %+v, then %+v", before, st)
	}
}

// ANALYZE skips the payload columns (migration 0015): they are never
// filtered, joined or sorted on, and sampling them was half of an ANALYZE's
// cost. The columns the queries use keep their statistics.
func TestAnalyzeSkipsPayloads(t *testing.T) {
	ctx, _, url, schema := openInSchema(t, 30*time.Second)
	conn := schemaConn(t, ctx, url, schema)
	if _, err := conn.Exec(ctx, `INSERT INTO history (tenant, instance_id, execution, seq, kind, event)
		SELECT 't', 'i' || g, 1, 1, 'started', '{"kind":"started","n":' || g || '}' FROM generate_series(1, 500) g`); err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Exec(ctx, `INSERT INTO instances (tenant, id, workflow, status, execution, input, output, created_at, updated_at)
		SELECT 't', 'i' || g, 'wf', 'completed', 1, '{"n":' || g || '}', '"done"', g, g FROM generate_series(1, 500) g`); err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Exec(ctx, `ANALYZE history; ANALYZE instances`); err != nil {
		t.Fatal(err)
	}
	rows, err := conn.Query(ctx, `SELECT tablename || '.' || attname FROM pg_stats
		WHERE schemaname = $1 AND tablename IN ('history', 'instances')`, schema)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]bool{}
	for rows.Next() {
		var c string
		if err := rows.Scan(&c); err != nil {
			t.Fatal(err)
		}
		got[c] = true
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	for _, c := range []string{"history.instance_id", "history.seq", "instances.id", "instances.status"} {
		if !got[c] {
			t.Errorf("no statistics for %s: %v", c, got)
		}
	}
	for _, c := range []string{"history.event", "instances.input", "instances.output"} {
		if got[c] {
			t.Errorf("statistics for payload column %s", c)
		}
	}
}
