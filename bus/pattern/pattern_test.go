package pattern_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/heraldwf/herald/bus/pattern"
	"github.com/heraldwf/herald/storage"
)

// The cap is copied, not imported (this package imports nothing of
// Herald); this keeps the copy honest.
func TestMaxNameBytesIsHeralds(t *testing.T) {
	if pattern.MaxNameBytes != storage.MaxNameBytes {
		t.Fatalf("pattern.MaxNameBytes = %d, storage.MaxNameBytes = %d", pattern.MaxNameBytes, storage.MaxNameBytes)
	}
}

func TestValidatePattern(t *testing.T) {
	long := strings.Repeat("a", pattern.MaxNameBytes+1)
	tests := []struct {
		in       string
		problems []string // substrings, one per expected problem, in order; nil: valid
	}{
		{"user.created", nil},
		{"user", nil},
		{"*", nil},
		{">", nil},
		{"user.*", nil},
		{"user.>", nil},
		{"*.created", nil},
		{"*.*.>", nil},
		{"ünïcode.événement", nil},
		{"user-created_v2:x", nil},
		{strings.Repeat("a", pattern.MaxNameBytes), nil},
		{"", []string{"is empty"}},
		{".", []string{"segment 1 of 2 is empty", "segment 2 of 2 is empty"}},
		{"user.", []string{"segment 2 of 2 is empty"}},
		{".user", []string{"segment 1 of 2 is empty"}},
		{"user..created", []string{"segment 2 of 3 is empty"}},
		{">.created", []string{"segment 1 is \">\", which may only be the last"}},
		{"user.>.x", []string{"segment 2 is \">\""}},
		{"us*er", []string{`segment 1 "us*er" has a wildcard inside it`}},
		{"user.cre>", []string{`segment 2 "cre>" has a wildcard inside it`}},
		{"**", []string{`segment 1 "**" has a wildcard inside it`}},
		{">>", []string{`segment 1 ">>" has a wildcard inside it`}},
		{"a\x00b", []string{"contains a NUL byte"}},
		{"a\xffb", []string{"is not valid UTF-8"}},
		{long, []string{"over the 255-byte cap"}},
		// Every problem is listed, not just the first.
		{"\xff..>.us*er\x00", []string{"not valid UTF-8", "NUL", "segment 2 of 4 is empty", "segment 3 is \">\"", "has a wildcard inside it"}},
		// A pathological input gets a bounded list.
		{strings.Repeat(".", 50), []string{"segment 1 of 51", "segment 2 of 51", "", "", "", "", "", "", "", "and 42 more problems"}},
	}
	for _, tt := range tests {
		err := pattern.ValidatePattern(tt.in)
		checkProblems(t, err, tt.in, true, tt.problems)
	}
}

func TestValidateEventType(t *testing.T) {
	tests := []struct {
		in       string
		problems []string
	}{
		{"user.created", nil},
		{"user", nil},
		{"a.b.c.d.e.f", nil},
		{"ünïcode.événement", nil},
		{strings.Repeat("a", pattern.MaxNameBytes), nil},
		{"", []string{"is empty"}},
		{"*", []string{`segment 1 "*" contains a wildcard character`}},
		{"user.>", []string{`segment 2 ">" contains a wildcard character`}},
		{"us*er.cr>ated", []string{`segment 1 "us*er"`, `segment 2 "cr>ated"`}},
		{"user..created", []string{"segment 2 of 3 is empty"}},
		{"user.", []string{"segment 2 of 2 is empty"}},
		{"a\x00", []string{"NUL"}},
		{"a\xc3", []string{"UTF-8"}},
		{strings.Repeat("a", pattern.MaxNameBytes+1), []string{"256 bytes, over the 255-byte cap"}},
	}
	for _, tt := range tests {
		err := pattern.ValidateEventType(tt.in)
		checkProblems(t, err, tt.in, false, tt.problems)
	}
}

func checkProblems(t *testing.T, err error, in string, isPattern bool, want []string) {
	t.Helper()
	if want == nil {
		if err != nil {
			t.Errorf("%q: unexpected error %v", in, err)
		}
		return
	}
	var pe *pattern.Error
	if !errors.As(err, &pe) {
		t.Errorf("%q: error %v is not a *pattern.Error", in, err)
		return
	}
	sentinel, other := pattern.ErrInvalidEventType, pattern.ErrInvalidPattern
	if isPattern {
		sentinel, other = other, sentinel
	}
	if !errors.Is(err, sentinel) || errors.Is(err, other) {
		t.Errorf("%q: error %v does not wrap exactly %v", in, err, sentinel)
	}
	if pe.Pattern != isPattern || pe.Input != in {
		t.Errorf("%q: error fields Pattern=%v Input=%q", in, pe.Pattern, pe.Input)
	}
	if len(pe.Problems) != len(want) {
		t.Errorf("%q: problems %q, want %d of them like %q", in, pe.Problems, len(want), want)
		return
	}
	for i, w := range want {
		if !strings.Contains(pe.Problems[i], w) {
			t.Errorf("%q: problem %d is %q, want it to contain %q", in, i, pe.Problems[i], w)
		}
	}
	if !strings.Contains(err.Error(), pe.Problems[0]) {
		t.Errorf("%q: message %q omits the problems", in, err.Error())
	}
}

func TestErrorMessageIsBounded(t *testing.T) {
	err := pattern.ValidatePattern(strings.Repeat("x", 100_000))
	if err == nil || len(err.Error()) > 200 {
		t.Fatalf("message of %d bytes: %v", len(err.Error()), err)
	}
}

func TestMatches(t *testing.T) {
	tests := []struct {
		pattern, eventType string
		want               bool
	}{
		{"user.created", "user.created", true},
		{"user.created", "user.deleted", false},
		{"user.created", "user", false},
		{"user.created", "user.created.v2", false},
		{"user.created", "User.created", false},
		{"user.*", "user.created", true},
		{"user.*", "user", false},
		{"user.*", "user.profile.updated", false},
		{"*.created", "order.created", true},
		{"*.created", "order.updated", false},
		{"*", "user", true},
		{"*", "user.created", false},
		{"user.>", "user.created", true},
		{"user.>", "user.profile.updated", true},
		{"user.>", "user", false},
		{"user.>", "order.created", false},
		{">", "user", true},
		{">", "a.b.c.d", true},
		{"*.>", "user", false},
		{"*.>", "user.created", true},
		{"user.*.updated", "user.profile.updated", true},
		{"user.*.updated", "user.profile.deleted", false},
		{"*.*.*", "a.b.c", true},
		{"*.*.*", "a.b", false},
		// Invalid on either side never matches.
		{"user.>.x", "user.a.x", false},
		{"us*er", "user", false},
		{"user.*", "user.*", false},
		{">", "", false},
		{">", "a..b", false},
	}
	for _, tt := range tests {
		if got := pattern.Matches(tt.pattern, tt.eventType); got != tt.want {
			t.Errorf("Matches(%q, %q) = %v, want %v", tt.pattern, tt.eventType, got, tt.want)
		}
	}
}
