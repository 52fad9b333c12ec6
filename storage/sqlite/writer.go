package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"syscall"
	"time"

	"modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"

	"github.com/heraldwf/herald/heraldtype"
	"github.com/heraldwf/herald/storage"
	"github.com/heraldwf/herald/storage/internal/backend"
)

// writeReq is one write call queued to the writer goroutine. fn runs inside
// a transaction (possibly shared with other calls, inside its own savepoint)
// and must only read and write through the wtx it is given. fn may run more
// than once (if a shared transaction fails, each call is re-run alone), so it
// must assign its results rather than accumulate them.
type writeReq struct {
	ctx  context.Context
	fn   func(*wtx) error
	done chan error // buffered(1): the writer never blocks on it

	finished bool // writer-owned: done has been sent
	notify   []wakeup
	defs     bool

	// early: answer as soon as the transaction has committed, before it is
	// durable (see writeEarly).
	early bool
	// committed, if set, is called on the writer once the request's
	// transaction (number seq) has committed, before it is durable and
	// before the request is answered. It must not block.
	committed func(seq int64)
}

// wtx is the writer's view of the transaction a request runs in.
type wtx struct {
	c      *wconn
	ctx    context.Context
	notify []wakeup // wake-ups to send once the transaction is durable
	defs   bool     // the request wrote event definitions or changed a bus generation (see Store.defsSeq)
}

func (w *wtx) exec(q string, args ...any) (sql.Result, error) {
	return w.c.exec(q, args)
}

func (w *wtx) query(q string, args ...any) (rowsIter, error) {
	r, err := w.c.query(q, args)
	if err != nil {
		return nil, err
	}
	return r, nil
}

func (w *wtx) queryRow(q string, args ...any) scanner {
	r, err := w.c.query(q, args)
	return wrow{rows: r, err: err}
}

// QueryContext makes wtx a querier. ctx is ignored: statements of a write
// run to completion (the caller's context was checked before fn ran).
func (w *wtx) QueryContext(_ context.Context, q string, args ...any) (rowsIter, error) {
	return w.query(q, args...)
}

// QueryRowContext makes wtx a querier; see QueryContext.
func (w *wtx) QueryRowContext(_ context.Context, q string, args ...any) scanner {
	return w.queryRow(q, args...)
}

// wakeup is a Subscribe notification: new work of kinds for tenant.
type wakeup struct {
	tenant string
	kinds  storage.WorkKind
}

// signal schedules a wake-up of every kind for tenant after commit.
func (w *wtx) signal(tenant string) { w.signalKinds(tenant, storage.WorkAll) }

// signalKinds schedules a wake-up of the subscribers to kinds for tenant
// after commit.
func (w *wtx) signalKinds(tenant string, kinds storage.WorkKind) {
	for i := range w.notify {
		if w.notify[i].tenant == tenant {
			w.notify[i].kinds |= kinds
			return
		}
	}
	w.notify = append(w.notify, wakeup{tenant, kinds})
}

// write runs fn in a write transaction on the writer goroutine and returns
// fn's error, or the transaction's. A nil error means fn's writes are
// committed; any error means none of them are. If ctx ends before the
// writer starts fn, fn does not run and ctx's error is returned.
func (s *Store) write(ctx context.Context, fn func(*wtx) error) error {
	return s.submit(ctx, &writeReq{ctx: ctx, fn: fn, done: make(chan error, 1)})
}

