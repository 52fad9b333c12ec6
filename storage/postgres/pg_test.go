package postgres_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/heraldwf/herald/heraldtype"
	"github.com/heraldwf/herald/history"
	"github.com/heraldwf/herald/storage"
	"github.com/heraldwf/herald/storage/postgres"
)

var t0 = time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)

// connect opens a plain connection to the test server, closed when the test
// ends.
func connect(t testing.TB) *pgx.Conn {
	t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, testURL(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close(context.Background()) })
	return conn
}

// waitSignal waits for a value on ch.
func waitSignal(t testing.TB, what string, ch <-chan struct{}) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(10 * time.Second):
		t.Fatalf("no signal after %s", what)
	}
}

func TestOpenRefusesBadOptions(t *testing.T) {
	ctx := context.Background()
	for _, schema := range []string{"", "Herald", "pg_herald", "a-b", `x"; DROP TABLE y; --`, strings.Repeat("s", 57)} {
		if _, err := postgres.Open(ctx, "postgres://127.0.0.1:1/none", postgres.WithSchema(schema)); err == nil {
			t.Errorf("Open with schema %q succeeded", schema)
		}
	}
	if _, err := postgres.Open(ctx, "postgres://127.0.0.1:1/none", postgres.WithMaxRetries(-1)); err == nil {
		t.Error("Open with negative retries succeeded")
	}
}

// Many processes start at once against a new schema: every Open succeeds,
// each migration is applied once, and a later Open applies nothing.
func TestConcurrentOpenMigratesOnce(t *testing.T) {
	schema := newSchema(t)
	const n = 8
	var wg sync.WaitGroup
	stores := make([]*postgres.Store, n)
	errs := make([]error, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			stores[i], errs[i] = postgres.Open(context.Background(), testURL(t), postgres.WithSchema(schema), postgres.WithMaxConns(2))
		}()
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("Open %d: %v", i, err)
		}
		defer stores[i].Close()
	}
	conn := connect(t)
	ctx := context.Background()
	var rows, versions int
	if err := conn.QueryRow(ctx, `SELECT count(*), count(DISTINCT version) FROM "`+schema+`".schema_migrations`).Scan(&rows, &versions); err != nil {
		t.Fatal(err)
	}
	if rows == 0 || rows != versions {
		t.Fatalf("schema_migrations: %d rows for %d versions", rows, versions)
	}

	// Data written through one store is there after reopening; reopening
	// applies nothing.
	if _, err := stores[0].InstanceCreate(ctx, &storage.InstanceCreateParams{
		Tenant: "t", ID: "i", Workflow: "wf", Input: json.RawMessage(`{"x": 1}`), Now: t0,
	}); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		s := open(t, schema)
		inst, err := s.InstanceGet(ctx, &storage.InstanceGetParams{Tenant: "t", ID: "i"})
		if err != nil {
			t.Fatalf("InstanceGet after reopen: %v", err)
		}
		if string(inst.Input) != `{"x": 1}` || !inst.CreatedAt.Equal(t0) {
			t.Fatalf("instance after reopen: %+v", inst)
		}
	}
	var again int
	if err := conn.QueryRow(ctx, `SELECT count(*) FROM "`+schema+`".schema_migrations`).Scan(&again); err != nil {
		t.Fatal(err)
	}
	if again != rows {
		t.Fatalf("reopening changed schema_migrations: %d rows, then %d", rows, again)
	}
}

func TestOpenRefusesNewerSchema(t *testing.T) {
	schema := newSchema(t)
	open(t, schema)
	conn := connect(t)
	if _, err := conn.Exec(context.Background(), `INSERT INTO "`+schema+`".schema_migrations (version, name, applied_at)
		VALUES (9999, '9999_future.sql', 0)`); err != nil {
		t.Fatal(err)
	}
	_, err := postgres.Open(context.Background(), testURL(t), postgres.WithSchema(schema))
	if err == nil || !strings.Contains(err.Error(), "newer") {
		t.Fatalf("Open of a newer schema: %v, want a refusal", err)
	}
}

