package postgres_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/heraldwf/herald/heraldtype"
	"github.com/heraldwf/herald/history"
	"github.com/heraldwf/herald/storage"
	"github.com/heraldwf/herald/storage/postgres"
)

// busPublishN publishes events id0..id(n-1) of type typ at t0.
func busPublishN(t *testing.T, s *postgres.Store, tenant string, n int) {
	t.Helper()
	ctx := context.Background()
	for i := range n {
		if _, err := s.BusPublish(ctx, &storage.BusPublishParams{Tenant: tenant, Now: t0,
			Event: storage.BusPublishEvent{ID: fmt.Sprintf("e%04d", i), Type: "order.created", Data: json.RawMessage(`{"n":1}`), Source: "client"}}); err != nil {
			t.Fatal(err)
		}
	}
}

// routeTo routes every event to subs (all matched).
func routeTo(subs ...string) func(*storage.BusEvent) []storage.BusRouteDecision {
	return func(*storage.BusEvent) []storage.BusRouteDecision {
		ds := make([]storage.BusRouteDecision, len(subs))
		for i, s := range subs {
			ds[i] = storage.BusRouteDecision{Subscription: s, Matched: true}
		}
		return ds
	}
}

// Two stores (two nodes) route one tenant's events at once: every event is
// routed by exactly one of them, and gets exactly one execution per
// subscription.
func TestBusRouteAcrossStores(t *testing.T) {
	schema := newSchema(t)
	stores := []*postgres.Store{open(t, schema, postgres.WithMaxConns(4)), open(t, schema, postgres.WithMaxConns(4))}
	ctx := context.Background()
	const n, tenant = 300, "t"
	busPublishN(t, stores[0], tenant, n)
	var (
		mu     sync.Mutex
		routed int
		wg     sync.WaitGroup
	)
	for i := range 6 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				k, err := stores[i%2].BusRoute(ctx, &storage.BusRouteParams{Tenant: tenant, Max: 7, Now: t0, Route: routeTo("a", "b")})
				if err != nil {
					t.Error(err)
					return
				}
				if k == 0 {
					return
				}
				mu.Lock()
				routed += k
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if routed != n {
		t.Fatalf("routed %d events, want %d", routed, n)
	}
	var execs, distinct int
	if err := connect(t).QueryRow(ctx, `SELECT count(*), count(DISTINCT (event_id, subscription)) FROM "`+schema+`".bus_routes
		WHERE tenant = $1 AND status = 'queued'`, tenant).Scan(&execs, &distinct); err != nil {
		t.Fatal(err)
	}
	if execs != 2*n || distinct != 2*n {
		t.Fatalf("%d executions (%d distinct), want %d", execs, distinct, 2*n)
	}
}

