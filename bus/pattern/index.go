package pattern

import (
	"slices"
	"strings"
	"sync"
)

// Index maps patterns to values (typically subscription ids) and finds
// every value whose pattern matches an event type by walking a segment
// trie: at each level it follows the event's literal segment, the "*"
// child and collects the values of patterns ending in ">", so the cost of
// a match grows with the number of segments and of values returned, not
// with the number of patterns held.
//
// Each (pattern, value) pair is held once: adding it again does nothing.
// A value added under several patterns that match the same event type is
// returned once per such pattern.
//
// Concurrency: an Index is safe for any number of concurrent readers
// (Match, AppendMatch, Len) and writers (Add, Remove). It uses a
// sync.RWMutex, not copy-on-write: subscriptions change rarely, but a
// copy-on-write trie would copy a pattern's whole value list on every Add,
// quadratic when thousands of subscriptions share one pattern. Readers
// hold the read lock only while walking the trie.
//
// The zero Index is empty and ready to use; an Index must not be copied
// after first use.
type Index[V comparable] struct {
	mu   sync.RWMutex
	root node[V]
	n    int
}

// node is one level of the trie: the patterns that have consumed the
// segments on the path to it.
type node[V comparable] struct {
	literal map[string]*node[V]
	star    *node[V]
	// here holds the values of patterns that end at this node; tail those
	// of patterns that continue with a final ">". Both in the order added.
	here []V
	tail []V
}

// Add adds value under pattern. It reports whether the pair was new;
// adding a pair already held changes nothing. An invalid pattern returns
// an *Error wrapping ErrInvalidPattern and changes nothing.
//
// Add costs O(segments + values already under this pattern).
func (x *Index[V]) Add(pattern string, value V) (bool, error) {
	if err := ValidatePattern(pattern); err != nil {
		return false, err
	}
	x.mu.Lock()
	defer x.mu.Unlock()
	list := x.root.values(pattern, true)
	if slices.Contains(*list, value) {
		return false, nil
	}
	*list = append(*list, value)
	x.n++
	return true, nil
}

// Remove removes value from under pattern and prunes the trie nodes left
// empty, so churn does not grow the index. It reports whether the pair was
// held. An invalid pattern returns an *Error wrapping ErrInvalidPattern.
func (x *Index[V]) Remove(pattern string, value V) (bool, error) {
	if err := ValidatePattern(pattern); err != nil {
		return false, err
	}
	x.mu.Lock()
	defer x.mu.Unlock()
	removed := x.root.remove(pattern, value)
	if removed {
		x.n--
	}
	return removed, nil
}

// Len returns the number of (pattern, value) pairs held.
func (x *Index[V]) Len() int {
	x.mu.RLock()
	defer x.mu.RUnlock()
	return x.n
}

// Match returns the values of every pattern that matches eventType, nil if
// none does. An invalid event type returns an *Error wrapping
// ErrInvalidEventType.
//
// The order is deterministic, independent of the order patterns were
// added in: patterns compare segment by segment, a literal segment before
// "*" before ">", so the most literal pattern comes first; values under
// the same pattern come in the order they were added.
func (x *Index[V]) Match(eventType string) ([]V, error) {
	return x.AppendMatch(nil, eventType)
}

// AppendMatch is Match appending to dst, returning the extended slice; a
// caller that reuses dst matches without allocating. On an invalid event
// type it returns dst unchanged and an *Error wrapping
// ErrInvalidEventType.
func (x *Index[V]) AppendMatch(dst []V, eventType string) ([]V, error) {
	if !eventTypeOK(eventType) {
		return dst, ValidateEventType(eventType)
	}
	x.mu.RLock()
	defer x.mu.RUnlock()
	return x.root.match(dst, eventType), nil
}

// match appends the values of n's patterns matching rest, which holds at
// least one segment. The visiting order (literal, "*", then ">") is what
// makes Match's order the documented one.
func (n *node[V]) match(dst []V, rest string) []V {
	seg, after, more := strings.Cut(rest, ".")
	if c := n.literal[seg]; c != nil {
		dst = c.next(dst, after, more)
	}
	if n.star != nil {
		dst = n.star.next(dst, after, more)
	}
	return append(dst, n.tail...)
}

// next continues a match at n once a segment is consumed: the patterns
// ending at n match if nothing is left.
func (n *node[V]) next(dst []V, rest string, more bool) []V {
	if more {
		return n.match(dst, rest)
	}
	return append(dst, n.here...)
}

// values returns the list pattern's values live in, creating the path
// when create is true; nil if it does not exist and create is false.
func (n *node[V]) values(pattern string, create bool) *[]V {
	for {
		seg, rest, more := strings.Cut(pattern, ".")
		if seg == TailWildcard {
			return &n.tail
		}
		c := n.child(seg, create)
		if c == nil {
			return nil
		}
		if !more {
			return &c.here
		}
		n, pattern = c, rest
	}
}

// child returns n's child for seg (a literal or "*"), creating it when
// create is true.
func (n *node[V]) child(seg string, create bool) *node[V] {
	if seg == Wildcard {
		if n.star == nil && create {
			n.star = &node[V]{}
		}
		return n.star
	}
	c := n.literal[seg]
	if c == nil && create {
		if n.literal == nil {
			n.literal = make(map[string]*node[V])
		}
		// Clone the key: the caller's pattern may be a slice of a larger
		// string this index would otherwise keep alive.
		c = &node[V]{}
		n.literal[strings.Clone(seg)] = c
	}
	return c
}

// remove removes value from under pattern below n, pruning children that
// become empty on the way back up.
func (n *node[V]) remove(pattern string, value V) bool {
	seg, rest, more := strings.Cut(pattern, ".")
	if seg == TailWildcard {
		return removeValue(&n.tail, value)
	}
	c := n.child(seg, false)
	if c == nil {
		return false
	}
	var removed bool
	if more {
		removed = c.remove(rest, value)
	} else {
		removed = removeValue(&c.here, value)
	}
	if removed && c.empty() {
		if seg == Wildcard {
			n.star = nil
		} else {
			delete(n.literal, seg)
		}
	}
	return removed
}

func (n *node[V]) empty() bool {
	return len(n.here) == 0 && len(n.tail) == 0 && n.star == nil && len(n.literal) == 0
}

// removeValue deletes value from *list keeping the others' order, which
// Match's order depends on; an emptied list is released.
func removeValue[V comparable](list *[]V, value V) bool {
	i := slices.Index(*list, value)
	if i < 0 {
		return false
	}
	*list = slices.Delete(*list, i, i+1)
	if len(*list) == 0 {
		*list = nil
	}
	return true
}
