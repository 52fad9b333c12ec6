package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/heraldwf/herald"
	"github.com/heraldwf/herald/heraldtype"
	"github.com/heraldwf/herald/history"
	"github.com/heraldwf/herald/storage"
	"github.com/heraldwf/herald/storage/postgres"
	"github.com/heraldwf/herald/storage/sqlite"
)

// Backends Herald runs on in the round-trip scenarios.
const (
	backendSQLiteFull   = "sqlite-full"
	backendSQLiteNormal = "sqlite-normal"
	backendPostgres     = "postgres"
)

// stampStore is the store Herald's runtime sees in the benchmark: it passes
// every call through and notes, right after TurnCommit returns, which
// instance's turn was committed and with what status. A resumed stamp is
// therefore the moment the turn that took the event is committed (durable
// with the backend's setting), not merely the moment the code ran.
type stampStore struct {
	storage.Store
	onCommit func(id string, status heraldtype.Status, at time.Time)
	// onBusFinish, when set, is told how long each BusFinish call took
	// (the transaction that records attempts and writes dead letters).
	onBusFinish func(p *storage.BusFinishParams, took time.Duration)
	// stages stamps the isolated scenario's round trips (stages.go).
	stages *stageRecorder
}

func (s *stampStore) BusFinish(ctx context.Context, p *storage.BusFinishParams) ([]error, error) {
	start := time.Now()
	errs, err := s.Store.BusFinish(ctx, p)
	if err == nil && s.onBusFinish != nil {
		s.onBusFinish(p, time.Since(start))
	}
	return errs, err
}

func (s *stampStore) TurnCommit(ctx context.Context, p *storage.TurnCommitParams) ([]history.Event, error) {
	start := time.Now()
	drops, err := s.Store.TurnCommit(ctx, p)
	if err == nil {
		end := time.Now()
		s.stages.note(p.InstanceID, func(st *stageStamps) { st.commitStart, st.commitEnd = start, end })
		s.onCommit(p.InstanceID, p.Status, end)
	}
	return drops, err
}

// heraldSystem is Herald (a Runtime and its Client in this process) on one
// backend.
type heraldSystem struct {
	name, durability string
	pgSettler        // the PostgreSQL server's URL, on that backend
	store            storage.Store
	closeStore       func() error
	rt               *herald.Runtime
	client           *herald.Client
	resumed          chan Stamp
	parked           atomic.Int64
	commits          atomic.Int64 // every turn commit, for the replay scenario
	onTurn           atomic.Pointer[func(id string, at time.Time)]
	stages           *stageRecorder
}

// heraldOptions are the knobs every Herald run shares.
type heraldOptions struct {
	dir         string // for SQLite files
	postgresURL string
	pgConns     int
	turnWorkers int
	tag         string // makes file and schema names unique per scenario

	// The event-bus scenarios' settings (zero: Herald's defaults).
	bus         herald.BusConfig
	observer    herald.Observer
	onBusFinish func(p *storage.BusFinishParams, took time.Duration)
}

const waitWorkflow = "bench.wait"

