package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/heraldwf/herald/heraldtype"
	"github.com/heraldwf/herald/history"
	"github.com/heraldwf/herald/internal/testdb"
	"github.com/heraldwf/herald/storage"
)

// stmtCounter counts the statements of a pool by their text.
type stmtCounter struct {
	mu sync.Mutex
	n  map[string]int
}

func (c *stmtCounter) note(sql string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.n[sql]++
}

func (c *stmtCounter) take(sql string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := c.n[sql]
	delete(c.n, sql)
	return n
}

// commitManyStore opens a store on a fresh schema that counts its
// statements.
func commitManyStore(ctx context.Context, t *testing.T) (*Store, *stmtCounter) {
	t.Helper()
	sc := &stmtCounter{n: map[string]int{}}
	s, err := Open(ctx, testdb.PostgresURL(t), WithSchema(testdb.NewSchema(t)),
		WithPoolConfig(func(c *pgxpool.Config) { c.ConnConfig.Tracer = sqlTracer(sc.note) }))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s, sc
}

// commitManyTurns parks the instances named by raises (each with an
// activity task if it is in tasks), raises each its events, and claims
// their turns.
func commitManyTurns(ctx context.Context, t *testing.T, s *Store, raises map[string][]string, tasks map[string]bool) map[string]*storage.Turn {
	t.Helper()
	for id := range raises {
		if _, err := s.InstanceCreate(ctx, &storage.InstanceCreateParams{Tenant: "t", ID: id, Workflow: "wf", Now: hoNow}); err != nil {
			t.Fatal(err)
		}
	}
	claim := func() map[string]*storage.Turn {
		turns, err := s.TurnClaim(ctx, &storage.TurnClaimParams{Tenant: "t", Now: hoNow, Lease: time.Minute, Max: 100})
		if err != nil {
			t.Fatal(err)
		}
		byID := map[string]*storage.Turn{}
		for _, tr := range turns {
			byID[tr.Instance.ID] = tr
		}
		if len(byID) != len(raises) {
			t.Fatalf("claimed %d turns, want %d", len(byID), len(raises))
		}
		return byID
	}
	for id, tr := range claim() {
		var kicks []int64
		for _, m := range tr.Messages {
			kicks = append(kicks, m.ID)
		}
		p := &storage.TurnCommitParams{Tenant: "t", InstanceID: id, LockToken: tr.LockToken, Execution: 1, Now: hoNow, ConsumedMessages: kicks,
			Status: heraldtype.StatusRunning, NewEvents: []history.Event{{Seq: 2, Kind: history.EventSubscribed, Name: "go", Time: hoNow}}}
		if tasks[id] {
			p.NewEvents = append(p.NewEvents, history.Event{Seq: 3, Kind: history.ActivityScheduled, Name: "act", Time: hoNow})
			p.Activities = []storage.ActivityTask{{Tenant: "t", InstanceID: id, Execution: 1, TaskSeq: 3, Name: "act", Attempt: 1}}
		}
		if _, err := s.TurnCommit(ctx, p); err != nil {
			t.Fatal(err)
		}
	}
	for id, evs := range raises {
		for _, ev := range evs {
			if _, err := s.EventRaise(ctx, &storage.EventRaiseParams{Tenant: "t", InstanceID: id, EventID: ev,
				Lane: history.LanePositional, Name: "go", Payload: json.RawMessage(`{"ev":"` + ev + `"}`), Now: hoNow}); err != nil {
				t.Fatal(err)
			}
		}
	}
	return claim()
}

