package sqlite

import (
	"context"
	"errors"
	"path/filepath"
	"testing"
	"time"

	"github.com/heraldwf/herald/heraldtype"
	"github.com/heraldwf/herald/storage"
)

// holdSync replaces the store's WAL fsync with one that reports each call on
// started and waits for a value on release (nil: sync for real).
func holdSync(s *Store) (started chan struct{}, release chan error) {
	started, release = make(chan struct{}, 16), make(chan error)
	real := s.syncFn
	s.syncFn = func() error {
		started <- struct{}{}
		if err := <-release; err != nil {
			return err
		}
		return real()
	}
	return started, release
}

func create(ctx context.Context, s *Store, id string) error {
	_, err := s.InstanceCreate(ctx, &storage.InstanceCreateParams{Tenant: "t", ID: id, Workflow: "wf"})
	return err
}

// With the sync pipeline (FULL, the default) a write call returns only after
// an fsync of the WAL that began after its commit, and a read that sees the
// write waits for that fsync too.
func TestSyncPipelineAnswersAfterFsync(t *testing.T) {
	s := openTest(t)
	if s.syncq == nil {
		t.Fatal("FULL store runs without the sync pipeline")
	}
	started, release := holdSync(s)
	ctx := context.Background()

	written := make(chan error, 1)
	go func() { written <- create(ctx, s, "a") }()
	<-started // committed, fsync under way
	select {
	case err := <-written:
		t.Fatalf("write returned before its fsync finished (err %v)", err)
	case <-time.After(50 * time.Millisecond):
	}

	read := make(chan error, 1)
	go func() {
		_, err := s.InstanceGet(ctx, &storage.InstanceGetParams{Tenant: "t", ID: "a"})
		read <- err
	}()
	select {
	case err := <-read:
		t.Fatalf("read of a write that is not durable yet returned (err %v)", err)
	case <-time.After(50 * time.Millisecond):
	}

	release <- nil
	if err := <-written; err != nil {
		t.Fatal(err)
	}
	if err := <-read; err != nil {
		t.Fatal(err)
	}
	// A read of what is already durable does not wait.
	if _, err := s.InstanceGet(ctx, &storage.InstanceGetParams{Tenant: "t", ID: "a"}); err != nil {
		t.Fatal(err)
	}
}

// A failed fsync fails the writes waiting on it and every later write: the
// OS may have dropped the dirty pages, so nothing is known to be durable.
func TestSyncPipelineFsyncFailureBreaksStore(t *testing.T) {
	s := openTest(t)
	started, release := holdSync(s)
	ctx := context.Background()
	disk := errors.New("EIO")

	written := make(chan error, 1)
	go func() { written <- create(ctx, s, "a") }()
	<-started
	release <- disk
	if err := <-written; !errors.Is(err, disk) {
		t.Fatalf("write during a failed fsync: %v, want %v", err, disk)
	}
	if err := create(ctx, s, "b"); !errors.Is(err, disk) {
		t.Fatalf("write after a failed fsync: %v, want %v", err, disk)
	}
	if _, err := s.InstanceGet(ctx, &storage.InstanceGetParams{Tenant: "t", ID: "a"}); !errors.Is(err, disk) {
		t.Fatalf("read after a failed fsync: %v, want %v", err, disk)
	}
}

