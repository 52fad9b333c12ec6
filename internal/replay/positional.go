package replay

import (
	"slices"
	"sort"

	"github.com/heraldwf/herald/history"
)

// Positional is the pure state machine of the positional lane (docs/positional.md)
// for one execution. It knows nothing about futures or storage: it pairs
// waits with arrivals by name, in order, and decides the fate of each
// arrival. The replay engine drives it from history; tests drive it
// directly.
type Positional struct {
	// MaxUnconsumed caps buffered events across names (rule 4).
	MaxUnconsumed int

	waits     map[string][]int // active, unmatched waits per name: their subscription seqs, oldest first
	buffered  map[string][]*Buffered
	count     int            // buffered events across names
	withdrawn map[string]int // withdrawn questions per name (rule 3)
	ordinal   map[string]int // waits made per name (the wait number of the next one, minus one)
	arrivals  int            // global arrival counter, to keep arrival order across names
}

// Buffered is an event that arrived with no wait to receive it.
type Buffered struct {
	// Event is the arrival as recorded in history (EventRaised): name, id,
	// payload, origin execution, receipt time.
	Event history.Event
	// order is the event's place in the arrival order of its lane (set on
	// every arrival, delivered or buffered), so that an event given back
	// goes back to its place.
	order int
	// returned: buffered again by a give-back (the queue lane's
	// carry-forward limit does not count it).
	returned bool
}

// Outcome is what happened to an arriving event.
type Outcome struct {
	// Delivered: the event went to the wait with subscription seq WaitSeq.
	Delivered bool
	WaitSeq   int
	// Dropped with Reason; otherwise (neither Delivered nor Dropped) the
	// event is buffered.
	Dropped bool
	Reason  history.DropReason
}

// NewPositional returns an empty lane with the given buffered-event limit.
func NewPositional(maxUnconsumed int) *Positional {
	return &Positional{
		MaxUnconsumed: maxUnconsumed,
		waits:         map[string][]int{},
		buffered:      map[string][]*Buffered{},
		withdrawn:     map[string]int{},
		ordinal:       map[string]int{},
	}
}

// Wait registers a new wait (rule 2 and 3): it clears the name's withdrawn
// questions, and receives the oldest buffered event of the name at once if
// there is one. It returns the wait's number and the event consumed, if any.
func (p *Positional) Wait(name string, seq int) (waitNumber int, got *Buffered) {
	p.ordinal[name]++
	waitNumber = p.ordinal[name]
	delete(p.withdrawn, name)
	if q := p.buffered[name]; len(q) > 0 {
		got = q[0]
		p.buffered[name] = q[1:]
		if len(p.buffered[name]) == 0 {
			delete(p.buffered, name)
		}
		p.count--
		return waitNumber, got
	}
	p.waits[name] = append(p.waits[name], seq)
	return waitNumber, nil
}

// Cancel withdraws an active wait (it lost a select or timed out). It
// reports whether the wait was active; a withdrawn wait leaves a question
// whose late answer will be dropped.
func (p *Positional) Cancel(name string, seq int) bool {
	q := p.waits[name]
	for i, s := range q {
		if s == seq {
			p.waits[name] = append(q[:i:i], q[i+1:]...)
			if len(p.waits[name]) == 0 {
				delete(p.waits, name)
			}
			p.withdrawn[name]++
			return true
		}
	}
	return false
}

// Arrive decides the fate of an arriving event (rules 1, 3, 4) and applies
// it: delivered to the oldest active wait, dropped as the late answer to a
// withdrawn wait, dropped over the limit, or buffered.
func (p *Positional) Arrive(b *Buffered) Outcome {
	p.stamp(b)
	if q := p.waits[b.Event.Name]; len(q) > 0 {
		seq := q[0]
		p.waits[b.Event.Name] = q[1:]
		if len(p.waits[b.Event.Name]) == 0 {
			delete(p.waits, b.Event.Name)
		}
		return Outcome{Delivered: true, WaitSeq: seq}
	}
	if p.withdrawn[b.Event.Name] > 0 {
		p.withdrawn[b.Event.Name]--
		if p.withdrawn[b.Event.Name] == 0 {
			delete(p.withdrawn, b.Event.Name)
		}
		return Outcome{Dropped: true, Reason: history.DropWithdrawnWait}
	}
	if p.MaxUnconsumed > 0 && p.count >= p.MaxUnconsumed {
		return Outcome{Dropped: true, Reason: history.DropLimit}
	}
	p.buffer(b)
	return Outcome{}
}