// Two stores (two nodes) claim one tenant's executions at once: no
// execution is handed out twice. One node then dies with half of its
// executions unfinished: once their leases have run out, the other node's
// claims take each of them over exactly once, and the dead node's tokens
// no longer finish them.
func TestBusClaimsAcrossStores(t *testing.T) {
	schema := newSchema(t)
	stores := []*postgres.Store{open(t, schema, postgres.WithMaxConns(4)), open(t, schema, postgres.WithMaxConns(4))}
	ctx := context.Background()
	const n, tenant = 200, "t"
	busPublishN(t, stores[0], tenant, n)
	if k, err := stores[1].BusRoute(ctx, &storage.BusRouteParams{Tenant: tenant, Max: n, Now: t0, Route: routeTo("a", "b", "c")}); err != nil || k != n {
		t.Fatalf("BusRoute: %d, %v", k, err)
	}

	type claim struct {
		node int
		c    *storage.BusClaimed
	}
	claimAll := func(now time.Time) map[int64][]claim {
		var (
			mu  sync.Mutex
			got = map[int64][]claim{}
			wg  sync.WaitGroup
		)
		for node, s := range stores {
			for range 4 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for {
						cs, err := s.BusClaim(ctx, &storage.BusClaimParams{Tenant: tenant, Max: 5, Now: now, Lease: time.Minute})
						if err != nil {
							t.Error(err)
							return
						}
						if len(cs) == 0 {
							return
						}
						mu.Lock()
						for _, c := range cs {
							got[c.Execution.ID] = append(got[c.Execution.ID], claim{node, c})
						}
						mu.Unlock()
					}
				}()
			}
		}
		wg.Wait()
		return got
	}
	first := claimAll(t0)
	if len(first) != 3*n {
		t.Fatalf("claimed %d executions, want %d", len(first), 3*n)
	}
	var lost []*storage.BusClaimed
	var results []storage.BusResult
	for id, cs := range first {
		if len(cs) != 1 {
			t.Fatalf("execution %d claimed %d times", id, len(cs))
		}
		c := cs[0].c
		if c.TakenOver || c.Execution.Attempts != 1 || c.Execution.Status != heraldtype.ExecRunning {
			t.Fatalf("first claim: %+v", c)
		}
		if cs[0].node == 0 && id%2 == 0 {
			// node 0 starts these and dies before finishing them
			if err := stores[0].BusHeartbeat(ctx, &storage.BusHeartbeatParams{Tenant: tenant, Execution: id,
				LockToken: c.LockToken, LeaseUntil: t0.Add(time.Minute), Start: true}); err != nil {
				t.Fatal(err)
			}
			lost = append(lost, c)
			continue
		}
		results = append(results, storage.BusResult{Execution: id, LockToken: c.LockToken, Outcome: storage.BusSucceeded,
			Attempt: heraldtype.Attempt{Number: 1, Succeeded: true, StartedAt: t0}})
	}
	if len(lost) == 0 {
		t.Fatal("node 0 claimed no even execution")
	}
	errs, err := stores[1].BusFinish(ctx, &storage.BusFinishParams{Tenant: tenant, Now: t0, Results: results})
	if err != nil {
		t.Fatal(err)
	}
	for i, e := range errs {
		if e != nil {
			t.Fatalf("finish %d: %v", i, e)
		}
	}

	// Still leased: nothing to claim.
	if again := claimAll(t0.Add(time.Minute)); len(again) != 0 {
		t.Fatalf("claimed %d executions before their leases ran out", len(again))
	}
	second := claimAll(t0.Add(time.Minute + time.Nanosecond))
	if len(second) != len(lost) {
		t.Fatalf("took over %d executions, want %d", len(second), len(lost))
	}
	var retake []storage.BusResult
	var stale []storage.BusResult
	for _, c := range lost {
		cs := second[c.Execution.ID]
		if len(cs) != 1 {
			t.Fatalf("execution %d taken over %d times", c.Execution.ID, len(cs))
		}
		nc := cs[0].c
		if !nc.TakenOver || nc.Execution.Attempts != 2 || nc.LockToken == c.LockToken {
			t.Fatalf("takeover: %+v", nc)
		}
		stale = append(stale, storage.BusResult{Execution: c.Execution.ID, LockToken: c.LockToken, Outcome: storage.BusSucceeded,
			Attempt: heraldtype.Attempt{Number: 1}})
		retake = append(retake, storage.BusResult{Execution: c.Execution.ID, LockToken: nc.LockToken, Outcome: storage.BusSucceeded,
			Attempt: heraldtype.Attempt{Number: 2, Succeeded: true}})
	}
	// The dead node's results, arriving late, and the new owners' in one
	// call: each stale one is refused, each new one written.
	errs, err = stores[0].BusFinish(ctx, &storage.BusFinishParams{Tenant: tenant, Now: t0.Add(2 * time.Minute), Results: append(stale, retake...)})
	if err != nil {
		t.Fatal(err)
	}
	for i, e := range errs {
		if (i < len(stale)) != errors.Is(e, heraldtype.ErrLeaseLost) {
			t.Fatalf("result %d: %v", i, e)
		}
	}
	backlog, err := stores[0].BusBacklog(ctx, &storage.BusBacklogParams{Tenant: tenant})
	if err != nil || backlog != 0 {
		t.Fatalf("backlog %d, %v", backlog, err)
	}
	var attempts int
	if err := connect(t).QueryRow(ctx, `SELECT count(*) FROM "`+schema+`".bus_attempts WHERE tenant = $1`, tenant).Scan(&attempts); err != nil {
		t.Fatal(err)
	}
	if want := 3 * n; attempts != want {
		// Each execution has one attempt record: the lost attempts were
		// never finished, their late results were refused.
		t.Fatalf("%d attempt records, want %d", attempts, want)
	}
}

