package sqlite

import (
	"context"
	"errors"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/heraldwf/herald/heraldtype"
	"github.com/heraldwf/herald/storage"
)

// barrierDuration is how long TestReadNeverShowsUnsyncedWrite runs:
// HERALD_READ_BARRIER_DURATION (a Go duration) or 1 s.
func barrierDuration(t *testing.T) time.Duration {
	v := os.Getenv("HERALD_READ_BARRIER_DURATION")
	if v == "" {
		return time.Second
	}
	d, err := time.ParseDuration(v)
	if err != nil {
		t.Fatalf("HERALD_READ_BARRIER_DURATION: %v", err)
	}
	return d
}

// A read never returns a write that is not yet durable, even when it lands
// between the writer's COMMIT (which makes the rows visible to the read
// connections) and the writer's bookkeeping of that commit.
//
// The ground truth does not use the store's counters: just before each
// fsync of the WAL, a connection of the test's own reads the newest
// instance visible; everything visible then has its WAL frames written, so
// once that fsync succeeds it is durable. One goroutine creates instances
// 1, 2, 3, ... in order (rid k is instance k); readers poll for the next
// one through InstanceGet and check, when it returns it, that an fsync
// covering it has finished.
func TestReadNeverShowsUnsyncedWrite(t *testing.T) {
	s := openTest(t)
	probe, err := openConn(s.rpool.dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer probe.close()
	var synced atomic.Int64 // instances 1..synced are durable
	real := s.syncFn
	s.syncFn = func() error {
		var visible int64
		rows, err := probe.query("SELECT COALESCE(max(rid), 0) FROM instances", nil)
		if err == nil {
			err = wrow{rows: rows}.Scan(&visible)
		}
		if err != nil {
			return err
		}
		if err := real(); err != nil {
			return err
		}
		if visible > synced.Load() {
			synced.Store(visible)
		}
		return nil
	}

	ctx := context.Background()
	deadline := time.Now().Add(barrierDuration(t))
	var (
		created atomic.Int64
		stop    atomic.Bool
		wg      sync.WaitGroup
		reads   atomic.Int64
		bad     atomic.Int64
		errs    = make(chan error, 4)
	)
	wg.Add(1)
	go func() {
		defer wg.Done()
		defer stop.Store(true)
		for k := int64(1); time.Now().Before(deadline); k++ {
			if err := create(ctx, s, strconv.FormatInt(k, 10)); err != nil {
				errs <- err
				return
			}
			created.Store(k)
		}
	}()
	for range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for next := int64(1); !stop.Load(); {
				_, err := s.InstanceGet(ctx, &storage.InstanceGetParams{Tenant: "t", ID: strconv.FormatInt(next, 10)})
				if errors.Is(err, heraldtype.ErrNotFound) {
					continue
				}
				if err != nil {
					errs <- err
					return
				}
				reads.Add(1)
				if synced.Load() < next {
					bad.Add(1)
				}
				next++
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if n := bad.Load(); n > 0 {
		t.Fatalf("%d of %d reads returned an instance before the fsync that makes it durable had finished", n, reads.Load())
	}
	if reads.Load() == 0 {
		t.Fatal("no read found an instance")
	}
	t.Logf("%d instances created, %d reads found one, all durable", created.Load(), reads.Load())
}
