package sqlite

import (
	"os"
	"syscall"
)

// datasync is fdatasync(2): the file's data and the metadata needed to read
// it back (its size), as SQLite itself uses on Linux.
func datasync(f *os.File) error {
	rc, err := f.SyscallConn()
	if err != nil {
		return err
	}
	var serr error
	if err := rc.Control(func(fd uintptr) {
		for {
			serr = syscall.Fdatasync(int(fd))
			if serr != syscall.EINTR {
				return
			}
		}
	}); err != nil {
		return err
	}
	return serr
}
