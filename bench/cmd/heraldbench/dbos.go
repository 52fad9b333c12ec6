package main

import (
	"context"
	"database/sql"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"path/filepath"
	"time"

	"github.com/dbos-inc/dbos-transact-golang/dbos"
	_ "github.com/dbos-inc/dbos-transact-golang/dbos/driver/sqlite" // DBOS's SQLite system database
	"github.com/jackc/pgx/v5"
)

// DBOS system databases the benchmark runs on.
const (
	peerDBOSPostgres   = "dbos-postgres"
	peerDBOSSQLite     = "dbos-sqlite"      // DBOS's own SQLite setup: WAL, synchronous=NORMAL
	peerDBOSSQLiteFull = "dbos-sqlite-full" // the same with synchronous=FULL, to compare with herald sqlite FULL
)

// dbosSystem is DBOS Transact for Go (github.com/dbos-inc/dbos-transact-golang,
// pinned in go.mod) in this process, on PostgreSQL or on its SQLite system
// database.
//
// Workflow: a DBOS workflow that calls dbos.Recv on topic "go" (a durable
// step: the message is consumed and the step's output checkpointed in one
// transaction) and returns; the event is sent with dbos.Send from outside any
// workflow.
//
// Resumed stamp: inside the workflow, right after Recv has returned, i.e.
// after the transaction that consumed the message and checkpointed the step
// has committed. The workflow's completion is written after that (its status
// update), so the stamp is a little earlier than the end of the instance;
// the event's effect (the consumed message and the recorded step) is durable
// at that time.
//
// Parked: Recv writes its timeout deadline as a "DBOS.sleep" step before it
// waits; Park returns when every started workflow has that step in the
// system database (polled on a separate connection).
type dbosSystem struct {
	name, durability string
	pgSettler        // the PostgreSQL server's URL, for dbos-postgres
	dctx             dbos.Context
	resumed          chan Stamp
	waiting          func(ctx context.Context) (int, error) // DBOS.sleep steps recorded so far
	cleanup          []func()
	wf               dbos.Workflow[string, string]
}

// dbosOptions are the knobs of a DBOS run.
type dbosOptions struct {
	dir, postgresURL, tag string
}

func openDBOS(ctx context.Context, kind string, o dbosOptions) (_ *dbosSystem, err error) {
	s := &dbosSystem{resumed: make(chan Stamp, 1<<16)}
	defer func() {
		if err != nil {
			s.release()
		}
	}()
	cfg := dbos.Config{
		AppName: "heraldbench",
		Logger:  slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})),
	}
	switch kind {
	case peerDBOSPostgres:
		dbName := "heraldbench_dbos_" + o.tag
		dbURL, err := createDatabase(ctx, o.postgresURL, dbName)
		if err != nil {
			return nil, err
		}
		s.cleanup = append(s.cleanup, func() { dropDatabase(o.postgresURL, dbName) })
		cfg.DatabaseURL, s.pgURL = dbURL, dbURL
		sc, err := pgSetting(ctx, dbURL, "synchronous_commit")
		if err != nil {
			return nil, err
		}
		fs, _ := pgSetting(ctx, dbURL, "fsync")
		s.name = "dbos postgres"
		s.durability = fmt.Sprintf("WAL flush per commit (synchronous_commit=%s, fsync=%s)", sc, fs)
		if sc != "on" || fs != "on" {
			s.durability = fmt.Sprintf("NOT durable per commit (synchronous_commit=%s, fsync=%s)", sc, fs)
		}
		conn, err := pgx.Connect(ctx, dbURL)
		if err != nil {
			return nil, err
		}
		s.cleanup = append(s.cleanup, func() { conn.Close(context.Background()) })
		s.waiting = func(ctx context.Context) (int, error) {
			var n int
			err := conn.QueryRow(ctx, `SELECT count(*) FROM dbos.operation_outputs WHERE function_name = 'DBOS.sleep'`).Scan(&n)
			return n, err
		}
	case peerDBOSSQLite, peerDBOSSQLiteFull:
		path := filepath.Join(o.dir, "dbos-"+o.tag+".db")
		s.cleanup = append(s.cleanup, func() {
			for _, suffix := range []string{"", "-wal", "-shm", "-journal"} {
				os.Remove(path + suffix)
			}
		})
		if kind == peerDBOSSQLite {
			// DBOS opens the file itself (OpenSQLitePool): WAL,
			// synchronous=NORMAL, busy_timeout 5 s, BEGIN IMMEDIATE, 8
			// connections.
			cfg.DatabaseURL = "sqlite:" + path
			s.name = "dbos sqlite NORMAL"
			s.durability = "no fsync per commit (WAL, synchronous=NORMAL: DBOS's setting)"
		} else {
			// The same settings as DBOS's own pool, but synchronous=FULL.
			db, err := sql.Open("sqlite", "file:"+path+"?_txlock=immediate&_pragma=busy_timeout(5000)"+
				"&_pragma=foreign_keys(ON)&_pragma=journal_mode(WAL)&_pragma=synchronous(FULL)")
			if err != nil {
				return nil, err
			}
			db.SetMaxOpenConns(8)
			db.SetMaxIdleConns(4)
			s.cleanup = append(s.cleanup, func() { db.Close() })
			cfg.SQLiteSystemDB = db
			s.name = "dbos sqlite FULL"
			s.durability = "fsync per commit (WAL, synchronous=FULL; DBOS's own setting is NORMAL)"
		}
		// A separate read connection for the parked count (WAL: readers
		// do not block the writer).
		rdb, err := sql.Open("sqlite", "file:"+path+"?_pragma=busy_timeout(5000)")
		if err != nil {
			return nil, err
		}
		rdb.SetMaxOpenConns(1)
		// Before the files are removed.
		s.cleanup = append([]func(){func() { rdb.Close() }}, s.cleanup...)
		s.waiting = func(ctx context.Context) (int, error) {
			var n int
			err := rdb.QueryRowContext(ctx, `SELECT count(*) FROM operation_outputs WHERE function_name = 'DBOS.sleep'`).Scan(&n)
			return n, err
		}
	default:
		return nil, fmt.Errorf("unknown DBOS system %q", kind)
	}

	dctx, err := dbos.NewContext(context.Background(), cfg)
	if err != nil {
		return nil, err
	}
	s.dctx = dctx
	s.wf = func(ctx dbos.Context, _ string) (string, error) {
		v, err := dbos.Recv[string](ctx, "go", 24*time.Hour)
		if err != nil {
			return "", err
		}
		id, err := dbos.GetWorkflowID(ctx)
		if err != nil {
			return "", err
		}
		s.resumed <- Stamp{ID: id, At: time.Now()}
		return v, nil
	}
	dbos.RegisterWorkflow(dctx, s.wf, dbos.WithWorkflowName("bench.wait"))
	if err := dbos.Launch(dctx); err != nil {
		return nil, err
	}
	return s, nil
}

