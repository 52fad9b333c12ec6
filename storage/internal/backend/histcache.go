package backend

import (
	"container/list"
	"sync"
	"unsafe"

	"github.com/heraldwf/herald/history"
	"github.com/heraldwf/herald/storage"
)

// HistoryCache keeps the decoded histories of the instances whose turns a
// store claimed or committed lately (sticky histories), so that the next
// turn of such an instance reads only the events added since, instead of
// reading and decoding its whole history again: a turn on an instance with
// a long history then costs about what it costs on a short one.
//
// It relies on what a history is: an execution's events are numbered 1, 2,
// 3, … (history.Event.Seq), are only ever appended, and are never changed
// or deleted, and an instance id names one instance for good. So an entry,
// the events 1…n of an execution as some transaction saw them, stays a
// prefix of that execution's history whatever happens later, on this node
// or another: a claim that reads the events after n (and takes the entry
// only for the execution it holds) gets the whole history. An entry is
// extended by the turns the store commits and dropped when the instance
// ends or continues as new; the least recently used entries go when the
// cache holds more than its budget.
//
// The events handed out are shared: callers read them and never change
// them. Slices are handed out at full capacity, so that a caller's append
// copies, and the cache's own appends go past what any caller sees.
//
// A nil *HistoryCache caches nothing. Its methods are safe for concurrent
// use.
type HistoryCache struct {
	mu     sync.Mutex
	budget int64
	used   int64
	m      map[histKey]*list.Element
	lru    list.List // of *histEntry, most recently used first
}

type histKey struct{ tenant, id string }

type histEntry struct {
	key       histKey
	execution int
	events    []history.Event
	size      int64
	// inboxEmpty: the last commit this store made of the instance left
	// its inbox empty (NoteInbox).
	inboxEmpty bool
}

// histEventOverhead is what an event costs in memory besides its payloads
// and names (see eventSize): the decoded struct (384 bytes on 64-bit
// platforms) and the cache's share of its slice.
const histEventOverhead = int64(unsafe.Sizeof(history.Event{}))

// DefaultHistoryCacheBytes is the budget of a store's history cache unless
// its options say otherwise: 32 MiB.
const DefaultHistoryCacheBytes = 32 << 20

// eventSize estimates what ev takes in memory.
func eventSize(ev *history.Event) int64 {
	n := len(ev.Input) + len(ev.Result) + len(ev.Payload) + len(ev.Workflow) + len(ev.Name) + len(ev.EventID) +
		len(ev.Key) + len(ev.Target) + len(ev.LastEventID) + len(ev.ChildID)
	if ev.Failure != nil {
		n += len(ev.Failure.Kind) + len(ev.Failure.Message) + len(ev.Failure.Detail) + int(unsafe.Sizeof(history.Failure{}))
	}
	return int64(n) + histEventOverhead
}

func eventsSize(evs []history.Event) int64 {
	var n int64
	for i := range evs {
		n += eventSize(&evs[i])
	}
	return n
}

// NewHistoryCache returns a cache that holds at most about budget bytes of
// events (see eventSize); nil, a cache that holds nothing, if budget <= 0.
func NewHistoryCache(budget int64) *HistoryCache {
	if budget <= 0 {
		return nil
	}
	return &HistoryCache{budget: budget, m: make(map[histKey]*list.Element)}
}

// Get returns the events the cache holds of the instance's execution (nil
// if none) and the Seq of the last of them (0 if none). The caller reads
// the events after that Seq and appends them.
func (c *HistoryCache) Get(tenant, id string, execution int) ([]history.Event, int) {
	e, evs, after := c.Latest(tenant, id)
	if e != execution {
		return nil, 0
	}
	return evs, after
}

