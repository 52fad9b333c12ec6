package postgres_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/heraldwf/herald/history"
	"github.com/heraldwf/herald/storage"
	"github.com/heraldwf/herald/storage/postgres"
	"github.com/heraldwf/herald/storage/storagetest"
)

// Many nodes (stores with pools of their own on one schema) register
// delete-after-first waits on one key while puts of that key race with them:
// every put reaches at most one waiter, no waiter receives twice, and a
// correlated event is never left behind while waiters still wait. With a
// single put exactly one waiter receives it.
func TestCorrelatedDeleteAfterFirstAcrossNodes(t *testing.T) {
	schema := newSchema(t)
	const nodes, waiters = 4, 50
	stores := make([]*postgres.Store, nodes)
	for i := range stores {
		stores[i] = open(t, schema, postgres.WithMaxConns(8))
	}
	ctx := context.Background()
	conn := connect(t)

	// Rounds of one put, then rounds of several.
	for round, puts := range []int{1, 1, 1, 1, 1, 10, 10} {
		tenant := fmt.Sprintf("t%d", round)
		key := "doc"
		createAll(t, stores, tenant, waiters)
		turns, err := stores[0].TurnClaim(ctx, &storage.TurnClaimParams{Tenant: tenant, Now: t0, Lease: time.Minute, Max: waiters})
		if err != nil || len(turns) != waiters {
			t.Fatalf("TurnClaim: %d turns, %v", len(turns), err)
		}

		var (
			wg       sync.WaitGroup
			start    = make(chan struct{})
			mu       sync.Mutex
			fromPuts int
		)
		now := t0.Add(time.Second)
		for i, turn := range turns {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				time.Sleep(time.Duration(rand.Int64N(int64(10 * time.Millisecond))))
				ids := make([]int64, len(turn.Messages))
				for j, m := range turn.Messages {
					ids[j] = m.ID
				}
				_, err := stores[i%nodes].TurnCommit(ctx, &storage.TurnCommitParams{
					Tenant: tenant, InstanceID: turn.Instance.ID, LockToken: turn.LockToken, Execution: 1, Now: now,
					ConsumedMessages: ids,
					CorrelatedWaits:  []storage.CorrelatedWait{{TaskSeq: 2, Def: "signed", Key: key, DeleteAfterFirst: true}},
				})
				if err != nil {
					t.Errorf("TurnCommit(%s): %v", turn.Instance.ID, err)
				}
			}()
		}
		for j := range puts {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				// Spread the puts over the commits.
				time.Sleep(time.Duration(rand.Int64N(int64(10 * time.Millisecond))))
				c, err := stores[j%nodes].CorrelatedPut(ctx, &storage.CorrelatedPutParams{
					Tenant: tenant, Def: "signed", Key: key, Payload: []byte(fmt.Sprintf(`%d`, j)),
					DeleteAfterFirst: true, Now: now,
				})
				if err != nil {
					t.Errorf("CorrelatedPut: %v", err)
					return
				}
				if len(c.Produced) > 1 {
					t.Errorf("a delete-after-first put produced %d events", len(c.Produced))
				}
				mu.Lock()
				fromPuts += len(c.Produced)
				mu.Unlock()
			}()
		}
		close(start)
		wg.Wait()
		if t.Failed() {
			t.FailNow()
		}

		evs, err := stores[1].EventList(ctx, &storage.EventListParams{Tenant: tenant, Lane: history.LaneCorrelated})
		if err != nil {
			t.Fatal(err)
		}
		got := map[string]int{}
		for _, e := range evs {
			got[e.InstanceID]++
			if got[e.InstanceID] > 1 {
				t.Fatalf("round %d: instance %s received twice", round, e.InstanceID)
			}
		}
		if len(evs) < 1 || len(evs) > puts {
			t.Fatalf("round %d: %d deliveries for %d puts", round, len(evs), puts)
		}
		if puts == 1 && len(evs) != 1 {
			t.Fatalf("round %d: %d deliveries of one put, want exactly 1", round, len(evs))
		}
		if fromPuts > len(evs) {
			t.Fatalf("round %d: puts report %d deliveries, the ledger %d", round, fromPuts, len(evs))
		}
		// The last event was taken: nothing is left while 45+ waiters wait.
		if _, err := stores[2].CorrelatedGet(ctx, &storage.CorrelatedGetParams{Tenant: tenant, Def: "signed", Key: key}); err == nil {
			t.Fatalf("round %d: a correlated event is left while waiters wait", round)
		}
		var markers int
		if err := conn.QueryRow(ctx, `SELECT count(*) FROM "`+schema+`".correlated_waits WHERE tenant = $1`, tenant).Scan(&markers); err != nil {
			t.Fatal(err)
		}
		if markers+len(evs) != waiters {
			t.Fatalf("round %d: %d markers left and %d deliveries, want %d in all", round, markers, len(evs), waiters)
		}
		// Each delivered instance has exactly its message; the rest nothing.
		claimed, err := stores[0].TurnClaim(ctx, &storage.TurnClaimParams{Tenant: tenant, Now: now, Lease: time.Minute, Max: waiters})
		if err != nil {
			t.Fatal(err)
		}
		if len(claimed) != len(evs) {
			t.Fatalf("round %d: %d instances claimable, want %d", round, len(claimed), len(evs))
		}
		for _, turn := range claimed {
			if got[turn.Instance.ID] != 1 || len(turn.Messages) != 1 || turn.Messages[0].Key != key || turn.Messages[0].TaskSeq != 2 {
				t.Fatalf("round %d: turn of %s: %+v", round, turn.Instance.ID, turn.Messages)
			}
		}
	}
}

