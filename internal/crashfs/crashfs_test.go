package crashfs

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

// mount mounts f on a temporary directory for the test, or skips the test
// where FUSE cannot be mounted, except in CI (CI=true), where it fails.
func mount(t *testing.T, f *FS) string {
	t.Helper()
	dir := t.TempDir()
	err := Available()
	if err == nil {
		err = f.Mount(dir)
	}
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("FUSE is needed for this test and cannot be mounted: %v", err)
		}
		t.Skipf("FUSE cannot be mounted here (the test fails in CI): %v", err)
	}
	t.Cleanup(func() { f.Unmount() })
	return dir
}

func write(t *testing.T, path string, data []byte, off int64, sync bool) {
	t.Helper()
	fh, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer fh.Close()
	if _, err := fh.WriteAt(data, off); err != nil {
		t.Fatal(err)
	}
	if sync {
		if err := fh.Sync(); err != nil {
			t.Fatal(err)
		}
	}
}

func syncDir(t *testing.T, dir string) {
	t.Helper()
	d, err := os.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		t.Fatal(err)
	}
}

// Only what was fsynced survives: the content and size of a file at its
// last fsync, and the names of the directory at its last fsync.
func TestDurableKeepsOnlySynced(t *testing.T) {
	f := New(map[string][]byte{"old": []byte("old content")})
	dir := mount(t, f)

	write(t, filepath.Join(dir, "a"), []byte("hello"), 0, true)
	syncDir(t, dir)                                               // "a" is named durably
	write(t, filepath.Join(dir, "a"), []byte(" world"), 5, false) // not synced: lost with its size
	write(t, filepath.Join(dir, "b"), []byte("synced, unnamed"), 0, true)
	if err := os.Truncate(filepath.Join(dir, "old"), 3); err != nil { // not synced: lost
		t.Fatal(err)
	}
	got, err := os.ReadFile(filepath.Join(dir, "a"))
	if err != nil || string(got) != "hello world" {
		t.Fatalf("read a: %q, %v", got, err)
	}
	if err := f.Unmount(); err != nil {
		t.Fatal(err)
	}
	d := f.Durable()
	if string(d["a"]) != "hello" {
		t.Errorf("durable a = %q, want %q", d["a"], "hello")
	}
	if _, ok := d["b"]; ok {
		t.Errorf("b survived although its directory was never synced after it was created")
	}
	if string(d["old"]) != "old content" {
		t.Errorf("durable old = %q, want the content before the unsynced truncate", d["old"])
	}
}

// A file shrunk and grown again reads zeros where it grew, before and
// after a sync; a removed file stays until the directory is synced.
func TestDurableSizeChangesAndUnlink(t *testing.T) {
	f := New(map[string][]byte{"x": bytes.Repeat([]byte{7}, 10000)})
	dir := mount(t, f)
	p := filepath.Join(dir, "x")
	if err := os.Truncate(p, 100); err != nil {
		t.Fatal(err)
	}
	write(t, p, []byte{1}, 9000, true)
	want := make([]byte, 9001)
	copy(want, bytes.Repeat([]byte{7}, 100))
	want[9000] = 1
	if got, _ := os.ReadFile(p); !bytes.Equal(got, want) {
		t.Fatalf("read after shrink and grow: wrong content (len %d)", len(got))
	}
	if err := os.Remove(p); err != nil {
		t.Fatal(err)
	}
	if err := f.Unmount(); err != nil {
		t.Fatal(err)
	}
	if got := f.Durable()["x"]; !bytes.Equal(got, want) {
		t.Fatalf("durable x: wrong content (len %d), or removed without a directory sync", len(got))
	}
}

// A full file system refuses writes that grow the files with ENOSPC, and
// takes them again once there is room.
func TestCapacity(t *testing.T) {
	f := New(nil)
	dir := mount(t, f)
	f.SetCapacity(8192)
	p := filepath.Join(dir, "x")
	write(t, p, make([]byte, 8000), 0, false)
	fh, err := os.OpenFile(p, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer fh.Close()
	if _, err := fh.WriteAt(make([]byte, 500), 8000); !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("write past the capacity: %v, want ENOSPC", err)
	}
	if _, err := fh.WriteAt([]byte("in place"), 0); err != nil {
		t.Fatalf("overwrite on a full file system: %v", err)
	}
	f.SetCapacity(0)
	if _, err := fh.WriteAt(make([]byte, 500), 8000); err != nil {
		t.Fatalf("write after space was freed: %v", err)
	}
	f.FailSyncs(syscall.EIO)
	if err := fh.Sync(); !errors.Is(err, syscall.EIO) {
		t.Fatalf("fsync with failing syncs: %v, want EIO", err)
	}
}

// Torn keeps what keep picks of what was not synced: everything, or
// nothing (which is Durable).
func TestTorn(t *testing.T) {
	f := New(map[string][]byte{"gone": []byte("x")})
	dir := mount(t, f)
	write(t, filepath.Join(dir, "a"), bytes.Repeat([]byte{1}, 3*pageSize), 0, true)
	syncDir(t, dir)
	write(t, filepath.Join(dir, "a"), bytes.Repeat([]byte{2}, 2*pageSize), pageSize, false)
	write(t, filepath.Join(dir, "new"), []byte("n"), 0, false)
	if err := os.Remove(filepath.Join(dir, "gone")); err != nil {
		t.Fatal(err)
	}
	if err := f.Unmount(); err != nil {
		t.Fatal(err)
	}
	all := f.Torn(func() bool { return true })
	want := append(bytes.Repeat([]byte{1}, pageSize), bytes.Repeat([]byte{2}, 2*pageSize)...)
	if !bytes.Equal(all["a"], want) || string(all["new"]) != "n" || all["gone"] != nil {
		t.Errorf("Torn keeping everything: a %d bytes, new %q, gone %q", len(all["a"]), all["new"], all["gone"])
	}
	none := f.Torn(func() bool { return false })
	if !bytes.Equal(none["a"], bytes.Repeat([]byte{1}, 3*pageSize)) || none["new"] != nil || string(none["gone"]) != "x" {
		t.Errorf("Torn keeping nothing: a %d bytes, new %q, gone %q", len(none["a"]), none["new"], none["gone"])
	}
}

// After a failed fsync, what it was to write is not written by a later
// fsync either, unless it is written again (as Linux behaves).
func TestFailedSyncLosesPages(t *testing.T) {
	f := New(nil)
	dir := mount(t, f)
	p := filepath.Join(dir, "x")
	write(t, p, []byte("aaaa"), 0, true)
	syncDir(t, dir)
	f.FailSyncs(syscall.ENOSPC)
	fh, err := os.OpenFile(p, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer fh.Close()
	if _, err := fh.WriteAt([]byte("bb"), 0); err != nil {
		t.Fatal(err)
	}
	if err := fh.Sync(); !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("fsync: %v, want ENOSPC", err)
	}
	f.FailSyncs(0)
	if err := fh.Sync(); err != nil {
		t.Fatal(err)
	}
	if got := f.Durable()["x"]; string(got) != "aaaa" {
		t.Fatalf("after a failed and a good fsync: %q on disk, want the pages the failed one dropped missing (aaaa)", got)
	}
	if _, err := fh.WriteAt([]byte("bb"), 0); err != nil {
		t.Fatal(err)
	}
	if err := fh.Sync(); err != nil {
		t.Fatal(err)
	}
	if got := f.Durable()["x"]; string(got) != "bbaa" {
		t.Fatalf("written again and synced: %q on disk, want bbaa", got)
	}
}
