// Package clock is the time source of a Herald runtime and of its clients:
// the current time and timers. Every time the engine uses — a workflow's
// ctx.Now(), durable timers and wait timeouts, leases and heartbeats, retry
// backoff, retention and TTL expiry — is read from one Clock, so a test
// that swaps in a Virtual clock runs a 24-hour timer in microseconds by
// advancing it.
//
// Real is the wall clock and the default. Virtual is a clock that moves
// only when told to (Advance, Set); its timers fire as it passes their
// deadlines.
package clock

import (
	"sort"
	"sync"
	"time"
)

// Clock tells the time and makes timers that fire by that time. It must be
// safe for concurrent use.
type Clock interface {
	// Now returns the current time.
	Now() time.Time
	// NewTimer returns a timer that sends the time on its channel once d
	// has passed on this clock (at once if d <= 0).
	NewTimer(d time.Duration) Timer
}

// Timer is a single-shot timer of a Clock, with the semantics of
// time.Timer since Go 1.23: after Stop or Reset returns, no value from the
// timer's previous arming is received.
type Timer interface {
	// C returns the channel the firing time is sent on.
	C() <-chan time.Time
	// Stop prevents the timer from firing. It reports whether the call
	// stopped the timer (false: its firing was received, or it had been
	// stopped).
	Stop() bool
	// Reset re-arms the timer to fire d from now. It reports whether the
	// timer had been active.
	Reset(d time.Duration) bool
}

// Real returns the wall clock (time.Now and time.NewTimer).
func Real() Clock { return realClock{} }

// IsReal reports whether c is the wall clock Real returns.
func IsReal(c Clock) bool { _, ok := c.(realClock); return ok }

type realClock struct{}

func (realClock) Now() time.Time { return time.Now() }
func (realClock) NewTimer(d time.Duration) Timer {
	return realTimer{time.NewTimer(d)}
}

type realTimer struct{ t *time.Timer }

func (r realTimer) C() <-chan time.Time        { return r.t.C }
func (r realTimer) Stop() bool                 { return r.t.Stop() }
func (r realTimer) Reset(d time.Duration) bool { return r.t.Reset(d) }

// Virtual is a Clock that stands still until Advance or Set moves it. A
// timer fires when the clock reaches its deadline: Advance fires every
// timer it passes, in deadline order, before it returns. The zero value is
// not usable; call NewVirtual.
type Virtual struct {
	mu      sync.Mutex
	now     time.Time
	timers  map[*virtualTimer]struct{} // armed timers
	changed chan struct{}              // closed and replaced whenever the set of armed timers grows
}

// NewVirtual returns a virtual clock that reads start until it is moved.
func NewVirtual(start time.Time) *Virtual {
	return &Virtual{now: start, timers: map[*virtualTimer]struct{}{}, changed: make(chan struct{})}
}

// Now returns the clock's current time.
func (v *Virtual) Now() time.Time {
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.now
}

// NewTimer returns a timer that fires when the clock reaches Now()+d (at
// once if d <= 0).
func (v *Virtual) NewTimer(d time.Duration) Timer {
	t := &virtualTimer{v: v, c: make(chan time.Time, 1)}
	t.Reset(d)
	return t
}

// Advance moves the clock forward by d (a negative d is ignored) and fires
// every timer whose deadline it reaches.
func (v *Virtual) Advance(d time.Duration) {
	if d < 0 {
		return
	}
	// One critical section: concurrent Advances add up.
	v.mu.Lock()
	defer v.mu.Unlock()
	v.setLocked(v.now.Add(d))
}

// Set moves the clock to t and fires every timer whose deadline is at or
// before t. A t before the current time is ignored: the clock never goes
// back, as the engine's timestamps must not.
func (v *Virtual) Set(t time.Time) {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.setLocked(t)
}

func (v *Virtual) setLocked(t time.Time) {
	if t.Before(v.now) {
		return
	}
	v.now = t
	var due []*virtualTimer
	for vt := range v.timers {
		if !vt.deadline.After(t) {
			due = append(due, vt)
		}
	}
	sort.Slice(due, func(i, j int) bool { return due[i].deadline.Before(due[j].deadline) })
	for _, vt := range due {
		v.fireLocked(vt)
	}
}

// Timers returns how many timers are armed: a test can wait until the code
// it drives has gone to sleep before it advances the clock.
func (v *Virtual) Timers() int {
	v.mu.Lock()
	defer v.mu.Unlock()
	return len(v.timers)
}

// TimerArmed returns a channel that is closed the next time a timer is
// armed (created or reset), so a test can wait for one without polling.
func (v *Virtual) TimerArmed() <-chan struct{} {
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.changed
}

func (v *Virtual) fireLocked(vt *virtualTimer) {
	delete(v.timers, vt)
	select {
	case vt.c <- vt.deadline:
	default: // a value is already waiting: a timer fires once per arming
	}
}

type virtualTimer struct {
	v        *Virtual
	c        chan time.Time
	deadline time.Time // guarded by v.mu
}

func (t *virtualTimer) C() <-chan time.Time { return t.c }

func (t *virtualTimer) Stop() bool {
	t.v.mu.Lock()
	defer t.v.mu.Unlock()
	return t.stopLocked()
}

func (t *virtualTimer) stopLocked() bool {
	_, armed := t.v.timers[t]
	delete(t.v.timers, t)
	// As time.Timer since Go 1.23: no stale value after Stop, and a firing
	// nobody received counts as still active.
	select {
	case <-t.c:
		armed = true
	default:
	}
	return armed
}

func (t *virtualTimer) Reset(d time.Duration) bool {
	v := t.v
	v.mu.Lock()
	defer v.mu.Unlock()
	armed := t.stopLocked()
	t.deadline = v.now.Add(d)
	if d <= 0 {
		v.fireLocked(t)
		return armed
	}
	v.timers[t] = struct{}{}
	close(v.changed)
	v.changed = make(chan struct{})
	return armed
}
