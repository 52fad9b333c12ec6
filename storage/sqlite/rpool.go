package sqlite

import (
	"context"
	"errors"
	"sync"

	"github.com/heraldwf/herald/heraldtype"
)

// rpool is the pool of read connections, driven through the driver
// interface like the writer's (see wconn): a point read through
// database/sql cost about twice as much. Reads that need a transaction of
// their own (several statements on one snapshot) use the database/sql pool
// (Store.rdb) instead.
type rpool struct {
	dsn string
	max int

	mu     sync.Mutex
	idle   []*wconn
	open   int
	closed bool
	freed  chan struct{} // a connection was returned or closed
}

func newRPool(dsn string, max int) *rpool {
	return &rpool{dsn: dsn, max: max, freed: make(chan struct{}, 1)}
}

// get returns an idle connection, opening one if fewer than max are open,
// or waits for one.
func (p *rpool) get(ctx context.Context) (*wconn, error) {
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
			c, err := openConn(p.dsn)
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
func (p *rpool) put(c *wconn) {
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