// consume returns the commit of tr that takes its first message (with
// its fate and the event in history) and sets status; the instance's other
// messages stay.
func consume(tr *storage.Turn, status heraldtype.Status) *storage.TurnCommitParams {
	m := tr.Messages[0]
	next := len(tr.History) + 1
	p := &storage.TurnCommitParams{Tenant: "t", InstanceID: tr.Instance.ID, LockToken: tr.LockToken, Execution: tr.Instance.Execution,
		Now: hoNow.Add(time.Duration(len(tr.Instance.ID)) * time.Second), Status: status, ConsumedMessages: []int64{m.ID},
		NewEvents: []history.Event{{Seq: next, Kind: history.EventRaised, EventID: m.EventID, Name: m.Name, Time: hoNow}},
		Fates: []storage.FateUpdate{
			{EventID: m.EventID, Fate: history.FateBuffered, Execution: 1, OriginExecution: 1},
			{EventID: m.EventID, Fate: history.FateDelivered, Execution: 1, OriginExecution: 1, WaitNumber: 1},
		}}
	switch status {
	case heraldtype.StatusCompleted:
		p.NewEvents = append(p.NewEvents, history.Event{Seq: next + 1, Kind: history.ExecutionCompleted, Time: hoNow})
		p.Output = json.RawMessage(`{"done":"` + tr.Instance.ID + `"}`)
	case heraldtype.StatusFailed:
		p.NewEvents = append(p.NewEvents, history.Event{Seq: next + 1, Kind: history.ExecutionFailed, Time: hoNow})
		p.Failure = &history.Failure{Message: "boom " + tr.Instance.ID}
	}
	return p
}

// commitState is what the commits of the test wrote, read back.
func commitState(ctx context.Context, t *testing.T, s *Store) []string {
	t.Helper()
	var out []string
	for _, q := range []string{
		`SELECT id, status, execution, output, failure, updated_at, lock_token IS NOT NULL, lease_until, not_before, ready_at, history_seq FROM instances ORDER BY id`,
		`SELECT instance_id, execution, seq, kind, event FROM history ORDER BY instance_id, execution, seq`,
		`SELECT instance_id, event_id, visible_at FROM inbox ORDER BY instance_id, event_id`,
		`SELECT instance_id, event_id, fate, reason, execution, origin_execution, wait_number, updated_at FROM events ORDER BY instance_id, event_id`,
		`SELECT instance_id, task_seq FROM activities ORDER BY instance_id, task_seq`,
	} {
		rows, err := s.pool.Query(ctx, q)
		if err != nil {
			t.Fatal(err)
		}
		for rows.Next() {
			vals, err := rows.Values()
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, fmt.Sprintf("%v", vals))
		}
		if rows.Close(); rows.Err() != nil {
			t.Fatal(rows.Err())
		}
	}
	return out
}

