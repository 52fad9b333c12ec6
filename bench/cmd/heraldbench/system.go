package main

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"
)

// Lane is the way an event reaches a waiting instance.
type Lane string

// Lanes the round-trip scenarios use.
const (
	LanePositional Lane = "positional" // WaitEvent ⟷ RaiseEvent (or the peer's signal/event)
	LaneQueue      Lane = "queue"      // Dequeue ⟷ Enqueue
	// LaneCorrelated: WaitCorrelated(def, key) ⟷ PutCorrelatedEvent(def,
	// key); one put reaches every instance waiting on the key.
	LaneCorrelated Lane = "correlated"
)

// ErrUnsupported is returned by a System for a lane it does not have.
var ErrUnsupported = errors.New("not supported by this system")

// System is one engine on one backend, as the round-trip scenarios see it.
// Herald implements it (heraldSystem); a peer (durabletask-go, DBOS,
// Temporal) is added by implementing it in its own file and registering it
// in systems(), with its module pinned in bench/go.mod.
//
// Every scenario runs the same workflow on every system: wait for one event
// named "go" on the lane, then complete.
type System interface {
	// Name says what runs, e.g. "herald sqlite FULL".
	Name() string
	// Durability states the commit guarantee the run had, e.g. "fsync per
	// commit"; comparisons are only fair at equal durability.
	Durability() string
	// Park starts one instance per id and returns once every one of them
	// is durably waiting for its event on lane. On the correlated lane
	// instance i waits on key(i) (its own id when key is nil).
	Park(ctx context.Context, lane Lane, ids []string, key func(i int) string) error
	// Send sends the event "go" on lane to instance `to` (on the correlated
	// lane: puts it under the key `to`) and returns when the system has
	// accepted it.
	Send(ctx context.Context, lane Lane, to string) error
	// Resumed delivers one Stamp per instance whose wait was answered: the
	// moment the turn that resumed it was committed.
	Resumed() <-chan Stamp
	// Close stops the system and releases its storage.
	Close() error
}

// settler is a System whose storage is brought to its steady state before
// a paced run parks its instances (see underLoad).
type settler interface {
	// Settle returns what it did, for the result's note.
	Settle(ctx context.Context) (string, error)
}

// pgSettler makes a System on PostgreSQL a settler (pgSettle); with no
// URL it settles nothing.
type pgSettler struct{ pgURL string }

func (p pgSettler) Settle(ctx context.Context) (string, error) {
	if p.pgURL == "" {
		return "", nil
	}
	return pgSettle(ctx, p.pgURL)
}

// Stamp is an instance's resumed time.
type Stamp struct {
	ID string
	At time.Time
}

// stampBook waits for stamps by id: scenarios hand it the ids they sent to,
// it matches what the system reports.
type stampBook struct {
	mu      sync.Mutex
	at      map[string]time.Time
	waiters map[string]chan time.Time
	count   int
}

func newStampBook(src <-chan Stamp) *stampBook {
	b := &stampBook{at: map[string]time.Time{}, waiters: map[string]chan time.Time{}}
	go func() {
		for s := range src {
			b.mu.Lock()
			if _, dup := b.at[s.ID]; !dup {
				b.at[s.ID] = s.At
				b.count++
				if w, ok := b.waiters[s.ID]; ok {
					w <- s.At
					delete(b.waiters, s.ID)
				}
			}
			b.mu.Unlock()
		}
	}()
	return b
}

// wait returns the stamp of id once it is there.
func (b *stampBook) wait(ctx context.Context, id string) (time.Time, error) {
	b.mu.Lock()
	if t, ok := b.at[id]; ok {
		b.mu.Unlock()
		return t, nil
	}
	ch := make(chan time.Time, 1)
	b.waiters[id] = ch
	b.mu.Unlock()
	select {
	case t := <-ch:
		return t, nil
	case <-ctx.Done():
		return time.Time{}, fmt.Errorf("waiting for %s to resume: %w", id, ctx.Err())
	}
}

func (b *stampBook) get(id string) (time.Time, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	t, ok := b.at[id]
	return t, ok
}

func (b *stampBook) n() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.count
}