// Many concurrent writes share fsyncs: each fsync answers every transaction
// committed before it began.
func TestSyncPipelineSharesFsyncs(t *testing.T) {
	s := openTest(t)
	var syncs int
	real := s.syncFn
	s.syncFn = func() error { syncs++; time.Sleep(2 * time.Millisecond); return real() }
	ctx := context.Background()
	const n = 200
	errs := make(chan error, n)
	for i := range n {
		go func() { errs <- create(ctx, s, string(rune('A'+i%26))+time.Now().Format("150405.000000000")) }()
	}
	for range n {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	s.Close() // the syncer has stopped: syncs is safe to read
	if syncs == 0 || syncs >= n {
		t.Fatalf("%d fsyncs for %d concurrent writes", syncs, n)
	}
	t.Logf("%d concurrent writes, %d fsyncs", n, syncs)
}

// WithSyncInCommit and the other modes run without the pipeline.
func TestSyncPipelineOnlyForFull(t *testing.T) {
	dir := t.TempDir()
	for _, c := range []struct {
		name string
		opts []Option
		want bool
	}{
		{"full", nil, true},
		{"full-in-commit", []Option{WithSyncInCommit()}, false},
		{"normal", []Option{WithSynchronous(SynchronousNormal)}, false},
		{"off", []Option{WithSynchronous(SynchronousOff)}, false},
	} {
		s, err := Open(context.Background(), filepath.Join(dir, c.name+".db"), c.opts...)
		if err != nil {
			t.Fatal(err)
		}
		if got := s.syncq != nil; got != c.want {
			t.Errorf("%s: sync pipeline %v, want %v", c.name, got, c.want)
		}
		if err := create(context.Background(), s, "x"); err != nil {
			t.Errorf("%s: %v", c.name, err)
		}
		if err := s.Close(); err != nil {
			t.Errorf("%s: close: %v", c.name, err)
		}
	}
}

// TurnClaim is answered once committed, without waiting for the fsync: a
// claim lost to a power loss only makes its lock token fail. The commit of
// the turn waits, and its fsync covers the claim.
func TestSyncPipelineClaimDoesNotWait(t *testing.T) {
	s := openTest(t)
	ctx := context.Background()
	if _, err := s.EventRaise(ctx, &storage.EventRaiseParams{Tenant: "t", InstanceID: "a", EventID: "e1", Lane: "positional", Name: "go",
		StartIfAbsent: &storage.InstanceCreateParams{Tenant: "t", ID: "a", Workflow: "wf"}}); err != nil {
		t.Fatal(err)
	}
	started, release := holdSync(s)
	claimed := make(chan error, 1)
	go func() {
		turns, err := s.TurnClaim(ctx, &storage.TurnClaimParams{Tenant: "t", Max: 1})
		if err == nil && len(turns) != 1 {
			err = errors.New("no turn claimed")
		}
		claimed <- err
	}()
	<-started // the claim's transaction has committed, its fsync is held
	select {
	case err := <-claimed:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("TurnClaim waited for the fsync")
	}
	release <- nil
}

// A definition read waits for the fsync of a definition write it could see,
// not for the fsync of other writes in flight (every raise reads its
// definition).
func TestSyncPipelineDefinitionReads(t *testing.T) {
	s := openTest(t)
	ctx := context.Background()
	get := func() chan error {
		ch := make(chan error, 1)
		go func() {
			_, err := s.EventDefinitionGet(ctx, &storage.EventDefinitionGetParams{Tenant: "t", Name: "order.paid"})
			ch <- err
		}()
		return ch
	}
	started, release := holdSync(s)

	// An instance write is held in its fsync: the (missing) definition is
	// read at once.
	written := make(chan error, 1)
	go func() { written <- create(ctx, s, "a") }()
	<-started
	select {
	case err := <-get():
		if !errors.Is(err, heraldtype.ErrNotFound) {
			t.Fatalf("definition read: %v, want ErrNotFound", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("a definition read waited for an instance write's fsync")
	}
	release <- nil
	if err := <-written; err != nil {
		t.Fatal(err)
	}

	// A definition put is held in its fsync: a read that sees it waits.
	put := make(chan error, 1)
	go func() {
		_, err := s.EventDefinitionPut(ctx, &storage.EventDefinitionPutParams{Tenant: "t",
			Definition: heraldtype.EventDefinition{Name: "order.paid", Buffer: heraldtype.BufferFIFO}})
		put <- err
	}()
	<-started
	read := get()
	select {
	case err := <-read:
		t.Fatalf("definition read returned before the put was durable (err %v)", err)
	case <-time.After(50 * time.Millisecond):
	}
	release <- nil
	if err := <-put; err != nil {
		t.Fatal(err)
	}
	if err := <-read; err != nil {
		t.Fatal(err)
	}
}

// Workers are woken at commit, while the raise's fsync is still under way,
// so that the claim overlaps it; the raise itself is answered after it.
func TestSyncPipelineWakesAtCommit(t *testing.T) {
	s := openTest(t)
	ctx := context.Background()
	wake, cancel := s.SubscribeKinds("t", storage.WorkTurns)
	defer cancel()
	started, release := holdSync(s)
	raised := make(chan error, 1)
	go func() {
		_, err := s.EventRaise(ctx, &storage.EventRaiseParams{Tenant: "t", InstanceID: "a", EventID: "e1", Lane: "positional",
			Name: "go", StartIfAbsent: &storage.InstanceCreateParams{Tenant: "t", ID: "a", Workflow: "wf"}})
		raised <- err
	}()
	<-started
	select {
	case <-wake:
	case <-time.After(10 * time.Second):
		t.Fatal("no wake-up while the raise's fsync was held")
	}
	select {
	case err := <-raised:
		t.Fatalf("raise answered before its fsync (err %v)", err)
	default:
	}
	release <- nil
	if err := <-raised; err != nil {
		t.Fatal(err)
	}
}
