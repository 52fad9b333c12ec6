package schema

import (
	"bytes"
	"container/list"
	"hash/maphash"
	"sync"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// Cache keeps compiled schemas, and the reasons of those that cannot be
// used, by their bytes (a maphash of them, confirmed by comparing the
// bytes): every client of the process shares one cache, so a definition
// version is normally compiled once per process whichever client puts it or
// sends its events (again only after it was evicted), and two stores or
// tenants holding the same schema share it. A hit costs a fast hash and a
// comparison of the schema's bytes, a few microseconds for a large schema,
// so every event can look its schema up here. Keying by content rather than by (store, tenant,
// name, version) holds no reference to a store and cannot mistake one
// store's definition for another's. It keeps at most maxEntries schemas whose
// estimated memory (about 1 KiB per node, see MaxNodes) is at most maxBytes,
// evicting the least recently used. Concurrent first uses of a schema wait
// for one compile. Safe for concurrent use.
type Cache struct {
	maxEntries int
	maxBytes   int64

	mu      sync.Mutex
	seed    maphash.Seed
	entries map[uint64]*entry
	lru     list.List // of *entry, most recently used first; compiled entries only
	bytes   int64
}

type entry struct {
	key   uint64
	raw   []byte
	ready chan struct{} // closed once sch and err are set
	sch   *jsonschema.Schema
	err   error
	bytes int64
	elem  *list.Element
}

// nodeBytes estimates the memory of one compiled node (measured: about
// 880 bytes).
const nodeBytes = 1024

// NewCache returns an empty cache of at most maxEntries schemas and about
// maxBytes of compiled memory.
func NewCache(maxEntries int, maxBytes int64) *Cache {
	return &Cache{maxEntries: max(maxEntries, 1), maxBytes: maxBytes, seed: maphash.MakeSeed(), entries: map[uint64]*entry{}}
}

// Get returns raw compiled, or why it cannot be used (Compile's error),
// compiling it only if the cache does not hold it.
func (c *Cache) Get(raw []byte) (*jsonschema.Schema, error) {
	key := maphash.Bytes(c.seed, raw)
	c.mu.Lock()
	if e, ok := c.entries[key]; ok {
		if !bytes.Equal(e.raw, raw) {
			// Another schema with the same hash: compile this one
			// without caching it.
			c.mu.Unlock()
			sch, _, err := compile(raw)
			return sch, err
		}
		if e.elem != nil {
			c.lru.MoveToFront(e.elem)
		}
		c.mu.Unlock()
		<-e.ready
		return e.sch, e.err
	}
	e := &entry{key: key, raw: bytes.Clone(raw), ready: make(chan struct{})}
	c.entries[key] = e
	c.mu.Unlock()

	sch, nodes, err := compile(raw)
	e.sch, e.err = sch, err
	e.bytes = int64(len(raw)) + int64(nodes)*nodeBytes
	close(e.ready)

	c.mu.Lock()
	defer c.mu.Unlock()
	e.elem = c.lru.PushFront(e)
	c.bytes += e.bytes
	for c.lru.Len() > 1 && (c.lru.Len() > c.maxEntries || c.bytes > c.maxBytes) {
		old := c.lru.Remove(c.lru.Back()).(*entry)
		delete(c.entries, old.key)
		c.bytes -= old.bytes
	}
	return sch, err
}

// Len returns how many schemas the cache holds.
func (c *Cache) Len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.lru.Len()
}
