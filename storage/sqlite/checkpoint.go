package sqlite

import (
	"context"
	"database/sql"
	"time"
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
	run := func() {
		// An error (SQLITE_BUSY from another process's checkpoint, say)
		// only means this one is skipped: the next kick tries again.
		_, _ = db.ExecContext(context.Background(), "PRAGMA wal_checkpoint(PASSIVE)")
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
