// Package gopool runs functions on reused goroutines, which keep the
// stacks they grew.
//
// A new goroutine starts with a small stack and, as its calls go deeper,
// grows it by copying it to one twice the size (runtime.newstack,
// runtime.copystack), several times for a deep call chain; when it ends,
// the runtime frees a grown stack rather than keep it for the next
// goroutine. A turn of the runtime goes deep (the replay engine, JSON, the
// store's driver), and so does a workflow's code: run on a new goroutine
// each, growing stacks took a tenth of the process's CPU under load. A
// Pool hands a function to a goroutine that ran an earlier one and waits
// for work between functions, its stack grown already. (The garbage
// collector halves the stack of a waiting goroutine that uses little of
// it, so after a collection it may grow it again, once.)
//
// A function run by Go behaves as with a go statement: a panic it does not
// recover ends the process (the pool recovers nothing), and
// runtime.Goexit ends its goroutine, which then does not come back to the
// pool. What a goroutine inherits from the one that starts it (profiler
// labels) comes from the goroutine whose Go started it, not from the one
// whose Go handed it the function.
package gopool

import (
	"sync"
	"time"
)

// Pool runs functions on goroutines it reuses. At most maxIdle goroutines
// wait for work; one that has waited idleTimeout exits, so a burst does
// not leave its goroutines behind for ever. A nil *Pool runs every
// function on a new goroutine.
type Pool struct {
	maxIdle     int
	idleTimeout time.Duration

	mu       sync.Mutex
	idle     []*worker // waiting for work, the most recently parked last (taken first: the warmest)
	sweeping bool      // a sweep goroutine runs (while any goroutine waits)
	closed   bool      // Close was called
	done     chan struct{}
	running  sync.WaitGroup // every goroutine of the pool's, busy or waiting, and the sweep
}

// worker is a goroutine of the pool.
type worker struct {
	next  chan func() // capacity 1, so that a send never waits; nil: exit
	since time.Time   // when it began to wait for work
}

// New returns a pool that keeps at most maxIdle goroutines waiting for
// work (at least 1), each for at most about idleTimeout (at least a
// millisecond).
func New(maxIdle int, idleTimeout time.Duration) *Pool {
	return &Pool{maxIdle: max(maxIdle, 1), idleTimeout: max(idleTimeout, time.Millisecond), done: make(chan struct{})}
}

// Go runs fn on a goroutine of the pool that waits for work or, if none
// waits, on a new one, which joins the pool when fn returns. It does not
// wait for fn. After Close, fn runs on a goroutine of its own, as with go.
func (p *Pool) Go(fn func()) {
	if fn == nil {
		panic("gopool: Go of a nil function")
	}
	if p == nil {
		go fn()
		return
	}
	p.mu.Lock()
	if n := len(p.idle); n > 0 {
		w := p.idle[n-1]
		p.idle[n-1] = nil
		p.idle = p.idle[:n-1]
		p.mu.Unlock()
		w.next <- fn
		return
	}
	if p.closed {
		p.mu.Unlock()
		go fn()
		return
	}
	p.running.Add(1) // before Close's Wait, which comes after it sets closed
	p.mu.Unlock()
	go p.work(fn)
}

// Close makes the goroutines that wait for work exit, and those running a
// function exit when it returns, and waits for all of them: it waits for
// the functions running. Go still runs functions afterwards, on goroutines
// of their own. A function the pool runs must not call Close.
func (p *Pool) Close() {
	if p == nil {
		return
	}
	p.mu.Lock()
	if !p.closed {
		p.closed = true
		close(p.done)
		for i, w := range p.idle {
			w.next <- nil
			p.idle[i] = nil
		}
		p.idle = nil
	}
	p.mu.Unlock()
	p.running.Wait()
}

// Idle returns how many goroutines wait for work.
func (p *Pool) Idle() int {
	if p == nil {
		return 0
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.idle)
}

// work runs fn, then each function Go hands it, until it is told to exit.
func (p *Pool) work(fn func()) {
	defer p.running.Done()
	w := &worker{next: make(chan func(), 1)}
	for fn != nil {
		fn()
		if !p.park(w) {
			return
		}
		fn = <-w.next
	}
}

// park puts w on the idle list, unless the pool is closed or has enough
// goroutines waiting, and starts the sweep if none runs.
func (p *Pool) park(w *worker) bool {
	now := time.Now()
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed || len(p.idle) >= p.maxIdle {
		return false
	}
	w.since = now
	p.idle = append(p.idle, w)
	if !p.sweeping {
		p.sweeping = true
		p.running.Add(1)
		go p.sweep()
	}
	return true
}

// sweep tells the goroutines that have waited idleTimeout to exit, until
// none waits (or the pool is closed).
func (p *Pool) sweep() {
	defer p.running.Done()
	t := time.NewTimer(p.idleTimeout)
	defer t.Stop()
	for {
		select {
		case <-t.C:
		case <-p.done:
			return // Close tells the waiting goroutines
		}
		now := time.Now()
		p.mu.Lock()
		// The idle list is in the order the goroutines parked: the
		// longest waiting first.
		n := 0
		for n < len(p.idle) && now.Sub(p.idle[n].since) >= p.idleTimeout {
			p.idle[n].next <- nil
			n++
		}
		p.idle = p.idle[:copy(p.idle, p.idle[n:])]
		clear(p.idle[len(p.idle):cap(p.idle)])
		if len(p.idle) == 0 {
			p.sweeping = false
			p.mu.Unlock()
			return
		}
		wait := p.idle[0].since.Add(p.idleTimeout).Sub(now)
		p.mu.Unlock()
		t.Reset(wait)
	}
}
