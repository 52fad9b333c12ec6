// Package crashfs is a FUSE file system, held in memory, that models what a
// power loss leaves on a disk: the tests of Herald's durability mount it,
// run a workload on it in another process, kill that process, and look at
// what a power loss at that moment would have kept (Durable).
//
// The model is the strict POSIX one, which no real file system is weaker
// than:
//
//   - A write (or a size change: ftruncate, a write past the end,
//     fallocate) is seen at once by every reader, and kept by a power loss
//     only once an fsync or fdatasync of that file has finished after it.
//     Both sync the file's content and size; neither syncs its name.
//   - A new file, a removed file (and a rename, which the file system does
//     not offer) is kept only once its directory has been fsynced after it.
//     A file whose name is not durable is lost with everything in it, even
//     if the file itself was synced.
//   - Nothing else is durable: whatever was not synced is dropped whole.
//
// The file system is one flat directory of regular files (what SQLite
// needs). It can also run out of space on demand (SetCapacity): writes
// that would grow the files past the capacity fail with ENOSPC, as on a
// full disk, and fsyncs can be made to fail (FailSyncs).
//
// Mounting needs /dev/fuse and the right to mount (root): Mount mounts with
// mount(2) directly, no fusermount.
package crashfs

import (
	"context"
	"fmt"
	"os"
	"slices"
	"sync"
	"syscall"
	"time"

	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
)

// pageSize is the unit in which unsynced writes are tracked.
const pageSize = 4096

// FS is the file system's state. It outlives its mounts: mount it, let a
// process work on it, unmount it, and read what survives with Durable.
type FS struct {
	mu       sync.Mutex
	dir      string           // where it is mounted
	files    map[string]*file // the directory as it is now
	durable  map[string]*file // the directory as a power loss would leave it
	nextIno  uint64
	capacity int64         // 0: unlimited
	syncErr  syscall.Errno // non-zero: every fsync fails with it
	syncs    int64

	server *fuse.Server
}

type file struct {
	ino    uint64
	data   []byte             // what reads see
	synced []byte             // what a power loss keeps
	dirty  map[int64]struct{} // pages written since the last sync
}

// New returns a file system holding files (name to content), all durable.
func New(files map[string][]byte) *FS {
	f := &FS{files: map[string]*file{}, durable: map[string]*file{}, nextIno: 2}
	for name, data := range files {
		nf := f.newFile()
		nf.data = slices.Clone(data)
		nf.synced = slices.Clone(data)
		f.files[name] = nf
		f.durable[name] = nf
	}
	return f
}

func (f *FS) newFile() *file {
	f.nextIno++
	return &file{ino: f.nextIno, dirty: map[int64]struct{}{}}
}

// Mount mounts the file system on dir (an existing, empty directory). It
// fails if FUSE is not available.
func (f *FS) Mount(dir string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.server != nil {
		return fmt.Errorf("crashfs: already mounted")
	}
	zero := time.Duration(0)
	srv, err := fs.Mount(dir, &dirNode{fs: f}, &fs.Options{
		MountOptions: fuse.MountOptions{
			DirectMountStrict: true,
			FsName:            "crashfs",
			Name:              "crashfs",
			// Let the kernel keep the POSIX locks SQLite takes (the
			// file system is used from one machine).
			EnableLocks: false,
		},
		EntryTimeout:    &zero,
		AttrTimeout:     &zero,
		NegativeTimeout: &zero,
	})
	if err != nil {
		return fmt.Errorf("crashfs: mount %s: %w", dir, err)
	}
	f.server, f.dir = srv, dir
	return nil
}

// Unmount unmounts the file system. Every process using it must have
// closed its files (or died).
func (f *FS) Unmount() error {
	f.mu.Lock()
	srv, dir := f.server, f.dir
	f.server = nil
	f.mu.Unlock()
	if srv == nil {
		return nil
	}
	var err error
	for range 50 { // a dead process's files are released asynchronously
		if err = srv.Unmount(); err == nil {
			srv.Wait()
			return nil
		}
		time.Sleep(20 * time.Millisecond)
	}
	// Still busy: detach it, so that nothing stays mounted; the server
	// serves what is still open until it is closed.
	if derr := syscall.Unmount(dir, syscall.MNT_DETACH); derr == nil {
		return fmt.Errorf("crashfs: unmount: %w (detached instead)", err)
	}
	return fmt.Errorf("crashfs: unmount: %w", err)
}

