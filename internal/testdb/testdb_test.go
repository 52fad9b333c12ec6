package testdb

import (
	"bytes"
	"strings"
	"testing"
)

// fakeM counts runs and returns code.
type fakeM struct {
	runs, code int
}

func (m *fakeM) Run() int { m.runs++; return m.code }

func env(kv ...string) func(string) string {
	return func(k string) string {
		for i := 0; i+1 < len(kv); i += 2 {
			if kv[i] == k {
				return kv[i+1]
			}
		}
		return ""
	}
}

func TestMainWithoutURLSaysSkipped(t *testing.T) {
	m := &fakeM{code: 0}
	var stderr, tty bytes.Buffer
	if code := mainCode(m, "example.com/pkg", env(), &stderr, &tty); code != 0 || m.runs != 1 {
		t.Fatalf("code %d, runs %d; want the tests run and their code", code, m.runs)
	}
	want := `*** HERALD_TEST_POSTGRES_URL is not set: every PostgreSQL test in example.com/pkg SKIPPED — this "ok" is not a pass on PostgreSQL ***`
	for name, out := range map[string]string{"stderr": stderr.String(), "tty": tty.String()} {
		if strings.Count(out, want) != 2 {
			t.Errorf("%s: %q; want the warning before and after the tests", name, out)
		}
	}
	// No terminal: stderr only.
	stderr.Reset()
	if code := mainCode(&fakeM{code: 3}, "p", env("CI", "false"), &stderr, nil); code != 3 || !strings.Contains(stderr.String(), "SKIPPED") {
		t.Fatalf("code %d, stderr %q", code, stderr.String())
	}
}

func TestMainWithoutURLFailsInCI(t *testing.T) {
	for _, ci := range []string{"true", "1", "TRUE"} {
		m := &fakeM{}
		var stderr bytes.Buffer
		if code := mainCode(m, "example.com/pkg", env("CI", ci), &stderr, nil); code != 1 || m.runs != 1 {
			t.Fatalf("CI=%s: code %d, runs %d; want 1, the tests that need no database run", ci, code, m.runs)
		}
		if !strings.Contains(stderr.String(), "FAIL example.com/pkg") {
			t.Fatalf("CI=%s: stderr %q", ci, stderr.String())
		}
	}
}

func TestMainWithURLIsQuiet(t *testing.T) {
	m := &fakeM{code: 2}
	var stderr, tty bytes.Buffer
	if code := mainCode(m, "p", env(URLEnv, "postgres://x", "CI", "true"), &stderr, &tty); code != 2 || m.runs != 1 ||
		stderr.Len() != 0 || tty.Len() != 0 {
		t.Fatalf("code %d, runs %d, stderr %q, tty %q; want the tests run quietly", code, m.runs, stderr.String(), tty.String())
	}
}
