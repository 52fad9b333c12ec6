// Package postgres is Herald's scale-out storage backend: a storage.Store in
// a PostgreSQL database (13 or newer) shared by any number of Herald nodes,
// through github.com/jackc/pgx/v5 and its connection pool.
//
// # Schema
//
// Every table, index and function lives in one PostgreSQL schema, "herald"
// by default (WithSchema), so several Herald deployments or test runs can
// share one database. Each pooled connection gets that schema as its
// search_path. Migrations are embedded in the binary and applied by Open
// inside one transaction that holds an advisory lock, so any number of
// processes can open the same database at once; applied versions are
// recorded in the schema's schema_migrations table. Open refuses a schema
// that is newer than this package knows.
//
// Times are stored as bigint unix nanoseconds (UTC, 0 = unset), exactly as
// given, and returned in UTC; a zero Now in a params struct means time.Now().
// JSON payloads are stored as text, byte for byte.
//
// # Transactions and fencing
//
// Every write method runs in one transaction (which concurrent calls may
// share, see Group commit), most of them in a single round trip: a
// pipelined batch of statements that PostgreSQL runs as one implicit
// transaction (a failure in any statement rolls back all of them). Rows are
// locked instance first, then its inbox, events, history and activity rows,
// so writers do not deadlock; a transaction that still fails with a
// serialization failure or a detected deadlock is retried a few times. An
// event raised for an instance that does not exist yet and the instance's
// creation serialize on a transaction-level advisory lock of the instance
// id, so that the event cannot be left in the inbox of an instance that is
// not ready to be claimed. TurnCommit first locks the instance row and
// checks the lock token; any mismatch aborts the whole batch with
// heraldtype.ErrLeaseLost. The common turn commit (history, consumed messages,
// fates, status) is one statement, herald_commit (migration 0016), and a
// batch of them one herald_commit_many call (migration 0018). The
// lane rules a commit applies (the instance-end drops, the hand-on of a
// delete-after-first correlated event) are package backend's, in Go, run
// over laneTx's primitives; the schema's functions decide none of them.
//
// # Group commit
//
// Under load, what a transaction costs beyond its statements (its round
// trip, its commit, waking the client and the backend) was most of the cost
// of a raise or a turn commit. So concurrent TurnCommit, EventRaise,
// BusPublish and EventDefinitionGet calls share transactions: a call that
// finds no batch of its kind in flight runs at once (a call alone is never
// delayed), the calls made meanwhile share the next batch, one transaction
// in one round trip, and a second batch starts beside the first only once a
// full batch waits (see combiner). A call returns once its
// batch has committed, with its own outcome: a batch that fails wrote
// nothing, and each of its calls then runs alone. Only commits that take no
// advisory lock are batched; a batch locks its instances in (tenant, id)
// order, as every transaction that locks several does.
//
// Correlated puts and the turn commits that register correlated waits
// serialize on a transaction-level advisory lock of (tenant, definition,
// key), so that a put never misses a wait committed at the same moment and a
// delete-after-first event reaches exactly one waiter across nodes. These
// locks are taken before any row lock: a commit takes its waits' keys, and
// those of the waits it withdraws (whose deliveries made during the turn it
// hands on), in ascending order before its fence, a put takes its key, then locks the
// waiting instances in id order before it touches their markers and inboxes.
// A wait locks the correlated event row it delivers (FOR UPDATE), so that
// CorrelatedDelete and CorrelatedExpire, which take no advisory lock, never
// leave produced entries behind.
//
// # Claims
//
// TurnClaim and ActivityClaim pick work with FOR UPDATE SKIP LOCKED, so any
// number of nodes claim disjoint work without waiting for each other. Ready
// instances come in order from a partial index on instances.ready_at (the
// earliest visible_at of the instance's inbox, kept up to date by every write
// that changes the inbox); instances whose lease ran out come from an index
// on lease_until. A claim is committed with synchronous_commit off: losing
// one in a database crash only loses the lease, and the token it handed out
// then fails to commit (heraldtype.ErrLeaseLost), so nothing is duplicated.
// So is a raise that hands its turn over at commit (OnClaimed), which then
// returns only once a later commit has flushed it (walmark.go). Every other
// write is committed with the database's synchronous_commit setting.
//
// A turn claim is one round trip: the statement that leases the instances
// (and returns, with each row, whether it may have activity tasks and
// correlation markers, and the Seq that ends its history: migration 0017),
// then, in the same transaction (with a snapshot taken after the leases
// are locked), the read of their messages. Histories come from the history
// cache when the row says it holds all of one; what it lacks is read after
// the claim, by key, under the leases (readHistories). A raise that hands its instance
// off reads only what its own statement's row does not tell
// (handOffs.queueLoad).
//
// # Plans
//
// PostgreSQL keeps a prepared statement's generic plan, made on each
// connection after a few executions, until the statistics of a table it
// reads change. On a new schema that is while the tables are empty, when
// any index whose leading column is tenant looks as good as the one that
// finds a row by its key: a lookup could then scan a tenant's whole index
// for as long as the plan was kept. So the hot statements give the planner
// one sensible choice: the indexes do not compete for (tenant, id) lookups
// (migration 0003), claims update the rows they locked by ctid with
// sequential and bitmap scans off, and ledger rows are updated one key at a
// time. And the store analyzes its busiest tables itself, once, rather than
// waiting for autovacuum, which may be off: a table without statistics, or
// with statistics taken while it was nearly empty, once its file spans 16
// pages (never before: plans made from an empty table's statistics scan it
// for a key lookup; see stats.go).
//
// # Wake-ups
//
// Subscribe wakes idle workers in every process sharing the schema. A write
// that creates work signals the store's own subscribers at once, and a
// notifier goroutine then sends a NOTIFY on the channel "herald_<schema>"
// with the tenant (and the kinds of work) as payload, merging the tenants of
// the writes that committed meanwhile into one statement, at most one per
// millisecond. Each store that has subscribers
// keeps one LISTEN connection (outside the pool, opened by the first
// Subscribe, reconnecting with backoff) and fans notifications out to its
// subscribers, except those this store sent itself (their backend pids are
// its pool's connections): its subscribers were woken when the write
// committed, and a second wake-up would only cost an empty claim. The
// NOTIFY is sent after
// the write has committed, in its own transaction with synchronous_commit
// off, instead of inside the write's transaction: PostgreSQL serializes the
// commits of all transactions that notify (an exclusive lock held through the
// commit's WAL flush), so notifying inside the write would make every
// concurrent commit wait for the others' flushes. If a process dies between a commit and
// its NOTIFY, other nodes find the work on their next poll (NextWake).
// Anyone can wake a tenant's workers with NOTIFY herald_<schema>, '<tenant>'.
//
// # The event bus
//
// The bus's tables (migration 0008) follow the same rules: BusRoute and
// BusClaim pick rows with FOR UPDATE SKIP LOCKED, so that nodes route
// disjoint events and claim disjoint executions without waiting for each
// other; BusFinish and BusHeartbeat are fenced by the execution's lock
// token, and a running execution whose lease ran out is claimed again by
// anyone (TakenOver). A route decided to run is its execution: one row of
// bus_routes per (event, subscription), with status filtered when the
// filter said no. The fair-queueing numbers come from herald_bus_numbers,
// which locks the subscriptions' rows of bus_fq; every call that locks
// several kinds of rows takes them event, then execution (in id order),
// then bus_fq row (in subscription order). BusPublish is one statement
// (batched, see Group commit), BusClaim, BusFinish and BusHeartbeat one
// round trip each, BusRoute two (the events are locked, the callback
// decides, the decisions are stored and committed); a turn's published
// events are one more statement in the turn commit's batch, so a
// publishing turn still commits in one round trip, batched with others.
//
// Several of these calls lock rows in one statement and change them in a
// later one of the same transaction, by ctid: a statement's snapshot is
// taken when it starts, so a row a statement both locks and changes could
// have a newer version (a heartbeat's) than the one its snapshot sees, and
// an update by ctid would miss it. Multi-row lookups by key go through
// lateral probes (one primary-key probe per key), because a generic plan
// made while a table is empty may answer "id = ANY($ids)" by scanning the
// tenant's whole index. The bus's busiest tables have a warm-up of their
// own (stats.go).
//
// Free text that targets produce (attempt errors, stacks, script log
// lines, a filter's explanation, a dead letter's error) is stored as
// bytea, byte for byte: a script that logs a NUL byte must not wedge its
// execution on a refused write. Text stored as text (ids, types, patterns,
// sources, JSON documents, script sources) must be valid UTF-8 without NUL
// bytes (storage.BusStore states every rule of the bus's params; backend
// checks them for both backends), and is refused with
// heraldtype.ErrInvalidArgument otherwise, as are the ids the text rules
// refuse, nil params and negative limits.
//
// # Choices the storage contract leaves open
//
// They are those of the SQLite backend (package storage/sqlite), so that
// both pass the same conformance suite, except where noted:
//
//   - TurnClaim and ActivityClaim: Max <= 0 means 1, Lease <= 0 means 30 s.
//   - Fencing is by lock token only: a commit, completion or heartbeat whose
//     lease ran out still succeeds as long as nobody claimed the work since.
//   - NextWake also reports when a lease on an instance with messages, or on
//     an activity task, runs out (so that crashed work is taken over without
//     polling). It reads an instance's next message from its ready_at, so a
//     timer behind a message that is visible now is reported once the turn
//     that consumes that message has committed (SQLite scans the inbox).
//   - Continue-as-new also deletes the old executions' unconsumed activity
//     results (they could never be used).
//   - A task whose cancellation was requested is never handed out again: it
//     is deleted when its lease runs out, by ActivityRetry, or by
//     ActivityComplete (whose result is discarded).
//   - TurnCommit ignores Fates for event ids that are not in the instance's
//     ledger (of several Fates for one id, the last wins), and its
//     ConsumedMessages, CancelTimers and CancelActivities only ever touch the
//     instance's own rows.
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
//     bookmark it did not make, and orders keys bytewise (COLLATE "C").
//     CorrelatedExpire deletes by ExpiresAt, then definition, then key, and
//     skips events a put or a commit holds at that moment.
//   - LeaderElect refuses a non-positive Lease and an empty name or holder;
//     a holder renews its own lease even after it ran out (if nobody took
//     it). LeaderResign by someone who does not hold the leadership does
//     nothing.
//   - The bus: zero Max and Limit fields take the defaults (BusRoute 100,
//     BusClaim 1 with a one-minute lease, pages 100 and at most 1000, bulk
//     dead-letter operations and BusPrune 1000); the params follow the
//     rules storage.BusStore states, checked by backend for both backends.
//     BusFinish: a retry with a zero RetryAt is due at Now; a result with an
//     empty lock token, or repeating the (execution, token) of an earlier
//     result of the call, gets ErrLeaseLost; an execution that fails keeps
//     the attempt's error as its LastError, one that succeeds keeps its
//     last one. A reprocessed execution keeps its DeadLetter until it ends
//     again; a letter is reprocessed only while its execution still ended
//     in it. Bulk dead-letter operations take the oldest letters first and
//     skip letters another transaction holds. BusEventGet lists an event's
//     routes in the order they were decided. A subscription's
//     fair-queueing numbers start at 0; deleting it forgets its last one.
//     A deleted script's versions go on when it is saved again (a
//     tombstone keeps the count).
package postgres

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"math/rand/v2"
	"net"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/heraldwf/herald/heraldtype"
	"github.com/heraldwf/herald/storage"
	"github.com/heraldwf/herald/storage/internal/backend"
)

