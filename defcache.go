package herald

import (
	"context"
	"sync"
	"time"

	"github.com/heraldwf/herald/clock"
	"github.com/heraldwf/herald/storage"
)

// defCache holds the event definitions a runtime's clients (or one
// NewClient's) send events of, by tenant and name, with their versions
// (storage.CurrentDefinition), so that a send reads no definition from the
// store: it validates the event against the cached definition and raises it
// conditional on the cached version (storage.EventRaiseParams
// .CheckDefinition). A store refuses a raise whose definition was put,
// deleted or created since (storage.ErrDefinitionChanged) and writes
// nothing; the send then drops the entry, reads the definition again,
// validates the event against it and raises again (see admission.sendLane).
// So however old an entry is, and whichever node changed the definition,
// every stored event was validated against the definition current at its
// raise. Entries therefore never expire for a raise; PutEventDefinition and
// DeleteEventDefinition drop theirs only to spare the next send a refused
// raise. A publish, whose write is not conditional, uses an entry only
// while it is young (fresh, defFreshFor), and PutEventDefinition's drop
// makes this process's change apply to its next publish.
//
// The cache holds at most defCacheEntries entries and about defCacheBytes
// (schemas mostly); past either, random entries are evicted.
type defCache struct {
	clock clock.Clock // the engine's: when an entry was read (fresh)

	mu    sync.Mutex
	m     map[defKey]*defEntry
	bytes int
	// gen is incremented by every drop: a read that began before a drop may
	// have read what the drop was for, and is not added.
	gen uint64
}

const (
	defCacheEntries = 4096
	defCacheBytes   = 16 << 20
	// defEntryBytes is what an entry is counted for beside its tenant,
	// name and schema.
	defEntryBytes = 256
)

type defKey struct{ tenant, name string }

// defEntry is a definition as a store reported it. It is never changed
// once made: sends share it.
type defEntry struct {
	def     *EventDefinition // nil: none (never put, or deleted)
	version int64            // def's version; 0 for none
	size    int
	read    time.Time // when it was read (engine clock), before the read began
}

func newDefCache(clk clock.Clock) *defCache {
	return &defCache{clock: clk, m: map[defKey]*defEntry{}}
}

// get returns k's entry, and whether it was cached; if the cache does not
// hold it, it is read from store.
func (c *defCache) get(ctx context.Context, store storage.Store, k defKey) (_ *defEntry, cached bool, _ error) {
	c.mu.Lock()
	e := c.m[k]
	gen := c.gen
	c.mu.Unlock()
	if e != nil {
		return e, true, nil
	}
	e, err := c.read(ctx, store, k, gen)
	return e, false, err
}

// fresh returns k's entry if it was read less than maxAge ago, and
// whether it was cached; otherwise k is read from store again.
func (c *defCache) fresh(ctx context.Context, store storage.Store, k defKey, maxAge time.Duration) (_ *defEntry, cached bool, _ error) {
	c.mu.Lock()
	e := c.m[k]
	gen := c.gen
	c.mu.Unlock()
	if e != nil && c.clock.Now().Sub(e.read) < maxAge {
		return e, true, nil
	}
	// Missing or too old: the read replaces it (without a drop, which
	// would keep concurrent reads from being cached).
	e, err := c.read(ctx, store, k, gen)
	return e, false, err
}

// reload drops k's entry if it is old (see drop) and reads k from store.
func (c *defCache) reload(ctx context.Context, store storage.Store, k defKey, old *defEntry) (*defEntry, error) {
	c.mu.Lock()
	c.dropLocked(k, old)
	gen := c.gen
	c.mu.Unlock()
	return c.read(ctx, store, k, gen)
}

// read reads k from store and caches it unless the cache was dropped from
// since gen.
func (c *defCache) read(ctx context.Context, store storage.Store, k defKey, gen uint64) (*defEntry, error) {
	began := c.clock.Now()
	cur, err := store.EventDefinitionCurrent(ctx, &storage.EventDefinitionGetParams{Tenant: k.tenant, Name: k.name})
	if err != nil {
		return nil, err
	}
	e := &defEntry{def: cur.Definition, version: cur.Version, size: defEntryBytes + len(k.tenant) + len(k.name), read: began}
	if cur.Definition != nil {
		e.size += len(cur.Definition.Schema)
	}
	c.add(k, e, gen)
	return e, nil
}

// add caches e as k's entry, unless the cache was dropped from since gen
// (the read that made e began before the drop) or e alone is over the
// cache's size.
func (c *defCache) add(k defKey, e *defEntry, gen uint64) {
	if e.size > defCacheBytes {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.gen != gen {
		return
	}
	if old := c.m[k]; old != nil {
		c.bytes -= old.size
	}
	c.m[k] = e
	c.bytes += e.size
	for other, o := range c.m { // map order: random eviction
		if len(c.m) <= defCacheEntries && c.bytes <= defCacheBytes {
			break
		}
		if other == k {
			continue
		}
		delete(c.m, other)
		c.bytes -= o.size
	}
}

// drop removes k's entry if it is e (any entry if e is nil): the store
// refused a raise conditional on e, or this process changed k's
// definition.
func (c *defCache) drop(k defKey, e *defEntry) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.dropLocked(k, e)
}

func (c *defCache) dropLocked(k defKey, e *defEntry) {
	c.gen++
	if old := c.m[k]; old != nil && (e == nil || old == e) {
		delete(c.m, k)
		c.bytes -= old.size
	}
}
