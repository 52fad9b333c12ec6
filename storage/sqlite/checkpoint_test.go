package sqlite

import (
	"context"
	"fmt"
	"os"
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