// Two nodes run the whole bus at once — publishing, routing, claiming and
// finishing, with failures retried and dead-lettered and the dead letters
// reprocessed, all taking fair-queueing numbers for the same
// subscriptions — until the backlog is empty: nothing fails (no deadlock
// survives the retries), and every execution ends exactly as its attempts
// say.
func TestBusPipelineAcrossStores(t *testing.T) {
	schema := newSchema(t)
	stores := []*postgres.Store{open(t, schema, postgres.WithMaxConns(6)), open(t, schema, postgres.WithMaxConns(6))}
	ctx := context.Background()
	const n, tenant = 150, "t"
	subs := []string{"s1", "s2", "s3"}
	var wg sync.WaitGroup
	// Publishers.
	for node, s := range stores {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := node; i < n; i += 2 {
				if _, err := s.BusPublish(ctx, &storage.BusPublishParams{Tenant: tenant, Now: t0,
					Event: storage.BusPublishEvent{ID: fmt.Sprintf("e%04d", i), Type: "x", Data: json.RawMessage(`1`)}}); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}
	// Workers: route, claim, finish. An execution's first attempt fails
	// (retry due at once), its second dead-letters it if its id is odd; the
	// reprocessors queue those again, and their third attempt succeeds.
	var (
		mu       sync.Mutex
		finished = map[int64][]int{} // execution → attempt numbers written
	)
	work := func(s *postgres.Store) (bool, error) {
		k, err := s.BusRoute(ctx, &storage.BusRouteParams{Tenant: tenant, Max: 10, Now: t0, Route: routeTo(subs...)})
		if err != nil {
			return false, err
		}
		cs, err := s.BusClaim(ctx, &storage.BusClaimParams{Tenant: tenant, Max: 8, Now: t0, Lease: time.Hour})
		if err != nil {
			return false, err
		}
		var rs []storage.BusResult
		for _, c := range cs {
			a := c.Execution.Attempts
			r := storage.BusResult{Execution: c.Execution.ID, LockToken: c.LockToken,
				Attempt: heraldtype.Attempt{Number: a, StartedAt: t0, Error: "boom", ErrorKind: heraldtype.ErrorRuntime}}
			switch {
			case c.Execution.Reprocessed > 0:
				r.Outcome, r.Attempt.Succeeded, r.Attempt.Error, r.Attempt.ErrorKind = storage.BusSucceeded, true, "", ""
			case a == 1:
				r.Outcome, r.RetryAt = storage.BusRetry, t0
			case c.Execution.ID%2 == 1:
				r.Outcome = storage.BusDeadLetter
				r.DeadLetter = &heraldtype.DeadLetter{ErrorKind: heraldtype.ErrorRuntime, Error: "boom", FailedAt: t0}
			default:
				r.Outcome, r.Attempt.Succeeded, r.Attempt.Error, r.Attempt.ErrorKind = storage.BusSucceeded, true, "", ""
			}
			rs = append(rs, r)
		}
		if len(rs) > 0 {
			errs, err := s.BusFinish(ctx, &storage.BusFinishParams{Tenant: tenant, Now: t0, Results: rs})
			if err != nil {
				return false, err
			}
			mu.Lock()
			for i, e := range errs {
				if e != nil {
					mu.Unlock()
					return false, fmt.Errorf("finish of execution %d: %w", rs[i].Execution, e)
				}
				finished[rs[i].Execution] = append(finished[rs[i].Execution], rs[i].Attempt.Number)
			}
			mu.Unlock()
		}
		r, err := s.BusDeadLetterReprocess(ctx, &storage.BusDeadLetterOpParams{Tenant: tenant, Limit: 3, Now: t0})
		if err != nil {
			return false, err
		}
		return k > 0 || len(cs) > 0 || r > 0, nil
	}
	for _, s := range stores {
		for range 3 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				idle := 0
				for idle < 3 {
					busy, err := work(s)
					if err != nil {
						t.Error(err)
						return
					}
					if busy {
						idle = 0
					} else {
						idle++
					}
				}
			}()
		}
	}
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}
	if backlog, err := stores[0].BusBacklog(ctx, &storage.BusBacklogParams{Tenant: tenant}); err != nil || backlog != 0 {
		t.Fatalf("backlog %d, %v", backlog, err)
	}
	if len(finished) != n*len(subs) {
		t.Fatalf("%d executions finished, want %d", len(finished), n*len(subs))
	}
	for id, numbers := range finished {
		want := []int{1, 2}
		if id%2 == 1 {
			want = []int{1, 2, 1} // reprocessed: attempts start again
		}
		if fmt.Sprint(numbers) != fmt.Sprint(want) {
			t.Fatalf("execution %d: attempts %v, want %v", id, numbers, want)
		}
	}
}

