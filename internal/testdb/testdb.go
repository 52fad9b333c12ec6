// Package testdb gives tests a real database: a fresh PostgreSQL schema on
// the server named by HERALD_TEST_POSTGRES_URL, dropped when the test ends.
//
// Without that variable the PostgreSQL tests skip, and `go test ./...`
// still reports their package "ok". Main (the TestMain of a package whose
// tests need PostgreSQL) says so loudly, and with CI=true fails the package
// instead; so does PostgresURL for a single test.
package testdb

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// URLEnv names the environment variable that points tests at a PostgreSQL
// server (a database the tests may create schemas in).
const URLEnv = "HERALD_TEST_POSTGRES_URL"

// BackendEnv selects the backend of the end-to-end tests: "sqlite"
// (default) or "postgres".
const BackendEnv = "HERALD_TEST_BACKEND"

// CIEnv is set to true by CI services; there a PostgreSQL test must run, not
// skip.
const CIEnv = "CI"

// inCI reports whether CIEnv says this is a CI run.
func inCI(getenv func(string) string) bool {
	ci, _ := strconv.ParseBool(getenv(CIEnv))
	return ci
}

// PostgresURL returns the test server's URL. When it is not set, it skips
// the test, or fails it under CI=true.
func PostgresURL(t testing.TB) string {
	t.Helper()
	url := os.Getenv(URLEnv)
	if url == "" && inCI(os.Getenv) {
		t.Fatalf("%s is not set and %s=true: the PostgreSQL tests must run, not skip", URLEnv, CIEnv)
	}
	if url == "" {
		t.Skipf("%s is not set: skipping the PostgreSQL tests (e.g. %s=postgres://postgres@127.0.0.1:5432/test?sslmode=disable)", URLEnv, URLEnv)
	}
	return url
}

// Backend returns the backend the end-to-end tests should use.
func Backend() string {
	if b := os.Getenv(BackendEnv); b != "" {
		return b
	}
	return "sqlite"
}

// NewSchema returns a fresh schema name, dropped with everything in it when
// the test ends (after cleanups registered later, such as closing stores).
func NewSchema(t testing.TB) string {
	t.Helper()
	url := PostgresURL(t)
	var b [6]byte
	_, _ = rand.Read(b[:])
	schema := "herald_test_" + hex.EncodeToString(b[:])
	t.Cleanup(func() { DropSchema(t, url, schema) })
	return schema
}

// DropSchema drops schema and everything in it.
func DropSchema(t testing.TB, url, schema string) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Errorf("drop schema %s: %v", schema, err)
		return
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, `DROP SCHEMA IF EXISTS "`+schema+`" CASCADE`); err != nil {
		t.Errorf("drop schema %s: %v", schema, err)
	}
}

// Main is the TestMain of a package whose tests need PostgreSQL:
//
//	func TestMain(m *testing.M) { testdb.Main(m) }
//
// When HERALD_TEST_POSTGRES_URL is not set, it prints a loud line before and
// after the tests, because `go test ./...` would otherwise print only "ok"
// for a package whose every PostgreSQL test skipped. `go test` shows a
// passing package's output only with -v, so the line also goes to the
// terminal (/dev/tty) when there is one; a result go test replays from its
// cache ("(cached)") prints nothing, -count=1 runs the tests again. With
// CI=true it fails the package instead, without running it.
func Main(m *testing.M) {
	pkg := "this package"
	if pc, _, _, ok := runtime.Caller(1); ok {
		if f := runtime.FuncForPC(pc); f != nil {
			pkg = strings.TrimSuffix(strings.TrimSuffix(f.Name(), ".TestMain"), "_test")
		}
	}
	var tty io.Writer
	if f, err := os.OpenFile("/dev/tty", os.O_WRONLY, 0); err == nil {
		defer f.Close()
		tty = f
	}
	os.Exit(mainCode(m, pkg, os.Getenv, os.Stderr, tty))
}

// mainCode is Main's logic with its surroundings passed in: it returns the
// exit code.
func mainCode(m interface{ Run() int }, pkg string, getenv func(string) string, stderr, tty io.Writer) int {
	if getenv(URLEnv) != "" {
		return m.Run()
	}
	say := func(line string) {
		fmt.Fprintln(stderr, line)
		if tty != nil {
			fmt.Fprintln(tty, line)
		}
	}
	if inCI(getenv) {
		// The tests that need no database still run; each PostgreSQL test
		// fails (PostgresURL), and so does the package, whatever they did.
		say(fmt.Sprintf("*** %s is not set and %s=true: FAIL %s: its PostgreSQL tests must run, not skip ***", URLEnv, CIEnv, pkg))
		m.Run()
		return 1
	}
	warning := fmt.Sprintf(`*** %s is not set: every PostgreSQL test in %s SKIPPED — this "ok" is not a pass on PostgreSQL ***`, URLEnv, pkg)
	say(warning)
	code := m.Run()
	say(warning)
	return code
}