// Durable returns the files a power loss now would leave: the names the
// last fsync of the directory recorded, with the content each had at its
// last fsync.
func (f *FS) Durable() map[string][]byte {
	return f.Torn(func() bool { return false })
}

// Torn is Durable for a disk that wrote some of what was not synced before
// the power went: keep decides, for each page written since its file's last
// sync, each file's size change and each name created or removed since the
// directory's last sync, whether the disk kept it. keep always false is
// Durable.
func (f *FS) Torn(keep func() bool) map[string][]byte {
	f.mu.Lock()
	defer f.mu.Unlock()
	names := map[string]*file{}
	for name, nf := range f.durable {
		if cur, ok := f.files[name]; ok && cur == nf || !keep() {
			names[name] = nf
		}
	}
	for name, nf := range f.files {
		if f.durable[name] != nf && keep() {
			names[name] = nf
		}
	}
	out := make(map[string][]byte, len(names))
	for name, nf := range names {
		size := int64(len(nf.synced))
		if size != int64(len(nf.data)) && keep() {
			size = int64(len(nf.data))
		}
		b := make([]byte, size)
		copy(b, nf.synced)
		for p := range nf.dirty {
			if lo := p * pageSize; lo < size && lo < int64(len(nf.data)) && keep() {
				hi := min(lo+pageSize, size)
				copy(b[lo:hi], nf.data[lo:min(hi, int64(len(nf.data)))])
			}
		}
		out[name] = b
	}
	return out
}

// SetCapacity limits the space the files may take (the sum of their
// sizes) to n bytes; 0 removes the limit. A write that would pass it fails
// with ENOSPC.
func (f *FS) SetCapacity(n int64) {
	f.mu.Lock()
	f.capacity = n
	f.mu.Unlock()
}

// Used returns the space the files take now.
func (f *FS) Used() int64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.used()
}

func (f *FS) used() int64 {
	var n int64
	for _, nf := range f.files {
		n += int64(len(nf.data))
	}
	return n
}

// FailSyncs makes every fsync fail with errno (which 0 ends). What a failed
// fsync was to write is handled as Linux does after a writeback error: it
// stays readable but is marked clean, so a later fsync that succeeds does
// not write it either: it is lost at the next power loss unless written
// again.
func (f *FS) FailSyncs(errno syscall.Errno) {
	f.mu.Lock()
	f.syncErr = errno
	f.mu.Unlock()
}

// Syncs returns the number of successful fsyncs so far.
func (f *FS) Syncs() int64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.syncs
}

// grow makes nf size bytes long (zero-filled), if the capacity allows.
func (f *FS) grow(nf *file, size int64) syscall.Errno {
	if size <= int64(len(nf.data)) {
		return 0
	}
	if f.capacity > 0 && f.used()+size-int64(len(nf.data)) > f.capacity {
		return syscall.ENOSPC
	}
	nf.resize(size)
	return 0
}

// resize makes nf size bytes long: what it gains reads as zeros. The pages
// between the old and the new end are marked dirty, so that a sync writes
// them (zeros, or nothing past the end) over what was synced before.
func (nf *file) resize(size int64) {
	old := int64(len(nf.data))
	switch {
	case size > int64(cap(nf.data)):
		nd := make([]byte, size, max(size, 2*int64(cap(nf.data))))
		copy(nd, nf.data)
		nf.data = nd
	case size > old:
		nf.data = nf.data[:size]
		clear(nf.data[old:])
	default:
		nf.data = nf.data[:size]
	}
	nf.markDirty(min(old, size), max(old, size)-min(old, size))
}

func (nf *file) markDirty(off, n int64) {
	for p := off / pageSize; p*pageSize < off+n; p++ {
		nf.dirty[p] = struct{}{}
	}
}

// sync makes nf's content and size durable.
func (nf *file) sync() {
	size := int64(len(nf.data))
	switch old := int64(len(nf.synced)); {
	case size > int64(cap(nf.synced)):
		ns := make([]byte, size, max(size, 2*int64(cap(nf.synced))))
		copy(ns, nf.synced)
		nf.synced = ns
	case size > old:
		nf.synced = nf.synced[:size]
		clear(nf.synced[old:])
	default:
		nf.synced = nf.synced[:size]
	}
	for p := range nf.dirty {
		lo := p * pageSize
		if lo >= size {
			continue
		}
		hi := min(lo+pageSize, size)
		copy(nf.synced[lo:hi], nf.data[lo:hi])
	}
	clear(nf.dirty)
}