func TestCloseThenErrClosed(t *testing.T) {
	schema := newSchema(t)
	s, err := postgres.Open(context.Background(), testURL(t), postgres.WithSchema(schema))
	if err != nil {
		t.Fatal(err)
	}
	ch, cancel := s.SubscribeKinds("t", storage.WorkAll) // starts the listener, which Close must stop
	defer cancel()
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	ctx := context.Background()
	if _, err := s.InstanceGet(ctx, &storage.InstanceGetParams{Tenant: "t", ID: "i"}); !errors.Is(err, heraldtype.ErrClosed) {
		t.Fatalf("InstanceGet after Close: %v, want ErrClosed", err)
	}
	if _, err := s.EventRaise(ctx, &storage.EventRaiseParams{Tenant: "t", InstanceID: "i", EventID: "e", Now: t0}); !errors.Is(err, heraldtype.ErrClosed) {
		t.Fatalf("EventRaise after Close: %v, want ErrClosed", err)
	}
	select {
	case <-ch:
		t.Fatal("signal after Close")
	default:
	}
}

// A write through one store wakes a subscriber of another store (another
// pool, as in another process) through NOTIFY, and only for its tenant.
func TestNotifyWakesOtherStore(t *testing.T) {
	schema := newSchema(t)
	writer, reader := open(t, schema), open(t, schema)
	ctx := context.Background()

	ch, cancel := reader.SubscribeKinds("t", storage.WorkAll)
	defer cancel()
	other, cancelOther := reader.SubscribeKinds("other", storage.WorkAll)
	defer cancelOther()

	if _, err := writer.InstanceCreate(ctx, &storage.InstanceCreateParams{Tenant: "t", ID: "i", Workflow: "wf", Now: t0}); err != nil {
		t.Fatal(err)
	}
	waitSignal(t, "InstanceCreate in another store", ch)
	if _, err := writer.EventRaise(ctx, &storage.EventRaiseParams{
		Tenant: "t", InstanceID: "i", EventID: "e1", Lane: history.LanePositional, Name: "go", Now: t0,
	}); err != nil {
		t.Fatal(err)
	}
	waitSignal(t, "EventRaise in another store", ch)
	select {
	case <-other:
		t.Fatal("a subscriber of another tenant was woken")
	default:
	}

	// Anyone can wake a tenant's workers by hand.
	conn := connect(t)
	if _, err := conn.Exec(ctx, `SELECT pg_notify($1, 'other')`, reader.Channel()); err != nil {
		t.Fatal(err)
	}
	waitSignal(t, "a NOTIFY by hand", other)
}

// Wake-ups through NOTIFY carry the kind of work: another store's raise
// wakes a subscriber to turns and not one to activities, a scheduled
// activity the other way round; a NOTIFY by hand (the tenant alone) wakes
// both. A store's own writes wake its subscribers once, not again through
// its own NOTIFY.
func TestNotifyKinds(t *testing.T) {
	schema := newSchema(t)
	writer, reader := open(t, schema), open(t, schema)
	ctx := context.Background()
	turns, cancelTurns := reader.SubscribeKinds("t", storage.WorkTurns)
	defer cancelTurns()
	acts, cancelActs := reader.SubscribeKinds("t", storage.WorkActivities)
	defer cancelActs()
	noSignal := func(what string, ch <-chan struct{}) {
		t.Helper()
		select {
		case <-ch:
			t.Fatalf("%s: woken", what)
		case <-time.After(300 * time.Millisecond):
		}
	}

	if _, err := writer.InstanceCreate(ctx, &storage.InstanceCreateParams{Tenant: "t", ID: "i", Workflow: "wf", Now: t0}); err != nil {
		t.Fatal(err)
	}
	waitSignal(t, "InstanceCreate wakes turns", turns)
	noSignal("InstanceCreate, activities", acts)

	turn, err := writer.TurnClaim(ctx, &storage.TurnClaimParams{Tenant: "t", Now: t0, Max: 1})
	if err != nil || len(turn) != 1 {
		t.Fatalf("TurnClaim: %v, %d turns", err, len(turn))
	}
	ids := make([]int64, len(turn[0].Messages))
	for i, m := range turn[0].Messages {
		ids[i] = m.ID
	}
	if _, err := writer.TurnCommit(ctx, &storage.TurnCommitParams{Tenant: "t", InstanceID: "i", LockToken: turn[0].LockToken,
		Execution: 1, Now: t0, ConsumedMessages: ids, Status: heraldtype.StatusRunning,
		NewEvents:  []history.Event{{Seq: 2, Kind: history.ActivityScheduled, Name: "a", Time: t0}},
		Activities: []storage.ActivityTask{{TaskSeq: 2, Name: "a"}}}); err != nil {
		t.Fatal(err)
	}
	waitSignal(t, "a scheduled activity wakes activities", acts)
	noSignal("a scheduled activity, turns", turns)

	if _, err := writer.EventRaise(ctx, &storage.EventRaiseParams{
		Tenant: "t", InstanceID: "i", EventID: "e1", Lane: history.LanePositional, Name: "go", Now: t0,
	}); err != nil {
		t.Fatal(err)
	}
	waitSignal(t, "EventRaise wakes turns", turns)
	noSignal("EventRaise, activities", acts)

	conn := connect(t)
	if _, err := conn.Exec(ctx, `SELECT pg_notify($1, 't')`, reader.Channel()); err != nil {
		t.Fatal(err)
	}
	waitSignal(t, "a NOTIFY by hand, turns", turns)
	waitSignal(t, "a NOTIFY by hand, activities", acts)

	// The reader's own raise: one wake-up, at commit.
	if _, err := reader.EventRaise(ctx, &storage.EventRaiseParams{
		Tenant: "t", InstanceID: "i", EventID: "e2", Lane: history.LanePositional, Name: "go", Now: t0,
	}); err != nil {
		t.Fatal(err)
	}
	waitSignal(t, "an own raise", turns)
	noSignal("an own raise, through NOTIFY", turns)
}