// DefaultSchema is the PostgreSQL schema Open uses without WithSchema.
const DefaultSchema = "herald"

// DefaultMaxRetries is how many times a transaction that failed with a
// serialization failure or a detected deadlock is retried by default.
const DefaultMaxRetries = 5

type config struct {
	schema     string
	maxConns   int32
	maxRetries int
	syncCommit string
	poolConfig func(*pgxpool.Config)
	// goCorrelated applies the correlated lane's Go rules (package
	// backend) instead of their one-statement SQL; tests only (see
	// commitWaitSQL).
	goCorrelated bool
	histBytes    int64 // the history cache's budget; <= 0: none
	// raiseLinger: see raiseLinger (walmark.go); tests change it.
	raiseLinger time.Duration
}

// Option configures Open.
type Option func(*config)

// WithSchema sets the PostgreSQL schema that holds Herald's tables. It is
// created if it does not exist. The name must be a lower-case identifier
// ([a-z_][a-z0-9_]*, at most 56 bytes, so that the notification channel
// "herald_<schema>" fits PostgreSQL's 63-byte limit; pg_* names are
// PostgreSQL's). Default DefaultSchema ("herald").
func WithSchema(name string) Option {
	return func(c *config) { c.schema = name }
}

// WithMaxConns sets the maximum number of pooled connections. Default: a
// pool_max_conns parameter in the URL, else pgxpool's default (the greater of
// 4 and the number of CPUs). Subscribe's listener uses one more connection,
// outside the pool.
func WithMaxConns(n int32) Option {
	return func(c *config) { c.maxConns = n }
}

