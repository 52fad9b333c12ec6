package replay

import (
	"sort"

	"github.com/heraldwf/herald/history"
)

// Queue is the pure state machine of the queue lane (docs/queue.md): a durable
// FIFO mailbox per queue name. Unlike the positional lane it has no
// causality: a cancelled receive consumes nothing and leaves no withdrawn
// question, so a message always waits for the next receive.
type Queue struct {
	// Max caps unconsumed messages across queue names (MaxQueuedEvents).
	Max int

	waits    map[string][]int
	buffered map[string][]*Buffered
	count    int
	arrivals int
	returned int            // buffered messages that a receive gave back
	newest   map[string]int // per queue, the order of its newest message delivered or buffered
}

// NewQueue returns an empty queue lane with the given limit.
func NewQueue(max int) *Queue {
	return &Queue{Max: max, waits: map[string][]int{}, buffered: map[string][]*Buffered{}, newest: map[string]int{}}
}

// Wait registers a blocking receive: it takes the oldest message of the
// queue at once if there is one, and otherwise waits.
func (q *Queue) Wait(name string, seq int) *Buffered {
	if b := q.Take(name); b != nil {
		return b
	}
	q.waits[name] = append(q.waits[name], seq)
	return nil
}

// Take removes and returns the oldest message of the queue, or nil.
func (q *Queue) Take(name string) *Buffered {
	l := q.buffered[name]
	if len(l) == 0 {
		return nil
	}
	b := l[0]
	q.buffered[name] = l[1:]
	if len(q.buffered[name]) == 0 {
		delete(q.buffered, name)
	}
	q.uncount(b)
	return b
}

// Cancel removes a waiting receive; nothing is consumed and nothing is
// withdrawn. It reports whether the receive was waiting.
func (q *Queue) Cancel(name string, seq int) bool {
	l := q.waits[name]
	for i, s := range l {
		if s == seq {
			q.waits[name] = append(l[:i:i], l[i+1:]...)
			if len(q.waits[name]) == 0 {
				delete(q.waits, name)
			}
			return true
		}
	}
	return false
}

// Arrive decides the fate of an arriving message: delivered to the oldest
// waiting receive, or buffered. With latest (a `buffer: latest`
// definition) a buffered message of the same queue is superseded by the new
// one and returned so its drop can be recorded. Past Max the new message is
// dropped (limit).
func (q *Queue) Arrive(b *Buffered, latest bool) (o Outcome, superseded []*Buffered) {
	name := b.Event.Name
	q.stamp(b)
	if l := q.waits[name]; len(l) > 0 {
		q.newest[name] = b.order
		seq := l[0]
		q.waits[name] = l[1:]
		if len(q.waits[name]) == 0 {
			delete(q.waits, name)
		}
		return Outcome{Delivered: true, WaitSeq: seq}, nil
	}
	if latest {
		superseded = q.buffered[name]
		for _, old := range superseded {
			q.uncount(old)
		}
		delete(q.buffered, name)
	}
	if q.Max > 0 && q.count >= q.Max {
		return Outcome{Dropped: true, Reason: history.DropLimit}, superseded
	}
	q.buffer(b)
	q.newest[name] = b.order
	return Outcome{}, superseded
}

// Apply replays a recorded outcome. A superseded drop names the buffered
// message it removes by event id. It reports false if the outcome is
// impossible in the current state.
func (q *Queue) Apply(b *Buffered, o Outcome) bool {
	name := b.Event.Name
	if !(o.Dropped && o.Reason == history.DropSuperseded) {
		q.stamp(b) // an arrival (a superseded drop names an older message)
	}
	switch {
	case o.Delivered:
		l := q.waits[name]
		if len(l) == 0 || l[0] != o.WaitSeq {
			return false
		}
		q.waits[name] = l[1:]
		if len(q.waits[name]) == 0 {
			delete(q.waits, name)
		}
		q.newest[name] = b.order
	case o.Dropped && o.Reason == history.DropSuperseded:
		l := q.buffered[name]
		for i, x := range l {
			if x.Event.EventID == b.Event.EventID {
				q.buffered[name] = append(l[:i:i], l[i+1:]...)
				if len(q.buffered[name]) == 0 {
					delete(q.buffered, name)
				}
				q.uncount(x)
				return true
			}
		}
		return false
	case o.Dropped:
	default:
		if len(q.waits[name]) > 0 {
			return false
		}
		q.buffer(b)
		q.newest[name] = b.order
	}
	return true
}

// GiveBack returns a message that a receive took and whose result the
// workflow never got (the receive lost a Select): it goes back to its place
// in the order, as if it had never been taken. The oldest waiting receive
// of its queue gets it at once (Delivered); with none it is buffered before
// every message of its queue that arrived after it. On a latest-value queue
// (the message was recorded with Latest) it is dropped as superseded if a
// newer message of its queue has arrived since and was not dropped. It is never dropped for the
// limit: it was counted when it arrived, so it may take the lane over Max
// until receives drain it (new arrivals are dropped meanwhile), and it does
// not count against the carry-forward limit (Returned).
func (q *Queue) GiveBack(b *Buffered) Outcome {
	name := b.Event.Name
	if b.Event.Latest && q.newest[name] > b.order {
		return Outcome{Dropped: true, Reason: history.DropSuperseded}
	}
	if l := q.waits[name]; len(l) > 0 {
		seq := l[0]
		q.waits[name] = l[1:]
		if len(q.waits[name]) == 0 {
			delete(q.waits, name)
		}
		return Outcome{Delivered: true, WaitSeq: seq}
	}
	b.returned = true
	q.returned++
	q.buffered[name] = insertByOrder(q.buffered[name], b)
	q.count++
	return Outcome{}
}

// stamp gives an arriving message its place in the arrival order.
func (q *Queue) stamp(b *Buffered) {
	q.arrivals++
	b.order = q.arrivals
}

func (q *Queue) buffer(b *Buffered) {
	q.buffered[b.Event.Name] = append(q.buffered[b.Event.Name], b)
	q.count++
}

func (q *Queue) uncount(b *Buffered) {
	q.count--
	if b.returned {
		b.returned = false
		q.returned--
	}
}

// Count is the number of unconsumed messages across queues.
func (q *Queue) Count() int { return q.count }

// Returned is the number of unconsumed messages that a receive gave back.
func (q *Queue) Returned() int { return q.returned }

// Len is the number of unconsumed messages in one queue.
func (q *Queue) Len(name string) int { return len(q.buffered[name]) }

// Unconsumed returns the unconsumed messages in arrival order.
func (q *Queue) Unconsumed() []*Buffered {
	out := make([]*Buffered, 0, q.count)
	for _, l := range q.buffered {
		out = append(out, l...)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].order < out[j].order })
	return out
}
