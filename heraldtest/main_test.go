package heraldtest_test

import (
	"context"
	"testing"

	"github.com/heraldwf/herald"
	"github.com/heraldwf/herald/heraldtest"
	"github.com/heraldwf/herald/internal/testdb"
	"github.com/heraldwf/herald/storage"
	"github.com/heraldwf/herald/storage/postgres"
)

// TestMain serves script targets: scripts run in child processes that
// re-execute the test binary.
func TestMain(m *testing.M) {
	herald.ServeScriptChild()
	testdb.Main(m)
}

// withBackendFromEnv runs the Env on PostgreSQL when HERALD_TEST_BACKEND
// is "postgres" (a fresh schema at HERALD_TEST_POSTGRES_URL), on SQLite
// otherwise: one test, both backends. It lives in the tests, not in
// heraldtest, so that heraldtest does not import the PostgreSQL module.
func withBackendFromEnv() heraldtest.Option {
	if testdb.Backend() != "postgres" {
		return heraldtest.WithStore(nil)
	}
	return heraldtest.WithStore(func(t testing.TB) storage.Store {
		t.Helper()
		schema := testdb.NewSchema(t) // its drop runs after the store's close below
		st, err := postgres.Open(context.Background(), testdb.PostgresURL(t), postgres.WithSchema(schema),
			postgres.WithMaxConns(4), postgres.WithSynchronousCommit("off"))
		if err != nil {
			t.Fatalf("open PostgreSQL store: %v", err)
		}
		t.Cleanup(func() { _ = st.Close() })
		return st
	})
}

// newEnv is heraldtest.New on the backend HERALD_TEST_BACKEND names.
func newEnv(t *testing.T, register func(rt *herald.Runtime), opts ...heraldtest.Option) *heraldtest.Env {
	t.Helper()
	return heraldtest.New(t, register, append([]heraldtest.Option{withBackendFromEnv()}, opts...)...)
}