// Concurrent publishes share transactions (publish batches): each gets its
// own outcome — stored, duplicate (with the first copy's time) or a
// conflict — and nothing else is written.
func TestBusPublishBatches(t *testing.T) {
	s := open(t, newSchema(t))
	ctx := context.Background()
	const n = 200
	publish := func(i int, typ string, now time.Time) (*storage.BusPublished, error) {
		return s.BusPublish(ctx, &storage.BusPublishParams{Tenant: "t", Now: now,
			Event: storage.BusPublishEvent{ID: fmt.Sprintf("e%03d", i%(n/2)), Type: typ, Data: json.RawMessage(`{}`)}})
	}
	// Half the ids first, then every id at once: the first half are
	// duplicates (or conflicts, for a different type), the rest new.
	for i := range n / 4 {
		if _, err := publish(i, "a", t0); err != nil {
			t.Fatal(err)
		}
	}
	var wg sync.WaitGroup
	res := make([]*storage.BusPublished, n)
	errs := make([]error, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			typ := "a"
			if i >= n/2 && i%(n/2) < n/4 {
				typ = "b"
			}
			res[i], errs[i] = publish(i, typ, t0.Add(time.Hour))
		}()
	}
	wg.Wait()
	stored := map[int]int{}
	for i := range n {
		id := i % (n / 2)
		switch {
		case id < n/4 && i >= n/2: // type b for an id first published as a
			if !errors.Is(errs[i], heraldtype.ErrEventIDConflict) {
				t.Fatalf("publish %d: %+v, %v; want a conflict", i, res[i], errs[i])
			}
		case id < n/4:
			if errs[i] != nil || !res[i].Duplicate || !res[i].PublishedAt.Equal(t0) {
				t.Fatalf("publish %d: %+v, %v; want the first receipt", i, res[i], errs[i])
			}
		default:
			if errs[i] != nil || !res[i].PublishedAt.Equal(t0.Add(time.Hour)) {
				t.Fatalf("publish %d: %+v, %v", i, res[i], errs[i])
			}
			if !res[i].Duplicate {
				stored[id]++
			}
		}
	}
	for id := n / 4; id < n/2; id++ {
		if stored[id] != 1 {
			t.Fatalf("event e%03d stored %d times", id, stored[id])
		}
	}
	backlog, err := s.BusBacklog(ctx, &storage.BusBacklogParams{Tenant: "t"})
	if err != nil || backlog != n/2 {
		t.Fatalf("backlog %d, %v; want %d unrouted events", backlog, err, n/2)
	}
}

// Turns that publish commit in batches with other turns: every published
// event is stored once, with the turn; a turn whose lease was lost
// publishes nothing.
func TestBusTurnPublishBatched(t *testing.T) {
	s := open(t, newSchema(t))
	ctx := context.Background()
	const n = 60
	for i := range n {
		if _, err := s.InstanceCreate(ctx, &storage.InstanceCreateParams{Tenant: "t", ID: fmt.Sprintf("i%02d", i), Workflow: "wf", Now: t0}); err != nil {
			t.Fatal(err)
		}
	}
	turns, err := s.TurnClaim(ctx, &storage.TurnClaimParams{Tenant: "t", Now: t0, Max: n})
	if err != nil || len(turns) != n {
		t.Fatalf("TurnClaim: %d, %v", len(turns), err)
	}
	var wg sync.WaitGroup
	errs := make([]error, n)
	for i, turn := range turns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			token := turn.LockToken
			if i%10 == 0 {
				token = "lost"
			}
			p := &storage.TurnCommitParams{Tenant: "t", InstanceID: turn.Instance.ID, LockToken: token, Execution: 1, Now: t0,
				ConsumedMessages: []int64{turn.Messages[0].ID},
				NewEvents:        []history.Event{{Seq: 2, Kind: history.ExecutionCompleted, Time: t0}},
				Status:           heraldtype.StatusCompleted,
				Publish: []storage.BusPublishEvent{
					{ID: turn.Instance.ID + "/1", Type: "done", Data: json.RawMessage(`1`), Source: "workflow:" + turn.Instance.ID},
					{ID: turn.Instance.ID + "/2", Type: "done", Data: json.RawMessage(`2`), Source: "workflow:" + turn.Instance.ID},
				}}
			if i%3 == 0 {
				// Not a simple commit: the general path.
				p.Status, p.NewEvents = heraldtype.StatusRunning, []history.Event{{Seq: 2, Kind: history.TimerCreated, Time: t0}}
				p.Timers = []storage.TimerSchedule{{TaskSeq: 2, FireAt: t0.Add(time.Hour)}}
			}
			_, errs[i] = s.TurnCommit(ctx, p)
		}()
	}
	wg.Wait()
	for i, turn := range turns {
		lost := i%10 == 0
		if lost != errors.Is(errs[i], heraldtype.ErrLeaseLost) || (!lost && errs[i] != nil) {
			t.Fatalf("commit %d: %v", i, errs[i])
		}
		for k := 1; k <= 2; k++ {
			ev, err := s.BusEventGet(ctx, &storage.BusEventGetParams{Tenant: "t", ID: fmt.Sprintf("%s/%d", turn.Instance.ID, k)})
			if lost {
				if !errors.Is(err, heraldtype.ErrNotFound) {
					t.Fatalf("a lost turn's event: %+v, %v", ev, err)
				}
				continue
			}
			if err != nil || ev.Source != "workflow:"+turn.Instance.ID || string(ev.Data) != fmt.Sprint(k) {
				t.Fatalf("event %s/%d: %+v, %v", turn.Instance.ID, k, ev, err)
			}
		}
	}
}

