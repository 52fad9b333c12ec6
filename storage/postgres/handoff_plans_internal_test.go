package postgres

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/heraldwf/herald/history"
	"github.com/heraldwf/herald/storage"
)

// A raise that hands its instance off loads it with a claim's loading
// statements, and plans them as a claim does (scanPlans): PostgreSQL's
// default would plan them anew on every hand-off, its estimate of their
// generic plans being worse than that of the custom ones. On a pool of one
// connection, every hand-off's statements are that connection's prepared
// statements, whose plan counts pg_prepared_statements keeps.
func TestHandOffLoadsUseGenericPlans(t *testing.T) {
	ctx, s, _, _ := openInSchema(t, time.Minute, WithMaxConns(1))
	now := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	// More hand-offs than the five custom plans PostgreSQL makes before it
	// weighs the generic one.
	const n = 8
	for i := range n {
		id := fmt.Sprintf("i%d", i)
		if _, err := s.InstanceCreate(ctx, &storage.InstanceCreateParams{Tenant: "t", ID: id, Workflow: "wf", Now: now}); err != nil {
			t.Fatal(err)
		}
		res, err := s.EventRaise(ctx, &storage.EventRaiseParams{Tenant: "t", InstanceID: id, EventID: "e" + id,
			Lane: history.LanePositional, Name: "go", Now: now, Claim: &storage.TurnClaimParams{Lease: time.Minute}})
		if err != nil {
			t.Fatal(err)
		}
		if res.Turn == nil || !slices.ContainsFunc(res.Turn.Messages, func(m storage.Message) bool { return m.EventID == "e"+id }) {
			t.Fatalf("raise %d did not hand its instance off with its event: %+v", i, res.Turn)
		}
	}
	conn, err := s.pool.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Release()
	for _, c := range []struct{ name, sql string }{
		{"history", claimHistorySQL},
		{"messages", claimMessagesSQL},
	} {
		var generic, custom int64
		if err := conn.QueryRow(ctx, `SELECT generic_plans, custom_plans FROM pg_prepared_statements WHERE statement = $1`,
			c.sql).Scan(&generic, &custom); err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if custom != 0 || generic != n {
			t.Errorf("%s: %d generic and %d custom plans in %d hand-offs, want %d generic", c.name, generic, custom, n, n)
		}
	}
}
