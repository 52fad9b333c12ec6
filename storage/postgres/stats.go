package postgres

import (
	"context"
	"sync"
	"sync/atomic"
	"time"
)

// Statistics warm-up.
//
// PostgreSQL keeps, per connection, the generic plan it made for a prepared
// statement after a few executions, until the statistics of a table it
// reads change. On a new schema that plan is made while the tables are
// empty and have never been analyzed: every access path then looks equally
// cheap, and the plan may scan all of a tenant's rows for what is one
// primary-key lookup (a commit cost O(instances) in the benchmark, until
// autovacuum's first ANALYZE, up to a minute or more later). The queries
// are written so that the common lookups have one candidate index (see
// migration 0003), but joins and scans of an instance's rows still depend
// on the statistics. So the store analyzes the tables that carry the work
// itself, once, as soon as they hold a few hundred changed rows and nobody
// has analyzed them yet: PostgreSQL then replans every statement that reads
// them, in every session. A schema whose tables have been analyzed (by
// autovacuum or anyone) is never analyzed here.

// warmTables are the tables analyzed by the workflows' warm-up; the first
// four must have been analyzed for it to end.
var warmTables = []string{"instances", "inbox", "events", "history",
	"activities", "correlated_waits", "correlated_events", "correlated_produced"}

// warmBusTables are the tables analyzed by the event bus's warm-up (its
// own, so that a store whose workflows warmed up long ago still warms up
// the bus's tables once the bus is used); all must have been analyzed for
// it to end.
var warmBusTables = []string{"bus_events", "bus_routes", "bus_attempts"}

const (
	warmCore      = 4   // warmTables[:warmCore] end the warm-up
	warmMinRows   = 200 // changed rows before a table is analyzed
	warmEveryCall = 128 // writes between two checks
)

// statsWarmer runs the warm-up checks, at most one at a time, from the
// write path; it stops checking once the core tables have statistics.
type statsWarmer struct {
	s       *Store
	tables  []string // tables[:core] end the warm-up
	core    int
	done    atomic.Bool
	running atomic.Bool
	calls   atomic.Uint64
	wg      sync.WaitGroup
}

// note counts a write and, every warmEveryCall writes until the warm-up is
// done, starts a check in the background.
func (w *statsWarmer) note() {
	if w.done.Load() || w.calls.Add(1)%warmEveryCall != 0 || w.s.closed.Load() {
		return
	}
	if !w.running.CompareAndSwap(false, true) {
		return
	}
	w.wg.Add(1)
	go func() {
		defer w.wg.Done()
		defer w.running.Store(false)
		w.check()
	}()
}

// wait waits for a check in progress (Close).
func (w *statsWarmer) wait() { w.wg.Wait() }

const warmCheckSQL = `SELECT relname, last_analyze IS NOT NULL OR last_autoanalyze IS NOT NULL, n_mod_since_analyze
	FROM pg_stat_user_tables WHERE schemaname = $1 AND relname = ANY($2::text[])`

func (w *statsWarmer) check() {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	go func() {
		select {
		case <-w.s.closing:
			cancel()
		case <-ctx.Done():
		}
	}()
	rows, err := w.s.pool.Query(ctx, warmCheckSQL, w.s.cfg.schema, w.tables)
	if err != nil {
		return
	}
	analyzed := make(map[string]bool)
	var todo []string
	for rows.Next() {
		var (
			name string
			done bool
			mods int64
		)
		if err := rows.Scan(&name, &done, &mods); err != nil {
			rows.Close()
			return
		}
		if done {
			analyzed[name] = true
		} else if mods >= warmMinRows {
			todo = append(todo, name)
		}
	}
	rows.Close()
	if rows.Err() != nil {
		return
	}
	for _, name := range todo {
		// SKIP_LOCKED: another node analyzing it (or autovacuum) is as good.
		if _, err := w.s.pool.Exec(ctx, `ANALYZE (SKIP_LOCKED) "`+w.s.cfg.schema+`".`+name); err != nil {
			return
		}
		analyzed[name] = true
	}
	for _, name := range w.tables[:w.core] {
		if !analyzed[name] {
			return
		}
	}
	w.done.Store(true)
}