// When the LISTEN connection is lost, the listener reconnects and wakes
// every subscriber (notifications sent meanwhile are lost), and wake-ups
// from other stores work again.
func TestListenerReconnects(t *testing.T) {
	schema := newSchema(t)
	writer, reader := open(t, schema), open(t, schema)
	ctx := context.Background()
	ch, cancel := reader.SubscribeKinds("t", storage.WorkAll)
	defer cancel()

	conn := connect(t)
	tag, err := conn.Exec(ctx, `SELECT pg_terminate_backend(pid) FROM pg_stat_activity
		WHERE datname = current_database() AND query = $1`, `LISTEN "`+reader.Channel()+`"`)
	if err != nil {
		t.Fatal(err)
	}
	if tag.RowsAffected() != 1 {
		t.Fatalf("found %d listener connections, want 1", tag.RowsAffected())
	}
	waitSignal(t, "the listener reconnected", ch)

	// The reconnection's wake-up may race the write below; drain until the
	// write's own notification arrives: the instance is visible once woken.
	if _, err := writer.InstanceCreate(ctx, &storage.InstanceCreateParams{Tenant: "t", ID: "i", Workflow: "wf", Now: t0}); err != nil {
		t.Fatal(err)
	}
	deadline := time.After(10 * time.Second)
	for {
		select {
		case <-ch:
		case <-deadline:
			t.Fatal("no wake-up for a write after the reconnection")
		}
		turns, err := reader.TurnClaim(ctx, &storage.TurnClaimParams{Tenant: "t", Now: t0, Max: 1})
		if err != nil {
			t.Fatal(err)
		}
		if len(turns) == 1 {
			return
		}
	}
}

// Several stores (nodes) claim from one schema at once: every instance is
// claimed exactly once, and so is every activity task.
func TestConcurrentClaimsAcrossStores(t *testing.T) {
	schema := newSchema(t)
	stores := []*postgres.Store{open(t, schema, postgres.WithMaxConns(4)), open(t, schema, postgres.WithMaxConns(4))}
	ctx := context.Background()
	const (
		n       = 200
		workers = 4 // per store
		tenant  = "t"
	)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := stores[i%2].InstanceCreate(ctx, &storage.InstanceCreateParams{
				Tenant: tenant, ID: fmt.Sprintf("i%03d", i), Workflow: "wf", Now: t0,
			}); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}

	// claimAll runs workers on every store until claim returns nothing on
	// all of them, and counts what each claim returned.
	claimAll := func(claim func(s *postgres.Store) ([]string, error)) map[string]int {
		var (
			mu     sync.Mutex
			counts = map[string]int{}
			wg     sync.WaitGroup
		)
		for _, s := range stores {
			for range workers {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for {
						ids, err := claim(s)
						if err != nil {
							t.Error(err)
							return
						}
						if len(ids) == 0 {
							return
						}
						mu.Lock()
						for _, id := range ids {
							counts[id]++
						}
						mu.Unlock()
					}
				}()
			}
		}
		wg.Wait()
		return counts
	}
	check := func(what string, counts map[string]int) {
		t.Helper()
		if len(counts) != n {
			t.Fatalf("%s: %d distinct claimed, want %d", what, len(counts), n)
		}
		for id, c := range counts {
			if c != 1 {
				t.Fatalf("%s: %s claimed %d times", what, id, c)
			}
		}
	}

	// Turns: each commit schedules one activity.
	turns := claimAll(func(s *postgres.Store) ([]string, error) {
		turns, err := s.TurnClaim(ctx, &storage.TurnClaimParams{Tenant: tenant, Now: t0, Lease: time.Minute, Max: 3})
		if err != nil {
			return nil, err
		}
		var ids []string
		for _, turn := range turns {
			ids = append(ids, turn.Instance.ID)
			if _, err := s.TurnCommit(ctx, &storage.TurnCommitParams{
				Tenant: tenant, InstanceID: turn.Instance.ID, LockToken: turn.LockToken, Execution: 1, Now: t0,
				ConsumedMessages: []int64{turn.Messages[0].ID},
				NewEvents:        []history.Event{{Seq: 2, Kind: history.ActivityScheduled, Name: "work", Time: t0}},
				Activities:       []storage.ActivityTask{{TaskSeq: 2, Name: "work"}},
			}); err != nil {
				return nil, err
			}
		}
		return ids, nil
	})
	check("turns", turns)

	tasks := claimAll(func(s *postgres.Store) ([]string, error) {
		tasks, err := s.ActivityClaim(ctx, &storage.ActivityClaimParams{Tenant: tenant, Now: t0, Lease: time.Minute, Max: 3})
		if err != nil {
			return nil, err
		}
		var ids []string
		for _, task := range tasks {
			ids = append(ids, task.InstanceID)
		}
		return ids, nil
	})
	check("activities", tasks)
}

