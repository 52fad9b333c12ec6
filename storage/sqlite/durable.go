package sqlite

import (
	"cmp"
	"context"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
)

// durableMark is how far the store's committed transactions are durable:
// every transaction numbered up to seq (see Store.committed) is on disk.
type durableMark struct {
	seq atomic.Int64

	mu    sync.Mutex
	err   error         // a failed fsync: nothing after it is known to be durable
	stall error         // an fsync failed for lack of room; cleared once the WAL is rewritten and synced
	wake  chan struct{} // closed and replaced whenever seq advances
}

func newDurableMark() *durableMark {
	return &durableMark{wake: make(chan struct{})}
}

// advance records that the transactions up to seq are durable, or, with
// err, that they may not be.
func (d *durableMark) advance(seq int64, err error) {
	d.mu.Lock()
	if err != nil && d.err == nil {
		d.err = err
	}
	if err == nil && seq > d.seq.Load() {
		d.seq.Store(seq)
	}
	close(d.wake)
	d.wake = make(chan struct{})
	d.mu.Unlock()
}

// stalled records that an fsync failed for lack of room: until recovered,
// a wait for what it was to make durable fails with err at once.
func (d *durableMark) stalled(err error) {
	d.mu.Lock()
	d.stall = err
	close(d.wake)
	d.wake = make(chan struct{})
	d.mu.Unlock()
}

// recovered ends a stall: the transactions up to seq are durable.
func (d *durableMark) recovered(seq int64) {
	d.mu.Lock()
	d.stall = nil
	d.mu.Unlock()
	d.advance(seq, nil)
}

// wait returns once the transactions up to seq are durable.
func (d *durableMark) wait(ctx context.Context, seq int64) error {
	for {
		if d.seq.Load() >= seq {
			return nil
		}
		d.mu.Lock()
		if err := cmp.Or(d.err, d.stall); err != nil {
			d.mu.Unlock()
			return err
		}
		if d.seq.Load() >= seq {
			d.mu.Unlock()
			return nil
		}
		wake := d.wake
		d.mu.Unlock()
		select {
		case <-wake:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// openWAL opens the WAL file for the syncer's fsyncs (and its rewrite after
// an fsync that failed for lack of room, see recoverWAL). The writer connection
// is open and has read the schema, so the file exists and stays (SQLite
// deletes it only when the last connection closes).
func openWAL(path string) (*os.File, error) {
	f, err := os.OpenFile(path+"-wal", os.O_RDWR, 0)
	if err != nil {
		return nil, fmt.Errorf("open the WAL file for syncing: %w", err)
	}
	return f, nil
}

// syncWAL flushes the WAL file to disk (fdatasync where there is one).
func (s *Store) syncWAL() error {
	return datasync(s.wal)
}

// afterRead is deferred by the read methods: a read that succeeded waits
// until every transaction it could have seen is durable, so that a read never
// returns a write whose caller has not been told it is committed. A
// transaction is counted in s.committed before its COMMIT makes it visible
// (see Store.commit), so the number loaded when the read ends covers
// everything the read saw. Without the sync pipeline it returns at once:
// with SQLite's own FULL a COMMIT fsyncs the WAL before it publishes the
// transaction to readers, and NORMAL and OFF promise no durability.
func (s *Store) afterRead(ctx context.Context, err *error) {
	s.waitRead(ctx, err, s.committed.Load())
}

// afterDefinitionRead is afterRead for the reads of event definitions and
// of the bus's subscription generation: they wait only for the
// transactions that wrote definitions or changed a generation, which are
// rare, so the definition lookup every raise makes (and the generation
// read before every bus claim) does not wait for the fsync of whatever
// else is in flight.
func (s *Store) afterDefinitionRead(ctx context.Context, err *error) {
	s.waitRead(ctx, err, s.defsSeq.Load())
}

// waitRead waits, after a read that succeeded, until the transactions up to
// seq are durable; a failure replaces the read's result with an error.
func (s *Store) waitRead(ctx context.Context, err *error, seq int64) {
	if *err != nil || s.syncq == nil {
		return
	}
	if e := s.durable.wait(ctx, seq); e != nil {
		*err = fmt.Errorf("sqlite: wait for the data read to be durable: %w", e)
	}
}
