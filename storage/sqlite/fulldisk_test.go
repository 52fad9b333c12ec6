package sqlite_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/heraldwf/herald"
	"github.com/heraldwf/herald/heraldtype"
	"github.com/heraldwf/herald/internal/crashfs"
	"github.com/heraldwf/herald/storage/sqlite"
)

// A full disk: writes fail with ErrStorageFull and write nothing, what was
// acknowledged stays readable, and once there is room again the same store
// and runtime go on (no reopen) and every instance completes, well within
// a turn lease (so no turn waited for a lease to run out).
func TestFullDisk(t *testing.T) {
	for _, mode := range []string{"pipeline", "sync-in-commit"} {
		t.Run(mode, func(t *testing.T) {
			fsys, _, _, c := fullDiskRuntime(t, mode)
			ctx := context.Background()
			start := time.Now()
			const n = 100
			for i := range n {
				id := fmt.Sprintf("i%03d", i)
				if _, err := c.StartWorkflow(ctx, plWorkflow, id, herald.WithInstanceID(id)); err != nil {
					t.Fatal(err)
				}
			}
			// Fill the disk: the events' payloads take the room left.
			used, err := fsys.Used()
			if err != nil {
				t.Fatal(err)
			}
			if err := fsys.SetCapacity(used + 256<<10); err != nil {
				t.Fatal(err)
			}
			payload := strings.Repeat("x", 4096)
			acked := map[int]bool{}
			full := 0
			for i := range n {
				id := fmt.Sprintf("i%03d", i)
				_, err := c.RaiseEvent(ctx, id, "go", fmt.Sprintf("%s-%d", payload, i), herald.WithEventID(id+"/go"))
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
				t.Fatal("the disk never filled up")
			}
			t.Logf("%v: %d raises acknowledged, %d refused with ErrStorageFull", time.Since(start), len(acked), full)
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

			// Room again: the refused events are raised again, and every
			// instance completes on the running runtime.
			if err := fsys.SetCapacity(0); err != nil {
				t.Fatal(err)
			}
			for i := range n {
				if acked[i] {
					continue
				}
				id := fmt.Sprintf("i%03d", i)
				if _, err := c.RaiseEvent(ctx, id, "go", fmt.Sprintf("%s-%d", payload, i), herald.WithEventID(id+"/go")); err != nil {
					t.Fatalf("raise %s after space was freed: %v", id, err)
				}
			}
			t.Logf("%v: raised again", time.Since(start))
			wctx, cancel := context.WithTimeout(ctx, 15*time.Second)
			defer cancel()
			for i := range n {
				id := fmt.Sprintf("i%03d", i)
				info, err := c.WaitForCompletion(wctx, id)
				if err != nil {
					t.Fatalf("instance %s after space was freed: %v", id, err)
				}
				if info.Status != herald.StatusCompleted {
					t.Fatalf("instance %s: %s", id, info.Status)
				}
			}
			t.Logf("%v: all completed", time.Since(start))
		})
	}
}

// fullDiskRuntime mounts an empty crashfs and runs a store in mode and a
// Runtime on it with the workflow of the power-loss test. The turn lease is
// a minute: a turn that waited for a lease to run out would fail the test.
func fullDiskRuntime(t *testing.T, mode string) (*crashfs.Remote, string, *sqlite.Store, *herald.Client) {
	fsys := remoteCrashFS(t)
	dir := fsys.Dir
	ctx := context.Background()
	st, err := sqlite.Open(ctx, filepath.Join(dir, plDB), plModes[mode]...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	rt, err := herald.NewRuntime(st, &herald.Config{
		ClientConfig: herald.ClientConfig{Logger: slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelError + 4}))},
		TurnLease:    time.Minute,
		PollInterval: 50 * time.Millisecond,
	})
	if err != nil {
		t.Fatal(err)
	}
	herald.RegisterWorkflow(rt, plWorkflow, func(ctx *herald.Context, in string) (string, error) {
		var got string
		if err := ctx.WaitEvent("go").Get(&got); err != nil {
			return "", err
		}
		return in + "/" + got, nil
	})
	if err := rt.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rt.Stop(context.Background()) })
	c, err := rt.Client(herald.DefaultTenant)
	if err != nil {
		t.Fatal(err)
	}
	return fsys, dir, st, c
}

// remoteCrashFS mounts an empty crashfs, served by a child process (a
// process must not use through mmap a FUSE file system it serves), on a new
// directory for the test, or skips the test where FUSE cannot be mounted,
// except in CI (CI=true), where it fails. The child is the test binary's
// TestCrashFSServer.
func remoteCrashFS(t *testing.T) *crashfs.Remote {
	t.Helper()
	r, err := crashfs.StartRemote("TestCrashFSServer", t.TempDir())
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("FUSE IS NOT AVAILABLE: this test needs /dev/fuse and the right to mount (root): %v", err)
		}
		t.Skipf("FUSE IS NOT AVAILABLE, test skipped (it fails in CI): %v", err)
	}
	t.Cleanup(func() {
		if err := r.Close(); err != nil {
			t.Errorf("crashfs: %v", err)
		}
	})
	return r
}
