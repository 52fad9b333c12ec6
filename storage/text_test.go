package storage_test

import (
	"strings"
	"testing"

	"github.com/heraldwf/herald/storage"
)

func TestTextProblem(t *testing.T) {
	for _, s := range []string{"a", "order-1", "...", ".a", "a..b", "é'\"%_\\/ 🎉", "t€nant/x", "a b",
		"\u00a0nbsp", "\u200dzwj", "\u202f", "\u2065", "\u206a", strings.Repeat("x", storage.MaxIDBytes)} {
		if p := storage.TextProblem(s, storage.MaxIDBytes); p != "" {
			t.Errorf("%q is refused: %s", s, p)
		}
	}
	for s, want := range map[string]string{
		"":       "is empty",
		"\xff":   "is not valid UTF-8",
		"a\x00b": "contains a NUL byte",
		strings.Repeat("x", storage.MaxIDBytes+1): "over the 255-byte cap",
		".":                     `is "."`,
		"..":                    `is ".."`,
		"a\tb":                  "contains U+0009 at byte 1",
		"a\nb":                  "contains U+000A",
		"a\rb":                  "contains U+000D",
		"\x1b[31mred":           "contains U+001B at byte 0",
		"del\x7f":               "contains U+007F",
		"c1\u0085":              "contains U+0085",
		"line\u2028sep":         "contains U+2028",
		"para\u2029sep":         "contains U+2029",
		"lre\u202a":             "contains U+202A",
		"invoice-\u202etxt.exe": "contains U+202E at byte 8",
		"lri\u2066x":            "contains U+2066",
		"pdi\u2069":             "contains U+2069",
	} {
		if p := storage.TextProblem(s, storage.MaxIDBytes); !strings.Contains(p, want) {
			t.Errorf("TextProblem(%q) = %q, want it to say %q", s, p, want)
		}
	}
}

// TestValidateTenantID: a tenant id follows the same rules.
func TestValidateTenantID(t *testing.T) {
	for _, s := range []string{"..", ".", "a\tb", "a\u2067b"} {
		if storage.ValidateTenantID(s) == nil {
			t.Errorf("tenant id %q is accepted", s)
		}
	}
	if err := storage.ValidateTenantID("acme"); err != nil {
		t.Fatal(err)
	}
}
