package postgres

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/heraldwf/herald/heraldtype"
	"github.com/heraldwf/herald/history"
	"github.com/heraldwf/herald/internal/testdb"
	"github.com/heraldwf/herald/storage"
)

// loadCounter counts the statements that read a turn's history or
// messages, in batches and alone.
type loadCounter struct {
	mu sync.Mutex
	n  map[string]int
}

func (c *loadCounter) note(sql string) {
	kind := ""
	switch {
	case sql == claimHistorySQL:
		kind = "history"
	case sql == claimMessagesSQL:
		kind = "messages"
	case sql == readHistoriesSQL:
		kind = "late history"
	case sql == lateMessagesSQL:
		kind = "late messages"
	default:
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.n[kind]++
}

func (c *loadCounter) take() map[string]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := c.n
	c.n = map[string]int{}
	return n
}

// sqlTracer is a pgx tracer that hands every statement's text, alone or in
// a batch, to its function.
type sqlTracer func(sql string)

func (f sqlTracer) TraceQueryStart(ctx context.Context, _ *pgx.Conn, d pgx.TraceQueryStartData) context.Context {
	f(d.SQL)
	return ctx
}
func (f sqlTracer) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}
func (f sqlTracer) TraceBatchStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceBatchStartData) context.Context {
	return ctx
}
func (f sqlTracer) TraceBatchQuery(_ context.Context, _ *pgx.Conn, d pgx.TraceBatchQueryData) {
	f(d.SQL)
}
func (f sqlTracer) TraceBatchEnd(context.Context, *pgx.Conn, pgx.TraceBatchEndData) {}

// handOffStores opens n stores on one fresh schema, each counting its
// loading statements.
func handOffStores(t *testing.T, n int) (context.Context, []*Store, []*loadCounter) {
	t.Helper()
	url := testdb.PostgresURL(t)
	schema := testdb.NewSchema(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	var (
		stores []*Store
		counts []*loadCounter
	)
	for range n {
		lc := &loadCounter{n: map[string]int{}}
		s, err := Open(ctx, url, WithSchema(schema), WithPoolConfig(func(c *pgxpool.Config) { c.ConnConfig.Tracer = sqlTracer(lc.note) }))
		if err != nil {
			t.Fatal(err)
		}
		s.cfg.raiseLinger = 0 // nothing commits the turns these raises hand off
		t.Cleanup(func() { s.Close() })
		stores, counts = append(stores, s), append(counts, lc)
	}
	return ctx, stores, counts
}

var hoNow = time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)

// runTurn claims the turn of instance "i" on s and commits it with evs
// (numbered after the history it got) and the timers given; it returns the
// turn it committed.
func runTurn(ctx context.Context, t *testing.T, s *Store, timers []storage.TimerSchedule, evs ...history.Event) *storage.Turn {
	t.Helper()
	turns, err := s.TurnClaim(ctx, &storage.TurnClaimParams{Tenant: "t", Now: hoNow, Lease: time.Minute})
	if err != nil || len(turns) != 1 {
		t.Fatalf("claim: %v, %d turns", err, len(turns))
	}
	tr := turns[0]
	commitTurn(ctx, t, s, tr, timers, evs...)
	return tr
}

func commitTurn(ctx context.Context, t *testing.T, s *Store, tr *storage.Turn, timers []storage.TimerSchedule, evs ...history.Event) {
	t.Helper()
	ids := make([]int64, len(tr.Messages))
	for i, m := range tr.Messages {
		ids[i] = m.ID
	}
	next := len(tr.History) + 1
	for i := range evs {
		evs[i].Seq, evs[i].Time = next+i, hoNow
	}
	if _, err := s.TurnCommit(ctx, &storage.TurnCommitParams{Tenant: "t", InstanceID: "i", LockToken: tr.LockToken,
		Execution: tr.Instance.Execution, Now: hoNow, Status: heraldtype.StatusRunning, ConsumedMessages: ids,
		NewEvents: evs, Timers: timers}); err != nil {
		t.Fatal(err)
	}
}

// raise raises eventID to "i" without a hand-off.
func raise(ctx context.Context, t *testing.T, s *Store, eventID string) {
	t.Helper()
	if _, err := s.EventRaise(ctx, &storage.EventRaiseParams{Tenant: "t", InstanceID: "i", EventID: eventID,
		Lane: history.LanePositional, Name: "go", Now: hoNow}); err != nil {
		t.Fatal(err)
	}
}