// The bus's calls take the round trips they say: one for a publish, a
// claim, a finish, a heartbeat and a turn commit that publishes; two for a
// routing (one to lock the events, one to store the decisions and
// commit).
func TestBusRoundTrips(t *testing.T) {
	var rts rtCounter
	s := open(t, newSchema(t), postgres.WithPoolConfig(func(c *pgxpool.Config) { c.ConnConfig.Tracer = &rts }))
	ctx := context.WithValue(context.Background(), countedCall{}, true)
	count := func(what string, want int64, fn func() error) {
		t.Helper()
		before := rts.n.Load()
		if err := fn(); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		if n := rts.n.Load() - before; n != want {
			t.Errorf("%s: %d round trips, want %d", what, n, want)
		}
	}
	for i := range 3 {
		count("BusPublish", 1, func() error {
			_, err := s.BusPublish(ctx, &storage.BusPublishParams{Tenant: "t", Now: t0,
				Event: storage.BusPublishEvent{ID: fmt.Sprint("e", i), Type: "x", Data: json.RawMessage(`1`)}})
			return err
		})
	}
	count("BusRoute", 2, func() error {
		_, err := s.BusRoute(ctx, &storage.BusRouteParams{Tenant: "t", Now: t0, Route: routeTo("a")})
		return err
	})
	var cs []*storage.BusClaimed
	count("BusClaim", 1, func() (err error) {
		cs, err = s.BusClaim(ctx, &storage.BusClaimParams{Tenant: "t", Now: t0, Max: 3})
		return err
	})
	if len(cs) != 3 {
		t.Fatalf("claimed %d", len(cs))
	}
	count("BusHeartbeat", 1, func() error {
		return s.BusHeartbeat(ctx, &storage.BusHeartbeatParams{Tenant: "t", Execution: cs[0].Execution.ID, LockToken: cs[0].LockToken, LeaseUntil: t0.Add(time.Hour)})
	})
	count("BusFinish", 1, func() error {
		var rs []storage.BusResult
		for i, c := range cs {
			r := storage.BusResult{Execution: c.Execution.ID, LockToken: c.LockToken, Outcome: storage.BusOutcome(i + 1),
				RetryAt: t0.Add(time.Second), Attempt: heraldtype.Attempt{Number: 1}}
			if r.Outcome == storage.BusDeadLetter {
				r.DeadLetter = &heraldtype.DeadLetter{ErrorKind: heraldtype.ErrorPermanent}
			}
			rs = append(rs, r)
		}
		_, err := s.BusFinish(ctx, &storage.BusFinishParams{Tenant: "t", Now: t0, Results: rs})
		return err
	})
	if _, err := s.InstanceCreate(ctx, &storage.InstanceCreateParams{Tenant: "t", ID: "i", Workflow: "wf", Now: t0}); err != nil {
		t.Fatal(err)
	}
	turn := claimOneTurn(t, s)
	count("TurnCommit with Publish", 1, func() error {
		_, err := s.TurnCommit(ctx, &storage.TurnCommitParams{Tenant: "t", InstanceID: "i", LockToken: turn.LockToken, Execution: 1, Now: t0,
			ConsumedMessages: []int64{turn.Messages[0].ID}, Status: heraldtype.StatusCompleted,
			NewEvents: []history.Event{{Seq: 2, Kind: history.ExecutionCompleted, Time: t0}},
			Publish:   []storage.BusPublishEvent{{ID: "from-i", Type: "x", Data: json.RawMessage(`1`), Source: "workflow:i"}}})
		return err
	})
	if _, err := s.BusEventGet(ctx, &storage.BusEventGetParams{Tenant: "t", ID: "from-i"}); err != nil {
		t.Fatalf("the turn's event: %v", err)
	}
}

