// Package sqlite is Herald's embedded storage backend: a storage.Store kept
// in one SQLite file in WAL mode, through the pure-Go modernc.org/sqlite
// driver (no cgo).
//
// # Writes
//
// Every write goes through one connection owned by one writer goroutine
// (several writer connections starve each other with SQLITE_BUSY under load).
// Write calls made concurrently are queued to that goroutine, which merges
// the calls waiting at that moment into one transaction (group commit). A
// call that fails (ErrLeaseLost, a duplicate history seq, ...) writes
// nothing, while the others commit: the group is rolled back and the others
// run again, each in a savepoint of its own (see runGroup). A write call returns once its transaction has committed;
// with the default synchronous=FULL that means it is durable on disk, and one
// fsync is shared by every call of the batch. WithMaxBatch(1) gives one
// transaction per call.
//
// FULL is done by a sync pipeline (see syncLoop): the writer connection runs
// with synchronous=NORMAL and a syncer goroutine fdatasyncs the WAL before
// answering the calls of the transactions committed before the fsync began,
// while the writer goes on. TurnClaim is answered at commit, before the
// fsync (a claim lost to a power loss only fails its token).
// WithSyncInCommit makes SQLite fsync inside each COMMIT instead. The WAL is
// checkpointed by a goroutine of its own (checkpointLoop), not by the
// writer's commits.
//
// # Full disk
//
// A write that fails for want of room (SQLITE_FULL, ENOSPC, EDQUOT) returns
// an error matching heraldtype.ErrStorageFull and wrote nothing; the next write
// tries again, so the store goes on by itself once room is made.
// TurnAbandon, ActivityComplete and ActivityRetry wait for room instead of
// failing (see backend.UntilRoom). With the sync pipeline, an fsync of the
// WAL that fails for lack of room stalls the store rather than breaking it:
// the writes it was to make durable fail with ErrStorageFull (they were
// committed and may reappear), and so do later writes, and the reads that
// could see them, until a write finds room: then the WAL is read back,
// checked and written again before anything else (see recoverWAL). With
// WithSyncInCommit such an fsync fails its COMMIT (SQLite rolls the
// transaction back) with a plain I/O error, as SQLite does not tell why.
//
// # Reads
//
// Reads (InstanceGet, InstanceList, HistoryList, EventGet, EventList,
// EventDefinitionGet, EventDefinitionList, CorrelatedGet, CorrelatedSearch,
// the bus's gets and lists, BusBacklog, TenantsReady, NextWake) use a
// separate pool of read-only connections and see every write whose call has
// returned. Except TenantsReady, NextWake and BusBacklog, they return only
// once what they read is durable.
//
// # Schema
//
// Migrations are embedded in the binary and applied by Open, each once, in
// version order; their versions are recorded in the schema_migrations table.
// Open refuses a database whose schema is newer than this package knows.
//
// # Time
//
// Times are stored as integer unix nanoseconds (UTC) and returned in UTC. A
// zero Now in a params struct means time.Now().
//
// # Choices the storage contract leaves open
//
//   - TurnClaim and ActivityClaim: Max <= 0 means 1, Lease <= 0 means 30 s.
//   - Fencing is by lock token only: a commit, completion or heartbeat whose
//     lease ran out still succeeds as long as nobody claimed the work since.
//   - NextWake also reports when a lease on an instance with messages, or on
//     an activity task, runs out (so that crashed work is taken over without
//     polling).
//   - Continue-as-new also deletes the old executions' unconsumed activity
//     results (they could never be used).
//   - A task whose cancellation was requested is never handed out again: it
//     is deleted when its lease runs out, by ActivityRetry, or by
//     ActivityComplete (whose result is discarded).
//   - TurnCommit ignores Fates for event ids that are not in the instance's
//     ledger, and its ConsumedMessages, CancelTimers and CancelActivities
//     only ever touch the instance's own rows.
//   - EventRaise keeps ExpiresAt only for an instance that does not exist,
//     and creating the instance clears it from the events kept for it.
//   - EventExpire drops the most overdue events first (by ExpiresAt, then in
//     raise order).
//   - EventDefinitionPut refuses an unknown buffer policy and a negative
//     retention, payload cap or correlation TTL. A definition put again
//     after EventDefinitionDelete continues the deleted one's version (with
//     a new CreatedAt).
//   - Correlated lane: a wait made and withdrawn in the same turn (its seq
//     in both CorrelatedWaits and CancelCorrelatedWaits) is neither
//     registered nor delivered to; a commit that ends the instance or
//     continues it as new registers no waits. A produced event's inbox
//     message carries the wait's Execution as well as its TaskSeq. A put
//     reaches only markers of pending or running instances on the marker's
//     execution, oldest marker first (by creation, then insertion). A
//     correlated event past its ExpiresAt that CorrelatedExpire has not
//     deleted yet is not delivered to new waits and is replaced (new
//     CreatedAt, empty produced list) by a put; CorrelatedGet and
//     CorrelatedSearch still return it. Produced event ids are "corr-" and
//     a random UUID.
//   - CorrelatedPut refuses an empty definition or key (a wait on one is
//     registered, and never reached); CorrelatedSearch refuses an empty definition and a
//     bookmark it did not make, and orders keys bytewise. CorrelatedExpire
//     deletes by ExpiresAt, then definition, then key.
//   - LeaderElect refuses a non-positive Lease and an empty name or holder;
//     a holder renews its own lease even after it ran out (if nobody took
//     it). LeaderResign by someone who does not hold the leadership does
//     nothing.
//   - The event bus: see the comment at the top of bus.go.
package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/url"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	_ "modernc.org/sqlite" // registers the "sqlite" database/sql driver

	"github.com/heraldwf/herald/storage"
	"github.com/heraldwf/herald/storage/internal/backend"
)