// An event raised for an instance that does not exist yet, concurrently
// with the instance's creation and its first turns, is never stranded: once
// everything has committed, no instance has messages in its inbox without
// being ready to claim.
func TestRaiseRacesCreate(t *testing.T) {
	schema := newSchema(t)
	a, b := open(t, schema), open(t, schema)
	ctx := context.Background()
	const n = 200
	var (
		writers, workers sync.WaitGroup
		done             = make(chan struct{})
	)
	for i := range n {
		id := fmt.Sprintf("i%03d", i)
		writers.Add(2)
		go func() {
			defer writers.Done()
			if _, err := a.InstanceCreate(ctx, &storage.InstanceCreateParams{Tenant: "t", ID: id, Workflow: "wf", Now: t0}); err != nil {
				t.Error(err)
			}
		}()
		go func() {
			defer writers.Done()
			if _, err := b.EventRaise(ctx, &storage.EventRaiseParams{
				Tenant: "t", InstanceID: id, EventID: "e-" + id, Lane: history.LanePositional, Name: "go", Now: t0,
			}); err != nil {
				t.Error(err)
			}
		}()
	}
	// Turns run meanwhile, each consuming what it was given.
	runTurns := func() (int, error) {
		turns, err := a.TurnClaim(ctx, &storage.TurnClaimParams{Tenant: "t", Now: t0, Max: 4})
		if err != nil {
			return 0, err
		}
		for _, turn := range turns {
			ids := []int64{}
			for _, m := range turn.Messages {
				ids = append(ids, m.ID)
			}
			if _, err := a.TurnCommit(ctx, &storage.TurnCommitParams{
				Tenant: "t", InstanceID: turn.Instance.ID, LockToken: turn.LockToken, Execution: 1, Now: t0, ConsumedMessages: ids,
			}); err != nil {
				return 0, err
			}
		}
		return len(turns), nil
	}
	for range 4 {
		workers.Add(1)
		go func() {
			defer workers.Done()
			for {
				select {
				case <-done:
					return
				default:
				}
				if _, err := runTurns(); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	writers.Wait()
	close(done)
	workers.Wait()
	for {
		k, err := runTurns()
		if err != nil {
			t.Fatal(err)
		}
		if k == 0 {
			break
		}
	}
	var stranded int
	if err := connect(t).QueryRow(ctx, `SELECT count(*) FROM "`+schema+`".inbox m
		JOIN "`+schema+`".instances i ON i.tenant = m.tenant AND i.id = m.instance_id`).Scan(&stranded); err != nil {
		t.Fatal(err)
	}
	if stranded != 0 {
		t.Fatalf("%d messages left in the inboxes of instances nobody can claim", stranded)
	}
}

// Concurrent commits share transactions (commit batches); a commit that
// fails (here a stale lock token) fails alone: the others of its batch are
// committed, and its instance is untouched.
func TestCommitBatchFailsAlone(t *testing.T) {
	schema := newSchema(t)
	s := open(t, schema, postgres.WithMaxConns(4))
	ctx := context.Background()
	const n = 80
	for i := range n {
		if _, err := s.InstanceCreate(ctx, &storage.InstanceCreateParams{Tenant: "t", ID: fmt.Sprintf("i%02d", i), Workflow: "wf", Now: t0}); err != nil {
			t.Fatal(err)
		}
	}
	turns, err := s.TurnClaim(ctx, &storage.TurnClaimParams{Tenant: "t", Now: t0, Max: n})
	if err != nil || len(turns) != n {
		t.Fatalf("TurnClaim: %v, %d turns", err, len(turns))
	}
	stale := func(i int) bool { return i%7 == 3 }
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i, turn := range turns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ids := make([]int64, len(turn.Messages))
			for j, m := range turn.Messages {
				ids[j] = m.ID
			}
			token := turn.LockToken
			if stale(i) {
				token += "-stale"
			}
			_, errs[i] = s.TurnCommit(ctx, &storage.TurnCommitParams{Tenant: "t", InstanceID: turn.Instance.ID, LockToken: token,
				Execution: 1, Now: t0, ConsumedMessages: ids, Status: heraldtype.StatusCompleted, Output: json.RawMessage(`1`),
				NewEvents: []history.Event{{Seq: 2, Kind: history.ExecutionCompleted, Time: t0}}})
		}()
	}
	wg.Wait()
	for i, turn := range turns {
		inst, err := s.InstanceGet(ctx, &storage.InstanceGetParams{Tenant: "t", ID: turn.Instance.ID})
		if err != nil {
			t.Fatal(err)
		}
		h, err := s.HistoryList(ctx, &storage.HistoryListParams{Tenant: "t", InstanceID: turn.Instance.ID})
		if err != nil {
			t.Fatal(err)
		}
		if stale(i) {
			if !errors.Is(errs[i], heraldtype.ErrLeaseLost) {
				t.Errorf("%s, stale token: %v, want ErrLeaseLost", turn.Instance.ID, errs[i])
			}
			if inst.Status != heraldtype.StatusPending || len(h) != 1 {
				t.Errorf("%s, stale token: status %s, %d history events; want pending, 1", turn.Instance.ID, inst.Status, len(h))
			}
			continue
		}
		if errs[i] != nil {
			t.Errorf("%s: %v", turn.Instance.ID, errs[i])
		}
		if inst.Status != heraldtype.StatusCompleted || len(h) != 2 {
			t.Errorf("%s: status %s, %d history events; want completed, 2", turn.Instance.ID, inst.Status, len(h))
		}
	}
}

// Concurrent raises share transactions (raise batches); each gets the
// outcome it would get alone: stored, a duplicate's first receipt, an ended
// instance refused, an event kept for an instance that does not exist yet.
func TestRaiseBatchOutcomes(t *testing.T) {
	schema := newSchema(t)
	s := open(t, schema, postgres.WithMaxConns(4))
	ctx := context.Background()
	const n = 40
	for i := range n {
		if _, err := s.InstanceCreate(ctx, &storage.InstanceCreateParams{Tenant: "t", ID: fmt.Sprintf("i%02d", i), Workflow: "wf", Now: t0}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s.InstanceTerminate(ctx, &storage.InstanceTerminateParams{Tenant: "t", ID: "i00", Now: t0}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.EventRaise(ctx, &storage.EventRaiseParams{Tenant: "t", InstanceID: "i01", EventID: "dup", Lane: history.LanePositional, Name: "go", Now: t0}); err != nil {
		t.Fatal(err)
	}
	type outcome struct {
		res *storage.EventRaiseResult
		err error
	}
	raise := func(i int) *storage.EventRaiseParams {
		p := &storage.EventRaiseParams{Tenant: "t", InstanceID: fmt.Sprintf("i%02d", i%n), EventID: fmt.Sprintf("e%03d", i),
			Lane: history.LanePositional, Name: "go", Now: t0}
		switch {
		case i%10 == 1:
			p.InstanceID, p.EventID = "i01", "dup"
		case i%10 == 2:
			p.InstanceID = fmt.Sprintf("later%03d", i)
		}
		return p
	}
	const raises = 200
	out := make([]outcome, raises)
	var wg sync.WaitGroup
	for i := range raises {
		wg.Add(1)
		go func() {
			defer wg.Done()
			out[i].res, out[i].err = s.EventRaise(ctx, raise(i))
		}()
	}
	wg.Wait()
	for i, o := range out {
		p := raise(i)
		switch {
		case p.InstanceID == "i00":
			if !errors.Is(o.err, heraldtype.ErrInstanceNotRunning) {
				t.Errorf("raise %d to the ended instance: %v, want ErrInstanceNotRunning", i, o.err)
			}
		case o.err != nil:
			t.Errorf("raise %d: %v", i, o.err)
		case p.EventID == "dup":
			if !o.res.Duplicate {
				t.Errorf("raise %d of a seen event id: not a duplicate", i)
			}
		case o.res.Duplicate:
			t.Errorf("raise %d: a duplicate", i)
		default:
			e, err := s.EventGet(ctx, &storage.EventGetParams{Tenant: "t", EventID: p.EventID})
			if err != nil || e.InstanceID != p.InstanceID || e.Fate != history.FatePending {
				t.Errorf("raise %d: ledger %+v, %v", i, e, err)
			}
		}
	}
	// Every stored event is in its instance's inbox, in a turn.
	turns, err := s.TurnClaim(ctx, &storage.TurnClaimParams{Tenant: "t", Now: t0, Max: n})
	if err != nil {
		t.Fatal(err)
	}
	msgs := 0
	for _, turn := range turns {
		for _, m := range turn.Messages {
			if m.Kind == storage.MsgEvent {
				msgs++
			}
		}
	}
	want := 1 // the first "dup"
	for i := range raises {
		if p := raise(i); p.InstanceID != "i00" && p.EventID != "dup" && !strings.HasPrefix(p.InstanceID, "later") {
			want++
		}
	}
	if msgs != want {
		t.Errorf("%d event messages claimed, want %d", msgs, want)
	}
}

// Concurrent reads of event definitions (batched) each see the definition
// as stored when they were made: not found before the put, the new version
// after it, a copy of their own.
func TestDefinitionGetsBatched(t *testing.T) {
	schema := newSchema(t)
	s := open(t, schema, postgres.WithMaxConns(2))
	ctx := context.Background()
	get := func(name string) (*heraldtype.EventDefinition, error) {
		return s.EventDefinitionGet(ctx, &storage.EventDefinitionGetParams{Tenant: "t", Name: name})
	}
	var wg sync.WaitGroup
	for range 50 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := get("d"); !errors.Is(err, heraldtype.ErrNotFound) {
				t.Errorf("before the put: %v, want ErrNotFound", err)
			}
		}()
	}
	wg.Wait()
	if _, err := s.EventDefinitionPut(ctx, &storage.EventDefinitionPutParams{Tenant: "t", Now: t0, Definition: heraldtype.EventDefinition{
		Name: "d", Schema: json.RawMessage(`{"type":"object"}`)}}); err != nil {
		t.Fatal(err)
	}
	defs := make([]*heraldtype.EventDefinition, 50)
	for i := range defs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			d, err := get([]string{"d", "other"}[i%2])
			switch {
			case i%2 == 1 && !errors.Is(err, heraldtype.ErrNotFound):
				t.Errorf("another name: %v, want ErrNotFound", err)
			case i%2 == 0 && (err != nil || string(d.Schema) != `{"type":"object"}`):
				t.Errorf("after the put: %+v, %v", d, err)
			}
			defs[i] = d
		}()
	}
	wg.Wait()
	defs[0].Schema[0] = 'X'
	if string(defs[2].Schema) != `{"type":"object"}` {
		t.Errorf("two reads share their schema bytes")
	}
}