// Free text the targets produce — errors, stacks, log lines, a filter's
// explanation — is stored byte for byte, NUL bytes and invalid UTF-8
// included (PostgreSQL's text would refuse both; a script that logs one
// must not wedge its execution).
func TestBusFreeTextBytes(t *testing.T) {
	s := open(t, newSchema(t))
	ctx := context.Background()
	const odd = "a\x00b\xff\xfe\u00e9\n"
	busPublishN(t, s, "t", 1)
	if _, err := s.BusRoute(ctx, &storage.BusRouteParams{Tenant: "t", Now: t0, Route: func(*storage.BusEvent) []storage.BusRouteDecision {
		return []storage.BusRouteDecision{{Subscription: "a", Matched: true}, {Subscription: "b", FilteredBy: odd}}
	}}); err != nil {
		t.Fatal(err)
	}
	cs, err := s.BusClaim(ctx, &storage.BusClaimParams{Tenant: "t", Now: t0})
	if err != nil || len(cs) != 1 {
		t.Fatalf("BusClaim: %d, %v", len(cs), err)
	}
	logs := []string{odd, "", "\x00", string(make([]byte, 300))}
	errs, err := s.BusFinish(ctx, &storage.BusFinishParams{Tenant: "t", Now: t0, Results: []storage.BusResult{{
		Execution: cs[0].Execution.ID, LockToken: cs[0].LockToken, Outcome: storage.BusDeadLetter,
		Attempt:    heraldtype.Attempt{Number: 1, Error: odd, Stack: odd + odd, Logs: logs, ErrorKind: heraldtype.ErrorPermanent},
		DeadLetter: &heraldtype.DeadLetter{ErrorKind: heraldtype.ErrorPermanent, Error: odd, Stack: odd, Target: heraldtype.Target{Kind: "script", Script: "a\x00"}},
	}}})
	if err != nil || errs[0] != nil {
		t.Fatalf("BusFinish: %v, %v", errs, err)
	}
	ev, err := s.BusEventGet(ctx, &storage.BusEventGetParams{Tenant: "t", ID: "e0000"})
	if err != nil || len(ev.Routes) != 2 {
		t.Fatalf("BusEventGet: %+v, %v", ev, err)
	}
	if r := ev.Routes[1]; r.FilteredBy != odd || r.Matched {
		t.Fatalf("filtered route: %+v", r)
	}
	if e := ev.Routes[0].Execution; e.LastError != odd || e.Status != heraldtype.ExecDeadLettered {
		t.Fatalf("execution: %+v", e)
	}
	as, _, err := s.BusAttemptList(ctx, &storage.BusAttemptListParams{Tenant: "t", EventID: "e0000"})
	if err != nil || len(as) != 1 {
		t.Fatalf("BusAttemptList: %d, %v", len(as), err)
	}
	if a := as[0]; a.Error != odd || a.Stack != odd+odd || fmt.Sprintf("%q", a.Logs) != fmt.Sprintf("%q", logs) {
		t.Fatalf("attempt: %+v", a)
	}
	dl, err := s.BusDeadLetterGet(ctx, &storage.BusDeadLetterGetParams{Tenant: "t", ID: ev.Routes[0].Execution.DeadLetter})
	if err != nil || dl.Error != odd || dl.Stack != odd || dl.Target.Script != "a\x00" {
		t.Fatalf("dead letter: %+v, %v", dl, err)
	}
	// Text stored as text is refused, not mangled.
	for what, p := range map[string]*storage.BusFinishParams{
		"a result that is not UTF-8": {Tenant: "t", Results: []storage.BusResult{{Execution: 1, LockToken: "x", Outcome: storage.BusSucceeded,
			Attempt: heraldtype.Attempt{Result: json.RawMessage("\"\xff\"")}}}},
		"a target that is not UTF-8": {Tenant: "t", Results: []storage.BusResult{{Execution: 1, LockToken: "x", Outcome: storage.BusDeadLetter,
			DeadLetter: &heraldtype.DeadLetter{Target: heraldtype.Target{Script: "\xff"}}}}},
	} {
		if _, err := s.BusFinish(ctx, p); !errors.Is(err, heraldtype.ErrInvalidArgument) {
			t.Errorf("BusFinish with %s: %v, want ErrInvalidArgument", what, err)
		}
	}
	if _, err := s.BusPublish(ctx, &storage.BusPublishParams{Tenant: "t", Event: storage.BusPublishEvent{ID: "x", Type: "x", Data: json.RawMessage("\"\xff\"")}}); !errors.Is(err, heraldtype.ErrInvalidArgument) {
		t.Errorf("BusPublish of data that is not UTF-8: %v", err)
	}
}

