package herald

import (
	"encoding/json"
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/heraldwf/herald/storage"
)

// Limits on what crosses the door (Client calls). Every check runs before
// anything is stored, so a refused call changes nothing; the same rules
// hold on every backend.
const (
	// MaxIDBytes caps instance ids and event ids (valid UTF-8, no NUL).
	MaxIDBytes = storage.MaxIDBytes
	// MaxNameBytes caps workflow, event, queue and event definition names
	// (valid UTF-8, no NUL).
	MaxNameBytes = storage.MaxNameBytes
	// MaxKeyBytes caps correlation keys (valid UTF-8, no NUL).
	MaxKeyBytes = storage.MaxKeyBytes
	// DefaultMaxPayloadDepth is Config.MaxPayloadDepth's default.
	DefaultMaxPayloadDepth = 128
	// MaxPayloadDepthLimit is the largest Config.MaxPayloadDepth: a
	// payload is stored nested inside Herald's own records, whose decoder
	// refuses more than 10,000 levels.
	MaxPayloadDepthLimit = 1000
)

// textReasons appends to reasons why s cannot be the named identifier or
// name (what: "instance id", …).
func textReasons(reasons []string, what, s string, max int) []string {
	if p := storage.TextProblem(s, max); p != "" {
		return append(reasons, what+" "+p)
	}
	return reasons
}

// textOK reports whether s could be stored as an identifier of at most max
// bytes; a read of one that could not finds nothing.
func textOK(s string, max int) bool { return storage.TextProblem(s, max) == "" }

// cleanText reports whether s is valid UTF-8 without NUL bytes: text every
// backend stores unchanged (storage.TextProblem adds the length and
// emptiness rules of identifiers).
func cleanText(s string) bool { return utf8.ValidString(s) && strings.IndexByte(s, 0) < 0 }

// encodeJSON encodes v as JSON (a json.RawMessage as it is) and appends to
// reasons why the result cannot be stored as the named value (what:
// "payload", "input", …); see jsonReasons.
func encodeJSON(reasons []string, what string, v any, maxDepth int) (json.RawMessage, []string) {
	raw, err := marshal(v)
	if err != nil {
		return nil, append(reasons, what+" cannot be encoded as JSON: "+err.Error())
	}
	return raw, jsonReasons(reasons, what, raw, maxDepth)
}

// jsonReasons appends to reasons why raw cannot be stored as the named
// JSON value: not JSON, not UTF-8, or nested deeper than maxDepth (never
// more than MaxPayloadDepthLimit).
func jsonReasons(reasons []string, what string, raw []byte, maxDepth int) []string {
	maxDepth = min(maxDepth, MaxPayloadDepthLimit)
	switch {
	case !utf8.Valid(raw):
		return append(reasons, what+" is not valid UTF-8")
	case jsonDeeper(raw, maxDepth):
		return append(reasons, fmt.Sprintf("%s nests arrays and objects deeper than %d levels", what, maxDepth))
	case !json.Valid(raw):
		return append(reasons, what+" is not valid JSON")
	}
	return reasons
}

// jsonDeeper reports whether the arrays and objects of a JSON text nest
// deeper than max. It looks only at brackets outside strings, so it is
// linear and stops at the first level too deep; the text's validity is
// checked separately.
func jsonDeeper(b []byte, max int) bool {
	depth := 0
	inString, escaped := false, false
	for _, c := range b {
		if inString {
			switch {
			case escaped:
				escaped = false
			case c == '\\':
				escaped = true
			case c == '"':
				inString = false
			}
			continue
		}
		switch c {
		case '"':
			inString = true
		case '[', '{':
			if depth++; depth > max {
				return true
			}
		case ']', '}':
			depth--
		}
	}
	return false
}
