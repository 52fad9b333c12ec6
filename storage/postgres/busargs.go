package postgres

import (
	"encoding/binary"
	"encoding/json"
	"fmt"

	"github.com/heraldwf/herald/heraldtype"
)

// The bus's arguments as PostgreSQL takes them. Their checks are
// backend's (busparams.go): text stored as text is valid UTF-8 without NUL
// bytes there; free text the targets produce (errors, stacks, logs, filter
// explanations) is stored as bytea here and never refused.

// targetArg is a target's JSON
// (checked by backend.CheckBusTarget).
func targetArg(t *heraldtype.Target) (string, error) {
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