func (s *dbosSystem) Name() string          { return s.name }
func (s *dbosSystem) Durability() string    { return s.durability }
func (s *dbosSystem) Resumed() <-chan Stamp { return s.resumed }

func (s *dbosSystem) Park(ctx context.Context, lane Lane, ids []string, _ func(int) string) error {
	if lane != LanePositional {
		return ErrUnsupported
	}
	before, err := s.waiting(ctx)
	if err != nil {
		return err
	}
	err = parallel(ctx, 32, len(ids), func(i int) error {
		_, err := dbos.RunWorkflow(s.dctx, s.wf, "", dbos.WithWorkflowID(ids[i]))
		return err
	})
	if err != nil {
		return err
	}
	want := before + len(ids)
	var qerr error
	err = poll(ctx, 20*time.Millisecond, func() bool {
		n, err := s.waiting(ctx)
		if err != nil {
			qerr = err
			return true
		}
		return n >= want
	})
	if qerr != nil {
		return qerr
	}
	return err
}

func (s *dbosSystem) Send(ctx context.Context, lane Lane, to string) error {
	if lane != LanePositional {
		return ErrUnsupported
	}
	return dbos.Send(s.dctx, to, "x", "go")
}

func (s *dbosSystem) Close() error {
	var err error
	if s.dctx != nil {
		err = dbos.Shutdown(s.dctx, 30*time.Second)
	}
	s.release()
	return err
}

// release runs the cleanups in order, once.
func (s *dbosSystem) release() {
	for _, f := range s.cleanup {
		f()
	}
	s.cleanup = nil
}

// createDatabase creates database name on the server of base and returns
// base's URL pointing at it.
func createDatabase(ctx context.Context, base, name string) (string, error) {
	u, err := url.Parse(base)
	if err != nil {
		return "", fmt.Errorf("PostgreSQL URL: %w", err)
	}
	conn, err := pgx.Connect(ctx, base)
	if err != nil {
		return "", err
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{name}.Sanitize()); err != nil {
		return "", fmt.Errorf("create database %s: %w", name, err)
	}
	u.Path = "/" + name
	return u.String(), nil
}

// dropDatabase drops database name (closing any connection left to it).
func dropDatabase(base, name string) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, base)
	if err != nil {
		progress("  drop database %s: %v", name, err)
		return
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, "DROP DATABASE IF EXISTS "+pgx.Identifier{name}.Sanitize()+" WITH (FORCE)"); err != nil {
		progress("  drop database %s: %v", name, err)
	}
}
