package main

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	_ "modernc.org/sqlite" // the driver Herald's SQLite backend uses
)

// payload is a ~200-byte row, as in the storage figures of bench/README.md.
var payload = strings.Repeat("x", 200)

// physicalSQLite measures plain inserts into a SQLite file in WAL mode with
// the same driver and settings as Herald's writer: one row per transaction,
// and rowsPerTx rows per transaction.
func physicalSQLite(ctx context.Context, dir, sync string, rowsPerTx int, dur time.Duration) Result {
	r := Result{Scenario: "physical limit", System: fmt.Sprintf("sqlite %s, %d row(s)/commit", sync, rowsPerTx),
		Durability: "fsync per commit (WAL, synchronous=FULL)", RateUnit: "commits/s"}
	if sync != "FULL" {
		r.Durability = "no fsync per commit (WAL, synchronous=" + sync + ")"
	}
	if rowsPerTx > 1 {
		r.RateUnit = "rows/s"
	}
	path := filepath.Join(dir, fmt.Sprintf("physical-%s-%d.db", sync, rowsPerTx))
	defer func() {
		for _, s := range []string{"", "-wal", "-shm"} {
			os.Remove(path + s)
		}
	}()
	db, err := sql.Open("sqlite", "file:"+path+"?_pragma=journal_mode(WAL)&_pragma=synchronous("+sync+")&_pragma=busy_timeout(5000)&_txlock=immediate")
	if err != nil {
		r.Error = err.Error()
		return r
	}
	defer db.Close()
	db.SetMaxOpenConns(1)
	if _, err := db.ExecContext(ctx, "CREATE TABLE t (id INTEGER PRIMARY KEY, v TEXT NOT NULL)"); err != nil {
		r.Error = err.Error()
		return r
	}
	stmt, err := db.PrepareContext(ctx, "INSERT INTO t (v) VALUES (?)")
	if err != nil {
		r.Error = err.Error()
		return r
	}
	defer stmt.Close()
	progress("  physical: %s for %v", r.System, dur)
	var lat dist
	commits := 0
	start := time.Now()
	for time.Since(start) < dur {
		t0 := time.Now()
		tx, err := db.BeginTx(ctx, nil)
		if err != nil {
			r.Error = err.Error()
			return r
		}
		for range rowsPerTx {
			if _, err := tx.StmtContext(ctx, stmt).ExecContext(ctx, payload); err != nil {
				tx.Rollback()
				r.Error = err.Error()
				return r
			}
		}
		if err := tx.Commit(); err != nil {
			r.Error = err.Error()
			return r
		}
		lat = append(lat, time.Since(t0))
		commits++
	}
	r.N = commits * rowsPerTx
	r.Rate = float64(commits*rowsPerTx) / time.Since(start).Seconds()
	lat.fill(&r)
	r.Note = "latency is per commit"
	return r
}

// physicalPostgres measures plain inserts into PostgreSQL: one row per
// transaction from conns concurrent connections, or (rowsPerTx > 1) one
// transaction of rowsPerTx pipelined inserts at a time on one connection.
func physicalPostgres(ctx context.Context, url string, conns, rowsPerTx int, dur time.Duration) Result {
	r := Result{Scenario: "physical limit", RateUnit: "commits/s"}
	if rowsPerTx > 1 {
		r.System = fmt.Sprintf("postgres 1 conn, %d rows/commit pipelined", rowsPerTx)
		r.RateUnit = "rows/s"
	} else {
		r.System = fmt.Sprintf("postgres %d conn(s), 1 row/commit", conns)
	}
	sc, err := pgSetting(ctx, url, "synchronous_commit")
	if err != nil {
		r.Error = err.Error()
		return r
	}
	fs, _ := pgSetting(ctx, url, "fsync")
	r.Durability = fmt.Sprintf("WAL flush per commit (synchronous_commit=%s, fsync=%s)", sc, fs)
	if sc != "on" || fs != "on" {
		r.Durability = fmt.Sprintf("NOT durable per commit (synchronous_commit=%s, fsync=%s)", sc, fs)
	}
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		r.Error = err.Error()
		return r
	}
	cfg.MaxConns = int32(conns)
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		r.Error = err.Error()
		return r
	}
	defer pool.Close()
	table := fmt.Sprintf("heraldbench_physical_%d", time.Now().UnixNano())
	if _, err := pool.Exec(ctx, "CREATE TABLE "+table+" (id bigserial PRIMARY KEY, v text NOT NULL)"); err != nil {
		r.Error = err.Error()
		return r
	}
	defer pool.Exec(context.Background(), "DROP TABLE IF EXISTS "+table)
	progress("  physical: %s for %v", r.System, dur)
	insert := "INSERT INTO " + table + " (v) VALUES ($1)"
	var (
		mu      sync.Mutex
		lat     dist
		commits atomic.Int64
		first   atomic.Pointer[error]
		wg      sync.WaitGroup
	)
	start := time.Now()
	for range conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var mine dist
			for time.Since(start) < dur && first.Load() == nil {
				t0 := time.Now()
				var err error
				if rowsPerTx == 1 {
					_, err = pool.Exec(ctx, insert, payload)
				} else {
					err = pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
						b := &pgx.Batch{}
						for range rowsPerTx {
							b.Queue(insert, payload)
						}
						return tx.SendBatch(ctx, b).Close()
					})
				}
				if err != nil {
					first.CompareAndSwap(nil, &err)
					return
				}
				mine = append(mine, time.Since(t0))
				commits.Add(1)
			}
			mu.Lock()
			lat = append(lat, mine...)
			mu.Unlock()
		}()
	}
	wg.Wait()
	if e := first.Load(); e != nil {
		r.Error = (*e).Error()
		return r
	}
	rows := int(commits.Load()) * rowsPerTx
	r.N = rows
	r.Rate = float64(rows) / time.Since(start).Seconds()
	lat.fill(&r)
	r.Note = "latency is per commit"
	return r
}