// rtCounter counts the round trips (queries sent alone and batches) made
// with a context that carries countedCall: a call's own, not those of the
// store's background work (NOTIFY).
type rtCounter struct{ n atomic.Int64 }

type countedCall struct{}

func (c *rtCounter) count(ctx context.Context) {
	if ctx.Value(countedCall{}) != nil {
		c.n.Add(1)
	}
}

func (c *rtCounter) TraceQueryStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceQueryStartData) context.Context {
	c.count(ctx)
	return ctx
}
func (c *rtCounter) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}
func (c *rtCounter) TraceBatchStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceBatchStartData) context.Context {
	c.count(ctx)
	return ctx
}
func (c *rtCounter) TraceBatchQuery(context.Context, *pgx.Conn, pgx.TraceBatchQueryData) {}
func (c *rtCounter) TraceBatchEnd(context.Context, *pgx.Conn, pgx.TraceBatchEndData)     {}

// The event round trip's store calls take one round trip each: reading the
// event's definition, the raise, the claim (lease, history, messages), and
// the commit of the turn that completes the instance.
func TestRoundTripsPerCall(t *testing.T) {
	schema := newSchema(t)
	var rts rtCounter
	s := open(t, schema, postgres.WithPoolConfig(func(c *pgxpool.Config) { c.ConnConfig.Tracer = &rts }))
	ctx := context.WithValue(context.Background(), countedCall{}, true)
	if _, err := s.InstanceCreate(ctx, &storage.InstanceCreateParams{Tenant: "t", ID: "i", Workflow: "wf", Now: t0}); err != nil {
		t.Fatal(err)
	}
	turn := claimOneTurn(t, s)
	commit := func(turn *storage.Turn, p *storage.TurnCommitParams) {
		t.Helper()
		for _, m := range turn.Messages {
			p.ConsumedMessages = append(p.ConsumedMessages, m.ID)
		}
		p.Tenant, p.InstanceID, p.LockToken, p.Execution, p.Now = "t", "i", turn.LockToken, 1, t0
		if _, err := s.TurnCommit(ctx, p); err != nil {
			t.Fatal(err)
		}
	}
	commit(turn, &storage.TurnCommitParams{Status: heraldtype.StatusRunning,
		NewEvents: []history.Event{{Seq: 2, Kind: history.EventSubscribed, Name: "go", Time: t0}}})

	count := func(what string, fn func()) {
		t.Helper()
		before := rts.n.Load()
		fn()
		if n := rts.n.Load() - before; n != 1 {
			t.Errorf("%s: %d round trips, want 1", what, n)
		}
	}
	count("EventDefinitionGet", func() {
		if _, err := s.EventDefinitionGet(ctx, &storage.EventDefinitionGetParams{Tenant: "t", Name: "go"}); !errors.Is(err, heraldtype.ErrNotFound) {
			t.Fatal(err)
		}
	})
	count("EventRaise", func() {
		if _, err := s.EventRaise(ctx, &storage.EventRaiseParams{Tenant: "t", InstanceID: "i", EventID: "e", Lane: history.LanePositional, Name: "go", Now: t0}); err != nil {
			t.Fatal(err)
		}
	})
	count("TurnClaim", func() { turn = claimOneTurn(t, s) })
	count("TurnCommit", func() {
		m := turn.Messages[0]
		commit(turn, &storage.TurnCommitParams{Status: heraldtype.StatusCompleted, Output: json.RawMessage(`1`),
			NewEvents: []history.Event{{Seq: 3, Kind: history.EventRaised, EventID: m.EventID, Name: "go", Time: t0},
				{Seq: 4, Kind: history.ExecutionCompleted, Time: t0}},
			Fates: []storage.FateUpdate{{EventID: m.EventID, Fate: history.FateDelivered, Execution: 1, OriginExecution: 1, WaitNumber: 1}}})
	})
}

