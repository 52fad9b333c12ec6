package main

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/microsoft/durabletask-go/api"
	"github.com/microsoft/durabletask-go/backend"
	dtsqlite "github.com/microsoft/durabletask-go/backend/sqlite"
	"github.com/microsoft/durabletask-go/task"
)

// durableTaskSystem is durabletask-go (github.com/microsoft/durabletask-go,
// pinned in go.mod) with its SQLite backend on a file, its worker and its
// client in this process.
//
// Workflow: an orchestrator that awaits WaitForSingleEvent("go") and
// completes; the event is sent with the client's RaiseEvent.
//
// Resumed stamp: the backend is wrapped (dtStampBackend) like Herald's store,
// and an instance is stamped when CompleteOrchestrationWorkItem has returned
// for the work item whose new state is completed: the commit of the turn that
// took the event, the same point as Herald's stamp.
type durableTaskSystem struct {
	path       string
	be         backend.Backend
	worker     backend.TaskHubWorker
	client     backend.TaskHubClient
	durability string
	resumed    chan Stamp
	parked     atomic.Int64
}

// dtWait is the benchmark's orchestrator: wait for the external event "go"
// with no timeout, then complete with its payload.
func dtWait(ctx *task.OrchestrationContext) (any, error) {
	var v string
	if err := ctx.WaitForSingleEvent("go", -1).Await(&v); err != nil {
		return nil, err
	}
	return v, nil
}

// dtStampBackend passes every call to the SQLite backend and notes each
// committed orchestration turn.
type dtStampBackend struct {
	backend.Backend
	s *durableTaskSystem
}

func (b *dtStampBackend) CompleteOrchestrationWorkItem(ctx context.Context, wi *backend.OrchestrationWorkItem) error {
	err := b.Backend.CompleteOrchestrationWorkItem(ctx, wi)
	if err == nil && wi.State != nil {
		if wi.State.IsCompleted() {
			b.s.resumed <- Stamp{ID: string(wi.InstanceID), At: time.Now()}
		} else {
			b.s.parked.Add(1)
		}
	}
	return err
}

func openDurableTask(ctx context.Context, dir, tag string, workers int) (*durableTaskSystem, error) {
	path := filepath.Join(dir, "durabletask-"+tag+".db")
	s := &durableTaskSystem{path: path, resumed: make(chan Stamp, 1<<16)}
	logger := dtLogger{}
	inner := dtsqlite.NewSqliteBackend(dtsqlite.NewSqliteOptions(path), logger)
	s.be = &dtStampBackend{Backend: inner, s: s}
	r := task.NewTaskRegistry()
	if err := r.AddOrchestratorN("bench.wait", dtWait); err != nil {
		return nil, err
	}
	ex := task.NewTaskExecutor(r)
	ow := backend.NewOrchestrationWorker(s.be, ex, logger, backend.WithMaxParallelism(int32(workers)))
	aw := backend.NewActivityTaskWorker(s.be, ex, logger)
	s.worker = backend.NewTaskHubWorker(s.be, ow, aw, logger)
	if err := s.worker.Start(context.Background()); err != nil {
		s.cleanup(inner)
		return nil, err
	}
	s.client = backend.NewTaskHubClient(s.be)
	jm, sync, err := sqlitePragmas(ctx, "file:"+path)
	if err != nil {
		s.Close()
		return nil, err
	}
	s.durability = fmt.Sprintf("%s per commit (journal_mode=%s, synchronous=%s: SQLite's defaults, the backend sets no PRAGMA)",
		map[bool]string{true: "fsync", false: "no fsync"}[sync == "FULL" || sync == "EXTRA"], jm, sync)
	return s, nil
}

// sqlitePragmas reads the journal mode of the file at dsn and the synchronous
// setting a new connection of the same driver (modernc.org/sqlite) gets: the
// durabletask-go backend opens its connection with no PRAGMA, so these are
// what it runs with.
func sqlitePragmas(ctx context.Context, dsn string) (journal, synchronous string, err error) {
	db, err := sql.Open("sqlite", dsn)
	if err != nil {
		return "", "", err
	}
	defer db.Close()
	if err := db.QueryRowContext(ctx, "PRAGMA journal_mode").Scan(&journal); err != nil {
		return "", "", err
	}
	var n int
	if err := db.QueryRowContext(ctx, "PRAGMA synchronous").Scan(&n); err != nil {
		return "", "", err
	}
	names := []string{"OFF", "NORMAL", "FULL", "EXTRA"}
	synchronous = fmt.Sprint(n)
	if n >= 0 && n < len(names) {
		synchronous = names[n]
	}
	return strings.ToUpper(journal), synchronous, nil
}

func (s *durableTaskSystem) Name() string          { return "durabletask-go sqlite" }
func (s *durableTaskSystem) Durability() string    { return s.durability }
func (s *durableTaskSystem) Resumed() <-chan Stamp { return s.resumed }

func (s *durableTaskSystem) Park(ctx context.Context, lane Lane, ids []string, _ func(int) string) error {
	if lane != LanePositional {
		return ErrUnsupported
	}
	before := s.parked.Load()
	err := parallel(ctx, 32, len(ids), func(i int) error {
		_, err := s.client.ScheduleNewOrchestration(ctx, "bench.wait", api.WithInstanceID(api.InstanceID(ids[i])))
		return err
	})
	if err != nil {
		return err
	}
	want := before + int64(len(ids))
	return poll(ctx, 2*time.Millisecond, func() bool { return s.parked.Load() >= want })
}

func (s *durableTaskSystem) Send(ctx context.Context, lane Lane, to string) error {
	if lane != LanePositional {
		return ErrUnsupported
	}
	return s.client.RaiseEvent(ctx, api.InstanceID(to), "go", api.WithEventPayload("x"))
}

func (s *durableTaskSystem) Close() error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	err := s.worker.Shutdown(ctx)
	s.cleanup(s.be.(*dtStampBackend).Backend)
	return err
}

// cleanup closes the backend's database handle and removes its files. The
// SQLite backend has no Close (its *sql.DB lives until the process ends), so
// the handle is reached by reflection: otherwise every run would keep a
// connection to a deleted file.
func (s *durableTaskSystem) cleanup(be backend.Backend) {
	if v := reflect.ValueOf(be); v.Kind() == reflect.Pointer && v.Elem().Kind() == reflect.Struct {
		if f := v.Elem().FieldByName("db"); f.IsValid() && f.Type() == reflect.TypeFor[*sql.DB]() {
			if db := *(**sql.DB)(unsafe.Pointer(f.UnsafeAddr())); db != nil {
				db.Close()
			}
		}
	}
	for _, suffix := range []string{"", "-journal", "-wal", "-shm"} {
		os.Remove(s.path + suffix)
	}
}

// dtLogger passes on durabletask-go's warnings and errors and drops the rest.
type dtLogger struct{}

func (dtLogger) Debug(...any)          {}
func (dtLogger) Debugf(string, ...any) {}
func (dtLogger) Info(...any)           {}
func (dtLogger) Infof(string, ...any)  {}
func (dtLogger) Warn(v ...any)         { progress("  durabletask-go: %s", fmt.Sprint(v...)) }
func (dtLogger) Warnf(f string, v ...any) {
	progress("  durabletask-go: %s", fmt.Sprintf(f, v...))
}
func (dtLogger) Error(v ...any) { progress("  durabletask-go: %s", fmt.Sprint(v...)) }
func (dtLogger) Errorf(f string, v ...any) {
	progress("  durabletask-go: %s", fmt.Sprintf(f, v...))
}
