package sqlite

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// bareLimit matches a LIMIT or OFFSET whose operand is a bare parameter
// (?, ?3): SQLite recompiles such a statement on every bind (see
// wconn.prepare).
var bareLimit = regexp.MustCompile(`(?i)\b(LIMIT|OFFSET)\s+\?`)

// TestNoBareLimitParameter fails on a query in the package's code that
// writes LIMIT ? instead of LIMIT +?.
func TestNoBareLimitParameter(t *testing.T) {
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	checked := 0
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		checked++
		for i, line := range strings.Split(string(b), "\n") {
			if bareLimit.MatchString(line) {
				t.Errorf("%s:%d: LIMIT or OFFSET on a bare parameter; write LIMIT +?: %s", f, i+1, strings.TrimSpace(line))
			}
		}
	}
	if checked == 0 {
		t.Fatal("no source files found")
	}
}

// TestBareLimitPattern checks that the guard above sees what it guards
// against, and passes the form the store uses.
func TestBareLimitPattern(t *testing.T) {
	for _, q := range []string{"ORDER BY id LIMIT ?", "LIMIT ?3)", "limit  ?2", "OFFSET ?"} {
		if !bareLimit.MatchString(q) {
			t.Errorf("%q not matched", q)
		}
	}
	for _, q := range []string{"ORDER BY id LIMIT +?", "LIMIT +?3)", "LIMIT 10"} {
		if bareLimit.MatchString(q) {
			t.Errorf("%q matched", q)
		}
	}
}
