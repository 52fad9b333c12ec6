package postgres

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/heraldwf/herald/heraldtype"
	"github.com/heraldwf/herald/storage"
)

// The checks of the bus's arguments, made before anything is sent: each
// failure wraps heraldtype.ErrInvalidArgument and nothing is written.
// Identifiers follow storage.TextProblem; other text stored as text (a
// pattern, a source, JSON documents, script source) must be what
// PostgreSQL's text accepts (valid UTF-8 without NUL bytes); free text the
// targets produce (errors, stacks, logs, filter explanations) is stored as
// bytea and never refused.

// invalid wraps heraldtype.ErrInvalidArgument.
func invalid(format string, args ...any) error {
	return fmt.Errorf("%s: %w", fmt.Sprintf(format, args...), heraldtype.ErrInvalidArgument)
}

// checkID checks an identifier (tenant, event id, type, subscription and
// script ids).
func checkID(what, s string) error {
	if p := storage.TextProblem(s, storage.MaxIDBytes); p != "" {
		return invalid("%s %s", what, p)
	}
	return nil
}

// checkText checks text stored in a text column: "" is allowed.
func checkText(what, s string) error {
	switch {
	case !utf8.ValidString(s):
		return invalid("%s is not valid UTF-8", what)
	case strings.IndexByte(s, 0) >= 0:
		return invalid("%s contains a NUL byte", what)
	}
	return nil
}

// checkJSON checks a JSON document stored in a text column (the engine
// has checked that it is JSON; Go's checker lets invalid UTF-8 through).
func checkJSON(what string, b json.RawMessage) error {
	switch {
	case !utf8.Valid(b):
		return invalid("%s is not valid UTF-8", what)
	case len(b) > 0 && strings.IndexByte(string(b), 0) >= 0:
		return invalid("%s contains a NUL byte", what)
	}
	return nil
}

// maxSourceBytes caps an event's source: "workflow:" and an instance id.
const maxSourceBytes = len("workflow:") + storage.MaxIDBytes

// checkPublish checks an event to publish (BusPublish, TurnCommit): its id
// and type follow the text rules, its data is there (the engine checks
// that it is JSON) and is valid UTF-8, its source is text of at most
// maxSourceBytes, its trace context is storable (TraceParentProblem).
func checkPublish(ev *storage.BusPublishEvent) error {
	if err := checkID("event id", ev.ID); err != nil {
		return err
	}
	if p := storage.TextProblem(ev.Type, storage.MaxNameBytes); p != "" {
		return invalid("event type %s", p)
	}
	if len(ev.Data) == 0 {
		return invalid("event %q has no data (want a JSON value)", ev.ID)
	}
	if err := checkJSON("event data", ev.Data); err != nil {
		return err
	}
	if err := checkText("event source", ev.Source); err != nil {
		return err
	}
	if len(ev.Source) > maxSourceBytes {
		return invalid("event source is %d bytes, over the %d-byte cap", len(ev.Source), maxSourceBytes)
	}
	if p := storage.TraceParentProblem(ev.TraceParent); p != "" {
		return invalid("event %q: trace context %s", ev.ID, p)
	}
	return nil
}

// checkTarget checks a target's text: JSON would replace invalid UTF-8.
func checkTarget(t *heraldtype.Target) error {
	for what, s := range map[string]string{"target kind": string(t.Kind), "target script": t.Script,
		"target workflow": t.Workflow, "target instance id": t.InstanceID, "target name": t.Name,
		"target key": t.Key, "target handler": t.Handler} {
		if !utf8.ValidString(s) {
			return invalid("%s is not valid UTF-8", what)
		}
	}
	return nil
}

// targetArg is a target's JSON.
func targetArg(t *heraldtype.Target) (string, error) {
	if err := checkTarget(t); err != nil {
		return "", err
	}
	b, err := json.Marshal(t)
	if err != nil {
		return "", fmt.Errorf("encode target: %w", err)
	}
	return string(b), nil
}

// decodeTarget decodes a target column.
func decodeTarget(b []byte) (heraldtype.Target, error) {
	var t heraldtype.Target
	if len(b) == 0 {
		return t, nil
	}
	if err := json.Unmarshal(b, &t); err != nil {
		return t, fmt.Errorf("decode target: %w: %w", err, heraldtype.ErrCorrupt)
	}
	return t, nil
}

// textArg is free text for a bytea column; "" is an empty value, not NULL.
func textArg(s string) []byte { return []byte(s) }

// jsonText is a JSON document for a text column of an array argument (NULL
// when empty).
func jsonText(m json.RawMessage) *string {
	if len(m) == 0 {
		return nil
	}
	s := string(m)
	return &s
}

// encodeLogs stores a script's log lines: each line's length as an
// unsigned varint, then its bytes. No lines is NULL.
func encodeLogs(lines []string) []byte {
	if len(lines) == 0 {
		return nil
	}
	n := 0
	for _, l := range lines {
		n += binary.MaxVarintLen64 + len(l)
	}
	b := make([]byte, 0, n)
	for _, l := range lines {
		b = binary.AppendUvarint(b, uint64(len(l)))
		b = append(b, l...)
	}
	return b
}

var errBadLogs = fmt.Errorf("decode logs: truncated: %w", heraldtype.ErrCorrupt)

// decodeLogs decodes encodeLogs.
func decodeLogs(b []byte) ([]string, error) {
	var lines []string
	for len(b) > 0 {
		n, k := binary.Uvarint(b)
		if k <= 0 || n > uint64(len(b)-k) {
			return nil, errBadLogs
		}
		lines = append(lines, string(b[k:k+int(n)]))
		b = b[k+int(n):]
	}
	return lines, nil
}

// limitOr is a page size or batch size: n, def if n is 0, at most max (0:
// no cap). A negative n is refused.
func limitOr(n, def, max int) (int, error) {
	if n < 0 {
		return 0, invalid("negative limit %d", n)
	}
	if n == 0 {
		n = def
	}
	if max > 0 && n > max {
		n = max
	}
	return n, nil
}

// Defaults of the bus's params.
const (
	busRouteMax   = 100
	busLease      = time.Minute
	busListLimit  = 100
	busListMax    = 1000
	busOpLimit    = 1000
	busPruneLimit = 1000
)

var errNilParams = fmt.Errorf("nil params: %w", heraldtype.ErrInvalidArgument)