// The bus's writes wake another store's bus workers (through NOTIFY), and
// only them: a publish, a routing that queued executions, a retry, a
// reprocess and a turn that publishes wake a WorkBus subscriber of the
// other store, never a WorkTurns or WorkActivities one.
func TestBusWakesOtherStore(t *testing.T) {
	schema := newSchema(t)
	a, b := open(t, schema), open(t, schema)
	ctx := context.Background()
	bus, cancelBus := a.SubscribeKinds("t", storage.WorkBus)
	defer cancelBus()
	turns, cancelTurns := a.SubscribeKinds("t", storage.WorkTurns|storage.WorkActivities)
	defer cancelTurns()
	all, drain, cancelAll := a.SubscribeAll(storage.WorkBus)
	defer cancelAll()
	quiet := func(what string) {
		t.Helper()
		select {
		case <-turns:
			t.Fatalf("%s woke a subscriber to turns and activities", what)
		default:
		}
	}
	wake := func(what string, fn func() error) {
		t.Helper()
		if err := fn(); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		waitSignal(t, what, bus)
		waitSignal(t, what+" (SubscribeAll)", all)
		if got := drain(); fmt.Sprint(got) != "[t]" {
			t.Fatalf("%s: SubscribeAll drained %q", what, got)
		}
		quiet(what)
	}
	wake("BusPublish", func() error {
		_, err := b.BusPublish(ctx, &storage.BusPublishParams{Tenant: "t", Now: t0, Event: storage.BusPublishEvent{ID: "e", Type: "x", Data: json.RawMessage(`1`)}})
		return err
	})
	wake("BusRoute", func() error {
		_, err := b.BusRoute(ctx, &storage.BusRouteParams{Tenant: "t", Now: t0, Route: routeTo("s")})
		return err
	})
	var c *storage.BusClaimed
	wake("BusFinish with a retry", func() error {
		cs, err := b.BusClaim(ctx, &storage.BusClaimParams{Tenant: "t", Now: t0})
		if err != nil || len(cs) != 1 {
			return fmt.Errorf("claim: %d, %v", len(cs), err)
		}
		c = cs[0]
		_, err = b.BusFinish(ctx, &storage.BusFinishParams{Tenant: "t", Now: t0, Results: []storage.BusResult{{Execution: c.Execution.ID,
			LockToken: c.LockToken, Outcome: storage.BusRetry, RetryAt: t0.Add(time.Second), Attempt: heraldtype.Attempt{Number: 1}}}})
		return err
	})
	wake("BusDeadLetterReprocess", func() error {
		cs, err := b.BusClaim(ctx, &storage.BusClaimParams{Tenant: "t", Now: t0.Add(time.Second)})
		if err != nil || len(cs) != 1 {
			return fmt.Errorf("claim: %d, %v", len(cs), err)
		}
		errs, err := b.BusFinish(ctx, &storage.BusFinishParams{Tenant: "t", Now: t0, Results: []storage.BusResult{{Execution: cs[0].Execution.ID,
			LockToken: cs[0].LockToken, Outcome: storage.BusDeadLetter, Attempt: heraldtype.Attempt{Number: 2},
			DeadLetter: &heraldtype.DeadLetter{ErrorKind: heraldtype.ErrorPermanent}}}})
		if err != nil || errs[0] != nil {
			return fmt.Errorf("finish: %v, %v", errs, err)
		}
		n, err := b.BusDeadLetterReprocess(ctx, &storage.BusDeadLetterOpParams{Tenant: "t", Now: t0})
		if err == nil && n != 1 {
			err = fmt.Errorf("reprocessed %d", n)
		}
		return err
	})
	if _, err := b.InstanceCreate(ctx, &storage.InstanceCreateParams{Tenant: "t", ID: "i", Workflow: "wf", Now: t0}); err != nil {
		t.Fatal(err)
	}
	waitSignal(t, "InstanceCreate", turns)
	turn := claimOneTurn(t, b)
	wake("TurnCommit with Publish", func() error {
		_, err := b.TurnCommit(ctx, &storage.TurnCommitParams{Tenant: "t", InstanceID: "i", LockToken: turn.LockToken, Execution: 1, Now: t0,
			ConsumedMessages: []int64{turn.Messages[0].ID}, Status: heraldtype.StatusCompleted,
			NewEvents: []history.Event{{Seq: 2, Kind: history.ExecutionCompleted, Time: t0}},
			Publish:   []storage.BusPublishEvent{{ID: "from-i", Type: "x", Data: json.RawMessage(`1`), Source: "workflow:i"}}})
		return err
	})
}