// WithMaxRetries sets how many times a transaction that failed with a
// serialization failure (SQLSTATE 40001) or a detected deadlock (40P01) is
// retried. 0 disables retries. Default DefaultMaxRetries (5).
func WithMaxRetries(n int) Option {
	return func(c *config) { c.maxRetries = n }
}

// WithSynchronousCommit sets PostgreSQL's synchronous_commit for the
// store's connections: "on", "off", "local", "remote_write" or
// "remote_apply". With "off" a write call returns before its commit is
// flushed to disk: a crash of the database server (not of a Herald process)
// may lose the last few hundred milliseconds of commits, in exchange for
// several times the commit rate. Default: the server's (or the URL's)
// setting, normally "on". Claims always commit with "off" (see the package
// comment).
func WithSynchronousCommit(mode string) Option {
	return func(c *config) { c.syncCommit = mode }
}

// WithPoolConfig lets the caller adjust the pool configuration parsed from
// the URL (TLS, timeouts, tracing, ...) before the pool is created. The
// search_path run-time parameter is set by the store afterwards and must not
// be changed. Subscribe's LISTEN connection is opened with the resulting
// ConnConfig, without the pool's hooks.
func WithPoolConfig(fn func(*pgxpool.Config)) Option {
	return func(c *config) { c.poolConfig = fn }
}

