// Package pattern validates the event types of Herald's event bus and the
// subscription patterns that select them, and indexes patterns so that an
// event finds every subscription it matches without a scan of all of them.
//
// # Grammar
//
// An event type is one or more segments joined by dots:
//
//	event-type = segment *( "." segment )
//	segment    = 1*( any character except "." "*" ">" )
//
// A pattern has the same shape, but a segment may also be a wildcard that
// stands alone in its segment:
//
//	pattern    = psegment *( "." psegment ) [ "." ">" ] / ">"
//	psegment   = segment / "*"
//
// where
//
//   - a literal segment matches that exact segment (byte for byte, case
//     sensitive): "user.created" matches only "user.created";
//   - "*" matches exactly one segment: "user.*" matches "user.created" but
//     neither "user" nor "user.profile.updated";
//   - ">", only as the last segment, matches one or more trailing segments:
//     "user.>" matches "user.created" and "user.profile.updated" but not
//     "user"; ">" alone matches every event type.
//
// Both are valid UTF-8 without NUL bytes and at most [MaxNameBytes] bytes.
// A wildcard inside a segment ("us*er", "user.>x") is refused rather than
// read as a literal, so that no pattern means something other than what it
// looks like; for the same reason an event type contains neither "*" nor
// ">". Refusals are *[Error] values listing every problem, wrapping
// [ErrInvalidPattern] or [ErrInvalidEventType].
//
// The grammar is NATS's subject grammar (nats-io/nats-server), minus its
// whitespace rule; [Index] is a segment trie in the spirit of NATS's sublist,
// without its result cache (matching is already a few hundred nanoseconds).
package pattern

import (
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"
)

// MaxNameBytes caps patterns and event types. It equals herald.MaxNameBytes
// (and storage.MaxNameBytes), the cap on every name Herald stores; it is
// defined here so this package imports nothing of Herald, and a test keeps
// the two equal.
const MaxNameBytes = 255

const (
	// Wildcard matches exactly one segment.
	Wildcard = "*"
	// TailWildcard, only as a pattern's last segment, matches one or more
	// trailing segments.
	TailWildcard = ">"
)

// maxProblems bounds the list an *Error carries: an input of thousands of
// dots has thousands of empty segments, and the first few say enough.
const maxProblems = 10

var (
	// ErrInvalidPattern is wrapped by every error about a malformed pattern.
	ErrInvalidPattern = errors.New("invalid event-type pattern")
	// ErrInvalidEventType is wrapped by every error about a malformed event
	// type.
	ErrInvalidEventType = errors.New("invalid event type")
)

// Error is a refused pattern or event type with every problem found in it
// (at most ten, the last of them then saying how many more there were).
// errors.Is(err, ErrInvalidPattern) or errors.Is(err, ErrInvalidEventType)
// tells which of the two was refused.
type Error struct {
	// Pattern is true for a pattern, false for an event type.
	Pattern bool
	// Input is the refused text, as given.
	Input string
	// Problems lists what is wrong, one phrase each, in input order.
	Problems []string
}

func (e *Error) Error() string {
	what := "event type"
	if e.Pattern {
		what = "event-type pattern"
	}
	in := e.Input
	if len(in) > 64 {
		// The input may be megabytes; the problems already say where.
		in = in[:64] + "…"
	}
	return fmt.Sprintf("invalid %s %q: %s", what, in, strings.Join(e.Problems, "; "))
}

// Unwrap returns ErrInvalidPattern or ErrInvalidEventType.
func (e *Error) Unwrap() error {
	if e.Pattern {
		return ErrInvalidPattern
	}
	return ErrInvalidEventType
}

// ValidatePattern returns nil if p is a valid pattern, else an *Error
// wrapping ErrInvalidPattern that lists every problem.
func ValidatePattern(p string) error { return check(p, true) }

// ValidateEventType returns nil if t is a valid event type (a pattern
// without wildcards), else an *Error wrapping ErrInvalidEventType that
// lists every problem.
func ValidateEventType(t string) error {
	if eventTypeOK(t) {
		return nil
	}
	return check(t, false)
}

// check validates s as a pattern or an event type, collecting every
// problem rather than stopping at the first, so a user fixes a bad input
// in one round.
func check(s string, pattern bool) error {
	var probs []string
	add := func(format string, args ...any) {
		probs = append(probs, fmt.Sprintf(format, args...))
	}
	if s == "" {
		return &Error{Pattern: pattern, Input: s, Problems: []string{"is empty"}}
	}
	if len(s) > MaxNameBytes {
		add("is %d bytes, over the %d-byte cap", len(s), MaxNameBytes)
	}
	if !utf8.ValidString(s) {
		add("is not valid UTF-8")
	}
	if strings.IndexByte(s, 0) >= 0 {
		add("contains a NUL byte")
	}
	n := strings.Count(s, ".") + 1
	i := 0
	for seg := range strings.SplitSeq(s, ".") {
		i++
		switch {
		case seg == "":
			add("segment %d of %d is empty", i, n)
		case !pattern && strings.ContainsAny(seg, "*>"):
			add("segment %d %q contains a wildcard character; an event type has none", i, seg)
		case seg == TailWildcard && i < n:
			add("segment %d is %q, which may only be the last segment", i, TailWildcard)
		case seg == Wildcard || seg == TailWildcard:
		case strings.ContainsAny(seg, "*>"):
			add("segment %d %q has a wildcard inside it; a wildcard must be a whole segment", i, seg)
		}
	}
	if len(probs) == 0 {
		return nil
	}
	if len(probs) > maxProblems {
		more := len(probs) - (maxProblems - 1)
		probs = append(probs[:maxProblems-1], fmt.Sprintf("and %d more problems", more))
	}
	return &Error{Pattern: pattern, Input: s, Problems: probs}
}

// eventTypeOK is ValidateEventType's allocation-free fast path, taken on
// every Match: one pass over the bytes.
func eventTypeOK(t string) bool {
	if t == "" || len(t) > MaxNameBytes {
		return false
	}
	prevDot := true // an empty first segment is caught like any other
	for i := 0; i < len(t); i++ {
		switch t[i] {
		case 0, '*', '>':
			return false
		case '.':
			if prevDot {
				return false
			}
			prevDot = true
		default:
			prevDot = false
		}
	}
	return !prevDot && utf8.ValidString(t)
}

// Matches reports whether eventType matches pattern. It returns false when
// either of them is invalid; ValidatePattern and ValidateEventType say why.
func Matches(pattern, eventType string) bool {
	if !eventTypeOK(eventType) || ValidatePattern(pattern) != nil {
		return false
	}
	p, t := pattern, eventType
	for {
		pseg, prest, pmore := strings.Cut(p, ".")
		if pseg == TailWildcard {
			return true // t still has at least one segment here
		}
		tseg, trest, tmore := strings.Cut(t, ".")
		if pseg != Wildcard && pseg != tseg {
			return false
		}
		if !pmore || !tmore {
			return pmore == tmore
		}
		p, t = prest, trest
	}
}
