package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"time"

	"modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"
)

// checkpointEvery is the least time between two background checkpoints.
const checkpointEvery = 250 * time.Millisecond

// checkpointLoop copies the WAL back into the database file on a connection
// of its own, so that the writer never does it. SQLite's automatic
// checkpoint (off on the writer connection) runs inside the COMMIT that
// crosses 1,000 WAL pages: it writes the pages to the database file and
// fsyncs it while every other write waits, a stall of many milliseconds
// each few hundred commits under load. A PASSIVE checkpoint here runs
// beside the writer (it copies what no reader still needs and never blocks
// a writer); the writer restarts the WAL from its beginning once a
// checkpoint has copied all of it.
//
// It runs after commits (kick), at most every checkpointEvery, and once
// more when the store closes.
func (s *Store) checkpointLoop(db *sql.DB) {
	defer close(s.ckptDone)
	var hold int64
	run := func() {
		s.ckptMu.Lock()
		defer s.ckptMu.Unlock()
		// While the sync pipeline may not have seen an fsync failure that
		// this connection's last checkpoint saw (each file descriptor gets
		// a writeback error once), the WAL may hold pages the OS dropped:
		// no checkpoint copies them into the database until the syncer has
		// synced (or, on a stall, checked and rewritten) what was committed
		// then. See recoverWAL.
		if s.stalled.Load() != nil || s.durable.seq.Load() < hold || s.ckptOff.Load() {
			return
		}
		// An error (SQLITE_BUSY from another process's checkpoint, say)
		// only means this one is skipped: the next kick tries again.
		_, err := db.ExecContext(context.Background(), "PRAGMA wal_checkpoint(PASSIVE)")
		var se *sqlite.Error
		if s.syncq != nil && errors.As(err, &se) && (se.Code()&0xff == sqlite3.SQLITE_IOERR || se.Code()&0xff == sqlite3.SQLITE_FULL) {
			hold = s.committed.Load()
		}
	}
	for {
		select {
		case <-s.ckptKick:
		case <-s.closing:
			return
		}
		run()
		select {
		case <-time.After(checkpointEvery):
		case <-s.closing:
			return
		}
	}
}

// kickCheckpoint tells the checkpointer that the WAL has grown.
func (s *Store) kickCheckpoint() {
	if s.ckptKick == nil {
		return
	}
	select {
	case s.ckptKick <- struct{}{}:
	default:
	}
}
