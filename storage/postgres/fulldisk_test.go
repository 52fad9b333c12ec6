package postgres_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/heraldwf/herald"
	"github.com/heraldwf/herald/heraldtype"
	"github.com/heraldwf/herald/storage/postgres"
)

// setupOrSkip skips the test with the reason, except in CI (CI=true), where
// it fails.
func setupOrSkip(t *testing.T, format string, args ...any) {
	t.Helper()
	if os.Getenv("CI") == "true" {
		t.Fatalf("full-disk test cannot be set up: "+format, args...)
	}
	t.Skipf("full-disk test skipped (it fails in CI): "+format, args...)
}

// fullTablespace mounts a 16 MiB tmpfs, owned by the server's user, and
// makes it a tablespace of the test server, dropped (and unmounted) when
// the test ends. It needs root and a server on this machine.
func fullTablespace(t *testing.T, url string) (name, dir string) {
	t.Helper()
	pg, err := user.Lookup("postgres")
	if err != nil {
		setupOrSkip(t, "no postgres user on this machine (the server must be local): %v", err)
	}
	dir, err = os.MkdirTemp("", "herald-pgfull-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.Remove(dir) })
	if err := syscall.Mount("tmpfs", dir, "tmpfs", 0, "size=16m,mode=0700"); err != nil {
		setupOrSkip(t, "mount a tmpfs (needs root): %v", err)
	}
	t.Cleanup(func() {
		if err := syscall.Unmount(dir, 0); err != nil {
			t.Errorf("unmount %s: %v", dir, err)
		}
	})
	uid, _ := strconv.Atoi(pg.Uid)
	gid, _ := strconv.Atoi(pg.Gid)
	if err := os.Chown(dir, uid, gid); err != nil {
		t.Fatal(err)
	}
	var b [6]byte
	_, _ = rand.Read(b[:])
	name = "herald_full_" + hex.EncodeToString(b[:])
	conn := connect(t)
	ctx := context.Background()
	if _, err := conn.Exec(ctx, fmt.Sprintf("CREATE TABLESPACE %s LOCATION '%s'", name, dir)); err != nil {
		setupOrSkip(t, "create a tablespace on %s (the server must be local, and the test's user a superuser): %v", dir, err)
	}
	t.Cleanup(func() {
		c := connect(t)
		if _, err := c.Exec(context.Background(), "DROP TABLESPACE "+name); err != nil {
			t.Errorf("drop tablespace %s: %v", name, err)
		}
	})
	return name, dir
}

// A full disk on PostgreSQL (a tablespace on a small tmpfs): writes fail
// with ErrStorageFull (SQLSTATE 53100) and write nothing, what was
// acknowledged stays, and once room is made the running store and runtime
// complete every instance, well within a turn lease.
func TestFullDisk(t *testing.T) {
	url := testURL(t)
	ts, dir := fullTablespace(t, url)
	schema := newSchema(t) // dropped before the tablespace
	ctx := context.Background()
	st := open(t, schema, postgres.WithPoolConfig(func(c *pgxpool.Config) {
		c.ConnConfig.RuntimeParams["default_tablespace"] = ts
	}))
	rt, err := herald.NewRuntime(st, &herald.Config{
		ClientConfig: herald.ClientConfig{Logger: slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelError + 4}))},
		TurnLease:    time.Minute,
		PollInterval: 50 * time.Millisecond,
	})
	if err != nil {
		t.Fatal(err)
	}
	herald.RegisterWorkflow(rt, "full.flow", func(ctx *herald.Context, in string) (string, error) {
		var got string
		if err := ctx.WaitEvent("go").Get(&got); err != nil {
			return "", err
		}
		return in + "/" + got[:8], nil
	})
	if err := rt.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rt.Stop(context.Background()) })
	c, err := rt.Client(herald.DefaultTenant)
	if err != nil {
		t.Fatal(err)
	}

	const n = 50
	for i := range n {
		id := fmt.Sprintf("i%03d", i)
		if _, err := c.StartWorkflow(ctx, "full.flow", id, herald.WithInstanceID(id)); err != nil {
			t.Fatal(err)
		}
	}
	// Fill the file system, leaving a little room for the first raises.
	filler := filepath.Join(dir, "filler")
	fillTo(t, filler, 256<<10)
	payload := randomText(64 << 10)
	acked := map[int]bool{}
	full := 0
	for i := range n {
		id := fmt.Sprintf("i%03d", i)
		_, err := c.RaiseEvent(ctx, id, "go", payload, herald.WithEventID(id+"/go"))
		switch {
		case err == nil:
			acked[i] = true
		case errors.Is(err, heraldtype.ErrStorageFull):
			full++
		default:
			t.Fatalf("raise %s on a full disk: %v (want ErrStorageFull)", id, err)
		}
	}
	if full == 0 {
		t.Fatal("the tablespace never filled up")
	}
	t.Logf("%d raises acknowledged, %d refused with ErrStorageFull", len(acked), full)
	for i := range acked {
		id := fmt.Sprintf("i%03d", i)
		if _, err := c.EventFate(ctx, id+"/go"); err != nil {
			t.Errorf("acknowledged event %s/go on a full disk: %v", id, err)
		}
	}
	// A refused raise wrote nothing: its event id is unknown.
	for i := range n {
		id := fmt.Sprintf("i%03d", i)
		if _, err := c.EventFate(ctx, id+"/go"); !acked[i] && !errors.Is(err, heraldtype.ErrNotFound) {
			t.Errorf("refused event %s/go on a full disk: fate read %v, want ErrNotFound", id, err)
		}
	}

	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	for i := range n {
		if acked[i] {
			continue
		}
		id := fmt.Sprintf("i%03d", i)
		if _, err := c.RaiseEvent(ctx, id, "go", payload, herald.WithEventID(id+"/go")); err != nil {
			t.Fatalf("raise %s after room was made: %v", id, err)
		}
	}
	wctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	for i := range n {
		id := fmt.Sprintf("i%03d", i)
		info, err := c.WaitForCompletion(wctx, id)
		if err != nil {
			t.Fatalf("instance %s after room was made: %v", id, err)
		}
		if info.Status != herald.StatusCompleted {
			t.Fatalf("instance %s: %s", id, info.Status)
		}
	}
}

// fillTo writes path until the file system has only about room bytes left.
func fillTo(t *testing.T, path string, room int64) {
	t.Helper()
	var sfs syscall.Statfs_t
	if err := syscall.Statfs(filepath.Dir(path), &sfs); err != nil {
		t.Fatal(err)
	}
	free := int64(sfs.Bavail) * int64(sfs.Bsize)
	if free <= room {
		return
	}
	if err := os.WriteFile(path, make([]byte, free-room), 0o600); err != nil {
		t.Fatal(err)
	}
}

// randomText is n bytes of hex: a payload that compresses little, so that
// it takes room in the table.
func randomText(n int) string {
	b := make([]byte, n/2)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
