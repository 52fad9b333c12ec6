package postgres_test

import (
	"context"
	"testing"
	"time"

	"github.com/heraldwf/herald/internal/testdb"
	"github.com/heraldwf/herald/storage"
	"github.com/heraldwf/herald/storage/postgres"
	"github.com/heraldwf/herald/storage/storagetest"
)

// TestMain says loudly that the package's tests skipped when
// HERALD_TEST_POSTGRES_URL is not set, and fails the package under CI=true.
func TestMain(m *testing.M) { testdb.Main(m) }

func testURL(t testing.TB) string { return testdb.PostgresURL(t) }

func newSchema(t testing.TB) string { return testdb.NewSchema(t) }

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

// Two stores on one schema (two nodes): each turn carries its whole
// history, however much of it the other node wrote.
func TestHistoryAcrossStores(t *testing.T) {
	testURL(t)
	schema := newSchema(t)
	storagetest.HistoryAcrossStores(t, open(t, schema), open(t, schema))
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
