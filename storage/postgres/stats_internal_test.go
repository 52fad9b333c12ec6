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

// After warmOwnWrites writes through the store, the warm-up analyzes the
// core tables nobody has analyzed even though pg_stat_user_tables shows
// fewer than warmMinRows changes (a busy session reports them at most once
// a second); the other tables still wait for changes of their own.
func TestWarmUpCountsOwnWrites(t *testing.T) {
	ctx, s, url, schema := openInSchema(t, 30*time.Second)
	conn := schemaConn(t, ctx, url, schema)
	for i := range 10 {
		if _, err := s.InstanceCreate(ctx, &storage.InstanceCreateParams{Tenant: "t", ID: fmt.Sprint("i", i),
			Workflow: "wf", Now: time.Unix(0, 1)}); err != nil {
			t.Fatal(err)
		}
	}
	analyzed := func() map[string]bool {
		t.Helper()
		rows, err := conn.Query(ctx, `SELECT c.relname, c.reltuples >= 0 FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
			WHERE n.nspname = $1 AND c.relname = ANY($2::text[])`, schema, warmTables[:warmCore])
		if err != nil {
			t.Fatal(err)
		}
		defer rows.Close()
		m := map[string]bool{}
		for rows.Next() {
			var name string
			var ok bool
			if err := rows.Scan(&name, &ok); err != nil {
				t.Fatal(err)
			}
			m[name] = ok
		}
		return m
	}
	s.warm.check()
	for name, ok := range analyzed() {
		if ok {
			t.Fatalf("%s analyzed after 10 writes", name)
		}
	}
	s.warm.calls.Store(warmOwnWrites)
	s.warm.check()
	got := analyzed()
	for _, name := range warmTables[:warmCore] {
		if !got[name] {
			t.Errorf("%s not analyzed after %d writes: %v", name, warmOwnWrites, got)
		}
	}
	if !s.warm.done.Load() {
		t.Error("the warm-up is not done after the core tables were analyzed")
	}
	// A table the writes did not touch is left alone, not analyzed empty.
	var tuples float64
	if err := conn.QueryRow(ctx, `SELECT c.reltuples::float8 FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
		WHERE n.nspname = $1 AND c.relname = 'activities'`, schema).Scan(&tuples); err != nil {
		t.Fatal(err)
	}
	if tuples >= 0 {
		t.Errorf("activities analyzed (reltuples %v) though nothing was written to it", tuples)
	}
}
