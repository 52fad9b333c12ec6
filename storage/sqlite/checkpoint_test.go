package sqlite

import (
	"context"
	"encoding/binary"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// The writer does not checkpoint (wal_autocheckpoint is off on its
// connection): the background checkpointer copies the WAL into the database
// file.
func TestBackgroundCheckpoint(t *testing.T) {
	s := openTest(t)
	ctx := context.Background()
	size := func() int64 {
		fi, err := os.Stat(s.path)
		if err != nil {
			t.Fatal(err)
		}
		return fi.Size()
	}
	before := size()
	for i := range 300 {
		if err := create(ctx, s, fmt.Sprintf("instance-%04d", i)); err != nil {
			t.Fatal(err)
		}
	}
	deadline := time.Now().Add(10 * time.Second)
	for size() <= before {
		if time.Now().After(deadline) {
			t.Fatalf("database file still %d bytes: the WAL was never checkpointed", before)
		}
		time.Sleep(20 * time.Millisecond)
	}
	var autockpt int
	if err := s.wc.queryRowForTest("PRAGMA wal_autocheckpoint", &autockpt); err != nil {
		t.Fatal(err)
	}
	if autockpt != 0 {
		t.Fatalf("writer's wal_autocheckpoint = %d, want 0", autockpt)
	}
}

// queryRowForTest scans the first row of q; for tests, on an idle writer.
func (c *wconn) queryRowForTest(q string, dest ...any) error {
	r, err := c.query(q, nil)
	return wrow{rows: r, err: err}.Scan(dest...)
}

// Under writes that never stop, a checkpoint beside the writer never copies
// the whole WAL, so SQLite never restarts it and it grows without end: the
// writer runs the last checkpoint (lastCheckpoint) and the WAL restarts
// from its beginning. The WAL header's checkpoint sequence number counts
// the restarts.
func TestWALRestartsUnderSteadyWrites(t *testing.T) {
	old := restartFrames
	restartFrames = 256
	t.Cleanup(func() { restartFrames = old })
	s := openTest(t)
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	defer func() {
		cancel()
		wg.Wait()
	}()
	seq := func() uint32 {
		f, err := os.Open(s.path + "-wal")
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		var hdr [32]byte
		if _, err := f.ReadAt(hdr[:], 0); err != nil {
			t.Fatal(err)
		}
		return binary.BigEndian.Uint32(hdr[12:16])
	}
	var n atomic.Int64
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				if err := create(ctx, s, fmt.Sprintf("instance-%06d", n.Add(1))); err != nil && ctx.Err() == nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	deadline := time.Now().Add(10 * time.Second)
	for n.Load() < 100 { // the WAL header is written with the first frame
		if time.Now().After(deadline) {
			t.Fatal("no writes")
		}
		time.Sleep(10 * time.Millisecond)
	}
	first := seq()
	for seq() < first+2 {
		if time.Now().After(deadline) {
			t.Fatalf("the WAL restarted %d times in 10 s of steady writes (%d instances, %d writer checkpoints), want 2",
				seq()-first, n.Load(), s.ckptLasts.Load())
		}
		time.Sleep(10 * time.Millisecond)
	}
}