// WithHistoryCache sets the budget, in bytes, of the cache of the
// histories of the instances this store ran lately: a raise that hands an
// instance off to this process reads only the events added since the
// instance's last turn here (by this process or, on another node, by
// another) instead of its whole history (see backend.HistoryCache). A
// claim of several turns (TurnClaim) reads whole histories and fills the
// cache. 0 or less: no cache. Default DefaultHistoryCacheBytes (32 MiB).
func WithHistoryCache(bytes int64) Option {
	return func(c *config) { c.histBytes = bytes }
}

// DefaultHistoryCacheBytes is WithHistoryCache's default.
const DefaultHistoryCacheBytes = backend.DefaultHistoryCacheBytes

var schemaName = regexp.MustCompile(`^[a-z_][a-z0-9_]*$`)

func (c *config) validate() error {
	if !schemaName.MatchString(c.schema) || len(c.schema) > 56 || strings.HasPrefix(c.schema, "pg_") {
		return fmt.Errorf("invalid schema name %q (want [a-z_][a-z0-9_]*, at most 56 bytes, not pg_*)", c.schema)
	}
	if c.maxConns < 0 {
		return fmt.Errorf("negative max conns %d", c.maxConns)
	}
	if c.maxRetries < 0 {
		return fmt.Errorf("negative max retries %d", c.maxRetries)
	}
	switch c.syncCommit {
	case "", "on", "off", "local", "remote_write", "remote_apply":
	default:
		return fmt.Errorf("unknown synchronous_commit mode %q", c.syncCommit)
	}
	return nil
}