// The simple commits of a batch are one herald_commit_many call that
// writes exactly what each herald_commit would: commits that continue
// (with messages left or not), complete, fail and end an instance with
// activity tasks; and one that fails the call (a lost lease, an ending
// with events to drop) makes each commit run alone with its own outcome.
func TestCommitManyAsOne(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	raises := map[string][]string{
		"keep":     {"keep-1"},                   // continues without consuming
		"next":     {"next-1", "next-2"},         // continues with a message left
		"done":     {"done-1"},                   // completes
		"failed":   {"failed-1"},                 // fails
		"tasks":    {"tasks-1"},                  // completes with an activity task left
		"drops":    {"drops-1", "drops-2"},       // completes with an event to drop
		"lost":     {"lost-1"},                   // its lease is lost
		"stale":    {"stale-1"},                  // ran on another execution
		"beside":   {"beside-1"},                 // continues beside it
		"together": {"together-1", "together-2"}, // continues beside those two
	}
	tasks := map[string]bool{"tasks": true}
	// commits makes the two batches' commits from the turns.
	commits := func(turns map[string]*storage.Turn) (first, second, third []*storage.TurnCommitParams) {
		keep := turns["keep"]
		first = []*storage.TurnCommitParams{
			{Tenant: "t", InstanceID: "keep", LockToken: keep.LockToken, Execution: 1, Now: hoNow, Status: heraldtype.StatusRunning,
				NewEvents: []history.Event{{Seq: len(keep.History) + 1, Kind: history.EventSubscribed, Name: "other", Time: hoNow}}},
			consume(turns["next"], heraldtype.StatusRunning),
			consume(turns["done"], heraldtype.StatusCompleted),
			consume(turns["failed"], heraldtype.StatusFailed),
			consume(turns["tasks"], heraldtype.StatusCompleted),
		}
		lost := consume(turns["lost"], heraldtype.StatusRunning)
		lost.LockToken = "not-the-token"
		stale := consume(turns["stale"], heraldtype.StatusRunning)
		stale.Execution = 2
		second = []*storage.TurnCommitParams{
			consume(turns["drops"], heraldtype.StatusCompleted), lost, consume(turns["together"], heraldtype.StatusRunning),
		}
		third = []*storage.TurnCommitParams{consume(turns["beside"], heraldtype.StatusRunning), stale}
		return first, second, third
	}

	// One store commits each turn alone (herald_commit), the other in
	// batches (herald_commit_many).
	alone, aloneStmts := commitManyStore(ctx, t)
	first, second, third := commits(commitManyTurns(ctx, t, alone, raises, tasks))
	aloneErrs := map[string]error{}
	for _, p := range slices.Concat(first, second, third) {
		c, err := alone.newCommitCall(ctx, p)
		if err != nil {
			t.Fatal(err)
		}
		aloneErrs[p.InstanceID] = alone.commitOne(ctx, c)
	}
	if n := aloneStmts.take(commitManySQL); n != 0 {
		t.Fatalf("commits one by one ran herald_commit_many %d times", n)
	}

	many, manyStmts := commitManyStore(ctx, t)
	first, second, third = commits(commitManyTurns(ctx, t, many, raises, tasks))
	manyErrs, manyReady := map[string]error{}, map[string]*int64{}
	for i, ps := range [][]*storage.TurnCommitParams{first, second, third} {
		var calls []*combined[*commitCall]
		for _, p := range ps {
			c, err := many.newCommitCall(ctx, p)
			if err != nil {
				t.Fatal(err)
			}
			calls = append(calls, &combined[*commitCall]{call: c})
		}
		manyStmts.take(commitFuncSQL)
		many.commitBatch(calls)
		for _, cc := range calls {
			manyErrs[cc.call.p.InstanceID] = cc.call.err
			if cc.call.err == nil {
				manyReady[cc.call.p.InstanceID] = cc.call.res.ready
			}
		}
		// The first batch is one call; the others' fail, and their
		// commits run alone (the one with events to drop tries
		// herald_commit first, then its interactive transaction).
		if n := manyStmts.take(commitManySQL); n != 1 {
			t.Fatalf("batch %d: herald_commit_many ran %d times, want 1", i+1, n)
		}
		if n, want := manyStmts.take(commitFuncSQL), []int{0, 3, 2}[i]; n != want {
			t.Fatalf("batch %d: herald_commit ran %d times, want %d", i+1, n, want)
		}
	}

	for id := range raises {
		a, m := aloneErrs[id], manyErrs[id]
		if id == "lost" {
			if !errors.Is(a, heraldtype.ErrLeaseLost) || !errors.Is(m, heraldtype.ErrLeaseLost) {
				t.Errorf("lost lease: alone %v, in a batch %v; want ErrLeaseLost", a, m)
			}
			continue
		}
		if id == "stale" {
			if a == nil || m == nil || a.Error() != m.Error() {
				t.Errorf("another execution: alone %v, in a batch %v; want the same error", a, m)
			}
			continue
		}
		if a != nil || m != nil {
			t.Errorf("%s: alone %v, in a batch %v", id, a, m)
		}
	}
	if a, m := commitState(ctx, t, alone), commitState(ctx, t, many); !reflect.DeepEqual(a, m) {
		t.Errorf("one by one:\n%v\nin batches:\n%v", a, m)
	}
	// Of a commit's two updates of one event's fate, the last wins.
	var fate string
	if err := many.pool.QueryRow(ctx, `SELECT fate FROM events WHERE tenant = 't' AND event_id = 'done-1'`).Scan(&fate); err != nil || fate != string(history.FateDelivered) {
		t.Errorf("done-1's fate: %q (%v), want delivered", fate, err)
	}
	var tasksLeft int
	if err := many.pool.QueryRow(ctx, `SELECT count(*) FROM activities WHERE tenant = 't' AND instance_id = 'tasks'`).Scan(&tasksLeft); err != nil || tasksLeft != 0 {
		t.Errorf("the ended instance's activity tasks: %d left (%v)", tasksLeft, err)
	}
	// What the batches returned is the instance's ready_at: the next
	// message's, or none.
	want := map[string]bool{"keep": true, "next": true, "together": true, "beside": false, "done": false, "failed": false, "tasks": false, "drops": false}
	for id, ready := range want {
		var got *int64
		if err := many.pool.QueryRow(ctx, `SELECT ready_at FROM instances WHERE tenant = 't' AND id = $1`, id).Scan(&got); err != nil {
			t.Fatal(err)
		}
		if (got != nil) != ready {
			t.Errorf("%s: ready_at %v, want set %v", id, got, ready)
		}
		if r := manyReady[id]; fmt.Sprint(deref(r)) != fmt.Sprint(deref(got)) {
			t.Errorf("%s: the commit returned ready_at %v, the row has %v", id, deref(r), deref(got))
		}
	}
}

