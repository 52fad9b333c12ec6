package heraldtest_test

import (
	"testing"

	"github.com/heraldwf/herald"
	"github.com/heraldwf/herald/heraldtest"
	"github.com/heraldwf/herald/internal/testdb"
)

// TestMain serves script targets: scripts run in child processes that
// re-execute the test binary.
func TestMain(m *testing.M) {
	herald.ServeScriptChild()
	testdb.Main(m)
}

// newEnv is heraldtest.New on the backend HERALD_TEST_BACKEND names.
func newEnv(t *testing.T, register func(rt *herald.Runtime), opts ...heraldtest.Option) *heraldtest.Env {
	t.Helper()
	return heraldtest.New(t, register, append([]heraldtest.Option{heraldtest.WithBackendFromEnv()}, opts...)...)
}
