package sqlite

import (
	"context"
	"errors"
	"path/filepath"
	"runtime"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/heraldwf/herald/heraldtype"
	"github.com/heraldwf/herald/storage"
)

func openTest(t *testing.T) *Store {
	t.Helper()
	s, err := Open(context.Background(), filepath.Join(t.TempDir(), "w.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func createReq(id string, after func(*wtx) error) *writeReq {
	return &writeReq{
		ctx:  context.Background(),
		done: make(chan error, 1),
		fn: func(w *wtx) error {
			if _, err := createInstance(w, &storage.InstanceCreateParams{Tenant: "t", ID: id, Workflow: "wf", Now: time.Unix(1, 0)}); err != nil {
				return err
			}
			if after != nil {
				return after(w)
			}
			return nil
		},
	}
}

func exists(t *testing.T, s *Store, id string) bool {
	t.Helper()
	_, err := s.InstanceGet(context.Background(), &storage.InstanceGetParams{Tenant: "t", ID: id})
	if err != nil && !errors.Is(err, heraldtype.ErrNotFound) {
		t.Fatal(err)
	}
	return err == nil
}

// runBatch is called directly (the writer goroutine is idle) so that the
// requests are certain to share one transaction.
func TestGroupCommitSavepoints(t *testing.T) {
	boom := errors.New("boom")
	for _, c := range []struct {
		name    string
		fail    func(*wtx) error
		commits int64
	}{
		// The failing request is rolled back to its savepoint; the shared
		// transaction commits the other two.
		{"error", func(*wtx) error { return boom }, 1},
		{"panic", func(*wtx) error { panic("bug") }, 1},
		// The failing request took the whole transaction down: the others
		// are re-run in transactions of their own.
		{"transaction lost", func(w *wtx) error {
			if _, err := w.exec("ROLLBACK"); err != nil {
				return err
			}
			return boom
		}, 2},
	} {
		t.Run(c.name, func(t *testing.T) {
			s := openTest(t)
			batch := []*writeReq{createReq("a", nil), createReq("b", c.fail), createReq("c", nil)}
			s.runBatch(slices.Clone(batch)) // runBatch reuses its argument's backing array
			for i, want := range []bool{true, false, true} {
				err := <-batch[i].done
				if (err == nil) != want {
					t.Fatalf("request %d: error %v", i, err)
				}
			}
			if !exists(t, s, "a") || exists(t, s, "b") || !exists(t, s, "c") {
				t.Fatalf("instances a, b, c exist: %v %v %v; want true false true", exists(t, s, "a"), exists(t, s, "b"), exists(t, s, "c"))
			}
			if st := s.Stats(); st.Commits != c.commits || st.Writes != 2 {
				t.Fatalf("Stats = %+v, want %d commits of 2 writes", st, c.commits)
			}
			// The writer is still healthy.
			if _, err := s.InstanceCreate(context.Background(), &storage.InstanceCreateParams{Tenant: "t", ID: "d", Workflow: "wf"}); err != nil {
				t.Fatal(err)
			}
		})
	}
}

func TestGroupCommitSkipsCancelledRequests(t *testing.T) {
	s := openTest(t)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	r := createReq("a", nil)
	r.ctx = ctx
	rb := createReq("b", nil)
	s.runBatch([]*writeReq{r, rb}) // runBatch reuses its argument's backing array
	if err := <-r.done; !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled request: %v", err)
	}
	if err := <-rb.done; err != nil {
		t.Fatal(err)
	}
	if exists(t, s, "a") || !exists(t, s, "b") {
		t.Fatal("cancelled request ran")
	}
}

// Point reads run on fewer connections than there are Ps (see rpool), each
// on its connection's goroutine, whatever WithReadConns allows.
func TestReadsFewerThanPs(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(3))
	s := openTest(t)
	if err := create(context.Background(), s, "a"); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 50 {
				if !exists(t, s, "a") {
					t.Error("instance a not found")
					return
				}
			}
		}()
	}
	wg.Wait()
	s.rpool.mu.Lock()
	open := s.rpool.open
	s.rpool.mu.Unlock()
	if open < 1 || open > 2 {
		t.Fatalf("%d read connections open with GOMAXPROCS 3, want 1 or 2", open)
	}
}