// Latest returns what the cache holds of the instance, whatever the
// execution: the execution, its events and the Seq of the last of them
// (0, nil, 0 if nothing). For a caller that learns the instance's
// execution only with the events it reads.
func (c *HistoryCache) Latest(tenant, id string) (int, []history.Event, int) {
	if c == nil {
		return 0, nil, 0
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	el := c.m[histKey{tenant, id}]
	if el == nil {
		return 0, nil, 0
	}
	e := el.Value.(*histEntry)
	c.lru.MoveToFront(el)
	n := len(e.events)
	return e.execution, e.events[:n:n], n
}

// Put records evs, the whole history of the instance's execution as a
// claim read it. A history that is not numbered 1, 2, 3, … is not kept,
// nor one larger than a quarter of the budget.
func (c *HistoryCache) Put(tenant, id string, execution int, evs []history.Event) {
	if c == nil {
		return
	}
	for i := range evs {
		if evs[i].Seq != i+1 {
			c.Drop(tenant, id)
			return
		}
	}
	size := eventsSize(evs)
	c.mu.Lock()
	defer c.mu.Unlock()
	k := histKey{tenant, id}
	if el := c.m[k]; el != nil {
		c.remove(el)
	}
	if len(evs) == 0 || size > c.budget/4 {
		return
	}
	n := len(evs)
	c.m[k] = c.lru.PushFront(&histEntry{key: k, execution: execution, events: evs[:n:n], size: size})
	c.used += size
	c.evict()
}

// Append adds evs, the events a committed turn appended to the instance's
// execution (or a claim read after the entry's), to the entry they
// continue. An entry they do not continue (another execution, or a gap:
// events this cache did not see) is dropped.
func (c *HistoryCache) Append(tenant, id string, execution int, evs []history.Event) {
	if c == nil || len(evs) == 0 {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	el := c.m[histKey{tenant, id}]
	if el == nil {
		return
	}
	e := el.Value.(*histEntry)
	n := len(e.events)
	if e.execution != execution {
		c.remove(el)
		return
	}
	for i := range evs {
		if evs[i].Seq != n+1+i {
			c.remove(el)
			return
		}
	}
	size := eventsSize(evs)
	if e.size+size > c.budget/4 {
		c.remove(el)
		return
	}
	// In place when there is room: the slices handed out end at their
	// length (Get), so no reader sees or writes past it.
	e.events = append(e.events, evs...)
	e.size += size
	c.used += size
	c.lru.MoveToFront(el)
	c.evict()
}

// continues reports whether the cache holds the instance's execution up to
// Seq seq exactly: whether events from seq+1 on would extend it.
func (c *HistoryCache) continues(tenant, id string, execution, seq int) bool {
	if c == nil {
		return false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	el := c.m[histKey{tenant, id}]
	if el == nil {
		return false
	}
	e := el.Value.(*histEntry)
	return e.execution == execution && len(e.events) == seq
}

// AppendCommitted is Append for the events a committed turn appended,
// given as the documents the store wrote: the cache keeps them as a read
// would return them (decoded from those documents: times in UTC, payloads
// as stored), never as the caller built them, so that a turn cannot tell
// whether its history came from the cache. It decodes nothing unless the
// events extend an entry; one that does not decode drops the entry.
func (c *HistoryCache) AppendCommitted(tenant, id string, execution, firstSeq int, docs []string) {
	if len(docs) == 0 || !c.continues(tenant, id, execution, firstSeq-1) {
		return
	}
	evs := make([]history.Event, len(docs))
	for i, d := range docs {
		ev, err := DecodeHistoryEvent([]byte(d))
		if err != nil {
			c.Drop(tenant, id)
			return
		}
		evs[i] = ev
	}
	c.Append(tenant, id, execution, evs)
}

// Attach returns the whole history of the instance's execution from held,
// what the cache gave a claim of it (Get, or Latest for that execution;
// nil if nothing), and read, the events the claim read after those, and
// records it: read extends the entry when held came from it, and replaces
// the entry otherwise.
func (c *HistoryCache) Attach(tenant, id string, execution int, held, read []history.Event) []history.Event {
	if len(held) == 0 {
		c.Put(tenant, id, execution, read)
		return read
	}
	c.Append(tenant, id, execution, read)
	return append(held[:len(held):len(held)], read...) // a copy: held stays as the cache has it
}

// Committed records the outcome of a store's commit of p, whose new events
// the store wrote as docs: they extend the entry if the commit succeeded
// (ok) and the instance goes on in the same execution; otherwise the entry
// goes (the instance ended or continued as new, or the commit failed and
// nothing says what the history now holds).
func (c *HistoryCache) Committed(p *storage.TurnCommitParams, docs []string, ok bool) {
	switch {
	case !ok || p.Status.Terminal() || p.ContinueAsNew != nil:
		c.Drop(p.Tenant, p.InstanceID)
	case len(p.NewEvents) > 0:
		c.AppendCommitted(p.Tenant, p.InstanceID, p.Execution, p.NewEvents[0].Seq, docs)
	}
}

// NoteInbox records, on the instance's entry if the cache holds one,
// whether the commit the store just made of it left its inbox empty. It
// is a hint for the next hand-off of the instance (InboxEmpty): one that
// expects an empty inbox need not plan to read it, and checks.
func (c *HistoryCache) NoteInbox(tenant, id string, empty bool) {
	if c == nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if el := c.m[histKey{tenant, id}]; el != nil {
		el.Value.(*histEntry).inboxEmpty = empty
	}
}

// InboxEmpty reports what NoteInbox last recorded of the instance's
// entry: false if nothing, or if the cache holds no entry.
func (c *HistoryCache) InboxEmpty(tenant, id string) bool {
	if c == nil {
		return false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	el := c.m[histKey{tenant, id}]
	return el != nil && el.Value.(*histEntry).inboxEmpty
}

// EndsAt reports whether held, what the cache gave of an execution's
// history (its events 1…n: see Get), is all of it, given end, the Seq of
// the stored history's last event (-1: not known). An execution's events
// are numbered 1, 2, 3, … without gaps, so n == end leaves nothing to read.
func EndsAt(held []history.Event, end int) bool { return len(held) > 0 && len(held) == end }

// Drop forgets the instance's entry, if any.
func (c *HistoryCache) Drop(tenant, id string) {
	if c == nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if el := c.m[histKey{tenant, id}]; el != nil {
		c.remove(el)
	}
}

// Len returns the number of instances the cache holds, and their size.
func (c *HistoryCache) Len() (int, int64) {
	if c == nil {
		return 0, 0
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.m), c.used
}

func (c *HistoryCache) remove(el *list.Element) {
	e := el.Value.(*histEntry)
	c.lru.Remove(el)
	delete(c.m, e.key)
	c.used -= e.size
}

func (c *HistoryCache) evict() {
	for c.used > c.budget {
		c.remove(c.lru.Back())
	}
}