func handOff(ctx context.Context, t *testing.T, s *Store, eventID string) *storage.Turn {
	t.Helper()
	var got *storage.Turn
	res, err := s.EventRaise(ctx, &storage.EventRaiseParams{Tenant: "t", InstanceID: "i", EventID: eventID,
		Lane: history.LanePositional, Name: "go", Payload: json.RawMessage(`{"n":1}`), Now: hoNow, TraceParent: "tp",
		Claim: &storage.TurnClaimParams{Lease: time.Minute}, OnClaimed: func(t *storage.Turn) { got = t }})
	if err != nil {
		t.Fatal(err)
	}
	if got == nil {
		got = res.Turn
	}
	if got == nil {
		t.Fatalf("raise of %s handed nothing off", eventID)
	}
	return got
}

// wantTurnAsRead gives the turn's lease back and claims the instance
// again: the claim reads everything, and the hand-off's turn must be what
// it reads.
func wantTurnAsRead(ctx context.Context, t *testing.T, s *Store, got *storage.Turn) {
	t.Helper()
	if err := s.TurnAbandon(ctx, &storage.TurnAbandonParams{Tenant: "t", InstanceID: "i", LockToken: got.LockToken}); err != nil {
		t.Fatal(err)
	}
	s.hist.Drop("t", "i")
	turns, err := s.TurnClaim(ctx, &storage.TurnClaimParams{Tenant: "t", Now: hoNow, Lease: time.Minute})
	if err != nil || len(turns) != 1 {
		t.Fatalf("claim: %v, %d turns", err, len(turns))
	}
	want := turns[0]
	if !reflect.DeepEqual(got.History, want.History) {
		t.Errorf("handed-off history:\n %+v\nread:\n %+v", got.History, want.History)
	}
	if !reflect.DeepEqual(got.Messages, want.Messages) {
		t.Errorf("handed-off messages:\n %+v\nread:\n %+v", got.Messages, want.Messages)
	}
}

func wantLoads(t *testing.T, what string, lc *loadCounter, want map[string]int) {
	t.Helper()
	if got := lc.take(); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("%s: loading statements %v, want %v", what, got, want)
	}
}

func parkInstance(ctx context.Context, t *testing.T, s *Store) {
	t.Helper()
	if _, err := s.InstanceCreate(ctx, &storage.InstanceCreateParams{Tenant: "t", ID: "i", Workflow: "wf", Now: hoNow}); err != nil {
		t.Fatal(err)
	}
}

// A hand-off of an instance whose last turn this store committed, leaving
// its inbox empty, reads nothing but the raise's own statement: its
// history is the cache's, its message the one it inserted; and the turn is
// exactly what a claim reads.
func TestHandOffReadsNothingItKnows(t *testing.T) {
	ctx, ss, lcs := handOffStores(t, 1)
	s, lc := ss[0], lcs[0]
	parkInstance(ctx, t, s)
	runTurn(ctx, t, s, nil, history.Event{Kind: history.EventSubscribed, Name: "go"})
	lc.take()
	got := handOff(ctx, t, s, "e1")
	wantLoads(t, "hand-off", lc, map[string]int{})
	if len(got.History) != 2 || len(got.Messages) != 1 {
		t.Fatalf("handed-off turn: %d events, %d messages; want 2 and 1", len(got.History), len(got.Messages))
	}
	wantTurnAsRead(ctx, t, s, got)
}

// A store whose cache is behind (another store ran a turn of the instance
// since) learns it from the row's history_seq and reads the rest after the
// raise.
func TestHandOffReadsHistoryItMissed(t *testing.T) {
	ctx, ss, lcs := handOffStores(t, 2)
	a, b := ss[0], ss[1]
	parkInstance(ctx, t, a)
	runTurn(ctx, t, a, nil, history.Event{Kind: history.EventSubscribed, Name: "go"})
	raise(ctx, t, b, "e0")
	runTurn(ctx, t, b, nil, history.Event{Kind: history.EventRaised, EventID: "e0", Name: "go"},
		history.Event{Kind: history.EventSubscribed, Name: "go"})
	lcs[0].take()
	got := handOff(ctx, t, a, "e1")
	wantLoads(t, "hand-off", lcs[0], map[string]int{"late history": 1})
	if len(got.History) != 4 {
		t.Fatalf("handed-off history: %d events, want 4", len(got.History))
	}
	wantTurnAsRead(ctx, t, a, got)
}

// An inbox that is not empty when the raise leases the instance (a message
// came without a hand-off after the store's last commit) is read after
// the raise, so the turn gets every message, in order.
func TestHandOffReadsMessagesItDidNotExpect(t *testing.T) {
	ctx, ss, lcs := handOffStores(t, 1)
	s, lc := ss[0], lcs[0]
	parkInstance(ctx, t, s)
	runTurn(ctx, t, s, nil, history.Event{Kind: history.EventSubscribed, Name: "go"})
	raise(ctx, t, s, "e0")
	lc.take()
	got := handOff(ctx, t, s, "e1")
	wantLoads(t, "hand-off", lc, map[string]int{"late messages": 1})
	if len(got.Messages) != 2 || got.Messages[0].EventID != "e0" || got.Messages[1].EventID != "e1" {
		t.Fatalf("handed-off messages %+v, want e0 then e1", got.Messages)
	}
	wantTurnAsRead(ctx, t, s, got)
}

