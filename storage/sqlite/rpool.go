package sqlite

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"sync"

	"github.com/heraldwf/herald/heraldtype"
)

// rpool is the pool of read connections, driven through the driver
// interface like the writer's (see wconn): a point read through
// database/sql cost about twice as much. Reads that need a transaction of
// their own (several statements on one snapshot) use the database/sql pool
// (Store.rdb) instead.
//
// It keeps at most one read running per GOMAXPROCS less one (readSlots). A
// read that begins while another connection holds the WAL lock it needs
// (a reader updating the read mark it wants, a checkpoint) retries inside
// SQLite, spinning and then sleeping in short nanosleep system calls, and
// neither gives its P back to the Go scheduler: when as many readers spin
// as there are Ps, the goroutine that holds the lock, runnable, gets no P
// until sysmon takes one back, and every read, write and fsync of the
// store waits meanwhile, the worst of the tail under load. With fewer
// readers than Ps one is always free.
type rpool struct {
	dsn string
	max int

	mu     sync.Mutex
	idle   []*rconn
	open   int
	closed bool
	freed  chan struct{} // a connection was returned or closed
}

func newRPool(dsn string, max int) *rpool {
	return &rpool{dsn: dsn, max: min(max, readSlots()), freed: make(chan struct{}, 1)}
}

// readSlots is how many point reads may run at once: GOMAXPROCS less one,
// at least one (see rpool).
func readSlots() int { return max(1, runtime.GOMAXPROCS(0)-1) }

// get returns an idle connection, opening one if fewer than max are open,
// or waits for one.
func (p *rpool) get(ctx context.Context) (*rconn, error) {
	for {
		p.mu.Lock()
		if p.closed {
			p.mu.Unlock()
			return nil, heraldtype.ErrClosed
		}
		if n := len(p.idle); n > 0 {
			c := p.idle[n-1]
			p.idle = p.idle[:n-1]
			p.mu.Unlock()
			return c, nil
		}
		if p.open < p.max {
			p.open++
			p.mu.Unlock()
			c, err := openRConn(p.dsn)
			if err != nil {
				p.release()
				return nil, err
			}
			return c, nil
		}
		p.mu.Unlock()
		select {
		case <-p.freed:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

// put returns a connection to the pool (closing it if the pool is closed).
func (p *rpool) put(c *rconn) {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		c.close()
		p.release()
		return
	}
	p.idle = append(p.idle, c)
	p.mu.Unlock()
	p.wake()
}

func (p *rpool) release() {
	p.mu.Lock()
	p.open--
	p.mu.Unlock()
	p.wake()
}

func (p *rpool) wake() {
	select {
	case p.freed <- struct{}{}:
	default:
	}
}

// close closes the idle connections; those in use are closed when put back.
func (p *rpool) close() error {
	p.mu.Lock()
	p.closed = true
	idle := p.idle
	p.idle = nil
	p.open -= len(idle)
	p.mu.Unlock()
	var errs []error
	for _, c := range idle {
		errs = append(errs, c.close())
	}
	return errors.Join(errs...)
}

// query runs a read on a pooled connection. The statement itself runs to
// completion (it is short); ctx bounds the wait for a connection.
func (p *rpool) query(ctx context.Context, q string, args []any) (*wrows, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	c, err := p.get(ctx)
	if err != nil {
		return nil, err
	}
	defer p.put(c)
	return c.query(q, args)
}

// rconn is a read connection with the goroutine that runs its statements.
// SQLite's code needs a deep stack: run on the caller's goroutine, a read
// grows the stack of every new goroutine that makes one (a request
// handler's, a turn's), each time copying it; this goroutine's stack stays
// grown.
type rconn struct {
	c    *wconn
	work chan func()
	ret  chan struct{} // the statement sent on work has run
}

func openRConn(dsn string) (*rconn, error) {
	c, err := openConn(dsn)
	if err != nil {
		return nil, err
	}
	rc := &rconn{c: c, work: make(chan func()), ret: make(chan struct{}, 1)}
	go rc.loop()
	return rc, nil
}

func (rc *rconn) loop() {
	for fn := range rc.work {
		fn()
		rc.ret <- struct{}{}
	}
}

// query runs c.query on the connection's goroutine.
func (rc *rconn) query(q string, args []any) (rows *wrows, err error) {
	rc.work <- func() {
		defer func() {
			if p := recover(); p != nil {
				rows, err = nil, fmt.Errorf("internal error: panic in read: %v", p)
			}
		}()
		rows, err = rc.c.query(q, args)
	}
	<-rc.ret
	return rows, err
}

// close stops the goroutine and closes the connection; no statement runs.
func (rc *rconn) close() error {
	close(rc.work)
	return rc.c.close()
}