func claimOneTurn(t *testing.T, s *postgres.Store) *storage.Turn {
	t.Helper()
	ctx := context.WithValue(context.Background(), countedCall{}, true)
	turns, err := s.TurnClaim(ctx, &storage.TurnClaimParams{Tenant: "t", Now: t0, Max: 1})
	if err != nil || len(turns) != 1 {
		t.Fatalf("TurnClaim: %v, %d turns", err, len(turns))
	}
	return turns[0]
}

// batchCounter counts, in each batch sent, the statements whose SQL starts
// with prefix, and keeps the largest count.
type batchCounter struct {
	prefix string
	most   atomic.Int64
}

func (c *batchCounter) TraceQueryStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceQueryStartData) context.Context {
	return ctx
}
func (c *batchCounter) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}
func (c *batchCounter) TraceBatchStart(ctx context.Context, _ *pgx.Conn, d pgx.TraceBatchStartData) context.Context {
	var n int64
	for _, q := range d.Batch.QueuedQueries {
		if strings.HasPrefix(q.SQL, c.prefix) {
			n++
		}
	}
	for {
		most := c.most.Load()
		if n <= most || c.most.CompareAndSwap(most, n) {
			return ctx
		}
	}
}
func (c *batchCounter) TraceBatchQuery(context.Context, *pgx.Conn, pgx.TraceBatchQueryData) {}
func (c *batchCounter) TraceBatchEnd(context.Context, *pgx.Conn, pgx.TraceBatchEndData)     {}