// A wait and a put of its key, on different nodes, started together, many
// times over: whichever commits first, the waiter receives the event exactly
// once and nothing is left behind — never a marker next to the event it
// waits for (a lost wake-up), never a delete-after-first event kept after a
// delivery.
func TestCorrelatedWaitPutRaceAcrossNodes(t *testing.T) {
	schema := newSchema(t)
	const nodes, pairs = 4, 200
	stores := make([]*postgres.Store, nodes)
	for i := range stores {
		stores[i] = open(t, schema, postgres.WithMaxConns(8))
	}
	ctx := context.Background()
	conn := connect(t)
	const tenant = "t"
	createAll(t, stores, tenant, pairs)
	turns, err := stores[0].TurnClaim(ctx, &storage.TurnClaimParams{Tenant: tenant, Now: t0, Lease: time.Minute, Max: pairs})
	if err != nil || len(turns) != pairs {
		t.Fatalf("TurnClaim: %d turns, %v", len(turns), err)
	}
	now := t0.Add(time.Second)
	var wg sync.WaitGroup
	sem := make(chan struct{}, 16) // pairs in flight
	for i, turn := range turns {
		key := "k-" + turn.Instance.ID
		deleteAfterFirst := i%2 == 0
		sem <- struct{}{}
		wg.Add(2)
		start := make(chan struct{})
		go func() {
			defer wg.Done()
			<-start
			_, err := stores[i%nodes].TurnCommit(ctx, &storage.TurnCommitParams{
				Tenant: tenant, InstanceID: turn.Instance.ID, LockToken: turn.LockToken, Execution: 1, Now: now,
				ConsumedMessages: []int64{turn.Messages[0].ID},
				CorrelatedWaits:  []storage.CorrelatedWait{{TaskSeq: 2, Def: "signed", Key: key, DeleteAfterFirst: deleteAfterFirst}},
			})
			if err != nil {
				t.Errorf("TurnCommit(%s): %v", turn.Instance.ID, err)
			}
		}()
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			<-start
			if _, err := stores[(i+1)%nodes].CorrelatedPut(ctx, &storage.CorrelatedPutParams{
				Tenant: tenant, Def: "signed", Key: key, Payload: []byte(`1`), DeleteAfterFirst: deleteAfterFirst, Now: now,
			}); err != nil {
				t.Errorf("CorrelatedPut(%s): %v", key, err)
			}
		}()
		close(start)
	}
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}

	evs, err := stores[1].EventList(ctx, &storage.EventListParams{Tenant: tenant, Lane: history.LaneCorrelated, Limit: 10 * pairs})
	if err != nil {
		t.Fatal(err)
	}
	delivered := map[string]int{}
	for _, e := range evs {
		delivered[e.InstanceID]++
	}
	var markers int
	if err := conn.QueryRow(ctx, `SELECT count(*) FROM "`+schema+`".correlated_waits WHERE tenant = $1`, tenant).Scan(&markers); err != nil {
		t.Fatal(err)
	}
	for i, turn := range turns {
		id := turn.Instance.ID
		if delivered[id] != 1 {
			t.Errorf("%s received %d events, want 1", id, delivered[id])
		}
		c, err := stores[2].CorrelatedGet(ctx, &storage.CorrelatedGetParams{Tenant: tenant, Def: "signed", Key: "k-" + id})
		switch {
		case i%2 == 0 && err == nil:
			t.Errorf("delete-after-first event of %s is still stored", id)
		case i%2 == 1 && err != nil:
			t.Errorf("event of %s: %v", id, err)
		case i%2 == 1 && len(c.Produced) != 1:
			t.Errorf("event of %s produced %d events, want 1", id, len(c.Produced))
		}
	}
	if markers != 0 {
		t.Errorf("%d markers left, want 0", markers)
	}
}