// The refusals this store adds to the bus's contract (the package doc's
// choices) write nothing.
func TestBusRefusals(t *testing.T) {
	s := open(t, newSchema(t))
	ctx := context.Background()
	sub := heraldtype.Subscription{ID: "s", Pattern: "x", Target: heraldtype.Target{Kind: heraldtype.TargetHandler, Handler: "h"}}
	big := 1 << 31
	for what, fn := range map[string]func() error{
		"an event without data": func() error {
			_, err := s.BusPublish(ctx, &storage.BusPublishParams{Tenant: "t", Event: storage.BusPublishEvent{ID: "e", Type: "x"}})
			return err
		},
		"a source over its cap": func() error {
			_, err := s.BusPublish(ctx, &storage.BusPublishParams{Tenant: "t", Event: storage.BusPublishEvent{ID: "e", Type: "x",
				Data: json.RawMessage(`1`), Source: "workflow:" + string(make([]byte, storage.MaxIDBytes)) + "x"}})
			return err
		},
		"a type over its cap": func() error {
			_, err := s.BusPublish(ctx, &storage.BusPublishParams{Tenant: "t", Event: storage.BusPublishEvent{ID: "e",
				Type: fmt.Sprintf("%0*d", storage.MaxNameBytes+1, 0), Data: json.RawMessage(`1`)}})
			return err
		},
		"a zero heartbeat": func() error {
			return s.BusHeartbeat(ctx, &storage.BusHeartbeatParams{Tenant: "t", Execution: 1, LockToken: "x"})
		},
		"a filter that is not JSON": func() error {
			bad := sub
			bad.Filter = json.RawMessage(`{"all":`)
			_, err := s.BusSubscriptionPut(ctx, &storage.BusSubscriptionPutParams{Tenant: "t", Subscription: bad})
			return err
		},
		"MaxRetries over 2^30": func() error {
			bad := sub
			bad.MaxRetries = &big
			_, err := s.BusSubscriptionPut(ctx, &storage.BusSubscriptionPutParams{Tenant: "t", Subscription: bad})
			return err
		},
		"a script source with a NUL byte": func() error {
			_, err := s.BusScriptPut(ctx, &storage.BusScriptPutParams{Tenant: "t", ID: "js", Source: "return 1;\x00"})
			return err
		},
		"a turn publishing an event without data": func() error {
			_, err := s.TurnCommit(ctx, &storage.TurnCommitParams{Tenant: "t", InstanceID: "i", LockToken: "k", Execution: 1,
				Publish: []storage.BusPublishEvent{{ID: "p", Type: "x"}}})
			return err
		},
	} {
		if err := fn(); !errors.Is(err, heraldtype.ErrInvalidArgument) {
			t.Errorf("%s: %v, want ErrInvalidArgument", what, err)
		}
	}
	if n, err := s.BusBacklog(ctx, &storage.BusBacklogParams{Tenant: "t"}); err != nil || n != 0 {
		t.Fatalf("backlog %d, %v", n, err)
	}
	if g, err := s.BusSubscriptionGeneration(ctx, &storage.BusTenantParams{Tenant: "t"}); err != nil || g != 0 {
		t.Fatalf("generation %d, %v", g, err)
	}
	if _, err := s.BusScriptGet(ctx, &storage.BusScriptGetParams{Tenant: "t", ID: "js"}); !errors.Is(err, heraldtype.ErrNotFound) {
		t.Fatalf("script: %v", err)
	}
}

// Deleting a subscription forgets its last fair-queueing number: put
// again, its first execution gets the tenant's current number, not its
// old last + 1.
func TestBusSubscriptionDeleteForgetsNumber(t *testing.T) {
	schema := newSchema(t)
	s := open(t, schema)
	ctx := context.Background()
	sub := heraldtype.Subscription{ID: "A", Pattern: "x", Target: heraldtype.Target{Kind: heraldtype.TargetHandler, Handler: "h"}}
	put := func() {
		t.Helper()
		if _, err := s.BusSubscriptionPut(ctx, &storage.BusSubscriptionPutParams{Tenant: "t", Subscription: sub, Now: t0}); err != nil {
			t.Fatal(err)
		}
	}
	route := func(ids []string, subs ...string) {
		t.Helper()
		for _, id := range ids {
			if _, err := s.BusPublish(ctx, &storage.BusPublishParams{Tenant: "t", Now: t0,
				Event: storage.BusPublishEvent{ID: id, Type: "x", Data: json.RawMessage(`1`)}}); err != nil {
				t.Fatal(err)
			}
		}
		if n, err := s.BusRoute(ctx, &storage.BusRouteParams{Tenant: "t", Now: t0, Route: routeTo(subs...)}); err != nil || n != len(ids) {
			t.Fatalf("BusRoute: %d, %v", n, err)
		}
	}
	put()
	route([]string{"a0", "a1", "a2", "a3", "a4"}, "A") // A: 0..4
	route([]string{"b0"}, "B")                         // B: max(0, 0) = 0
	claimed := func(max int) []string {
		t.Helper()
		cs, err := s.BusClaim(ctx, &storage.BusClaimParams{Tenant: "t", Now: t0, Max: max})
		if err != nil {
			t.Fatal(err)
		}
		var ids []string
		for _, c := range cs {
			ids = append(ids, c.Execution.EventID+"/"+c.Execution.Subscription)
		}
		return ids
	}
	if got := claimed(2); fmt.Sprint(got) != "[a0/A b0/B]" {
		t.Fatalf("claimed %v", got)
	}
	if err := s.BusSubscriptionDelete(ctx, &storage.BusSubscriptionGetParams{Tenant: "t", ID: "A"}); err != nil {
		t.Fatal(err)
	}
	put()
	// The queue's lowest is a1's 1. A, forgotten, gets max(0, 1) = 1 (not
	// its old last 4 + 1 = 5): it runs right after a1, before a2.
	route([]string{"n"}, "A")
	if got := claimed(3); fmt.Sprint(got) != "[a1/A n/A a2/A]" {
		t.Fatalf("claimed %v after the subscription was put again", got)
	}
}
