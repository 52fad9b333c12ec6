package sqlite_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/heraldwf/herald/heraldtype"
	"github.com/heraldwf/herald/history"
	"github.com/heraldwf/herald/storage"
	"github.com/heraldwf/herald/storage/sqlite"
	"github.com/heraldwf/herald/storage/storagetest"
)

func open(t testing.TB, path string, opts ...sqlite.Option) *sqlite.Store {
	t.Helper()
	s, err := sqlite.Open(context.Background(), path, opts...)
	if err != nil {
		t.Fatalf("Open(%s): %v", path, err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func TestConformance(t *testing.T) {
	storagetest.Run(t, func(t *testing.T) storage.Store {
		return open(t, filepath.Join(t.TempDir(), "herald.db"))
	})
}

// Two stores on one file (two processes on one database): each turn
// carries its whole history, however much of it the other store wrote.
func TestHistoryAcrossStores(t *testing.T) {
	path := filepath.Join(t.TempDir(), "herald.db")
	storagetest.HistoryAcrossStores(t, open(t, path), open(t, path))
}

// The suite again with group commit off: every write in its own transaction.
func TestConformanceNoGroupCommit(t *testing.T) {
	storagetest.Run(t, func(t *testing.T) storage.Store {
		return open(t, filepath.Join(t.TempDir(), "herald.db"), sqlite.WithMaxBatch(1), sqlite.WithSynchronous(sqlite.SynchronousNormal))
	})
}

var t0 = time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)

func TestReopenKeepsDataAndMigrationsAreIdempotent(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "a b?c#d.db") // characters that need escaping in a URI
	s, err := sqlite.Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.InstanceCreate(ctx, &storage.InstanceCreateParams{
		Tenant: "t", ID: "i", Workflow: "wf", Input: json.RawMessage(`{"x":1}`), Now: t0,
	}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.EventRaise(ctx, &storage.EventRaiseParams{
		Tenant: "t", InstanceID: "i", EventID: "e1", Lane: history.LanePositional, Name: "go", Now: t0,
	}); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if err := s.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	if _, err := s.InstanceGet(ctx, &storage.InstanceGetParams{Tenant: "t", ID: "i"}); !errors.Is(err, heraldtype.ErrClosed) {
		t.Fatalf("InstanceGet after Close: %v, want ErrClosed", err)
	}
	if _, err := s.EventRaise(ctx, &storage.EventRaiseParams{Tenant: "t", InstanceID: "i", EventID: "e2", Now: t0}); !errors.Is(err, heraldtype.ErrClosed) {
		t.Fatalf("EventRaise after Close: %v, want ErrClosed", err)
	}

	for range 2 { // reopening twice: migrations already applied are skipped
		s = open(t, path)
		inst, err := s.InstanceGet(ctx, &storage.InstanceGetParams{Tenant: "t", ID: "i"})
		if err != nil {
			t.Fatalf("InstanceGet after reopen: %v", err)
		}
		if string(inst.Input) != `{"x":1}` || !inst.CreatedAt.Equal(t0) {
			t.Fatalf("instance after reopen: %+v", inst)
		}
		e, err := s.EventGet(ctx, &storage.EventGetParams{Tenant: "t", EventID: "e1"})
		if err != nil || e.Fate != history.FatePending {
			t.Fatalf("event after reopen: %+v, %v", e, err)
		}
		turns, err := s.TurnClaim(ctx, &storage.TurnClaimParams{Tenant: "t", Now: t0, Lease: time.Minute})
		if err != nil || len(turns) != 1 || len(turns[0].Messages) != 2 {
			t.Fatalf("claim after reopen: %+v, %v", turns, err)
		}
		if err := s.TurnAbandon(ctx, &storage.TurnAbandonParams{Tenant: "t", InstanceID: "i", LockToken: turns[0].LockToken}); err != nil {
			t.Fatal(err)
		}
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
	}
}

func TestOpenRejectsBadInput(t *testing.T) {
	ctx := context.Background()
	for _, path := range []string{"", ":memory:", "file:x.db?mode=memory"} {
		if s, err := sqlite.Open(ctx, path); err == nil {
			s.Close()
			t.Errorf("Open(%q) succeeded", path)
		}
	}
	dir := t.TempDir()
	for i, opt := range []sqlite.Option{
		sqlite.WithSynchronous("SOMETIMES"),
		sqlite.WithReadConns(0),
		sqlite.WithMaxBatch(0),
		sqlite.WithBusyTimeout(-time.Second),
	} {
		if s, err := sqlite.Open(ctx, filepath.Join(dir, fmt.Sprintf("%d.db", i)), opt); err == nil {
			s.Close()
			t.Errorf("Open with bad option %d succeeded", i)
		}
	}
	// Nil params never panic.
	s := open(t, filepath.Join(dir, "nil.db"))
	if _, err := s.InstanceCreate(ctx, nil); err == nil {
		t.Error("InstanceCreate(nil) succeeded")
	}
	if _, err := s.TurnCommit(ctx, nil); err == nil {
		t.Error("TurnCommit(nil) succeeded")
	}
	if _, _, err := s.NextWake(ctx, nil); err == nil {
		t.Error("NextWake(nil) succeeded")
	}
}

// Concurrent writes are merged into fewer transactions than calls, and a
// failing call in a batch does not fail the others.
func TestGroupCommit(t *testing.T) {
	ctx := context.Background()
	s := open(t, filepath.Join(t.TempDir(), "g.db"))
	const n = 200
	var wg sync.WaitGroup
	errs := make(chan error, 2*n)
	for i := range n {
		wg.Add(2)
		go func() {
			defer wg.Done()
			_, err := s.InstanceCreate(ctx, &storage.InstanceCreateParams{Tenant: "t", ID: fmt.Sprintf("i%d", i), Workflow: "wf", Now: t0})
			errs <- err
		}()
		go func() {
			defer wg.Done()
			// Always fails: nobody holds this token.
			_, err := s.TurnCommit(ctx, &storage.TurnCommitParams{Tenant: "t", InstanceID: fmt.Sprintf("i%d", i), LockToken: "x", Execution: 1, Now: t0})
			if !errors.Is(err, heraldtype.ErrLeaseLost) {
				errs <- fmt.Errorf("TurnCommit: %v, want ErrLeaseLost", err)
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	list, _, err := s.InstanceList(ctx, &storage.InstanceListParams{Tenant: "t", Limit: 1000})
	if err != nil || len(list) != n {
		t.Fatalf("InstanceList: %d instances, %v; want %d", len(list), err, n)
	}
	st := s.Stats()
	if st.Writes != n {
		t.Fatalf("Stats.Writes = %d, want %d", st.Writes, n)
	}
	t.Logf("%d writes in %d commits", st.Writes, st.Commits)
}

func TestCancelledContextWritesNothing(t *testing.T) {
	s := open(t, filepath.Join(t.TempDir(), "c.db"))
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := s.InstanceCreate(ctx, &storage.InstanceCreateParams{Tenant: "t", ID: "i", Workflow: "wf", Now: t0})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("InstanceCreate with a cancelled context: %v", err)
	}
	if _, err := s.InstanceGet(context.Background(), &storage.InstanceGetParams{Tenant: "t", ID: "i"}); !errors.Is(err, heraldtype.ErrNotFound) {
		t.Fatalf("InstanceGet: %v, want ErrNotFound", err)
	}
}