// Two tenants' instances of the same id committed in one
// herald_commit_many call: each commit writes its own tenant's rows only.
func TestCommitManyTenants(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	s, stmts := commitManyStore(ctx, t)
	var calls []*combined[*commitCall]
	for _, tenant := range []string{"a", "b"} {
		if _, err := s.InstanceCreate(ctx, &storage.InstanceCreateParams{Tenant: tenant, ID: "same", Workflow: "wf", Now: hoNow}); err != nil {
			t.Fatal(err)
		}
		turns, err := s.TurnClaim(ctx, &storage.TurnClaimParams{Tenant: tenant, Now: hoNow, Lease: time.Minute})
		if err != nil || len(turns) != 1 {
			t.Fatalf("claim in %s: %v, %d turns", tenant, err, len(turns))
		}
		tr := turns[0]
		p := &storage.TurnCommitParams{Tenant: tenant, InstanceID: "same", LockToken: tr.LockToken, Execution: 1, Now: hoNow,
			ConsumedMessages: []int64{tr.Messages[0].ID}, Status: heraldtype.StatusCompleted, Output: json.RawMessage(`"` + tenant + `"`),
			NewEvents: []history.Event{{Seq: 2, Kind: history.ExecutionCompleted, Time: hoNow}}}
		c, err := s.newCommitCall(ctx, p)
		if err != nil {
			t.Fatal(err)
		}
		calls = append(calls, &combined[*commitCall]{call: c})
	}
	s.commitBatch(calls)
	for _, cc := range calls {
		if cc.call.err != nil {
			t.Fatalf("%s: %v", cc.call.p.Tenant, cc.call.err)
		}
	}
	if n := stmts.take(commitManySQL); n != 1 {
		t.Fatalf("herald_commit_many ran %d times, want 1", n)
	}
	for _, tenant := range []string{"a", "b"} {
		inst, err := s.InstanceGet(ctx, &storage.InstanceGetParams{Tenant: tenant, ID: "same"})
		if err != nil {
			t.Fatal(err)
		}
		if inst.Status != heraldtype.StatusCompleted || string(inst.Output) != `"`+tenant+`"` {
			t.Errorf("tenant %s: status %s, output %s", tenant, inst.Status, inst.Output)
		}
		var events int
		if err := s.pool.QueryRow(ctx, `SELECT count(*) FROM history WHERE tenant = $1 AND instance_id = 'same'`, tenant).Scan(&events); err != nil || events != 2 {
			t.Errorf("tenant %s: %d history events (%v), want 2", tenant, events, err)
		}
	}
}