// Store is a storage.Store in a PostgreSQL schema. It is safe for concurrent
// use by many goroutines, and any number of Stores (in one process or many)
// may share the schema. Close it when done.
type Store struct {
	cfg     config
	hist    *backend.HistoryCache // recently run instances' histories (nil: none)
	pool    *pgxpool.Pool
	channel string // NOTIFY channel
	lockKey uint64 // schema part of the per-instance advisory lock keys

	closed    atomic.Bool
	closeOnce sync.Once
	closing   chan struct{}

	ownPIDs   *sync.Map // uint32 backend pid → struct{}: the pool's connections
	hub       backend.Hub
	claims    backend.ClaimNotes
	commits   combiner[*commitCall]
	raises    combiner[*raiseCall]
	publishes combiner[*publishCall]
	defGets   combiner[*defGetCall]
	warm      statsWarmer // workflows' tables
	warmBus   statsWarmer // the bus's tables
	notifier  notifier
	listener  listener

	tenantsSeen sync.Map // tenant id → struct{}: known to be registered

	// claimsCold: a turn claim reads the histories in its batch, as most of
	// those of the last claim were not in the history cache (a node that
	// just started, or whose instances other nodes ran); else only what
	// the cache lacks is read, after the claim (TurnClaim).
	claimsCold atomic.Bool

	// Raises whose commit did not wait for the WAL flush (walmark.go):
	// the mark that says when they are durable; each holds deferred's read
	// lock while it waits, so that Close lets them finish before it closes
	// the pool.
	wal      walMark
	deferred sync.RWMutex
}

var _ storage.Store = (*Store)(nil)