// Concurrent raises that ask for a hand-off share transactions (raise
// batches) and still hand their instances off, each its own, loaded as a
// claim loads it: a batch leases them all and loads them with one set of
// loading statements. Raises of a second tenant in the same batches are
// stored and, when not handed off, leave their instances claimable.
func TestRaiseBatchHandsOff(t *testing.T) {
	schema := newSchema(t)
	bc := &batchCounter{prefix: "WITH inst AS MATERIALIZED (\n\tSELECT status, (lock_token IS NULL"}
	s := open(t, schema, postgres.WithMaxConns(4), postgres.WithPoolConfig(func(c *pgxpool.Config) { c.ConnConfig.Tracer = bc }))
	ctx := context.Background()
	const n = 100 // instances per tenant, per round
	for round := 0; bc.most.Load() < 2; round++ {
		if round == 5 {
			t.Fatalf("no batch held two raises that hand off in %d rounds of %d concurrent raises", round, 2*n)
		}
		id := func(i int) string { return fmt.Sprintf("r%d-i%03d", round, i) }
		for _, tenant := range []string{"t", "u"} {
			for i := range n {
				if _, err := s.InstanceCreate(ctx, &storage.InstanceCreateParams{Tenant: tenant, ID: id(i), Workflow: "wf", Now: t0}); err != nil {
					t.Fatal(err)
				}
			}
		}
		// Leave the kicks of the new instances out of the way: claimed,
		// committed running, unleased.
		for _, tenant := range []string{"t", "u"} {
			turns, err := s.TurnClaim(ctx, &storage.TurnClaimParams{Tenant: tenant, Now: t0, Max: n})
			if err != nil || len(turns) != n {
				t.Fatalf("TurnClaim: %d turns, %v", len(turns), err)
			}
			for _, turn := range turns {
				if _, err := s.TurnCommit(ctx, &storage.TurnCommitParams{Tenant: tenant, InstanceID: turn.Instance.ID,
					LockToken: turn.LockToken, Execution: 1, Now: t0, Status: heraldtype.StatusRunning,
					ConsumedMessages: []int64{turn.Messages[0].ID}}); err != nil {
					t.Fatal(err)
				}
			}
		}
		type raised struct {
			tenant string
			res    *storage.EventRaiseResult
			err    error
		}
		out := make([]raised, 2*n)
		var wg sync.WaitGroup
		for i := range out {
			out[i].tenant = "t"
			if i%4 == 3 {
				out[i].tenant = "u"
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				out[i].res, out[i].err = s.EventRaise(ctx, &storage.EventRaiseParams{Tenant: out[i].tenant, InstanceID: id(i / 2),
					EventID: fmt.Sprintf("r%d-e%03d", round, i), Lane: history.LanePositional, Name: "go", Now: t0,
					Claim: &storage.TurnClaimParams{Lease: time.Minute}})
			}()
		}
		wg.Wait()
		handedOff := map[string]*storage.Turn{} // tenant/id → turn
		for i, o := range out {
			if o.err != nil {
				t.Fatalf("raise %d: %v", i, o.err)
			}
			if o.res.Turn == nil {
				continue
			}
			turn := o.res.Turn
			key := o.tenant + "/" + turn.Instance.ID
			if turn.Instance.ID != id(i/2) || turn.Instance.Tenant != o.tenant {
				t.Fatalf("raise %d for %s handed off %s", i, id(i/2), key)
			}
			if handedOff[key] != nil {
				t.Fatalf("%s handed off twice", key)
			}
			handedOff[key] = turn
			if turn.Err != nil || turn.LockToken == "" || !turn.LeaseUntil.Equal(t0.Add(time.Minute)) ||
				len(turn.History) != 1 || turn.History[0].Kind != history.ExecutionStarted {
				t.Fatalf("turn of %s: %+v", key, turn)
			}
			if !slices.ContainsFunc(turn.Messages, func(m storage.Message) bool { return m.EventID == o.res.EventID }) {
				t.Fatalf("turn of %s without the event that handed it off: %+v", key, turn.Messages)
			}
		}
		// Every instance of t was made runnable by a raise that asked for a
		// hand-off and found it unleased: each is handed off, in a batch or
		// alone.
		for i := range n {
			if handedOff["t/"+id(i)] == nil && (2*i)%4 != 3 && (2*i+1)%4 != 3 {
				t.Errorf("%s was not handed off", id(i))
			}
		}
		// Of u, those not handed off are claimable with their events.
		turns, err := s.TurnClaim(ctx, &storage.TurnClaimParams{Tenant: "u", Now: t0, Max: 2 * n})
		if err != nil {
			t.Fatal(err)
		}
		for _, turn := range turns {
			if handedOff["u/"+turn.Instance.ID] != nil {
				t.Errorf("u/%s claimed while its hand-off's lease runs", turn.Instance.ID)
			}
		}
		want := 0
		for i := range n {
			if (2*i)%4 == 3 || (2*i+1)%4 == 3 {
				if handedOff["u/"+id(i)] == nil {
					want++
				}
			}
		}
		if len(turns) != want {
			t.Errorf("%d instances of u claimable, want %d (raised, not handed off)", len(turns), want)
		}
	}
}