// An instance whose last commit left a message in its inbox (a timer not
// yet due) is not expected to have an empty one: the raise's batch reads
// its messages, and the timer stays for later.
func TestHandOffReadsMessagesOfABusyInbox(t *testing.T) {
	ctx, ss, lcs := handOffStores(t, 1)
	s, lc := ss[0], lcs[0]
	parkInstance(ctx, t, s)
	runTurn(ctx, t, s, []storage.TimerSchedule{{TaskSeq: 2, FireAt: hoNow.Add(time.Hour)}},
		history.Event{Kind: history.TimerCreated, FireAt: hoNow.Add(time.Hour)})
	lc.take()
	got := handOff(ctx, t, s, "e1")
	wantLoads(t, "hand-off", lc, map[string]int{"messages": 1})
	if len(got.Messages) != 1 || got.Messages[0].EventID != "e1" {
		t.Fatalf("handed-off messages %+v, want e1 alone", got.Messages)
	}
	wantTurnAsRead(ctx, t, s, got)
}

// A turn commit keeps the row's history_seq and flags: the Seq of the
// history's end, and whether the instance may have tasks and markers.
func TestCommitKeepsHistorySeqAndFlags(t *testing.T) {
	ctx, ss, _ := handOffStores(t, 1)
	s := ss[0]
	parkInstance(ctx, t, s)
	row := func() (seq *int32, tasks, markers bool) {
		t.Helper()
		if err := s.pool.QueryRow(ctx, `SELECT history_seq, has_tasks, has_markers FROM instances WHERE tenant = 't' AND id = 'i'`).
			Scan(&seq, &tasks, &markers); err != nil {
			t.Fatal(err)
		}
		return
	}
	if seq, tasks, markers := row(); seq == nil || *seq != 1 || tasks || markers {
		t.Fatalf("created: history_seq %v, tasks %v, markers %v; want 1, false, false", seq, tasks, markers)
	}
	// The simple commit (herald_commit).
	runTurn(ctx, t, s, nil, history.Event{Kind: history.EventSubscribed, Name: "go"}, history.Event{Kind: history.EventSubscribed, Name: "more"})
	if seq, _, _ := row(); seq == nil || *seq != 3 {
		t.Fatalf("after a simple commit: history_seq %v, want 3", seq)
	}
	// The general path: an activity and a correlated wait.
	raise(ctx, t, s, "k")
	turns, err := s.TurnClaim(ctx, &storage.TurnClaimParams{Tenant: "t", Now: hoNow, Lease: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	for _, tr := range turns {
		ids := make([]int64, len(tr.Messages))
		for i, m := range tr.Messages {
			ids[i] = m.ID
		}
		if _, err := s.TurnCommit(ctx, &storage.TurnCommitParams{Tenant: "t", InstanceID: "i", LockToken: tr.LockToken,
			Execution: 1, Now: hoNow, Status: heraldtype.StatusRunning, ConsumedMessages: ids,
			NewEvents: []history.Event{
				{Seq: 4, Time: hoNow, Kind: history.ActivityScheduled, Name: "act"},
				{Seq: 5, Time: hoNow, Kind: history.EventSubscribed, Name: "c", Lane: history.LaneCorrelated, Key: "k1"},
			},
			Activities:      []storage.ActivityTask{{TaskSeq: 4, Name: "act"}},
			CorrelatedWaits: []storage.CorrelatedWait{{TaskSeq: 5, Def: "c", Key: "k1"}},
		}); err != nil {
			t.Fatal(err)
		}
	}
	if seq, tasks, markers := row(); seq == nil || *seq != 5 || !tasks || !markers {
		t.Fatalf("after the general commit: history_seq %v, tasks %v, markers %v; want 5, true, true", seq, tasks, markers)
	}
}

// A schema made before migration 0017 gets each running instance's
// history_seq (the current execution's last Seq) and flags from its rows;
// an ended instance keeps NULL.
func TestMigrateInstanceFlags(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	conn, url, schema := legacySchema(t, ctx, 17)
	for _, q := range []string{
		`INSERT INTO tenants (id, created_at, updated_at) VALUES ('t', 1, 1)`,
		// a: execution 2 of 3 events (execution 1 had 5), a task and a marker.
		`INSERT INTO instances (tenant, id, workflow, status, execution, created_at, updated_at) VALUES ('t', 'a', 'wf', 'running', 2, 1, 1)`,
		`INSERT INTO history (tenant, instance_id, execution, seq, kind, event)
			SELECT 't', 'a', 1, s, 'k', '{}' FROM generate_series(1, 5) s`,
		`INSERT INTO history (tenant, instance_id, execution, seq, kind, event)
			SELECT 't', 'a', 2, s, 'k', '{}' FROM generate_series(1, 3) s`,
		`INSERT INTO activities (tenant, instance_id, execution, task_seq, name, attempt, visible_at, created_at) VALUES ('t', 'a', 2, 2, 'act', 1, 1, 1)`,
		`INSERT INTO correlated_waits (tenant, instance_id, execution, task_seq, def, key, created_at) VALUES ('t', 'a', 2, 3, 'd', 'k', 1)`,
		// b: one event, nothing else.
		`INSERT INTO instances (tenant, id, workflow, status, execution, created_at, updated_at) VALUES ('t', 'b', 'wf', 'pending', 1, 1, 1)`,
		`INSERT INTO history (tenant, instance_id, execution, seq, kind, event) VALUES ('t', 'b', 1, 1, 'k', '{}')`,
		// c: ended.
		`INSERT INTO instances (tenant, id, workflow, status, execution, created_at, updated_at) VALUES ('t', 'c', 'wf', 'completed', 1, 1, 1)`,
		`INSERT INTO history (tenant, instance_id, execution, seq, kind, event) VALUES ('t', 'c', 1, 1, 'k', '{}')`,
	} {
		if _, err := conn.Exec(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	s, err := Open(ctx, url, WithSchema(schema))
	if err != nil {
		t.Fatalf("Open of a version-16 schema: %v", err)
	}
	defer s.Close()
	for _, c := range []struct {
		id             string
		seq            *int32
		tasks, markers bool
	}{
		{"a", ptr(int32(3)), true, true},
		{"b", ptr(int32(1)), false, false},
		{"c", nil, false, false},
	} {
		var (
			seq            *int32
			tasks, markers bool
		)
		if err := conn.QueryRow(ctx, `SELECT history_seq, has_tasks, has_markers FROM instances WHERE tenant = 't' AND id = $1`, c.id).
			Scan(&seq, &tasks, &markers); err != nil {
			t.Fatal(err)
		}
		if fmt.Sprint(deref(seq)) != fmt.Sprint(deref(c.seq)) || (seq == nil) != (c.seq == nil) || tasks != c.tasks || markers != c.markers {
			t.Errorf("%s: history_seq %v, tasks %v, markers %v; want %v, %v, %v", c.id, deref(seq), tasks, markers, deref(c.seq), c.tasks, c.markers)
		}
	}
}

func ptr[T any](v T) *T { return &v }

func deref[T any](p *T) any {
	if p == nil {
		return nil
	}
	return *p
}

// A claim takes each history from the cache when the row says the cache
// holds all of it (history_seq), and reads, after the claim and by the
// instance's key, only what the cache lacks: nothing on the node that ran
// the last turn, the rest on one whose cache another node's turn left
// behind. While most histories a store claims are not in its cache (it has
// just started), it reads them in the claim's batch instead, whole.
func TestClaimReadsHistoryOnlyPastTheCache(t *testing.T) {
	ctx, ss, lcs := handOffStores(t, 2)
	a, b := ss[0], ss[1]
	parkInstance(ctx, t, a)
	lcs[0].take()
	runTurn(ctx, t, a, nil, history.Event{Kind: history.EventSubscribed, Name: "go"})
	wantLoads(t, "a new store's claim", lcs[0], map[string]int{"history": 1, "messages": 1})
	raise(ctx, t, a, "e0")
	runTurn(ctx, t, a, nil, history.Event{Kind: history.EventRaised, EventID: "e0", Name: "go"})
	raise(ctx, t, a, "e1")
	lcs[0].take()
	tr := runTurn(ctx, t, a, nil, history.Event{Kind: history.EventRaised, EventID: "e1", Name: "go"})
	wantLoads(t, "claim with the history cached", lcs[0], map[string]int{"messages": 1})
	if len(tr.History) != 3 {
		t.Fatalf("claimed history: %d events, want 3", len(tr.History))
	}
	raise(ctx, t, a, "e2")
	runTurn(ctx, t, b, nil, history.Event{Kind: history.EventRaised, EventID: "e2", Name: "go"})
	raise(ctx, t, a, "e3")
	lcs[0].take()
	turns, err := a.TurnClaim(ctx, &storage.TurnClaimParams{Tenant: "t", Now: hoNow, Lease: time.Minute})
	if err != nil || len(turns) != 1 {
		t.Fatalf("claim: %v, %d turns", err, len(turns))
	}
	wantLoads(t, "claim behind another node's turn", lcs[0], map[string]int{"late history": 1, "messages": 1})
	if len(turns[0].History) != 5 {
		t.Fatalf("claimed history: %d events, want 5", len(turns[0].History))
	}
	wantTurnAsRead(ctx, t, a, turns[0])
}
