package sqlite

import (
	"context"
	"errors"
	"fmt"
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
// requests are certain to share one transaction. A group runs without
// savepoints until a request fails; then the others run again, each in a
// savepoint, as do the next groups (savepointGroups): both ways are
// tested, and each must leave the failing request's writes out and the
// others' in.
func TestGroupCommitFailure(t *testing.T) {
	boom := errors.New("boom")
	for _, c := range []struct {
		name string
		fail func(*wtx) error
		// commits: how many transactions committed the two good
		// requests, optimistic group first, then savepoint group.
		commits [2]int64
	}{
		// Optimistic: the group is rolled back and the two others commit
		// in a savepoint group. Savepoint group: the failing request is
		// rolled back to its savepoint; the transaction commits the others.
		{"error", func(w *wtx) error {
			if _, err := w.exec(`INSERT INTO instances (tenant, id, workflow, status, execution, created_at, updated_at)
				VALUES ('t', 'half', 'wf', 'pending', 1, 0, 0)`); err != nil {
				return err
			}
			return boom
		}, [2]int64{1, 1}},
		{"panic", func(*wtx) error { panic("bug") }, [2]int64{1, 1}},
		// The failing request took the whole transaction down: in a
		// savepoint group, the others are re-run in transactions of their
		// own.
		{"transaction lost", func(w *wtx) error {
			if _, err := w.exec("ROLLBACK"); err != nil {
				return err
			}
			return boom
		}, [2]int64{1, 2}},
	} {
		for mode, saved := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/savepoints=%v", c.name, saved), func(t *testing.T) {
				s := openTest(t)
				if saved {
					s.savepointGroups = 1
				}
				batch := []*writeReq{createReq("a", nil), createReq("b", c.fail), createReq("c", nil)}
				s.runBatch(slices.Clone(batch)) // runBatch reuses its argument's backing array
				for i, want := range []bool{true, false, true} {
					err := <-batch[i].done
					if (err == nil) != want || (!want && c.name != "panic" && !errors.Is(err, boom)) {
						t.Fatalf("request %d: error %v", i, err)
					}
				}
				if !exists(t, s, "a") || exists(t, s, "b") || !exists(t, s, "c") || exists(t, s, "half") {
					t.Fatalf("instances a, b, c, half exist: %v %v %v %v; want true false true false",
						exists(t, s, "a"), exists(t, s, "b"), exists(t, s, "c"), exists(t, s, "half"))
				}
				if st := s.Stats(); st.Commits != c.commits[mode] || st.Writes != 2 {
					t.Fatalf("Stats = %+v, want %d commits of 2 writes", st, c.commits[mode])
				}
				// A failure makes the next groups use savepoints; a group
				// with savepoints counts down.
				if want := savepointGroupsAfterFailure; !saved && s.savepointGroups != want {
					t.Fatalf("savepointGroups = %d after a failed optimistic group, want %d", s.savepointGroups, want)
				}
				if saved && s.savepointGroups != 0 {
					t.Fatalf("savepointGroups = %d after the savepoint group, want 0", s.savepointGroups)
				}
				// The writer is still healthy.
				if _, err := s.InstanceCreate(context.Background(), &storage.InstanceCreateParams{Tenant: "t", ID: "d", Workflow: "wf"}); err != nil {
					t.Fatal(err)
				}
			})
		}
	}
}

// A group in which nothing fails commits in one transaction without
// savepoints, and leaves the mode optimistic.
func TestGroupCommitOptimistic(t *testing.T) {
	s := openTest(t)
	batch := []*writeReq{createReq("a", nil), createReq("b", nil), createReq("c", nil)}
	s.runBatch(slices.Clone(batch))
	for i := range batch {
		if err := <-batch[i].done; err != nil {
			t.Fatalf("request %d: %v", i, err)
		}
	}
	if st := s.Stats(); st.Commits != 1 || st.Writes != 3 {
		t.Fatalf("Stats = %+v, want 1 commit of 3 writes", st)
	}
	if s.savepointGroups != 0 {
		t.Fatalf("savepointGroups = %d, want 0", s.savepointGroups)
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