// Synchronous is SQLite's synchronous setting for the writer connection: how
// hard a commit pushes data to disk.
type Synchronous string

// Synchronous settings.
const (
	// SynchronousFull fsyncs the WAL on every commit: a write call that has
	// returned survives a power loss. The default.
	SynchronousFull Synchronous = "FULL"
	// SynchronousNormal fsyncs only at WAL checkpoints: commits survive a
	// crash of the process, but the last ones may be lost on a power loss or
	// an OS crash. Several times faster per commit.
	SynchronousNormal Synchronous = "NORMAL"
	// SynchronousOff never fsyncs. For tests and throwaway data only.
	SynchronousOff Synchronous = "OFF"
)

// Defaults of the options.
const (
	DefaultBusyTimeout = 5 * time.Second
	DefaultReadConns   = 4
	DefaultMaxBatch    = 128
)

type config struct {
	synchronous Synchronous
	inWriter    bool // FULL: SQLite fsyncs inside COMMIT, no sync pipeline
	busyTimeout time.Duration
	readConns   int
	maxBatch    int
	maxLinger   time.Duration // see linger.go; tests change it
	histBytes   int64         // the history cache's budget; <= 0: none
}

// Option configures Open.
type Option func(*config)

// WithSynchronous sets the writer's synchronous mode. Default SynchronousFull.
func WithSynchronous(s Synchronous) Option {
	return func(c *config) { c.synchronous = s }
}

// WithSyncInCommit makes SynchronousFull sync the way SQLite does by itself:
// inside each COMMIT, on the writer goroutine, which waits for the disk. By
// default FULL uses the sync pipeline instead (the writer commits with
// synchronous=NORMAL and a separate goroutine fsyncs the WAL before any
// caller is answered; see the package documentation), which gives the same
// guarantee to every write call that has returned and lets the writer work
// while the disk flushes. For comparisons and as an escape hatch.
func WithSyncInCommit() Option {
	return func(c *config) { c.inWriter = true }
}

// WithBusyTimeout sets how long a connection waits for a lock held by
// another connection or process before failing with SQLITE_BUSY. Default
// DefaultBusyTimeout (5 s).
func WithBusyTimeout(d time.Duration) Option {
	return func(c *config) { c.busyTimeout = d }
}

// WithReadConns sets the maximum number of read connections. Default
// DefaultReadConns (4). Single-statement reads use at most GOMAXPROCS-1 of
// them at once (at least one; see rpool).
func WithReadConns(n int) Option {
	return func(c *config) { c.readConns = n }
}