func openHerald(ctx context.Context, backend string, o heraldOptions) (*heraldSystem, error) {
	h := &heraldSystem{resumed: make(chan Stamp, 1<<16), stages: &stageRecorder{}}
	switch backend {
	case backendSQLiteFull, backendSQLiteNormal:
		mode, dur := sqlite.SynchronousFull, "fsync per commit (WAL, synchronous=FULL)"
		if backend == backendSQLiteNormal {
			mode, dur = sqlite.SynchronousNormal, "no fsync per commit (WAL, synchronous=NORMAL)"
		}
		path := filepath.Join(o.dir, "herald-"+o.tag+".db")
		s, err := sqlite.Open(ctx, path, sqlite.WithSynchronous(mode))
		if err != nil {
			return nil, err
		}
		h.name, h.durability, h.store = "herald sqlite "+string(mode), dur, s
		h.closeStore = func() error {
			st := s.Stats()
			progress("  %s: %d write calls in %d commits (%.1f per commit), %d fsyncs of the WAL; %d checkpoints by the writer for a WAL restart, %v in all",
				h.name, st.Writes, st.Commits, float64(st.Writes)/float64(max(st.Commits, 1)), st.Syncs,
				st.WriterCheckpoints, st.WriterCheckpointTime.Round(time.Microsecond))
			err := s.Close()
			for _, suffix := range []string{"", "-wal", "-shm"} {
				os.Remove(path + suffix)
			}
			return err
		}
	case backendPostgres:
		schema := "heraldbench_" + o.tag
		s, err := postgres.Open(ctx, o.postgresURL, postgres.WithSchema(schema), postgres.WithMaxConns(int32(o.pgConns)))
		if err != nil {
			return nil, err
		}
		sc, err := pgSetting(ctx, o.postgresURL, "synchronous_commit")
		if err != nil {
			s.Close()
			return nil, err
		}
		fs, _ := pgSetting(ctx, o.postgresURL, "fsync")
		h.name, h.pgURL = "herald postgres", o.postgresURL
		h.durability = fmt.Sprintf("WAL flush per commit (synchronous_commit=%s, fsync=%s)", sc, fs)
		if sc != "on" || fs != "on" {
			h.durability = fmt.Sprintf("NOT durable per commit (synchronous_commit=%s, fsync=%s)", sc, fs)
		}
		h.store = s
		h.closeStore = func() error {
			err := s.Close()
			dropSchema(o.postgresURL, schema)
			return err
		}
	default:
		return nil, fmt.Errorf("unknown backend %q (want %s, %s or %s)", backend, backendSQLiteFull, backendSQLiteNormal, backendPostgres)
	}
	wrapped := &stampStore{Store: h.store, onCommit: h.committed, onBusFinish: o.onBusFinish, stages: h.stages}
	rt, err := herald.NewRuntime(wrapped, &herald.Config{
		TurnWorkers: o.turnWorkers,
		Bus:         o.bus,
		ClientConfig: herald.ClientConfig{Logger: slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})),
			Observer: o.observer},
	})
	if err != nil {
		h.closeStore()
		return nil, err
	}
	registerWait(rt)
	registerLoop(rt)
	if err := rt.Start(context.Background()); err != nil {
		h.closeStore()
		return nil, err
	}
	client, err := rt.Client(herald.DefaultTenant)
	if err != nil {
		rt.Stop(context.Background())
		h.closeStore()
		return nil, err
	}
	h.rt, h.client = rt, client
	return h, nil
}

// waitInput is the round-trip workflow's input.
type waitInput struct {
	Lane Lane   `json:"lane"`
	Key  string `json:"key,omitempty"` // correlated lane
}

// correlatedDef is the event definition of the correlated lane's runs.
const correlatedDef = "bench.doc"

// registerWait registers the workflow of the round-trip scenarios: wait for
// one event named "go" (on the correlated lane: a correlated event of
// correlatedDef under the input's key), then complete.
func registerWait(rt *herald.Runtime) {
	herald.RegisterWorkflow(rt, waitWorkflow, func(ctx *herald.Context, in waitInput) (string, error) {
		var v string
		var f herald.Future
		switch in.Lane {
		case LaneQueue:
			f = ctx.Dequeue("go")
		case LaneCorrelated:
			f = ctx.WaitCorrelated(correlatedDef, in.Key)
		default:
			f = ctx.WaitEvent("go")
		}
		err := f.Get(&v)
		return v, err
	})
}

// parkInstances starts the wait workflow for each id through c.
func parkInstances(ctx context.Context, c *herald.Client, lane Lane, ids []string, key func(i int) string) error {
	if lane == LaneCorrelated {
		if _, err := c.PutEventDefinition(ctx, herald.EventDefinition{Name: correlatedDef,
			Correlation: &herald.CorrelationConfig{}}); err != nil {
			return err
		}
	}
	return parallel(ctx, 32, len(ids), func(i int) error {
		in := waitInput{Lane: lane}
		if lane == LaneCorrelated {
			in.Key = ids[i]
			if key != nil {
				in.Key = key(i)
			}
		}
		_, err := c.StartWorkflow(ctx, waitWorkflow, in, herald.WithInstanceID(ids[i]))
		return err
	})
}

// send sends "go" through c on lane.
func send(ctx context.Context, c *herald.Client, lane Lane, to string) error {
	var err error
	switch lane {
	case LaneQueue:
		_, err = c.Enqueue(ctx, to, "go", "x")
	case LaneCorrelated:
		_, err = c.PutCorrelatedEvent(ctx, correlatedDef, to, "x")
	default:
		_, err = c.RaiseEvent(ctx, to, "go", "x")
	}
	return err
}