// Markers are deleted, not merely ignored, when their instance completes,
// continues as new or is terminated; a put's delivery deletes the marker.
func TestCorrelationMarkersDeleted(t *testing.T) {
	ctx := context.Background()
	schema := newSchema(t)
	conn := connect(t)
	storagetest.CorrelationMarkersDeleted(t, open(t, schema), func() int {
		t.Helper()
		var n int
		if err := conn.QueryRow(ctx, `SELECT count(*) FROM "`+schema+`".correlated_waits`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	})
}

// createAll creates instances i000, i001, ... of tenant through the stores
// in turn, concurrently.
func createAll(t *testing.T, stores []*postgres.Store, tenant string, n int) {
	t.Helper()
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := stores[i%len(stores)].InstanceCreate(context.Background(), &storage.InstanceCreateParams{
				Tenant: tenant, ID: fmt.Sprintf("i%03d", i), Workflow: "wf", Now: t0,
			}); err != nil {
				t.Errorf("InstanceCreate: %v", err)
			}
		}()
	}
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}
}

// A schema written by a version-1 Herald is upgraded in place: its ledger
// entries and inbox messages get an empty key, and the correlated lane works.
func TestMigrateFromVersion1(t *testing.T) {
	ctx := context.Background()
	schema := newSchema(t)
	v1, err := os.ReadFile("migrations/0001_init.sql")
	if err != nil {
		t.Fatal(err)
	}
	conn := connect(t)
	for _, q := range []string{
		`CREATE SCHEMA "` + schema + `"`,
		`SET search_path TO "` + schema + `"`,
		`CREATE TABLE schema_migrations (version integer PRIMARY KEY, name text NOT NULL, applied_at bigint NOT NULL)`,
		string(v1),
		`INSERT INTO schema_migrations VALUES (1, '0001_init.sql', 0)`,
		`INSERT INTO instances (tenant, id, workflow, status, execution, created_at, updated_at, ready_at)
			VALUES ('t', 'i', 'wf', 'running', 1, 1, 1, 1)`,
		`INSERT INTO events (tenant, event_id, instance_id, lane, name, fate, received_at, updated_at)
			VALUES ('t', 'old', 'i', 'positional', 'go', 'pending', 1, 1)`,
		`INSERT INTO inbox (tenant, instance_id, kind, lane, event_id, name, payload, visible_at, created_at)
			VALUES ('t', 'i', 'event', 'positional', 'old', 'go', '1', 1, 1)`,
	} {
		if _, err := conn.Exec(ctx, q, pgx.QueryExecModeSimpleProtocol); err != nil {
			t.Fatalf("%.60s: %v", q, err)
		}
	}
	s := open(t, schema)
	e, err := s.EventGet(ctx, &storage.EventGetParams{Tenant: "t", EventID: "old"})
	if err != nil || e.Key != "" || e.Fate != history.FatePending {
		t.Fatalf("old event after the upgrade: %+v, %v", e, err)
	}
	turns, err := s.TurnClaim(ctx, &storage.TurnClaimParams{Tenant: "t", Now: t0, Max: 1})
	if err != nil || len(turns) != 1 || len(turns[0].Messages) != 1 || turns[0].Messages[0].EventID != "old" || turns[0].Messages[0].Key != "" {
		t.Fatalf("claim after the upgrade: %+v, %v", turns, err)
	}
	if _, err := s.TurnCommit(ctx, &storage.TurnCommitParams{
		Tenant: "t", InstanceID: "i", LockToken: turns[0].LockToken, Execution: 1, Now: t0,
		ConsumedMessages: []int64{turns[0].Messages[0].ID},
		CorrelatedWaits:  []storage.CorrelatedWait{{TaskSeq: 2, Def: "d", Key: "k"}},
	}); err != nil {
		t.Fatal(err)
	}
	c, err := s.CorrelatedPut(ctx, &storage.CorrelatedPutParams{Tenant: "t", Def: "d", Key: "k", Payload: []byte(`1`), Now: t0})
	if err != nil || len(c.Produced) != 1 {
		t.Fatalf("CorrelatedPut after the upgrade: %+v, %v", c, err)
	}
}

// TestConformanceGoCorrelatedRules runs the correlated lane's conformance
// cases with the reference Go rules (backend.RegisterWaits,
// backend.CorrelatedPut) in place of the one-statement SQL the store
// normally runs: both must keep the one contract.
func TestConformanceGoCorrelatedRules(t *testing.T) {
	testURL(t)
	storagetest.RunCorrelated(t, func(t *testing.T) storage.Store {
		return open(t, newSchema(t), postgres.WithGoCorrelatedRules())
	})
}
