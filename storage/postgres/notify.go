package postgres

import (
	"context"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/heraldwf/herald/storage"
)

// notifyTimeout bounds one NOTIFY statement of the notifier.
const notifyTimeout = 5 * time.Second

// Listener reconnection backoff.
const (
	listenBackoffMin = 50 * time.Millisecond
	listenBackoffMax = 5 * time.Second
)

// listenStartWait bounds how long the first Subscribe waits for the LISTEN
// connection.
const listenStartWait = 5 * time.Second

// notifier sends the NOTIFYs that wake other processes' subscribers. Writers
// add tenants after their transaction has committed; the notifier goroutine
// sends one statement for all the tenants added since its previous one, so
// under load many writes share one NOTIFY transaction. That transaction
// commits with synchronous_commit off: it writes nothing worth a disk flush,
// and PostgreSQL holds a database-wide lock from a notifying transaction's
// pre-commit until its commit is done.
type notifier struct {
	s       *Store
	mu      sync.Mutex
	pending map[string]storage.WorkKind
	wake    chan struct{} // buffered(1)
	done    chan struct{}
}

func (n *notifier) start(s *Store) {
	n.s = s
	n.pending = make(map[string]storage.WorkKind)
	n.wake = make(chan struct{}, 1)
	n.done = make(chan struct{})
	go n.loop()
}

// add queues a notification of work of kinds for tenant. It never blocks.
func (n *notifier) add(tenant string, kinds storage.WorkKind) {
	n.mu.Lock()
	n.pending[tenant] |= kinds
	n.mu.Unlock()
	select {
	case n.wake <- struct{}{}:
	default:
	}
}

// stop sends what is queued and waits for the goroutine to end. The caller
// has closed s.closing.
func (n *notifier) stop() { <-n.done }

// notifyEvery is the shortest time between two NOTIFYs of a store. A write
// that finds the notifier idle is notified at once; under load the writes
// of the next millisecond share one NOTIFY. Each NOTIFY is a transaction,
// and wakes every backend of the database that listens on any channel;
// without a pause a store under load sent one for every few writes (0.19
// per instance of the event round trip once raises and commits were
// batched).
const notifyEvery = time.Millisecond

func (n *notifier) loop() {
	defer close(n.done)
	t := time.NewTimer(0)
	defer t.Stop()
	for {
		select {
		case <-n.wake:
			n.flush()
		case <-n.s.closing:
			n.flush()
			return
		}
		t.Reset(notifyEvery)
		select {
		case <-t.C:
		case <-n.s.closing:
			n.flush()
			return
		}
	}
}

const notifySQL = `SELECT set_config('synchronous_commit', 'off', true), pg_notify($1, t) FROM unnest($2::text[]) AS t`

func (n *notifier) flush() {
	n.mu.Lock()
	if len(n.pending) == 0 {
		n.mu.Unlock()
		return
	}
	payloads := make([]string, 0, len(n.pending))
	for t, k := range n.pending {
		payloads = append(payloads, notifyPayload(t, k))
	}
	clear(n.pending)
	n.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), notifyTimeout)
	defer cancel()
	// A failed NOTIFY is not retried: the other processes' workers find the
	// work when they next poll.
	_, _ = n.s.pool.Exec(ctx, notifySQL, n.s.channel, payloads)
}

// listener holds the LISTEN connection that turns other processes'
// notifications into local wake-ups. It starts with the first Subscribe,
// which waits until LISTEN is in effect (or the first attempt failed).
type listener struct {
	s         *Store
	cfg       *pgx.ConnConfig
	ctx       context.Context
	cancel    context.CancelFunc
	done      chan struct{}
	ready     chan struct{} // closed once the first connection attempt is over
	readyOnce sync.Once

	mu      sync.Mutex
	running bool
	stopped bool
}

func (l *listener) init(s *Store, cfg *pgx.ConnConfig) {
	l.s = s
	l.cfg = cfg
	l.ctx, l.cancel = context.WithCancel(context.Background())
	l.done = make(chan struct{})
	l.ready = make(chan struct{})
}

// ensure starts the listener goroutine unless it runs or was stopped, and
// waits (at most listenStartWait) for its first connection attempt.
func (l *listener) ensure() {
	l.mu.Lock()
	if l.stopped {
		l.mu.Unlock()
		return
	}
	if !l.running {
		l.running = true
		go l.run()
	}
	l.mu.Unlock()
	t := time.NewTimer(listenStartWait)
	defer t.Stop()
	select {
	case <-l.ready:
	case <-l.done:
	case <-t.C:
	}
}

func (l *listener) setReady() { l.readyOnce.Do(func() { close(l.ready) }) }

// stop ends the listener and waits for it.
func (l *listener) stop() {
	l.mu.Lock()
	l.stopped = true
	running := l.running
	l.mu.Unlock()
	l.cancel()
	if running {
		<-l.done
	}
}

func (l *listener) run() {
	defer close(l.done)
	backoff := listenBackoffMin
	for {
		connected, _ := l.session()
		l.setReady()
		if l.ctx.Err() != nil {
			return
		}
		if connected {
			backoff = listenBackoffMin
		}
		t := time.NewTimer(backoff)
		select {
		case <-l.ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
		backoff = min(2*backoff, listenBackoffMax)
	}
}

// session connects, listens and relays notifications until the connection
// fails or the listener is stopped. connected reports whether LISTEN took
// effect.
func (l *listener) session() (connected bool, err error) {
	conn, err := pgx.ConnectConfig(l.ctx, l.cfg)
	if err != nil {
		return false, err
	}
	defer func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		conn.Close(ctx)
	}()
	if _, err := conn.Exec(l.ctx, `LISTEN "`+l.s.channel+`"`); err != nil {
		return false, err
	}
	select {
	case <-l.ready:
		// A reconnection: notifications sent while no LISTEN was in effect
		// are lost, so wake every subscriber to look for work.
		l.s.hub.NotifyAll()
	default:
		l.setReady()
	}
	for {
		n, err := conn.WaitForNotification(l.ctx)
		if err != nil {
			return true, err
		}
		if _, own := l.s.ownPIDs.Load(n.PID); own {
			// Sent by this store's notifier: its subscribers were woken
			// when the write committed.
			continue
		}
		tenant, kinds := parsePayload(n.Payload)
		l.s.hub.NotifyKinds(tenant, kinds)
	}
}
