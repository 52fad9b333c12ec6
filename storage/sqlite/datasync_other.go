//go:build !linux

package sqlite

import "os"

// datasync flushes the file to disk (fsync).
func datasync(f *os.File) error { return f.Sync() }