// dirNode is the root directory.
type dirNode struct {
	fs.Inode
	fs *FS
}

var (
	_ fs.NodeLookuper  = (*dirNode)(nil)
	_ fs.NodeReaddirer = (*dirNode)(nil)
	_ fs.NodeCreater   = (*dirNode)(nil)
	_ fs.NodeUnlinker  = (*dirNode)(nil)
	_ fs.NodeFsyncer   = (*dirNode)(nil)
	_ fs.NodeGetattrer = (*dirNode)(nil)
	_ fs.NodeStatfser  = (*dirNode)(nil)
)

func (d *dirNode) Getattr(_ context.Context, _ fs.FileHandle, out *fuse.AttrOut) syscall.Errno {
	out.Mode = syscall.S_IFDIR | 0o755
	out.Ino = 1
	return 0
}

func (d *dirNode) Statfs(_ context.Context, out *fuse.StatfsOut) syscall.Errno {
	d.fs.mu.Lock()
	defer d.fs.mu.Unlock()
	capacity := d.fs.capacity
	if capacity == 0 {
		capacity = 1 << 40
	}
	out.Bsize = pageSize
	out.Frsize = pageSize
	out.Blocks = uint64(capacity / pageSize)
	free := max(capacity-d.fs.used(), 0) / pageSize
	out.Bfree, out.Bavail = uint64(free), uint64(free)
	out.NameLen = 255
	return 0
}

func (d *dirNode) child(ctx context.Context, nf *file, out *fuse.EntryOut) *fs.Inode {
	out.Ino = nf.ino
	out.Mode = syscall.S_IFREG | 0o644
	out.Size = uint64(len(nf.data))
	return d.NewInode(ctx, &fileNode{fs: d.fs, f: nf}, fs.StableAttr{Mode: syscall.S_IFREG, Ino: nf.ino})
}

func (d *dirNode) Lookup(ctx context.Context, name string, out *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	d.fs.mu.Lock()
	defer d.fs.mu.Unlock()
	nf, ok := d.fs.files[name]
	if !ok {
		return nil, syscall.ENOENT
	}
	return d.child(ctx, nf, out), 0
}

func (d *dirNode) Readdir(context.Context) (fs.DirStream, syscall.Errno) {
	d.fs.mu.Lock()
	defer d.fs.mu.Unlock()
	names := make([]string, 0, len(d.fs.files))
	for name := range d.fs.files {
		names = append(names, name)
	}
	slices.Sort(names)
	entries := make([]fuse.DirEntry, len(names))
	for i, name := range names {
		entries[i] = fuse.DirEntry{Name: name, Mode: syscall.S_IFREG, Ino: d.fs.files[name].ino}
	}
	return fs.NewListDirStream(entries), 0
}

func (d *dirNode) Create(ctx context.Context, name string, flags, mode uint32, out *fuse.EntryOut) (*fs.Inode, fs.FileHandle, uint32, syscall.Errno) {
	d.fs.mu.Lock()
	defer d.fs.mu.Unlock()
	nf, ok := d.fs.files[name]
	if ok && flags&syscall.O_EXCL != 0 {
		return nil, nil, 0, syscall.EEXIST
	}
	if !ok {
		nf = d.fs.newFile()
		d.fs.files[name] = nf
	} else if flags&syscall.O_TRUNC != 0 {
		nf.resize(0)
	}
	return d.child(ctx, nf, out), nil, 0, 0
}

func (d *dirNode) Unlink(_ context.Context, name string) syscall.Errno {
	d.fs.mu.Lock()
	defer d.fs.mu.Unlock()
	if _, ok := d.fs.files[name]; !ok {
		return syscall.ENOENT
	}
	delete(d.fs.files, name)
	return 0
}

// Fsync of the directory makes its names durable.
func (d *dirNode) Fsync(context.Context, fs.FileHandle, uint32) syscall.Errno {
	d.fs.mu.Lock()
	defer d.fs.mu.Unlock()
	if d.fs.syncErr != 0 {
		return d.fs.syncErr
	}
	d.fs.durable = make(map[string]*file, len(d.fs.files))
	for name, nf := range d.fs.files {
		d.fs.durable[name] = nf
	}
	d.fs.syncs++
	return 0
}