func (s *Store) submit(ctx context.Context, r *writeReq) error {
	if s.closed.Load() {
		return heraldtype.ErrClosed
	}
	if err := s.broken.Load(); err != nil {
		return *err
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	select {
	case s.reqs <- r:
	case <-s.closing:
		return heraldtype.ErrClosed
	case <-ctx.Done():
		return ctx.Err()
	}
	// Handed over: the writer answers within the batch it is running, and
	// the answer says whether fn's writes committed, so wait for it even if
	// ctx ends meanwhile.
	return fullErr(<-r.done)
}

// writeUntilRoom is write for the calls that hand back work the runtime
// holds (TurnAbandon, ActivityComplete, ActivityRetry): on a full disk it
// waits for room (see backend.UntilRoom).
func (s *Store) writeUntilRoom(ctx context.Context, fn func(*wtx) error) error {
	return backend.UntilRoom(ctx, s.closing, func() error { return s.write(ctx, fn) })
}

// roomRetry bounds how often a stalled store tries to recover (endStall).
const roomRetry = backend.RoomRetry

// fullErr marks the error of a write that failed for want of room (a full
// disk or quota: SQLITE_FULL, ENOSPC, EDQUOT) with heraldtype.ErrStorageFull.
func fullErr(err error) error {
	if err == nil || errors.Is(err, heraldtype.ErrStorageFull) || !isFull(err) {
		return err
	}
	return fmt.Errorf("%w (%w)", err, heraldtype.ErrStorageFull)
}

func isFull(err error) bool {
	var se *sqlite.Error
	if errors.As(err, &se) && se.Code()&0xff == sqlite3.SQLITE_FULL {
		return true
	}
	return errors.Is(err, syscall.ENOSPC) || errors.Is(err, syscall.EDQUOT)
}

// writeEarly is write for a call that may be answered before its
// transaction is durable: TurnClaim. A claim lost to a power loss costs
// nothing (its lock token then fails with ErrLeaseLost, and the work is
// claimed again), and everything a turn produces goes through TurnCommit,
// which is answered only once durable, and with it every transaction
// before it (the WAL is replayed as a prefix). Without the sync pipeline it
// is write.
func (s *Store) writeEarly(ctx context.Context, fn func(*wtx) error) error {
	return s.submit(ctx, &writeReq{ctx: ctx, fn: fn, done: make(chan error, 1), early: true})
}

// writerLoop is the single writer goroutine: it takes one request, adds the
// requests already waiting (up to maxBatch) and runs them as one batch. It
// closes the writer connection when the store closes.
func (s *Store) writerLoop() {
	defer close(s.writerDone)
	defer func() {
		if s.syncq != nil {
			close(s.syncq) // the syncer answers what it holds, then stops
			<-s.syncDone
		}
		s.wcloseErr = s.wc.close()
	}()
	batch := make([]*writeReq, 0, s.cfg.maxBatch)
	for {
		var first *writeReq
		if s.ckptLast.Load() != 0 {
			// The checkpointer asks for the last checkpoint before a WAL
			// restart: run it now if no write waits.
			select {
			case first = <-s.reqs:
				s.lastCheckpoint(false)
			default:
				s.lastCheckpoint(true)
			}
		}
		if first == nil {
			select {
			case first = <-s.reqs:
			case <-s.closing:
				return
			}
		}
		batch = append(batch[:0], first)
		if len(s.reqs) == 0 {
			// Nothing else waits yet: give the goroutines that are about
			// to write (callers just answered by the syncer, woken
			// together) one turn of the scheduler to hand in their
			// requests, so they share this transaction.
			runtime.Gosched()
		}
	fill:
		for len(batch) < s.cfg.maxBatch {
			select {
			case r := <-s.reqs:
				batch = append(batch, r)
			default:
				break fill
			}
		}
		s.runBatch(batch)
		clear(batch)
		s.publishLinger(true)
	}
}

func (s *Store) runBatch(batch []*writeReq) {
	live := batch[:0]
	for _, r := range batch {
		if err := r.ctx.Err(); err != nil {
			r.done <- err
			continue
		}
		live = append(live, r)
	}
	if len(live) > 0 && s.stalled.Load() != nil {
		if err := s.endStall(); err != nil {
			for _, r := range live {
				r.done <- err
			}
			return
		}
	}
	switch len(live) {
	case 0:
		return
	case 1:
		s.runAlone(live[0])
		return
	}
	if s.runGroup(live) {
		return
	}
	// The shared transaction failed as a whole (begin, a savepoint or the
	// commit): nothing of it was written. Re-run each unanswered request in
	// a transaction of its own, so one bad request cannot fail the others.
	for _, r := range live {
		if !r.finished {
			s.runAlone(r)
		}
	}
}

// runAlone runs one request in its own transaction and answers it.
func (s *Store) runAlone(r *writeReq) {
	r.notify = nil
	seq, err := s.runTx(func() (bool, error) {
		w := &wtx{c: s.wc, ctx: context.Background()}
		if err := call(r, w); err != nil {
			return false, err
		}
		r.notify, r.defs = w.notify, w.defs
		return r.defs, nil
	})
	r.finished = true
	if err != nil {
		r.done <- err
		return
	}
	s.commits.Add(1)
	s.writes.Add(1)
	s.acknowledge([]*writeReq{r}, seq)
}

// runTx runs fn in a transaction of its own and commits it; if anything
// fails, the transaction is rolled back. fn reports whether it wrote event
// definitions. runTx returns the transaction's number (see commit).
func (s *Store) runTx(fn func() (defs bool, err error)) (int64, error) {
	c := s.wc
	if err := c.run(c.begin); err != nil {
		return 0, s.txErr("begin", err)
	}
	defs, err := fn()
	if err != nil {
		c.run(c.rollback)
		return 0, err
	}
	seq, err := s.commit(defs)
	if err != nil {
		c.run(c.rollback) // a failed COMMIT can leave the transaction open
		return 0, s.txErr("commit", err)
	}
	return seq, nil
}

// commit commits the writer's transaction and returns its number in
// s.committed. The number is taken before the COMMIT, not after: the COMMIT
// makes the transaction's rows visible to the read connections at once, and
// a read that sees them must wait for the fsync of this transaction, so the
// read barrier (afterRead, which waits for every number taken when the read
// ends) must already count it. defs: the transaction wrote event
// definitions (see afterDefinitionRead). If the COMMIT fails, nothing became
// visible; the number is passed through the sync pipeline all the same, so
// that the reads that counted it do not wait for it forever.
func (s *Store) commit(defs bool) (int64, error) {
	seq := s.committed.Add(1)
	if defs {
		s.defsSeq.Store(seq)
	}
	if err := s.wc.run(s.wc.commit); err != nil {
		s.passed(seq)
		return 0, err
	}
	return seq, nil
}

// passed moves the durable mark past seq, a transaction that wrote nothing,
// in order with the transactions before it.
func (s *Store) passed(seq int64) {
	if s.syncq == nil {
		s.durable.advance(seq, nil)
		return
	}
	s.syncq <- syncItem{seq: seq}
}

// runGroup runs the requests in one transaction, without savepoints: a
// savepoint costs two statements a request, and every page a request
// changes that an earlier one of the batch changed too is copied into the
// savepoint's journal first (a tenth of the writer's work in the round
// trip). Calls rarely fail, so the group bets on none failing. When one
// does, its writes cannot be told from the others': the whole transaction
// is rolled back, the failed request is answered with its error (it wrote
// nothing, as with a savepoint), and the rest run again in one transaction
// with a savepoint each (runGroupSaved), as do the next groups for a while
// (savepointGroups), so a run of failing calls costs a batch once, not
// each time. It returns false if the transaction itself failed, leaving
// the unanswered requests unanswered.
func (s *Store) runGroup(reqs []*writeReq) bool {
	if s.savepointGroups > 0 {
		s.savepointGroups--
		return s.runGroupSaved(reqs)
	}
	c := s.wc
	if err := c.run(c.begin); err != nil {
		return false
	}
	for _, r := range reqs {
		r.notify = nil
		w := &wtx{c: c, ctx: context.Background()}
		if err := call(r, w); err != nil {
			c.run(c.rollback) // may fail if SQLite already rolled back: nothing is left open either way
			r.finished = true
			r.done <- err
			s.savepointGroups = savepointGroupsAfterFailure
			rest := slices.DeleteFunc(slices.Clone(reqs), func(r *writeReq) bool { return r.finished })
			switch len(rest) {
			case 0:
				return true
			case 1:
				s.runAlone(rest[0])
				return true
			}
			return s.runGroupSaved(rest)
		}
		r.notify, r.defs = w.notify, w.defs
	}
	defs := false
	for _, r := range reqs {
		defs = defs || r.defs
	}
	seq, err := s.commit(defs)
	if err != nil {
		c.run(c.rollback)
		return false
	}
	s.ackGroup(reqs, len(reqs), seq)
	return true
}

// savepointGroupsAfterFailure is how many groups after one whose request
// failed run with savepoints (runGroupSaved).
const savepointGroupsAfterFailure = 16

// runGroupSaved runs the requests in one transaction, each in a savepoint.
// A request whose fn fails is rolled back to its savepoint and answered at
// once; the others are answered after the commit. It returns false if the
// transaction itself failed, leaving the unanswered requests unanswered.
func (s *Store) runGroupSaved(reqs []*writeReq) bool {
	c := s.wc
	if err := c.run(c.begin); err != nil {
		return false
	}
	abort := func() bool {
		c.run(c.rollback) // may fail if SQLite already rolled back: nothing is left open either way
		return false
	}
	ok := 0
	for _, r := range reqs {
		r.notify = nil
		if err := c.run(c.savepoint); err != nil {
			return abort()
		}
		w := &wtx{c: c, ctx: context.Background()}
		if err := call(r, w); err != nil {
			// Answer now: whatever happens to the batch, this request wrote
			// nothing. If SQLite already rolled the whole transaction back
			// (I/O error, full disk), ROLLBACK TO fails and the batch is lost.
			r.finished = true
			r.done <- err
			if rerr := c.run(c.rollbackTo); rerr != nil {
				return abort()
			}
			if rerr := c.run(c.release); rerr != nil {
				return abort()
			}
			continue
		}
		if err := c.run(c.release); err != nil {
			return abort()
		}
		r.notify, r.defs = w.notify, w.defs
		ok++
	}
	if ok == 0 {
		// Every request failed and has been answered: nothing to commit.
		c.run(c.rollback)
		return true
	}
	defs := false
	for _, r := range reqs {
		defs = defs || (!r.finished && r.defs)
	}
	seq, err := s.commit(defs)
	if err != nil {
		return abort()
	}
	s.ackGroup(reqs, ok, seq)
	return true
}

// ackGroup counts the committed transaction (number seq) of a group whose
// ok unfinished requests it wrote, and acknowledges them.
func (s *Store) ackGroup(reqs []*writeReq, ok int, seq int64) {
	s.commits.Add(1)
	s.writes.Add(int64(ok))
	acks := make([]*writeReq, 0, ok)
	for _, r := range reqs {
		if !r.finished {
			r.finished = true
			acks = append(acks, r)
		}
	}
	s.acknowledge(acks, seq)
}

// acknowledge signals the committed requests' tenants and answers the
// requests once their transaction (number seq) is durable. Without the sync pipeline
// (synchronous FULL inside SQLite, NORMAL or OFF) that is now: the commit has
// done whatever syncing the mode promises. With it, the requests go to the
// syncer, which answers them after its next fsync of the WAL; the writer goes
// on with the next batch meanwhile.
func (s *Store) acknowledge(reqs []*writeReq, seq int64) {
	s.kickCheckpoint()
	for _, r := range reqs {
		if r.committed != nil {
			r.committed(seq)
		}
	}
	if s.syncq == nil {
		s.durable.advance(seq, nil)
		for _, r := range reqs {
			s.signal(r.notify)
			r.done <- nil
		}
		return
	}
	s.publishLinger(false)
	// Workers are woken now, at commit, not after the fsync: a turn claim
	// does not wait for durability (see writeEarly), and the commit of the
	// turn it starts is answered only after an fsync that covers this
	// transaction too. The claim overlaps this transaction's fsync.
	wait := reqs[:0:0]
	for _, r := range reqs {
		s.signal(r.notify)
		if r.early {
			r.done <- nil
			continue
		}
		wait = append(wait, r)
	}
	// Sent even when no request waits, so that the durable mark advances
	// past this transaction for the reads.
	s.syncq <- syncItem{reqs: wait, seq: seq}
}

// syncItem is a committed transaction's requests, waiting for the fsync
// that makes them durable, or the writer's request to recover from a stall
// (recover not nil; see recoverWAL).
type syncItem struct {
	reqs    []*writeReq
	seq     int64 // the transaction's number in s.committed
	recover chan error
}

// syncLoop is the syncer goroutine of the sync pipeline (synchronous FULL,
// the default). The writer connection runs with synchronous=NORMAL, so a
// COMMIT writes its WAL frames without waiting for the disk; the syncer then
// fsyncs the WAL file and only after that answers the transaction's
// requests. One fsync covers every transaction committed before it started,
// so the syncer takes all the items queued and answers them together, while
// the writer already runs the next batches: the disk's flush time and the
// writer's CPU time overlap instead of adding up.
//
// Durability is the same as SQLite's own synchronous=FULL for every write
// call that has returned: the WAL is append-only between checkpoints, its
// frames carry a checksum chain, and recovery after a power loss replays the
// longest valid prefix of committed transactions, which contains every
// transaction whose frames were flushed. (Checkpoints with NORMAL fsync the
// WAL before copying and the database file after, as with FULL.) Reads
// through the read pool wait for the same fsync (s.durable) so that they
// never return a write that is not yet durable.
//
// If an fsync fails, what the OS still holds is unknown (Linux may drop the
// dirty pages, and a later fsync then succeeds without them): the requests
// waiting on it fail. If it failed for lack of room (ENOSPC, EDQUOT), the
// store stalls (see recoverWAL): writes fail with heraldtype.ErrStorageFull
// until room is made and the WAL has been checked and written again. Any
// other failure breaks the store: it refuses every later write, like
// PostgreSQL, which stops on a failed fsync.
func (s *Store) syncLoop() {
	defer close(s.syncDone)
	var (
		pend  []syncItem
		open  = true
		last  int64 // the last transaction number received
		timer = time.NewTimer(time.Hour)
	)
	timer.Stop()
	for open {
		// busy: a transaction was already waiting when the last flush
		// ended, so the disk is the bottleneck and the next flush is due
		// at once.
		var (
			it   syncItem
			ok   bool
			busy = true
		)
		select {
		case it, ok = <-s.syncq:
		default:
			busy = false
			it, ok = <-s.syncq
		}
		if !ok {
			return
		}
		pend = append(pend[:0], it)
		open = s.takeQueued(&pend)
		// Unless busy, hold the flush for the commit of a turn handed off
		// by a raise among these transactions (see linger.go).
		for open && !busy && pend[len(pend)-1].recover == nil {
			wait := s.lingerFor(pend[len(pend)-1].seq)
			if wait == 0 {
				break
			}
			timer.Reset(wait)
			var (
				it        syncItem
				ok, fired bool
			)
			select {
			case it, ok = <-s.syncq:
				timer.Stop()
			case <-s.lingerWake:
				timer.Stop()
				continue
			case <-timer.C:
				fired = true
			}
			if fired {
				break
			}
			if !ok {
				open = false
				break
			}
			pend = append(pend, it)
			open = s.takeQueued(&pend)
		}
		if open {
			open = s.takeQueued(&pend) // what came with the mark's move
		}
		// A recovery request is the last item: the writer waits for its
		// answer before it commits anything else.
		var recover chan error
		if n := len(pend); pend[n-1].recover != nil {
			recover, pend = pend[n-1].recover, pend[:n-1]
		}
		if len(pend) > 0 {
			last = pend[len(pend)-1].seq
			err := s.syncPending(last)
			for _, it := range pend {
				for _, r := range it.reqs {
					r.done <- err
				}
			}
			clear(pend)
		}
		if recover != nil {
			recover <- s.recoverWAL(last)
		}
	}
}

// takeQueued appends the items already queued to the syncer to pend. It
// returns false if the queue is closed.
func (s *Store) takeQueued(pend *[]syncItem) bool {
	for {
		select {
		case it, ok := <-s.syncq:
			if !ok {
				return false
			}
			*pend = append(*pend, it)
		default:
			return true
		}
	}
}

// syncPending fsyncs the WAL for the transactions up to upTo and moves the
// durable mark, or records why it could not.
func (s *Store) syncPending(upTo int64) error {
	if st := s.stalled.Load(); st != nil {
		return *st // not known durable until recoverWAL has run
	}
	err := s.syncFn()
	s.syncs.Add(1)
	switch {
	case err == nil:
	case isFull(err):
		err = fmt.Errorf("fsync of the WAL failed for lack of room: the write was committed but is not "+
			"known to be durable, and the store refuses writes until there is room again: %w (%w)", err, heraldtype.ErrStorageFull)
		s.stalled.CompareAndSwap(nil, &err)
		s.durable.stalled(err)
		return err
	default:
		err = fmt.Errorf("fsync of the WAL failed, the store refuses further writes "+
			"(the write was committed but may not be durable): %w", err)
		s.broken.CompareAndSwap(nil, &err)
	}
	s.durable.advance(upTo, err)
	return err
}

// recoverWAL ends a stall (an fsync of the WAL that failed for lack of
// room), called by the syncer for the writer, which waits meanwhile, with
// upTo the last transaction committed. After a failed fsync nothing tells
// what the OS kept of the WAL's pages that it did not write: Linux marks
// them clean and may drop them, and a retried fsync then succeeds without
// them. So recoverWAL does not retry the fsync alone: with the checkpointer
// stopped, it reads back the committed part of the WAL and checks its
// checksum chain (readVerifiedWAL), writes those same bytes again (which
// makes every page of it dirty) and fsyncs. If that succeeds, the WAL on
// disk is byte for byte what SQLite committed, checked, and every
// transaction up to upTo is durable. If the fsync fails again for lack of
// room, the store stays stalled; if the check fails (the OS lost pages), or
// anything else fails, the store breaks.
func (s *Store) recoverWAL(upTo int64) error {
	st := s.stalled.Load()
	if st == nil {
		return nil
	}
	s.ckptMu.Lock()
	defer s.ckptMu.Unlock()
	fail := func(err error) error {
		err = fmt.Errorf("recovering from an fsync of the WAL that failed for lack of room: %w; "+
			"the store refuses further writes", err)
		s.broken.CompareAndSwap(nil, &err)
		s.durable.advance(upTo, err)
		return err
	}
	data, err := readVerifiedWAL(s.wal, s.path+"-shm")
	if err != nil {
		return fail(fmt.Errorf("the WAL no longer holds what was committed: %w", err))
	}
	if _, err := s.wal.WriteAt(data, 0); err != nil {
		if isFull(err) {
			return *st
		}
		return fail(err)
	}
	if err := s.syncFn(); err != nil {
		if isFull(err) {
			return *st
		}
		return fail(err)
	}
	s.stalled.Store(nil)
	s.durable.recovered(upTo)
	return nil
}

// endStall is run by the writer before a batch while the store is stalled:
// it asks the syncer to recover (at most every roomRetry/2) and returns nil
// if it did, else the error to fail the batch with.
func (s *Store) endStall() error {
	st := s.stalled.Load()
	if st == nil {
		return nil
	}
	if time.Since(s.lastTry) < roomRetry/2 {
		return *st
	}
	s.lastTry = time.Now()
	ch := make(chan error, 1)
	s.syncq <- syncItem{recover: ch}
	return <-ch
}

// call runs r.fn, turning a panic into an error so that a bug in one
// request cannot kill the writer goroutine (and with it every later write).
func call(r *writeReq, w *wtx) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("internal error: panic in write: %v", p)
		}
	}()
	return r.fn(w)
}

func (s *Store) signal(ws []wakeup) {
	for _, w := range ws {
		s.hub.NotifyKinds(w.tenant, w.kinds)
	}
}

func (s *Store) txErr(op string, err error) error {
	if s.closed.Load() {
		return fmt.Errorf("%s: %w", op, heraldtype.ErrClosed)
	}
	return fmt.Errorf("%s transaction: %w", op, err)
}
