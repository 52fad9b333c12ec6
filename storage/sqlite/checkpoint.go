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

// restartFrames is the WAL length (in frames, a page each) from which the
// WAL is made to restart from its beginning (see checkpointLoop): 16,384
// frames are 64 MiB with 4 KiB pages. A variable for tests.
var restartFrames int64 = 16384

// The WAL restart (see checkpointLoop).
const (
	// lastFrames bounds the frames left for the writer's last checkpoint:
	// the checkpointer asks for it only once a checkpoint beside the writer
	// has copied fewer than this, so that it is short.
	lastFrames = 256
	// catchUpPasses bounds the checkpoints run beside the writer to get
	// there before the checkpointer gives up until its next round.
	catchUpPasses = 4
	// lastWait is how long the writer waits for a moment with no write
	// waiting before it runs the last checkpoint all the same.
	lastWait = 100 * time.Millisecond
)

// checkpointLoop copies the WAL back into the database file on a connection
// of its own, so that the writer never does it. SQLite's automatic
// checkpoint (off on the writer connection) runs inside the COMMIT that
// crosses 1,000 WAL pages: it writes the pages to the database file and
// fsyncs it while every other write waits, a stall of many milliseconds
// each few hundred commits under load. A PASSIVE checkpoint here runs
// beside the writer (it copies what no reader still needs and never blocks
// a writer).
//
// The WAL restarts from its beginning in the first write transaction that
// begins when the whole WAL has been copied and no reader is in it (SQLite
// does it), but a checkpoint beside a writer that never stops never copies
// all of it: the writer appends while it copies. Under steady load the WAL
// then grows without end (hundreds of MiB in a benchmark's minute), and
// every commit extends the file, so that each fsync of the WAL commits the
// file system's journal too, which makes commits slower and their latency
// uneven. So once the WAL holds restartFrames frames, the checkpointer
// catches up beside the writer (up to catchUpPasses checkpoints, until one
// copies fewer than lastFrames frames) and then asks the writer for the
// last checkpoint (lastCheckpoint): the writer runs it between two
// batches, at a moment when no write waits (or after lastWait), so that
// the next transaction finds the WAL copied and restarts it; from then on
// the WAL file is written over in place. Durability is SQLite's own: a
// checkpoint fsyncs the WAL before it copies and the database file before
// it marks the WAL copied, and only then may the WAL restart.
//
// It runs after commits (kick), at most every checkpointEvery, and once
// more when the store closes.
func (s *Store) checkpointLoop(db *sql.DB) {
	defer close(s.ckptDone)
	pass := func() (logN, done int64) {
		s.ckptMu.Lock()
		defer s.ckptMu.Unlock()
		return s.walCheckpoint(func() (int64, int64, int64, error) {
			var busy, logN, done int64
			err := db.QueryRowContext(context.Background(), "PRAGMA wal_checkpoint(PASSIVE)").Scan(&busy, &logN, &done)
			return busy, logN, done, err
		})
	}
	run := func() {
		if s.ckptLast.Load() != 0 {
			return // the writer has not run the last one asked for yet
		}
		logN, done := pass()
		if logN < restartFrames || done < 0 {
			return
		}
		for range catchUpPasses {
			before := done
			if logN, done = pass(); done < 0 || logN < restartFrames {
				return // skipped, or the WAL restarted meanwhile
			}
			if done-before < lastFrames {
				break
			}
		}
		if logN-done > lastFrames {
			return // readers hold the rest, or the writer outpaced the copy: next round
		}
		s.ckptLast.Store(time.Now().UnixNano())
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

// walCheckpoint runs one checkpoint through run, which returns the three
// columns of PRAGMA wal_checkpoint, and returns the WAL's length in frames
// when it began and how many of them are copied (-1, -1 if it did not run).
// The caller holds ckptMu.
func (s *Store) walCheckpoint(run func() (busy, logN, done int64, err error)) (logN, done int64) {
	// While the sync pipeline may not have seen an fsync failure that
	// a checkpoint saw (each file descriptor gets a writeback error once),
	// the WAL may hold pages the OS dropped: no checkpoint copies them into
	// the database until the syncer has synced (or, on a stall, checked and
	// rewritten) what was committed then. See recoverWAL.
	if s.stalled.Load() != nil || s.durable.seq.Load() < s.ckptHold.Load() || s.ckptOff.Load() {
		return -1, -1
	}
	// An error (SQLITE_BUSY from another process's checkpoint, say)
	// only means this one is skipped: the next kick tries again.
	busy, logN, done, err := run()
	var se *sqlite.Error
	if s.syncq != nil && errors.As(err, &se) && (se.Code()&0xff == sqlite3.SQLITE_IOERR || se.Code()&0xff == sqlite3.SQLITE_FULL) {
		s.ckptHold.Store(s.committed.Load())
	}
	if err != nil || busy != 0 {
		return -1, -1
	}
	return logN, done
}

// lastCheckpoint is run by the writer between two batches when the
// checkpointer has asked for the last checkpoint before a WAL restart (see
// checkpointLoop): if idle (no write is waiting) or the request is older
// than lastWait, it checkpoints on its own connection what the
// checkpointer left, so that its next transaction restarts the WAL.
func (s *Store) lastCheckpoint(idle bool) {
	at := s.ckptLast.Load()
	if at == 0 || (!idle && time.Since(time.Unix(0, at)) < lastWait) {
		return
	}
	if !s.ckptMu.TryLock() {
		return // a checkpoint runs: try again after the next batch
	}
	defer s.ckptMu.Unlock()
	s.ckptLast.Store(0)
	began := time.Now()
	s.walCheckpoint(func() (busy, logN, done int64, err error) {
		r, err := s.wc.query("PRAGMA wal_checkpoint(PASSIVE)", nil)
		err = wrow{rows: r, err: err}.Scan(&busy, &logN, &done)
		return busy, logN, done, err
	})
	s.ckptLasts.Add(1)
	s.ckptLastTime.Add(int64(time.Since(began)))
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
