package storage

import (
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Caps on the identifiers and names Herald stores. Every backend must store
// and return any text within these rules unchanged (the conformance suite
// checks the boundary values); the engine refuses anything else at the door,
// so no backend ever sees it.
const (
	// MaxIDBytes caps instance ids, event ids and tenant names.
	MaxIDBytes = 255
	// MaxNameBytes caps workflow, activity, event, queue and event
	// definition names.
	MaxNameBytes = 255
	// MaxKeyBytes caps correlation keys.
	MaxKeyBytes = 1024
)

// TextProblem says why s cannot be stored as an identifier or name of at
// most max bytes, or returns "" if it can. The rules: not empty, valid
// UTF-8, no NUL byte, at most max bytes. (PostgreSQL refuses NUL and
// invalid UTF-8 in text, and its indexes refuse very long keys; SQLite would
// store them. One rule for both keeps the backends interchangeable.) Not "."
// or "..": an id is a path segment of the HTTP API, and a client that cleans
// its paths (the CLI's) would ask for another route. No control character
// (tab, CR, LF, any of C0 and C1), line or paragraph separator, or
// bidirectional embedding, override or isolate (U+202A–U+202E,
// U+2066–U+2069): an id is shown in logs, the CLI and the web UI, where
// these would let one id pass for another.
func TextProblem(s string, max int) string {
	switch {
	case s == "":
		return "is empty"
	case !utf8.ValidString(s):
		return "is not valid UTF-8"
	case strings.IndexByte(s, 0) >= 0:
		return "contains a NUL byte"
	case len(s) > max:
		return fmt.Sprintf("is %d bytes, over the %d-byte cap", len(s), max)
	case s == "." || s == "..":
		return fmt.Sprintf("is %q, a path segment of its own", s)
	}
	for i, r := range s {
		if unsafeRune(r) {
			return fmt.Sprintf("contains %U at byte %d (no control, line-separator or bidirectional-formatting characters)", r, i)
		}
	}
	return ""
}

// unsafeRune reports whether r is a control character, a line or paragraph
// separator, or a bidirectional embedding, override or isolate.
func unsafeRune(r rune) bool {
	return unicode.IsControl(r) || r == '\u2028' || r == '\u2029' ||
		(r >= '\u202a' && r <= '\u202e') || (r >= '\u2066' && r <= '\u2069')
}

// MaxTraceParentBytes caps a stored trace context (a W3C traceparent is 55
// bytes; the cap leaves room for a later version's).
const MaxTraceParentBytes = 256

// TraceParentProblem says why s cannot be stored as a trace context, or
// returns "" if it can: "" (none) or at most MaxTraceParentBytes of
// printable ASCII. The store does not parse it further.
func TraceParentProblem(s string) string {
	if len(s) > MaxTraceParentBytes {
		return fmt.Sprintf("is %d bytes, over the %d-byte cap", len(s), MaxTraceParentBytes)
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c > 0x7e {
			return fmt.Sprintf("has byte %#02x at %d (want printable ASCII)", c, i)
		}
	}
	return ""
}
