package postgres

import (
	"context"
	"math"
	"slices"
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
// itself, as soon as they hold a few hundred changed rows and nobody has
// analyzed them yet: PostgreSQL then replans every statement that reads
// them, in every session.
//
// After that, at most once per restatsEvery, it analyzes again a table
// whose live rows have doubled, or halved, since it was last analyzed (by
// anyone), by at least restatsMinRows rows: statistics taken at a few
// hundred rows make poor plans for a table a hundred times that size. (A
// smaller change is left alone: an ANALYZE takes up to a tenth of a second
// of the server's CPU, which a table of a few thousand rows does not
// repay.) Autovacuum, when it runs, usually analyzes sooner, so this
// matters where it is off or behind: on the benchmark machine, whose
// server runs without autovacuum, the plans made from a 2,000-instance
// schema's statistics took the p99 of a paced run on 26,000 instances from
// 14.6 to 46.2 ms at 2,400 sends/s. A growing table is analyzed a few
// times per tenfold growth; a table whose rows come and go at a steady
// size (the inbox) is not analyzed again, however many rows pass through
// it (each ANALYZE makes every session replan the statements that read the
// table).

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
	// warmOwnWrites is the number of this store's writes after which the
	// warm-up analyzes a core table (tables[:core]) nobody has analyzed,
	// even if pg_stat_user_tables does not show warmMinRows changes yet:
	// a busy session reports its changes there at most once a second, and
	// the first ANALYZE, which makes every session replan, would otherwise
	// come a second or two after the first writes, in the middle of
	// whatever the store does then. Other tables wait for their changes
	// (one never written is not analyzed empty).
	warmOwnWrites = 512
	// restatsEvery is the least time between two checks once the warm-up
	// is done.
	restatsEvery = time.Second
	// restatsMinRows is the least change in a table's live rows that
	// makes it analyzed again after the warm-up.
	restatsMinRows = 10_000
)

// statsWarmer runs the statistics checks, at most one at a time, from the
// write path: every warmEveryCall writes until the core tables have
// statistics (the warm-up), then at most once per restatsEvery.
type statsWarmer struct {
	s         *Store
	tables    []string // tables[:core] end the warm-up
	core      int
	minChange int64        // restatsMinRows; tests make it smaller
	done      atomic.Bool  // the warm-up is done
	lastCheck atomic.Int64 // when the last check started, unix nanoseconds
	running   atomic.Bool
	calls     atomic.Uint64
	wg        sync.WaitGroup
	// mine are the tables this warmer has analyzed, which
	// pg_stat_user_tables may not show yet. Only check, one at a time,
	// uses it.
	mine map[string]bool
}

// note counts a write and, every warmEveryCall writes (at most once per
// restatsEvery after the warm-up), starts a check in the background.
func (w *statsWarmer) note() {
	if w.calls.Add(1)%warmEveryCall != 0 || w.s.closed.Load() {
		return
	}
	now := time.Now().UnixNano()
	if w.done.Load() && now-w.lastCheck.Load() < int64(restatsEvery) {
		return
	}
	if !w.running.CompareAndSwap(false, true) {
		return
	}
	w.lastCheck.Store(now)
	w.wg.Add(1)
	go func() {
		defer w.wg.Done()
		defer w.running.Store(false)
		w.check()
	}()
}

// wait waits for a check in progress (Close).
func (w *statsWarmer) wait() { w.wg.Wait() }

// warmCheckSQL lists, of the tables $2 of schema $1, whether each has been
// analyzed, the rows changed since, its live rows now, and how many it held
// when last analyzed or vacuumed (reltuples: -1 before either).
const warmCheckSQL = `SELECT s.relname, s.last_analyze IS NOT NULL OR s.last_autoanalyze IS NOT NULL,
	s.n_mod_since_analyze, s.n_live_tup, c.reltuples::float8
	FROM pg_stat_user_tables s JOIN pg_class c ON c.oid = s.relid
	WHERE s.schemaname = $1 AND s.relname = ANY($2::text[])`

// outgrown reports whether a table whose statistics counted tuples rows
// has live rows now: at least minChange more or fewer, and twice or half as
// many.
func outgrown(live int64, tuples float64, minChange int64) bool {
	l := float64(live)
	return math.Abs(l-tuples) >= float64(minChange) && (l >= 2*tuples || 2*l <= tuples)
}

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
			name   string
			done   bool
			mods   int64
			live   int64
			tuples float64
		)
		if err := rows.Scan(&name, &done, &mods, &live, &tuples); err != nil {
			rows.Close()
			return
		}
		done = done || w.mine[name]
		switch {
		case !done:
			core := slices.Contains(w.tables[:w.core], name)
			if mods >= warmMinRows || (core && w.calls.Load() >= warmOwnWrites) {
				todo = append(todo, name) // the first statistics
			}
		case outgrown(live, tuples, w.minChange):
			todo = append(todo, name)
		default:
			analyzed[name] = true
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
		if w.mine == nil {
			w.mine = make(map[string]bool)
		}
		analyzed[name], w.mine[name] = true, true
	}
	for _, name := range w.tables[:w.core] {
		if !analyzed[name] {
			return
		}
	}
	w.done.Store(true)
}
