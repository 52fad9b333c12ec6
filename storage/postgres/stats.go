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
// statement (and for each statement of a PL/pgSQL function) after a few
// executions, until the statistics of a table it reads change. A plan made
// while a table spans a page or two reads the whole table for what is one
// index lookup, since on one page that is cheaper; as the table grows the
// plan stays, and every call scans it. Two states of a table make such
// plans:
//
//   - statistics taken while it was tiny (an ANALYZE of an empty table: the
//     planner then believes the file's size, a page or two);
//   - no statistics at all and a schema so new that nothing has grown: the
//     planner assumes at least ten pages then, which favours the indexes,
//     but a join's row estimates are guesses.
//
// So the store analyzes the tables that carry the work itself: a table
// without statistics, or with statistics taken while it spanned fewer than
// warmMinPages pages, as soon as its file has grown to warmMinPages (read
// from the file's size, which does not lag as pg_stat_user_tables does).
// PostgreSQL then replans every statement that reads it, in every session,
// with the table past the size at which a lookup's index beats a scan. A
// table still smaller is left alone, never analyzed near empty. (An earlier
// rule analyzed the core tables after the store's first 512 writes,
// whatever their size: the events table, empty while the instances are
// started, was analyzed empty, and every ending commit of that session
// then scanned the ledger, twice: bench/results.md, round 2, fifth pass.)
//
// Once a table has such statistics, the store leaves it to autovacuum.
// Plans made at 16 pages stay sound as the table grows (the planner scales
// its row estimates by the file's size, and reads the ends of an index for
// a range past the histogram), while every ANALYZE makes every session
// replan every statement that reads the table, at once. An earlier rule
// analyzed a table again each time its live rows had doubled, by 10,000
// or more: under paced load the replans after each such ANALYZE stalled
// every session's sends at once, the worst of the tail (bench/results.md,
// round 2, fifth pass). That rule had been measured against
// statistics of an empty events table, the failure the page rule above
// removes. The checks go on once per restatsEvery after the warm-up, for a
// table whose statistics someone took again while it was small.

// warmTables are the tables analyzed by the workflows' warm-up; the first
// four must have statistics from warmMinPages pages on for it to end.
var warmTables = []string{"instances", "inbox", "events", "history",
	"activities", "correlated_waits", "correlated_events", "correlated_produced"}

// warmBusTables are the tables analyzed by the event bus's warm-up (its
// own, so that a store whose workflows warmed up long ago still warms up
// the bus's tables once the bus is used); all must have statistics from
// warmMinPages pages on for it to end.
var warmBusTables = []string{"bus_events", "bus_routes", "bus_attempts"}

const (
	warmCore = 4 // warmTables[:warmCore] end the warm-up
	// warmMinPages is the size, in pages, from which a table's statistics
	// make plans that look a key up in an index rather than scan the
	// table: about twice the size at which PostgreSQL's default costs
	// start to prefer the index for the ledger's and the histories' rows.
	warmMinPages  = 16
	warmEveryCall = 128 // writes between two checks
	// warmCheckEvery is the least time between two checks during the
	// warm-up, which lasts until every core table has statistics from
	// warmMinPages pages on: a table that stays smaller (no events in a
	// deployment that only runs activities) keeps it going, and its checks
	// then cost at most ten catalog reads a second.
	warmCheckEvery = 100 * time.Millisecond
	// restatsEvery is the least time between two checks once the warm-up
	// is done.
	restatsEvery = time.Second
)

// statsWarmer runs the statistics checks, at most one at a time, from the
// write path: every warmEveryCall writes, at most once per warmCheckEvery
// until the core tables have statistics (the warm-up), then at most once
// per restatsEvery.
type statsWarmer struct {
	s         *Store
	tables    []string // tables[:core] end the warm-up
	core      int
	done      atomic.Bool  // the warm-up is done
	lastCheck atomic.Int64 // when the last check started, unix nanoseconds
	running   atomic.Bool
	calls     atomic.Uint64
	wg        sync.WaitGroup
}

// note counts a write and, every warmEveryCall writes (at most once per
// restatsEvery after the warm-up), starts a check in the background.
func (w *statsWarmer) note() {
	if w.calls.Add(1)%warmEveryCall != 0 || w.s.closed.Load() {
		return
	}
	now, every := time.Now().UnixNano(), warmCheckEvery
	if w.done.Load() {
		every = restatsEvery
	}
	if now-w.lastCheck.Load() < int64(every) {
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

// warmCheckSQL lists, of the tables $2 of schema $1, how many rows and
// pages each held when last analyzed or vacuumed (reltuples: -1 before
// either) and its pages now (its file's size, which does not lag as
// pg_stat_user_tables does).
const warmCheckSQL = `SELECT c.relname, c.reltuples::float8, c.relpages::int8,
	pg_relation_size(c.oid) / current_setting('block_size')::int8
	FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
	WHERE n.nspname = $1 AND c.relname = ANY($2::text[]) AND c.relkind = 'r'`

// smallStats reports whether a table's statistics (tuples rows on pages
// pages when taken) are missing or were taken while it spanned fewer than
// warmMinPages pages.
func smallStats(tuples float64, pages int64) bool { return tuples < 0 || pages < warmMinPages }

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
			name       string
			tuples     float64
			pages, now int64
		)
		if err := rows.Scan(&name, &tuples, &pages, &now); err != nil {
			rows.Close()
			return
		}
		switch {
		case smallStats(tuples, pages):
			if now >= warmMinPages {
				todo = append(todo, name)
			}
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
		analyzed[name] = true
	}
	for _, name := range w.tables[:w.core] {
		if !analyzed[name] {
			return
		}
	}
	w.done.Store(true)
}