// WithMaxBatch caps how many write calls the writer merges into one
// transaction. 1 disables group commit. Default DefaultMaxBatch (128).
func WithMaxBatch(n int) Option {
	return func(c *config) { c.maxBatch = n }
}

// WithHistoryCache sets the budget, in bytes of memory (estimated: each
// decoded event's struct, payloads and names), of the cache of recently
// run instances' histories: a turn of an instance it holds reads only the
// events added since its last turn instead of the whole history (see
// backend.HistoryCache). 0 or less: no cache. Default
// DefaultHistoryCacheBytes (32 MiB).
func WithHistoryCache(bytes int64) Option {
	return func(c *config) { c.histBytes = bytes }
}

// DefaultHistoryCacheBytes is WithHistoryCache's default.
const DefaultHistoryCacheBytes = backend.DefaultHistoryCacheBytes

func (c *config) validate() error {
	switch c.synchronous {
	case SynchronousFull, SynchronousNormal, SynchronousOff:
	default:
		return fmt.Errorf("unknown synchronous mode %q", c.synchronous)
	}
	if c.busyTimeout < 0 {
		return fmt.Errorf("negative busy timeout %v", c.busyTimeout)
	}
	if c.readConns < 1 {
		return fmt.Errorf("read connections must be at least 1, got %d", c.readConns)
	}
	if c.maxBatch < 1 {
		return fmt.Errorf("max batch must be at least 1, got %d", c.maxBatch)
	}
	return nil
}

// Store is a storage.Store on a SQLite file. It is safe for concurrent use.
// Close it when done.
type Store struct {
	path string
	cfg  config

	hist      *backend.HistoryCache // recently run instances' histories (nil: none)
	claims    backend.ClaimNotes    // what this store's claims saw of the instances they leased
	wc        *wconn                // the single writer connection, owned by the writer goroutine
	wcloseErr error                 // closing wc; set before writerDone is closed
	rdb       *sql.DB               // read-only pool for reads in a transaction
	rpool     *rpool                // read-only connections for single-statement reads
	rstmts    sync.Map              // query -> *sql.Stmt on rdb

	reqs       chan *writeReq // unbuffered: a request is either taken by the writer or not sent
	closing    chan struct{}
	writerDone chan struct{}
	closeOnce  sync.Once
	closeErr   error
	closed     atomic.Bool

	hub         backend.Hub
	tenantsSeen sync.Map // tenant id → struct{}: known to be registered

	// The background checkpointer (checkpointLoop).
	cdb      *sql.DB
	ckptKick chan struct{}
	ckptDone chan struct{}
	ckptLast atomic.Int64 // unix ns: the checkpointer asks the writer for the last checkpoint before a WAL restart (0: no)
	ckptHold atomic.Int64 // no checkpoint until the transactions up to this one are durable (see walCheckpoint)

	// The sync pipeline (see syncLoop); syncq is nil without it.
	wal       *os.File
	syncFn    func() error // s.syncWAL; tests replace it
	syncq     chan syncItem
	syncDone  chan struct{}
	committed atomic.Int64          // write transactions committed (numbered from 1)
	defsSeq   atomic.Int64          // the last of them that wrote event definitions or changed a bus generation
	durable   *durableMark          // how far they are on disk
	broken    atomic.Pointer[error] // a failed fsync: every later write fails with it
	stalled   atomic.Pointer[error] // an fsync failed for lack of room (see recoverWAL)
	ckptMu    sync.Mutex            // held by a checkpoint, and by recoverWAL
	lastTry   time.Time             // writer-owned: the last recoverWAL it asked for
	ckptOff   atomic.Bool           // tests: no background checkpoints

	// savepointGroups (writer-owned) is how many more groups run with a
	// savepoint for each request (see runGroup).
	savepointGroups int

	// Hand-offs whose turn has not come back (see linger.go).
	t0         time.Time                  // the origin of pendTurn.until and lingerMark.until (monotonic)
	pendTurns  []pendTurn                 // writer-owned, in transaction order
	linger     atomic.Pointer[lingerMark] // the oldest of them, for the syncer
	lingerWake chan struct{}              // buffered(1): the mark moved

	commits      atomic.Int64
	writes       atomic.Int64
	syncs        atomic.Int64
	ckptLasts    atomic.Int64 // the writer's last checkpoints before a WAL restart (lastCheckpoint)
	ckptLastTime atomic.Int64 // their total length, in nanoseconds
}

