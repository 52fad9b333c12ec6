package sqlite

import (
	"os"
	"testing"

	"github.com/heraldwf/herald/internal/crashfs"
)

// TestCrashFSServer is the crashfs server process of the tests that run a
// store on crashfs in their own process (see crashfs.StartRemote); run
// otherwise, it does nothing.
func TestCrashFSServer(t *testing.T) {
	if _, err := crashfs.ServeChild(); err != nil {
		t.Fatal(err)
	}
}

// remoteCrashFS mounts an empty crashfs, served by a child process, on a
// new directory for the test, or skips the test where FUSE cannot be
// mounted, except in CI (CI=true), where it fails.
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
