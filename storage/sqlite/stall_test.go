package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/heraldwf/herald/heraldtype"
	"github.com/heraldwf/herald/storage"
)

// An fsync of the WAL that fails for lack of room stalls the store rather
// than breaking it: writes and the reads that would need the unsynced
// transactions fail with ErrStorageFull; once there is room, the next write
// makes the store check and rewrite the WAL and goes through. crashfs
// fails the fsync as Linux does (the pages it was to write are marked clean
// and never written by a later fsync), and checkpoints are off, so a store
// that only retried the fsync would leave a hole in the WAL on disk, and a
// power loss would then lose the writes acknowledged after it: the test
// checks that none is lost.
func TestFsyncOutOfRoomStallsAndRecovers(t *testing.T) {
	fsys := remoteCrashFS(t)
	dir := fsys.Dir
	ctx := context.Background()
	s, err := Open(ctx, filepath.Join(dir, "h.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() }) // before the file system is unmounted
	s.ckptOff.Store(true)

	var acked []string
	for i := range 10 {
		id := fmt.Sprintf("a%d", i)
		if err := create(ctx, s, id); err != nil {
			t.Fatal(err)
		}
		acked = append(acked, id)
	}
	if err := fsys.FailSyncs(syscall.ENOSPC); err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		if err := create(ctx, s, fmt.Sprintf("b%d", i)); !errors.Is(err, heraldtype.ErrStorageFull) {
			t.Fatalf("write while fsyncs fail for lack of room: %v, want ErrStorageFull", err)
		}
	}
	if _, err := s.InstanceGet(ctx, &storage.InstanceGetParams{Tenant: "t", ID: "a0"}); !errors.Is(err, heraldtype.ErrStorageFull) {
		t.Fatalf("read while an unsynced write is visible: %v, want ErrStorageFull", err)
	}
	if err := fsys.FailSyncs(0); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		err := create(ctx, s, "c0")
		if err == nil {
			break
		}
		if !errors.Is(err, heraldtype.ErrStorageFull) || time.Now().After(deadline) {
			t.Fatalf("write once there is room again: %v", err)
		}
	}
	acked = append(acked, "c0")
	for i := 1; i < 10; i++ {
		id := fmt.Sprintf("c%d", i)
		if err := create(ctx, s, id); err != nil {
			t.Fatal(err)
		}
		acked = append(acked, id)
	}
	for _, id := range acked {
		if _, err := s.InstanceGet(ctx, &storage.InstanceGetParams{Tenant: "t", ID: id}); err != nil {
			t.Fatalf("read %s after recovery: %v", id, err)
		}
	}

	// A power loss now.
	lost := t.TempDir()
	if err := fsys.Durable(lost); err != nil {
		t.Fatal(err)
	}
	db, err := sql.Open("sqlite", filepath.Join(lost, "h.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	for _, id := range acked {
		var n int
		if err := db.QueryRow(`SELECT count(*) FROM instances WHERE tenant = 't' AND id = ?`, id).Scan(&n); err != nil || n != 1 {
			t.Errorf("acknowledged instance %s lost in a power loss after the recovery (%v)", id, err)
		}
	}
	var check string
	if err := db.QueryRow("PRAGMA integrity_check").Scan(&check); err != nil || check != "ok" {
		t.Errorf("integrity_check: %q, %v", check, err)
	}
}

// After an fsync that failed for lack of room, a WAL whose committed bytes
// changed (pages the OS dropped and read back from the disk) is not written
// again as if it were right: the store breaks, with the reason.
func TestFsyncOutOfRoomChangedWALBreaksStore(t *testing.T) {
	s := openTest(t)
	s.ckptOff.Store(true)
	ctx := context.Background()
	if err := create(ctx, s, "a"); err != nil {
		t.Fatal(err)
	}
	real := s.syncFn
	s.syncFn = func() error { return syscall.ENOSPC }
	if err := create(ctx, s, "b"); !errors.Is(err, heraldtype.ErrStorageFull) {
		t.Fatalf("write whose fsync failed for lack of room: %v, want ErrStorageFull", err)
	}
	// A page of the last committed frame reads back different.
	st, err := s.wal.Stat()
	if err != nil {
		t.Fatal(err)
	}
	b := make([]byte, 1)
	if _, err := s.wal.ReadAt(b, st.Size()-100); err != nil {
		t.Fatal(err)
	}
	b[0]++
	if _, err := s.wal.WriteAt(b, st.Size()-100); err != nil {
		t.Fatal(err)
	}
	s.syncFn = real
	err = create(ctx, s, "c")
	if err == nil || errors.Is(err, heraldtype.ErrStorageFull) || !strings.Contains(err.Error(), "bad checksum") {
		t.Fatalf("write after room was made, over a changed WAL: %v, want the store broken by a bad checksum", err)
	}
	if err := create(ctx, s, "d"); err == nil {
		t.Fatal("a broken store took a write")
	}
}
