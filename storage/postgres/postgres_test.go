package postgres_test

import (
	"context"
	"os"
	"os/exec"
	"strings"
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

// The conformance suite on PostgreSQL in its three modes, each held to
// the suite's one set of answers: the store as it runs (the simple
// commits through herald_commit_many, the rest through queueCommit's
// batch or the interactive laneTx), every commit that may share a
// transaction forced through the batch path even alone, and every rule
// that has a Go reference applied by that reference.
func TestConformance(t *testing.T) {
	testURL(t)
	for _, mode := range []struct {
		name string
		opts []postgres.Option
	}{
		{"default", nil},
		{"batch", []postgres.Option{postgres.WithForcedCommitBatch()}},
		{"go-rules", []postgres.Option{postgres.WithGoReferenceRules()}},
	} {
		t.Run(mode.name, func(t *testing.T) {
			storagetest.Run(t, func(t *testing.T) storage.Store {
				return open(t, newSchema(t), mode.opts...)
			})
		})
	}
}

// alteredFunctionsEnv names, in the environment of the test binary's
// child run, which functions.sql TestConformanceAlteredFunction's child
// applies.
const alteredFunctionsEnv = "HERALD_TEST_ALTERED_FUNCTIONS"

// A PL/pgSQL body changed without its Go reference fails the suite:
// functions.sql with herald_commit_many's fate update no longer writing
// the reason (the Go side, queueCommit's fate statement, still does) fails
// TurnCommitFates, which the same run with functions.sql as it is passes.
// The suite runs in a child process of the test binary, whose failure is
// the answer.
func TestConformanceAlteredFunction(t *testing.T) {
	testURL(t)
	const (
		body    = "UPDATE events e SET fate = t.fate, reason = t.reason,"
		altered = "UPDATE events e SET fate = t.fate, reason = '',"
	)
	switch os.Getenv(alteredFunctionsEnv) {
	case "":
	case "altered":
		src := strings.Replace(postgres.FunctionsSQL, body, altered, 1)
		storagetest.Run(t, func(t *testing.T) storage.Store {
			return open(t, newSchema(t), postgres.WithFunctions(src))
		})
		return
	case "pristine":
		storagetest.Run(t, func(t *testing.T) storage.Store {
			return open(t, newSchema(t), postgres.WithFunctions(postgres.FunctionsSQL))
		})
		return
	}
	if !strings.Contains(postgres.FunctionsSQL, body) {
		t.Fatalf("functions.sql no longer has %q: update the alteration", body)
	}
	child := func(which string) (string, error) {
		cmd := exec.Command(os.Args[0], "-test.run", "^TestConformanceAlteredFunction$/^TurnCommitFates$", "-test.count=1", "-test.v")
		cmd.Env = append(os.Environ(), alteredFunctionsEnv+"="+which)
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	if out, err := child("pristine"); err != nil || !strings.Contains(out, "--- PASS: TestConformanceAlteredFunction/TurnCommitFates") {
		t.Fatalf("the suite with functions.sql as it is: %v\n%s", err, out)
	}
	out, err := child("altered")
	if err == nil || !strings.Contains(out, "--- FAIL: TestConformanceAlteredFunction/TurnCommitFates") || !strings.Contains(out, "q1 reason") {
		t.Fatalf("the suite with an altered herald_commit_many: %v, want TurnCommitFates to fail on q1's reason\n%s", err, out)
	}
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
