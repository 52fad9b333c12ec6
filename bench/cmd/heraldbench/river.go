package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/rivermigrate"
)

// River (github.com/riverqueue/river, pinned in go.mod, with riverpgxv5) is
// the event bus's peer: a PostgreSQL job queue. Its workload is the
// bus-handler scenario's: River inserts a job (Client.Insert, one
// transaction each) → a worker whose Work returns nil completes it, against
// Herald publishing an event → a matched Go-handler target completes it;
// same N, same number of concurrent producers, River's MaxWorkers = Herald's
// Bus.Workers, the same PostgreSQL and pool size.
//
// Done stamp: River's job-completed event (Client.Subscribe). River's
// default completer (BatchCompleter) collects finished jobs and sets them
// completed in one UPDATE per batch (every 50 ms once 100 are waiting,
// every 250 ms otherwise); it emits the events after that UPDATE has
// returned, so the stamp is the moment the job's completion was durable —
// the same point as Herald's (its attempt's end committed).
//
// Two peers: "river" with River's defaults but MaxWorkers (FetchCooldown
// 100 ms: a producer fetches at most every 100 ms, LISTEN/NOTIFY wakes it
// for new jobs), and "river-fast" with FetchCooldown 1 ms (River's minimum),
// so fetches follow freed workers at once.
const (
	peerRiver     = "river"
	peerRiverFast = "river-fast"
)

func isBusPeer(p string) bool { return p == peerRiver || p == peerRiverFast }

type riverArgs struct {
	Seq int `json:"seq"`
}

func (riverArgs) Kind() string { return "heraldbench" }

type riverWorker struct {
	river.WorkerDefaults[riverArgs]
}

func (riverWorker) Work(context.Context, *river.Job[riverArgs]) error { return nil }