func (h *heraldSystem) committed(id string, status heraldtype.Status, at time.Time) {
	h.commits.Add(1)
	if fn := h.onTurn.Load(); fn != nil {
		(*fn)(id, at)
	}
	switch status {
	case heraldtype.StatusRunning:
		h.parked.Add(1)
	case heraldtype.StatusCompleted:
		h.resumed <- Stamp{ID: id, At: at}
	}
}

func (h *heraldSystem) Name() string          { return h.name }
func (h *heraldSystem) Durability() string    { return h.durability }
func (h *heraldSystem) Resumed() <-chan Stamp { return h.resumed }

func (h *heraldSystem) Park(ctx context.Context, lane Lane, ids []string, key func(i int) string) error {
	before := h.parked.Load()
	if err := parkInstances(ctx, h.client, lane, ids, key); err != nil {
		return err
	}
	want := before + int64(len(ids))
	return poll(ctx, 2*time.Millisecond, func() bool { return h.parked.Load() >= want })
}

func (h *heraldSystem) Send(ctx context.Context, lane Lane, to string) error {
	return send(ctx, h.client, lane, to)
}

func (h *heraldSystem) Close() error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	err := h.rt.Stop(ctx)
	if cerr := h.closeStore(); err == nil {
		err = cerr
	}
	return err
}

// parallel runs fn(0..n-1) on workers goroutines and returns the first
// error.
func parallel(ctx context.Context, workers, n int, fn func(i int) error) error {
	var (
		wg    sync.WaitGroup
		next  atomic.Int64
		first atomic.Pointer[error]
	)
	for range min(workers, max(n, 1)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1) - 1)
				if i >= n || first.Load() != nil || ctx.Err() != nil {
					return
				}
				if err := fn(i); err != nil {
					first.CompareAndSwap(nil, &err)
					return
				}
			}
		}()
	}
	wg.Wait()
	if e := first.Load(); e != nil {
		return *e
	}
	return ctx.Err()
}

// poll checks cond every `every` until it holds or ctx ends.
func poll(ctx context.Context, every time.Duration, cond func() bool) error {
	t := time.NewTicker(every)
	defer t.Stop()
	for !cond() {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
		}
	}
	return nil
}

// pgSettled says what pgSettle does, for a result's note.
const pgSettled = "PostgreSQL checkpointed before parking, so the paced part writes into recycled WAL segments"

// pgSettle runs a CHECKPOINT on the PostgreSQL server at url, before the
// paced run parks its instances. A server whose WAL has grown since its
// last checkpoint (the round trip before writes a lot of it in seconds) has
// no recycled segment to switch to: the backend that fills a 16 MB segment
// creates and zero-fills the next one in the foreground, holding the WAL
// write lock, and every commit waits for it, a stall of 50 to 70 ms every
// few seconds at 2,000 sends/s. A server in its steady state recycles the
// segments its checkpoints free. The checkpoint comes before the parking,
// not after: the first change to each page after a checkpoint writes the
// whole page to the WAL, and right after one at 2,300 sends/s that flood
// stalled the paced run's first seconds (p99 up to 490 ms); the parking
// takes it instead. A paced run that writes more WAL than the checkpoint
// recycled (about 10 segments on the benchmark machine) still meets a new
// segment near its end. Herald and DBOS on PostgreSQL are settled alike.
func pgSettle(ctx context.Context, url string) (string, error) {
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		return "", err
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, "CHECKPOINT"); err != nil {
		return "", fmt.Errorf("checkpoint: %w", err)
	}
	return pgSettled, nil
}

func pgSetting(ctx context.Context, url, name string) (string, error) {
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		return "", err
	}
	defer conn.Close(ctx)
	var v string
	err = conn.QueryRow(ctx, "SELECT current_setting($1)", name).Scan(&v)
	return v, err
}

func dropSchema(url, schema string) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		return
	}
	defer conn.Close(ctx)
	_, _ = conn.Exec(ctx, "DROP SCHEMA IF EXISTS "+pgx.Identifier{schema}.Sanitize()+" CASCADE")
}