// Apply replays a recorded outcome without re-deciding it, so a changed
// limit cannot make an old history replay differently. It reports false if
// the outcome is impossible in the current state (a delivery with no active
// wait, or to another wait), which means the history does not fit the code.
func (p *Positional) Apply(b *Buffered, o Outcome) bool {
	p.stamp(b)
	switch {
	case o.Delivered:
		q := p.waits[b.Event.Name]
		if len(q) == 0 || q[0] != o.WaitSeq {
			return false
		}
		p.waits[b.Event.Name] = q[1:]
		if len(p.waits[b.Event.Name]) == 0 {
			delete(p.waits, b.Event.Name)
		}
	case o.Dropped && o.Reason == history.DropWithdrawnWait:
		if p.withdrawn[b.Event.Name] == 0 || len(p.waits[b.Event.Name]) > 0 {
			return false
		}
		p.withdrawn[b.Event.Name]--
		if p.withdrawn[b.Event.Name] == 0 {
			delete(p.withdrawn, b.Event.Name)
		}
	case o.Dropped:
		// limit and other drops change nothing
	default:
		if len(p.waits[b.Event.Name]) > 0 || p.withdrawn[b.Event.Name] > 0 {
			return false
		}
		p.buffer(b)
	}
	return true
}

// GiveBack returns an event that a wait took and whose result the
// workflow never got (the wait lost a Select): it goes back to its place in
// the order, as if it had never been taken. The oldest active wait of its
// name receives it at once (Delivered); with none it is buffered before
// every buffered event of its name that arrived after it. It opens no
// withdrawn question and answers none: the question it answered is
// withdrawn together with its answer (rule 3 drops a late answer, and this
// one is not late). It is never dropped: it was counted against the limit
// when it arrived, so it may take the lane over the limit until receives
// drain it (new arrivals are dropped meanwhile).
func (p *Positional) GiveBack(b *Buffered) Outcome {
	name := b.Event.Name
	if q := p.waits[name]; len(q) > 0 {
		seq := q[0]
		p.waits[name] = q[1:]
		if len(p.waits[name]) == 0 {
			delete(p.waits, name)
		}
		return Outcome{Delivered: true, WaitSeq: seq}
	}
	p.buffered[name] = insertByOrder(p.buffered[name], b)
	p.count++
	return Outcome{}
}

// stamp gives an arriving event its place in the arrival order.
func (p *Positional) stamp(b *Buffered) {
	p.arrivals++
	b.order = p.arrivals
}

func (p *Positional) buffer(b *Buffered) {
	p.buffered[b.Event.Name] = append(p.buffered[b.Event.Name], b)
	p.count++
}

// insertByOrder inserts b into l (ordered by arrival) at its place.
func insertByOrder(l []*Buffered, b *Buffered) []*Buffered {
	i := sort.Search(len(l), func(i int) bool { return l[i].order > b.order })
	return slices.Insert(l, i, b)
}

// Count is the number of buffered events across names.
func (p *Positional) Count() int { return p.count }

// Active reports the number of active waits of a name.
func (p *Positional) Active(name string) int { return len(p.waits[name]) }

// Withdrawn reports the withdrawn questions outstanding for a name.
func (p *Positional) Withdrawn(name string) int { return p.withdrawn[name] }

// Unconsumed returns the buffered events in arrival order (for
// continue-as-new carry-forward).
func (p *Positional) Unconsumed() []*Buffered {
	out := make([]*Buffered, 0, p.count)
	for _, q := range p.buffered {
		out = append(out, q...)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].order < out[j].order })
	return out
}