// Open connects to the PostgreSQL database at url (a postgres:// URL or a
// key=value connection string, as pgx accepts, pool_* parameters included),
// creates the schema if needed and applies pending migrations. ctx bounds
// the connecting and the migrations only.
func Open(ctx context.Context, url string, opts ...Option) (*Store, error) {
	cfg := config{schema: DefaultSchema, maxRetries: DefaultMaxRetries, histBytes: DefaultHistoryCacheBytes,
		raiseLinger: raiseLinger}
	for _, o := range opts {
		if o != nil {
			o(&cfg)
		}
	}
	if err := cfg.validate(); err != nil {
		return nil, fmt.Errorf("postgres: open: %w", err)
	}
	pcfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		return nil, fmt.Errorf("postgres: open: %w", err)
	}
	if cfg.poolConfig != nil {
		cfg.poolConfig(pcfg)
	}
	if cfg.maxConns > 0 {
		pcfg.MaxConns = cfg.maxConns
	}
	// The backend pids of the pool's connections, so that the listener can
	// skip the notifications this store sent itself (its subscribers were
	// woken when the write committed).
	ownPIDs := new(sync.Map)
	afterConnect, beforeClose := pcfg.AfterConnect, pcfg.BeforeClose
	pcfg.AfterConnect = func(ctx context.Context, c *pgx.Conn) error {
		if afterConnect != nil {
			if err := afterConnect(ctx, c); err != nil {
				return err
			}
		}
		ownPIDs.Store(c.PgConn().PID(), struct{}{})
		return nil
	}
	pcfg.BeforeClose = func(c *pgx.Conn) {
		ownPIDs.Delete(c.PgConn().PID())
		if beforeClose != nil {
			beforeClose(c)
		}
	}
	params := pcfg.ConnConfig.RuntimeParams
	params["search_path"] = `"` + cfg.schema + `"`
	if params["application_name"] == "" {
		params["application_name"] = "herald"
	}
	if cfg.syncCommit != "" {
		params["synchronous_commit"] = cfg.syncCommit
	}
	pool, err := pgxpool.NewWithConfig(ctx, pcfg)
	if err != nil {
		return nil, fmt.Errorf("postgres: open: %w", err)
	}
	if err := migrate(ctx, pool, cfg.schema); err != nil {
		pool.Close()
		return nil, fmt.Errorf("postgres: open schema %s: %w", cfg.schema, err)
	}
	h := fnv.New64a()
	h.Write([]byte("herald\x00" + cfg.schema))
	s := &Store{
		cfg:     cfg,
		pool:    pool,
		channel: "herald_" + cfg.schema,
		lockKey: h.Sum64(),
		ownPIDs: ownPIDs,
		closing: make(chan struct{}),
		hist:    backend.NewHistoryCache(cfg.histBytes),
	}
	s.claimsCold.Store(true) // a new store's cache holds nothing
	s.warm = statsWarmer{s: s, tables: warmTables, core: warmCore}
	s.warmBus = statsWarmer{s: s, tables: warmBusTables, core: len(warmBusTables)}
	s.commits = combiner[*commitCall]{maxLeaders: maxCommitBatches, maxBatch: maxCommitBatch, run: s.commitBatch}
	s.raises = combiner[*raiseCall]{maxLeaders: maxRaiseBatches, maxBatch: maxRaiseBatch, run: s.raiseBatch}
	s.publishes = combiner[*publishCall]{maxLeaders: maxPublishBatches, maxBatch: maxPublishBatch, run: s.publishBatch}
	s.defGets = combiner[*defGetCall]{maxLeaders: maxDefGetBatches, maxBatch: maxDefGetBatch, run: s.defGetBatch}
	s.notifier.start(s)
	s.listener.init(s, pcfg.ConnConfig.Copy())
	return s, nil
}

// Close stops the listener, sends the notifications still queued, and closes
// the pool (waiting for the calls in flight to release their connections).
// Calls made after Close return heraldtype.ErrClosed. Close is idempotent;
// Subscribe channels are not closed.
func (s *Store) Close() error {
	s.closeOnce.Do(func() {
		s.closed.Store(true)
		close(s.closing)
		s.listener.stop()
		s.notifier.stop()
		s.warm.wait()
		s.warmBus.wait()
		s.deferred.Lock()
		s.pool.Close()
		s.deferred.Unlock()
	})
	return nil
}

// Schema returns the PostgreSQL schema the store works in.
func (s *Store) Schema() string { return s.cfg.schema }

// Channel returns the name of the NOTIFY channel the store's wake-ups use
// ("herald_<schema>").
func (s *Store) Channel() string { return s.channel }

// signal tells subscribers, here and in other processes, that tenant has new
// work of the kinds in the mask. Call it after the write has committed.
func (s *Store) signal(tenant string, kinds storage.WorkKind) {
	s.hub.NotifyKinds(tenant, kinds)
	s.notifier.add(tenant, kinds)
}

// instanceLockKey is the transaction-level advisory lock that serializes
// InstanceCreate with EventRaise for an instance that does not exist yet.
func (s *Store) instanceLockKey(tenant, id string) int64 {
	h := fnv.New64a()
	h.Write([]byte(tenant))
	h.Write([]byte{0})
	h.Write([]byte(id))
	return int64(h.Sum64() ^ s.lockKey)
}

// ---- errors and retries ----

// SQLSTATEs raised by the schema's functions.
const (
	codeLeaseLost      = "HL001"
	codeWrongExecution = "HL002"
	// codeEndDrops: herald_end was asked to end an instance that still has
	// events to drop; the commit runs again in a transaction that drops
	// them (backend.EndInstance).
	codeEndDrops = "HL003"
)

