package postgres_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"os"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/heraldwf/herald/storage"
	"github.com/heraldwf/herald/storage/postgres"
	"github.com/heraldwf/herald/storage/storagetest"
)

// urlEnv names the environment variable that points the tests at a
// PostgreSQL server (a database the tests may create schemas in).
const urlEnv = "HERALD_TEST_POSTGRES_URL"

// testURL returns the test server's URL, or skips the test.
func testURL(t testing.TB) string {
	t.Helper()
	url := os.Getenv(urlEnv)
	if url == "" {
		t.Skipf("%s is not set: skipping the PostgreSQL tests (e.g. %s=postgres://postgres@127.0.0.1:5432/test?sslmode=disable)", urlEnv, urlEnv)
	}
	return url
}

// newSchema returns a fresh schema name, dropped (with everything in it) when
// the test ends.
func newSchema(t testing.TB) string {
	t.Helper()
	url := testURL(t)
	var b [6]byte
	rand.Read(b[:])
	schema := "herald_test_" + hex.EncodeToString(b[:])
	t.Cleanup(func() {
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
	})
	return schema
}

// open opens a store on schema, closed when the test ends (before the schema
// is dropped).
func open(t testing.TB, schema string, opts ...postgres.Option) *postgres.Store {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s, err := postgres.Open(ctx, testURL(t), append([]postgres.Option{postgres.WithSchema(schema)}, opts...)...)
	if err != nil {
		t.Fatalf("Open(schema %s): %v", schema, err)
	}
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return s
}

func TestConformance(t *testing.T) {
	testURL(t)
	storagetest.Run(t, func(t *testing.T) storage.Store {
		return open(t, newSchema(t))
	})
}

// The suite again with every subtest's store on one shared schema: tenants
// keep them apart, as they keep Herald nodes' tenants apart.
func TestConformanceSharedSchema(t *testing.T) {
	testURL(t)
	schema := newSchema(t)
	open(t, schema) // migrate once, and keep the schema until the end
	storagetest.Run(t, func(t *testing.T) storage.Store {
		return open(t, schema, postgres.WithMaxConns(8))
	})
}
