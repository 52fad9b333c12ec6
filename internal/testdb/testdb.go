// Package testdb gives tests a real database: a fresh PostgreSQL schema on
// the server named by HERALD_TEST_POSTGRES_URL, dropped when the test ends.
package testdb

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"os"
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

// PostgresURL returns the test server's URL, or skips the test when it is
// not set.
func PostgresURL(t testing.TB) string {
	t.Helper()
	url := os.Getenv(URLEnv)
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