// fileNode is a regular file.
type fileNode struct {
	fs.Inode
	fs *FS
	f  *file
}

var (
	_ fs.NodeOpener    = (*fileNode)(nil)
	_ fs.NodeReader    = (*fileNode)(nil)
	_ fs.NodeWriter    = (*fileNode)(nil)
	_ fs.NodeGetattrer = (*fileNode)(nil)
	_ fs.NodeSetattrer = (*fileNode)(nil)
	_ fs.NodeFsyncer   = (*fileNode)(nil)
	_ fs.NodeFlusher   = (*fileNode)(nil)
	_ fs.NodeAllocater = (*fileNode)(nil)
)

func (n *fileNode) Open(context.Context, uint32) (fs.FileHandle, uint32, syscall.Errno) {
	return nil, 0, 0
}

func (n *fileNode) Getattr(_ context.Context, _ fs.FileHandle, out *fuse.AttrOut) syscall.Errno {
	n.fs.mu.Lock()
	defer n.fs.mu.Unlock()
	out.Ino = n.f.ino
	out.Mode = syscall.S_IFREG | 0o644
	out.Nlink = 1
	out.Size = uint64(len(n.f.data))
	out.Blocks = (out.Size + 511) / 512
	return 0
}

func (n *fileNode) Setattr(_ context.Context, _ fs.FileHandle, in *fuse.SetAttrIn, out *fuse.AttrOut) syscall.Errno {
	n.fs.mu.Lock()
	defer n.fs.mu.Unlock()
	if size, ok := in.GetSize(); ok {
		if int64(size) > int64(len(n.f.data)) {
			if e := n.fs.grow(n.f, int64(size)); e != 0 {
				return e
			}
		} else {
			n.f.resize(int64(size))
		}
	}
	out.Ino = n.f.ino
	out.Mode = syscall.S_IFREG | 0o644
	out.Size = uint64(len(n.f.data))
	return 0
}

func (n *fileNode) Read(_ context.Context, _ fs.FileHandle, dest []byte, off int64) (fuse.ReadResult, syscall.Errno) {
	n.fs.mu.Lock()
	defer n.fs.mu.Unlock()
	if off >= int64(len(n.f.data)) {
		return fuse.ReadResultData(nil), 0
	}
	end := min(off+int64(len(dest)), int64(len(n.f.data)))
	copy(dest, n.f.data[off:end])
	return fuse.ReadResultData(dest[:end-off]), 0
}

func (n *fileNode) Write(_ context.Context, _ fs.FileHandle, data []byte, off int64) (uint32, syscall.Errno) {
	n.fs.mu.Lock()
	defer n.fs.mu.Unlock()
	if e := n.fs.grow(n.f, off+int64(len(data))); e != 0 {
		return 0, e
	}
	copy(n.f.data[off:], data)
	n.f.markDirty(off, int64(len(data)))
	return uint32(len(data)), 0
}

func (n *fileNode) Allocate(_ context.Context, _ fs.FileHandle, off, size uint64, mode uint32) syscall.Errno {
	if mode&^uint32(1) != 0 { // only plain allocation and FALLOC_FL_KEEP_SIZE
		return syscall.EOPNOTSUPP
	}
	n.fs.mu.Lock()
	defer n.fs.mu.Unlock()
	if mode&1 != 0 { // KEEP_SIZE: space only, which this model does not reserve
		return 0
	}
	return n.fs.grow(n.f, int64(off+size))
}

// Fsync (and fdatasync) makes the file's content and size durable, not
// its name.
func (n *fileNode) Fsync(context.Context, fs.FileHandle, uint32) syscall.Errno {
	n.fs.mu.Lock()
	defer n.fs.mu.Unlock()
	if n.fs.syncErr != 0 {
		// As Linux does after a writeback error: the pages stay readable
		// but are marked clean, so no later fsync writes them.
		clear(n.f.dirty)
		return n.fs.syncErr
	}
	n.f.sync()
	n.fs.syncs++
	return 0
}

func (n *fileNode) Flush(context.Context, fs.FileHandle) syscall.Errno { return 0 }

// Available reports whether FUSE can be mounted here: /dev/fuse exists and
// is usable. It does not try a mount.
func Available() error {
	f, err := os.OpenFile("/dev/fuse", os.O_RDWR, 0)
	if err != nil {
		return fmt.Errorf("crashfs: FUSE unavailable: %w", err)
	}
	return f.Close()
}
