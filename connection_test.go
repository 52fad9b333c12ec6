package herald_test

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/heraldwf/herald"
	"github.com/heraldwf/herald/internal/testdb"
	"github.com/heraldwf/herald/storage"
	"github.com/heraldwf/herald/storage/postgres"
)

// A PostgreSQL connection killed under a call (pg_terminate_backend, a
// restarted server, a dropped network) must not reach the caller of a read
// or of an event send: Herald retries those, boundedly, as they are safe to
// repeat. Whatever still fails says ErrUnavailable, never a raw SQLSTATE.
// (SQLite has no connection to lose.)
func TestKilledConnectionsAreRetried(t *testing.T) {
	t.Parallel()
	base := testdb.PostgresURL(t)
	app := "herald-kill-" + testdb.NewSchema(t)[len("herald_test_"):]
	u, err := url.Parse(base)
	if err != nil {
		t.Fatal(err)
	}
	q := u.Query()
	q.Set("application_name", app)
	u.RawQuery = q.Encode()
	schema := testdb.NewSchema(t)
	ctx := context.Background()
	st, err := postgres.Open(ctx, u.String(), postgres.WithSchema(schema), postgres.WithMaxConns(4))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	// A claim whose answer was lost with its connection holds its lease
	// until it runs out: keep that short.
	b := setupOn(t, st, &herald.Config{TurnLease: time.Second}, doorWorkflows)

	killer, err := pgx.Connect(ctx, base)
	if err != nil {
		t.Fatal(err)
	}
	defer killer.Close(ctx)
	kill := func() int {
		var n int
		if err := killer.QueryRow(ctx, `SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity
			WHERE application_name = $1 AND backend_type = 'client backend'`, app).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	killed := 0
	for i := range 10 {
		id := fmt.Sprintf("k-%d", i)
		if _, err := b.client.StartWorkflow(b.ctx, "echo", nil, herald.WithInstanceID(id)); err != nil {
			t.Fatal(err)
		}
		killed += kill()
		if _, err := b.client.Status(b.ctx, id); err != nil {
			t.Fatalf("Status after the connections were killed: %v", err)
		}
		killed += kill()
		if _, err := b.client.History(b.ctx, id, 0); err != nil {
			t.Fatalf("History after the connections were killed: %v", err)
		}
		killed += kill()
		if _, err := b.client.RaiseEvent(b.ctx, id, "x", i, herald.WithEventID("e-"+id)); err != nil {
			t.Fatalf("RaiseEvent after the connections were killed: %v", err)
		}
		killed += kill()
		if _, err := b.client.EventFate(b.ctx, "e-"+id); err != nil {
			t.Fatalf("EventFate after the connections were killed: %v", err)
		}
		killed += kill()
		if _, err := b.client.Events(b.ctx, id); err != nil {
			t.Fatalf("Events after the connections were killed: %v", err)
		}
		killed += kill()
		info, err := b.client.WaitForCompletion(b.ctx, id)
		if err != nil {
			t.Fatalf("WaitForCompletion after the connections were killed: %v", err)
		}
		var got int
		if err := info.Result(&got); err != nil || got != i {
			t.Fatalf("%s: %d, %v", id, got, err)
		}
	}
	if killed == 0 {
		t.Fatal("no connection was killed: the test tested nothing")
	}
	t.Logf("killed %d connections", killed)

	// Below the client's retries, the store maps a lost connection onto
	// ErrUnavailable: a call made right after its connection was killed
	// fails so (the pool cannot know the connection is gone), never with a
	// raw SQLSTATE.
	direct, err := postgres.Open(ctx, u.String(), postgres.WithSchema(schema), postgres.WithMaxConns(1))
	if err != nil {
		t.Fatal(err)
	}
	defer direct.Close()
	unavailable := 0
	for range 20 {
		if _, err := direct.InstanceGet(ctx, &storage.InstanceGetParams{Tenant: herald.DefaultTenant, ID: "k-0"}); err != nil {
			if !errors.Is(err, herald.ErrUnavailable) {
				t.Fatalf("InstanceGet after its connection was killed: %v, want ErrUnavailable", err)
			}
			unavailable++
		}
		kill()
	}
	if unavailable == 0 {
		t.Fatal("no call saw its connection killed: the mapping onto ErrUnavailable was not tested")
	}
}