// codeDiskFull is disk_full: the server could not extend a file (the
// transaction was rolled back). do marks it with heraldtype.ErrStorageFull.
// Out of memory (53200) and the program limits (class 54) are not about
// room to store and stay as they are.
const codeDiskFull = "53100"

func pgCode(err error) string {
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		return pe.Code
	}
	return ""
}

func pgConstraint(err error) string {
	var pe *pgconn.PgError
	if errors.As(err, &pe) && pe.Code == "23505" {
		return pe.ConstraintName
	}
	return ""
}

// connectionLost reports whether err says the connection to the server
// failed or was closed by it under the call: SQLSTATE class 08 (connection
// exception), 57P01–57P03 (the backend was terminated, the server is
// shutting down or starting), or a network error with no SQLSTATE. Such an
// error is mapped onto heraldtype.ErrUnavailable.
func connectionLost(err error) bool {
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		return strings.HasPrefix(pe.Code, "08") || pe.Code == "57P01" || pe.Code == "57P02" || pe.Code == "57P03"
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return false
	}
	var ne net.Error
	return pgconn.SafeToRetry(err) || errors.As(err, &ne) || errors.Is(err, io.EOF) ||
		errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, net.ErrClosed)
}

// do runs fn, retrying it (after a short random pause) while it fails with a
// serialization failure, a detected deadlock, or a connection error that
// pgconn says happened before anything was sent (SafeToRetry). fn must be
// safe to run again: every attempt is a new transaction, and a failed one
// wrote nothing. Any other lost connection is returned wrapped in
// heraldtype.ErrUnavailable: a write may or may not have committed, so only the
// caller knows whether it may retry.
func (s *Store) do(ctx context.Context, fn func(ctx context.Context) error) error {
	if s.closed.Load() {
		return heraldtype.ErrClosed
	}
	return s.retry(ctx, fn, func(err error) (error, bool) {
		if s.closed.Load() && !errors.Is(err, heraldtype.ErrClosed) {
			return fmt.Errorf("%w (%v)", heraldtype.ErrClosed, err), false
		}
		code := pgCode(err)
		if code == codeDiskFull {
			return fmt.Errorf("%w (%w)", err, heraldtype.ErrStorageFull), false
		}
		return err, code == "40001" || code == "40P01" || (pgconn.SafeToRetry(err) && ctx.Err() == nil)
	})
}

// retry runs fn until it succeeds, or classify (given fn's error) says not
// to try again (returning the error to return), or fn has been retried
// maxRetries times, or ctx ends; between attempts it pauses a short random
// while, longer after each. A lost connection it gives up on is returned
// wrapped in heraldtype.ErrUnavailable.
func (s *Store) retry(ctx context.Context, fn func(ctx context.Context) error, classify func(error) (error, bool)) error {
	for attempt := 0; ; attempt++ {
		err := fn(ctx)
		if err == nil {
			return nil
		}
		err, again := classify(err)
		if !again || attempt >= s.cfg.maxRetries {
			if connectionLost(err) && !errors.Is(err, heraldtype.ErrUnavailable) {
				return fmt.Errorf("%w: %w", heraldtype.ErrUnavailable, err)
			}
			return err
		}
		pause := time.Duration(rand.Int64N(int64(time.Millisecond)<<min(attempt, 5))) + 100*time.Microsecond
		t := time.NewTimer(pause)
		select {
		case <-ctx.Done():
			t.Stop()
			return err
		case <-t.C:
		}
	}
}

// doUntilRoom is do for the calls that hand back work the runtime holds
// (TurnAbandon, ActivityComplete, ActivityRetry): on a full disk it waits
// for room (see backend.UntilRoom).
func (s *Store) doUntilRoom(ctx context.Context, fn func(ctx context.Context) error) error {
	return backend.UntilRoom(ctx, s.closing, func() error { return s.do(ctx, fn) })
}