var _ storage.Store = (*Store)(nil)

// Open opens (creating it if needed) the SQLite database at path, applies
// pending migrations and starts the writer. path is a file name; in-memory
// databases are refused because the writer and the readers use separate
// connections, which would each see their own empty database.
//
// ctx bounds the opening and the migrations only.
func Open(ctx context.Context, path string, opts ...Option) (*Store, error) {
	cfg := config{
		synchronous: SynchronousFull,
		busyTimeout: DefaultBusyTimeout,
		readConns:   DefaultReadConns,
		maxBatch:    DefaultMaxBatch,
		histBytes:   DefaultHistoryCacheBytes,
		maxLinger:   maxLinger,
	}
	for _, o := range opts {
		if o != nil {
			o(&cfg)
		}
	}
	if err := cfg.validate(); err != nil {
		return nil, fmt.Errorf("sqlite: open %s: %w", path, err)
	}
	if path == "" || path == ":memory:" || strings.HasPrefix(path, "file:") {
		return nil, fmt.Errorf("sqlite: open %q: path must be a plain file name (in-memory and URI names are not supported)", path)
	}

	name := "file:" + (&url.URL{Path: path}).EscapedPath()
	busy := fmt.Sprintf("_pragma=busy_timeout(%d)", cfg.busyTimeout.Milliseconds())
	pipeline := cfg.synchronous == SynchronousFull && !cfg.inWriter
	sync := cfg.synchronous
	if pipeline {
		sync = SynchronousNormal // the syncer fsyncs the WAL after each COMMIT
	}
	// The writer's page cache is 4 MiB, not more. When a B-tree split has
	// to reorder its new pages, SQLite (balance_nonroot) parks one of them
	// for a moment under the lock-byte page's number (262,145 with 4 KiB
	// pages); the COMMIT then drops every cached page numbered past the
	// end of the database, and with a key that far out it does so by
	// scanning the cache's whole hash table, whose size follows the number
	// of cached pages. 4 MiB (1,024 pages) is more than a batch dirties, so
	// the cache still holds what a commit writes, and small enough that the
	// scan stays a small part of the writer's time (bench/results.md, round
	// 2, fourth pass, has the measurements).
	wdsn := name + "?" + busy +
		"&_pragma=journal_mode(WAL)" +
		"&_pragma=synchronous(" + string(sync) + ")" +
		"&_pragma=foreign_keys(1)" +
		"&_pragma=cache_size(-4096)" + // 4 MiB: see above
		"&_pragma=temp_store(MEMORY)" + // savepoint sub-journals in memory, not a temp file
		"&_pragma=wal_autocheckpoint(0)" + // checkpoints run beside the writer (checkpointLoop)
		"&_txlock=immediate"
	rdsn := name + "?" + busy + "&_pragma=query_only(1)"

	// A writer connection comes first: it switches the file to WAL and
	// creates the schema before any reader looks at it. Migrations run
	// through database/sql; the writer goroutine then gets a connection of
	// its own that it drives through the driver interface (see wconn).
	mdb, err := sql.Open("sqlite", wdsn)
	if err != nil {
		return nil, fmt.Errorf("sqlite: open %s: %w", path, err)
	}
	mdb.SetMaxOpenConns(1)
	err = migrate(ctx, mdb)
	if cerr := mdb.Close(); err == nil && cerr != nil {
		err = cerr
	}
	if err != nil {
		return nil, fmt.Errorf("sqlite: open %s: %w", path, err)
	}
	wc, err := openWriterConn(wdsn)
	if err != nil {
		return nil, fmt.Errorf("sqlite: open %s: %w", path, err)
	}

	var wal *os.File
	if pipeline {
		if wal, err = openWAL(path); err != nil {
			wc.close()
			return nil, fmt.Errorf("sqlite: open %s: %w", path, err)
		}
	}
	closeWriter := func() {
		wc.close()
		if wal != nil {
			wal.Close()
		}
	}
	// The checkpointer's connection: the writer's settings, no autocheckpoint.
	cdb, err := sql.Open("sqlite", wdsn)
	if err != nil {
		closeWriter()
		return nil, fmt.Errorf("sqlite: open %s: %w", path, err)
	}
	cdb.SetMaxOpenConns(1)
	closeWriter = func() {
		wc.close()
		cdb.Close()
		if wal != nil {
			wal.Close()
		}
	}
	rdb, err := sql.Open("sqlite", rdsn)
	if err != nil {
		closeWriter()
		return nil, fmt.Errorf("sqlite: open %s: %w", path, err)
	}
	rdb.SetMaxOpenConns(cfg.readConns)
	rdb.SetMaxIdleConns(cfg.readConns)
	if err := rdb.PingContext(ctx); err != nil {
		closeWriter()
		rdb.Close()
		return nil, fmt.Errorf("sqlite: open %s: %w", path, err)
	}

	s := &Store{
		path:       path,
		cfg:        cfg,
		t0:         time.Now(),
		lingerWake: make(chan struct{}, 1),
		wc:         wc,
		rdb:        rdb,
		rpool:      newRPool(rdsn, cfg.readConns),
		hist:       backend.NewHistoryCache(cfg.histBytes),
		reqs:       make(chan *writeReq),
		closing:    make(chan struct{}),
		writerDone: make(chan struct{}),
		durable:    newDurableMark(),
		cdb:        cdb,
		ckptKick:   make(chan struct{}, 1),
		ckptDone:   make(chan struct{}),
	}
	go s.checkpointLoop(cdb)
	if pipeline {
		s.wal = wal
		s.syncFn = s.syncWAL
		s.syncq = make(chan syncItem, 2*cfg.maxBatch)
		s.syncDone = make(chan struct{})
		go s.syncLoop()
	}
	go s.writerLoop()
	return s, nil
}