// runRiver runs one River peer's round: warm-up, N jobs from `publishers`
// concurrent producers, then samples jobs one at a time.
func runRiver(ctx context.Context, o *options, peer, tag string) []Result {
	ctx, cancel := context.WithTimeout(ctx, scenarioTimeout)
	defer cancel()
	bo := o.bus
	cooldown := river.FetchCooldownDefault
	if peer == peerRiverFast {
		cooldown = river.FetchCooldownMin
	}
	name := fmt.Sprintf("river postgres (FetchCooldown %s)", cooldown)
	fail := func(err error) []Result {
		return []Result{{Scenario: busScenarioHandler, System: name, Peer: peer, Error: err.Error()}}
	}
	progress("Peer %s: %d workers, FetchCooldown %s", peer, bo.workers, cooldown)
	dbName := "heraldbench_river_" + tag
	dbURL, err := createDatabase(ctx, o.postgresURL, dbName)
	if err != nil {
		progress("  PEER %s UNAVAILABLE: %v", peer, err)
		return fail(fmt.Errorf("peer unavailable: %w", err))
	}
	defer dropDatabase(o.postgresURL, dbName)
	sc, err := pgSetting(ctx, dbURL, "synchronous_commit")
	if err != nil {
		return fail(err)
	}
	fs, _ := pgSetting(ctx, dbURL, "fsync")
	dur := fmt.Sprintf("WAL flush per commit (synchronous_commit=%s, fsync=%s)", sc, fs)
	if sc != "on" || fs != "on" {
		dur = fmt.Sprintf("NOT durable per commit (synchronous_commit=%s, fsync=%s)", sc, fs)
	}
	dur += "; a job row committed per Insert, its completion committed in batches (BatchCompleter, River's default)"
	pcfg, err := pgxpool.ParseConfig(dbURL)
	if err != nil {
		return fail(err)
	}
	pcfg.MaxConns = int32(o.pgConns)
	pool, err := pgxpool.NewWithConfig(ctx, pcfg)
	if err != nil {
		return fail(err)
	}
	defer pool.Close()
	driver := riverpgxv5.New(pool)
	mig, err := rivermigrate.New(driver, nil)
	if err != nil {
		return fail(err)
	}
	if _, err := mig.Migrate(ctx, rivermigrate.DirectionUp, nil); err != nil {
		return fail(fmt.Errorf("migrate: %w", err))
	}
	workers := river.NewWorkers()
	river.AddWorker(workers, &riverWorker{})
	client, err := river.NewClient(driver, &river.Config{
		Queues:        map[string]river.QueueConfig{river.QueueDefault: {MaxWorkers: bo.workers}},
		Workers:       workers,
		FetchCooldown: cooldown,
		Logger:        slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})),
	})
	if err != nil {
		return fail(err)
	}
	total := bo.warmup + bo.n + bo.samples
	events, unsubscribe := client.SubscribeConfig(&river.SubscribeConfig{
		Kinds: []river.EventKind{river.EventKindJobCompleted}, ChanSize: total + 1000})
	defer unsubscribe()
	stamps := make(chan Stamp, 1<<16)
	go func() {
		defer close(stamps)
		for ev := range events {
			stamps <- Stamp{ID: strconv.FormatInt(ev.Job.ID, 10), At: time.Now()}
		}
	}()
	book := newStampBook(stamps)
	if err := client.Start(ctx); err != nil {
		return fail(err)
	}
	defer func() {
		sctx, scancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer scancel()
		if err := client.Stop(sctx); err != nil {
			progress("  stop %s: %v", peer, err)
		}
	}()
	insert := func(i int) (string, error) {
		res, err := client.Insert(ctx, riverArgs{Seq: i}, nil)
		if err != nil {
			return "", err
		}
		return strconv.FormatInt(res.Job.ID, 10), nil
	}

	// Warm-up: the jobs go in at once (one at a time, each would wait for
	// the batch completer's 250 ms flush).
	warm := make([]string, bo.warmup)
	for i := range warm {
		if warm[i], err = insert(i); err != nil {
			return fail(fmt.Errorf("warm-up insert: %w", err))
		}
	}
	for _, id := range warm {
		if _, err := book.wait(ctx, id); err != nil {
			return fail(err)
		}
	}

	jobs := make([]string, bo.n)
	sent := make([]time.Time, bo.n)
	var nsent atomic.Int64
	progress("  %s: inserting %d jobs from %d producers", peer, bo.n, bo.publishers)
	before := book.n()
	stop := ticker(func() string {
		return fmt.Sprintf("  %s: inserted %d/%d, completed %d", peer, nsent.Load(), bo.n, book.n()-before)
	})
	start := time.Now()
	err = parallel(ctx, bo.publishers, bo.n, func(i int) error {
		sent[i] = time.Now()
		id, err := insert(i)
		jobs[i] = id
		nsent.Add(1)
		return err
	})
	if err != nil {
		stop()
		return fail(fmt.Errorf("insert: %w", err))
	}
	lat := make(dist, bo.n)
	var last time.Time
	for i, id := range jobs {
		at, err := book.wait(ctx, id)
		if err != nil {
			stop()
			return fail(err)
		}
		lat[i] = at.Sub(sent[i])
		if at.After(last) {
			last = at
		}
	}
	stop()
	cfg := fmt.Sprintf("MaxWorkers %d, FetchCooldown %s, pool %d conns, %d producers", bo.workers, cooldown, o.pgConns, bo.publishers)
	r := Result{Scenario: busScenarioHandler, System: name, Durability: dur, Peer: peer, N: bo.n,
		Rate: float64(bo.n) / last.Sub(start).Seconds(), RateUnit: "events/s",
		Note: cfg + "; rate N / (first insert → last completion committed), latency insert → completion committed"}
	lat.fill(&r)

	iso := make(dist, 0, bo.samples)
	for i := range bo.samples {
		t0 := time.Now()
		id, err := insert(i)
		if err != nil {
			return fail(err)
		}
		at, err := book.wait(ctx, id)
		if err != nil {
			return fail(err)
		}
		iso = append(iso, at.Sub(t0))
	}
	ri := Result{Scenario: busScenarioHandler + " (isolated)", System: name, Durability: dur, Peer: peer, N: bo.samples,
		Note: "one job at a time, insert → completion committed (the batch completer flushes a lone job within 250 ms)"}
	iso.fill(&ri)

	// Every job of the run is completed in the database.
	var completed int
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM river_job WHERE state = 'completed'`).Scan(&completed); err != nil {
		return fail(err)
	}
	if completed != total {
		return fail(fmt.Errorf("%d jobs completed in river_job, want %d", completed, total))
	}
	return []Result{r, ri}
}