// ---- batches ----

// step is one statement of a batch and what to do with its result.
type step struct {
	what string
	row  func(pgx.Row) error
	rows func(pgx.Rows) error
	tag  func(pgconn.CommandTag) error
}

// batch is a pgx.Batch whose results are read in order, each error wrapped
// with what its statement was doing. Sent outside a transaction, its
// statements run in one implicit transaction: the first failure rolls back
// all of them.
type batch struct {
	b     pgx.Batch
	steps []step
}

func (b *batch) exec(what, sql string, args ...any) {
	b.b.Queue(sql, args...)
	b.steps = append(b.steps, step{what: what})
}

func (b *batch) execTag(what string, fn func(pgconn.CommandTag) error, sql string, args ...any) {
	b.b.Queue(sql, args...)
	b.steps = append(b.steps, step{what: what, tag: fn})
}

func (b *batch) queryRow(what string, fn func(pgx.Row) error, sql string, args ...any) {
	b.b.Queue(sql, args...)
	b.steps = append(b.steps, step{what: what, row: fn})
}

func (b *batch) query(what string, fn func(pgx.Rows) error, sql string, args ...any) {
	b.b.Queue(sql, args...)
	b.steps = append(b.steps, step{what: what, rows: fn})
}

type sender interface {
	SendBatch(ctx context.Context, b *pgx.Batch) pgx.BatchResults
}

func (b *batch) send(ctx context.Context, q sender) error {
	br := q.SendBatch(ctx, &b.b)
	for _, st := range b.steps {
		var err error
		switch {
		case st.row != nil:
			err = st.row(br.QueryRow())
		case st.rows != nil:
			var rows pgx.Rows
			rows, err = br.Query()
			if err == nil {
				err = st.rows(rows)
				rows.Close()
				if err == nil {
					err = rows.Err()
				}
			}
		default:
			var ct pgconn.CommandTag
			ct, err = br.Exec()
			if err == nil && st.tag != nil {
				err = st.tag(ct)
			}
		}
		if err != nil {
			br.Close()
			if st.what == "" {
				return err
			}
			return fmt.Errorf("%s: %w", st.what, err)
		}
	}
	return br.Close()
}

// claimSettings starts the batch of a claim: its implicit transaction
// commits without waiting for its WAL to reach disk (see the package
// comment), and its queries use the plans of scanSettings.
const claimSettings = `SELECT set_config('synchronous_commit', 'off', true), ` + scanPlans

// scanSettings starts the batch of a NextWake: its queries use the plans
// of scanPlans.
const scanSettings = `SELECT ` + scanPlans

// scanPlans are the settings of the queries that look for work (claims and
// NextWake): no bitmap scans, no sequential scans, and the generic plan
// from the first execution.
//
// They walk the partial indexes on ready_at and lease_until, which get an
// entry for every row version a claim or a raise makes, dead as soon as the
// next one is made. A plain index scan marks the dead entries it meets so
// that later scans skip them; a bitmap scan, which the planner prefers when
// its statistics say the index is small, does not, and every scan would
// visit the heap for each dead entry until vacuum removes it (tens of
// thousands after a busy minute). A claim updates the rows it picked by
// ctid (a TID scan): with its other quals (tenant, id) the planner may pick,
// for a plan it keeps, an index scan of the tenant's whole index while the
// table looks tiny; with the ctid alone and sequential scans off the TID
// scan is its only choice. Each of these queries then has one sensible plan
// whatever the statistics say, which the generic plan is; without
// force_generic_plan PostgreSQL kept planning them anew on every execution
// (a third of a claim's cost), its estimate of the generic plan being
// worse than that of the custom ones.
const scanPlans = `set_config('enable_bitmapscan', 'off', true), set_config('enable_seqscan', 'off', true),
	set_config('plan_cache_mode', 'force_generic_plan', true)`