// Close stops the writer (after the batch it is running), then closes the
// connections. Calls made after Close return heraldtype.ErrClosed. Close is
// idempotent; Subscribe channels are not closed.
func (s *Store) Close() error {
	s.closeOnce.Do(func() {
		s.closed.Store(true)
		close(s.closing)
		<-s.writerDone
		<-s.ckptDone
		s.rstmts.Range(func(_, st any) bool {
			st.(*sql.Stmt).Close()
			return true
		})
		s.closeErr = errors.Join(s.wcloseErr, s.cdb.Close(), s.rdb.Close(), s.rpool.close())
		if s.wal != nil {
			s.closeErr = errors.Join(s.closeErr, s.wal.Close())
		}
		if s.closeErr != nil {
			s.closeErr = fmt.Errorf("sqlite: close %s: %w", s.path, s.closeErr)
		}
	})
	return s.closeErr
}

// Stats counts the writer's work since Open.
type Stats struct {
	// Commits is the number of write transactions committed.
	Commits int64
	// Writes is the number of write calls committed (Writes/Commits is the
	// average group-commit batch size).
	Writes int64
	// WriterCheckpoints is the number of checkpoints the writer ran
	// between two batches to copy the last frames of a long WAL, so that
	// the WAL restarts from its beginning (see checkpointLoop);
	// WriterCheckpointTime is their total length, during which no write
	// ran.
	WriterCheckpoints    int64
	WriterCheckpointTime time.Duration
	// Syncs is the number of fsyncs of the WAL by the sync pipeline (zero
	// without it): Commits/Syncs is how many transactions one fsync made
	// durable.
	Syncs int64
}

// Stats returns the writer's counters.
func (s *Store) Stats() Stats {
	return Stats{Commits: s.commits.Load(), Writes: s.writes.Load(),
		WriterCheckpoints: s.ckptLasts.Load(), WriterCheckpointTime: time.Duration(s.ckptLastTime.Load()),
		Syncs: s.syncs.Load()}
}

// SubscribeKinds: see storage.Notifier. This store wakes its subscribers
// for what it commits itself: an instance created, an event raised, a turn
// committed that left or added work, an activity result or retry, an
// abandoned turn, a termination; and for the bus (WorkBus) an event
// published (BusPublish, a turn's Publish), a route that queued executions,
// a retry, a reprocess.
func (s *Store) SubscribeKinds(tenant string, kinds storage.WorkKind) (<-chan struct{}, func()) {
	return s.hub.SubscribeKinds(tenant, kinds)
}
