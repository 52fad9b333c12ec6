package main

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"time"
)

// TestProgress_Plain: without a terminal, count lines at most one per
// plainEvery and the final count at Done, once.
func TestProgress_Plain(t *testing.T) {
	t.Parallel()
	var buf bytes.Buffer
	now := time.Unix(0, 0)
	p := newProgress(&buf, "deleting", 10)
	p.now = func() time.Time { return now }
	p.Add(1) // first count is drawn
	p.Add(1) // too soon
	now = now.Add(plainEvery)
	p.Add(3) // drawn
	p.Add(5)
	p.Done()
	p.Done()
	p.Add(1) // after Done: nothing
	if got, want := buf.String(), "deleting: 1/10\ndeleting: 5/10\ndeleting: 10/10\n"; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
}

// TestProgress_PlainLastLineOnce: when the last Add already printed the
// final count, Done does not print it again (it did: "deleting: 10/10"
// twice at the end of a plain log).
func TestProgress_PlainLastLineOnce(t *testing.T) {
	t.Parallel()
	var buf bytes.Buffer
	now := time.Unix(0, 0)
	p := newProgress(&buf, "deleting", 10)
	p.now = func() time.Time { return now }
	p.Add(4)
	now = now.Add(plainEvery)
	p.Add(6) // drawn: 10/10
	p.Done()
	if got, want := buf.String(), "deleting: 4/10\ndeleting: 10/10\n"; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
	// Nothing done at all: Done still says so, once.
	buf.Reset()
	q := newProgress(&buf, "fetching", 0)
	q.Done()
	if got, want := buf.String(), "fetching: 0\n"; got != want {
		t.Errorf("nothing done: got %q, want %q", got, want)
	}
}

// TestProgress_Terminal: on a terminal, a bar redrawn in place on one line
// that Done ends.
func TestProgress_Terminal(t *testing.T) {
	t.Parallel()
	var buf bytes.Buffer
	now := time.Unix(0, 0)
	p := newProgress(&buf, "copying", 4)
	p.tty = true
	p.now = func() time.Time { return now }
	p.Add(2)
	now = now.Add(ttyEvery)
	p.Add(2)
	p.Done()
	out := buf.String()
	if strings.Count(out, "\r\033[K") != 3 || !strings.HasSuffix(out, "\n") || strings.Count(out, "\n") != 1 {
		t.Errorf("not redrawn in place: %q", out)
	}
	if !strings.Contains(out, "copying [===============>              ] 2/4  50%") ||
		!strings.Contains(out, "copying [==============================] 4/4 100%") {
		t.Errorf("bar: %q", out)
	}
	// Unknown total: counts only.
	buf.Reset()
	q := newProgress(&buf, "fetching", 0)
	q.tty = true
	q.Add(7)
	q.Done()
	if got := buf.String(); got != "\r\033[Kfetching 7\r\033[Kfetching 7\n" {
		t.Errorf("unknown total: %q", got)
	}
}

// TestCell: how values show in tables and listings.
func TestCell(t *testing.T) {
	t.Parallel()
	when := time.Date(2026, 11, 24, 7, 13, 43, 500, time.FixedZone("x", 3600))
	for _, tc := range []struct {
		v    any
		max  int
		want string
	}{
		{nil, 0, "-"},
		{"", 0, "-"},
		{"a  b\nc", 0, "a b c"},
		{time.Time{}, 0, "-"},
		{when, 0, "2026-11-24T06:13:43Z"},
		{true, 0, "yes"},
		{false, 0, "no"},
		{42, 0, "42"},
		{90 * time.Minute, 0, "1h30m0s"},
		{json.RawMessage(`{ "a": [1, 2] }`), 0, `{"a":[1,2]}`},
		{json.RawMessage(nil), 0, "-"},
		{"abcdefghij", 5, "abcd…"},
		{"héllo wörld", 6, "héllo…"},
	} {
		if got := cell(tc.v, tc.max); got != tc.want {
			t.Errorf("cell(%#v, %d) = %q, want %q", tc.v, tc.max, got, tc.want)
		}
	}
}
