package herald_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/heraldwf/herald"
	"github.com/heraldwf/herald/history"
)

var errNotReady = errors.New("not ready yet")

// registerCounter registers "counter": it takes "inc" messages (each adds
// its payload) until a "stop", and answers queries about its state.
func registerCounter(rt *herald.Runtime) {
	herald.RegisterWorkflow(rt, "counter", func(ctx *herald.Context, start int) (int, error) {
		count, seen := start, []int{}
		if err := herald.SetQuery(ctx, "count", func(struct{}) (int, error) { return count, nil }); err != nil {
			return 0, err
		}
		if err := herald.SetQuery(ctx, "plus", func(n int) (int, error) { return count + n, nil }); err != nil {
			return 0, err
		}
		if err := ctx.SetQueryHandler("seen", func(json.RawMessage) (any, error) { return seen, nil }); err != nil {
			return 0, err
		}
		if err := ctx.SetQueryHandler("fail", func(json.RawMessage) (any, error) { return nil, errNotReady }); err != nil {
			return 0, err
		}
		if err := ctx.SetQueryHandler("panic", func(json.RawMessage) (any, error) { panic("boom") }); err != nil {
			return 0, err
		}
		if err := ctx.SetQueryHandler("decide", func(json.RawMessage) (any, error) {
			return nil, ctx.Sleep(1) // a decision: refused
		}); err != nil {
			return 0, err
		}
		if err := ctx.SetQueryHandler("unencodable", func(json.RawMessage) (any, error) { return make(chan int), nil }); err != nil {
			return 0, err
		}
		for _, bad := range []string{"", "a\x00b", strings.Repeat("q", herald.MaxNameBytes+1)} {
			if err := ctx.SetQueryHandler(bad, func(json.RawMessage) (any, error) { return nil, nil }); !errors.Is(err, herald.ErrInvalidArgument) {
				return 0, fmt.Errorf("SetQueryHandler(%.20q): %v, want ErrInvalidArgument", bad, err)
			}
		}
		ctx.Logger().Info("counter running") // logged once per turn that runs it new, never by a query
		for {
			var n int
			if err := ctx.Dequeue("inc").Get(&n); err != nil {
				return 0, err
			}
			if n < 0 {
				return count, nil
			}
			count += n
			seen = append(seen, n)
		}
	})
}

// historyBytes is the instance's current history as JSON.
func historyBytes(b *bundle, id string) []byte {
	b.t.Helper()
	raw, err := json.Marshal(b.history(id, 0))
	if err != nil {
		b.t.Fatal(err)
	}
	return raw
}

// quiet waits until the instance has consumed n "inc" messages (it then
// waits in Dequeue with nothing in its inbox).
func quiet(b *bundle, id string, n int) {
	b.t.Helper()
	b.waitHistory(id, history.EventSubscribed, "inc", n+1)
}

func TestQuery_RunningAndCompleted(t *testing.T) {
	t.Parallel()
	b := setup(t, nil, registerCounter)
	b.start("counter", "c1", 10)
	quiet(b, "c1", 0)
	for i := 1; i <= 3; i++ {
		b.enqueue("c1", "inc", i, "")
	}
	quiet(b, "c1", 3)

	before, info := historyBytes(b, "c1"), b.status("c1")
	var got int
	if err := b.client.Query(b.ctx, "c1", "count", nil, &got); err != nil {
		t.Fatal(err)
	}
	if got != 16 {
		t.Fatalf("count of the running instance: %d, want 16", got)
	}
	if err := b.client.Query(b.ctx, "c1", "plus", 100, &got); err != nil || got != 116 {
		t.Fatalf("plus 100: %d, %v; want 116", got, err)
	}
	var seen []int
	if err := b.client.Query(b.ctx, "c1", "seen", nil, &seen); err != nil || !slices.Equal(seen, []int{1, 2, 3}) {
		t.Fatalf("seen: %v, %v", seen, err)
	}
	var raw json.RawMessage
	if err := b.client.Query(b.ctx, "c1", "count", nil, &raw); err != nil || string(raw) != "16" {
		t.Fatalf("raw count: %s, %v", raw, err)
	}
	if err := b.client.Query(b.ctx, "c1", "count", nil, nil); err != nil {
		t.Fatalf("answer discarded: %v", err)
	}
	// Nothing durable moved: the history is byte-identical, the row was not
	// written, the instance still runs.
	if after := historyBytes(b, "c1"); string(after) != string(before) {
		t.Fatalf("a query changed the history:\nbefore %s\nafter  %s", before, after)
	}
	if now := b.status("c1"); !now.UpdatedAt.Equal(info.UpdatedAt) || now.Status != herald.StatusRunning {
		t.Fatalf("a query touched the instance: %+v → %+v", info, now)
	}

	// The state moves on with the next turn, and a finished instance
	// answers from its end.
	b.enqueue("c1", "inc", 4, "")
	quiet(b, "c1", 4)
	if err := b.client.Query(b.ctx, "c1", "count", nil, &got); err != nil || got != 20 {
		t.Fatalf("count after a fourth inc: %d, %v; want 20", got, err)
	}
	b.enqueue("c1", "inc", -1, "")
	if r := resultOf[int](b, "c1"); r != 20 {
		t.Fatalf("result %d", r)
	}
	// A query replays silently: the workflow's log line is the first
	// turn's only.
	if n := b.logs.count("counter running"); n != 1 {
		t.Fatalf("%d log lines of the workflow, want 1", n)
	}
	before = historyBytes(b, "c1")
	if err := b.client.Query(b.ctx, "c1", "count", nil, &got); err != nil || got != 20 {
		t.Fatalf("count of the completed instance: %d, %v; want 20", got, err)
	}
	if err := b.client.Query(b.ctx, "c1", "seen", nil, &seen); err != nil || !slices.Equal(seen, []int{1, 2, 3, 4}) {
		t.Fatalf("seen of the completed instance: %v, %v", seen, err)
	}
	if after := historyBytes(b, "c1"); string(after) != string(before) {
		t.Fatalf("a query changed a completed history")
	}
}

// status returns the instance's info.
func (b *bundle) status(id string) *herald.InstanceInfo {
	b.t.Helper()
	info, err := b.client.Status(b.ctx, id)
	if err != nil {
		b.t.Fatalf("status of %s: %v", id, err)
	}
	return info
}

func wantQueryError(t *testing.T, err error, kind herald.QueryErrorKind) *herald.QueryError {
	t.Helper()
	var qe *herald.QueryError
	if !errors.As(err, &qe) || !errors.Is(err, herald.ErrQueryFailed) || qe.Kind != kind {
		t.Fatalf("got %v, want a QueryError of kind %s", err, kind)
	}
	return qe
}

func TestQuery_Errors(t *testing.T) {
	t.Parallel()
	b := setup(t, nil, registerCounter)
	b.start("counter", "c1", 0)
	quiet(b, "c1", 0)
	before := historyBytes(b, "c1")
	var got int

	if err := b.client.Query(b.ctx, "nope", "count", nil, &got); !errors.Is(err, herald.ErrNotFound) {
		t.Fatalf("unknown instance: %v", err)
	}
	if err := b.client.Query(b.ctx, strings.Repeat("x", 10000), "count", nil, &got); !errors.Is(err, herald.ErrNotFound) {
		t.Fatalf("malformed instance id: %v", err)
	}
	qe := wantQueryError(t, b.client.Query(b.ctx, "c1", "nope", nil, &got), herald.QueryUnknown)
	if want := []string{"count", "decide", "fail", "panic", "plus", "seen", "unencodable"}; !slices.Equal(qe.Registered, want) {
		t.Fatalf("registered: %v, want %v", qe.Registered, want)
	}
	if err := b.client.Query(b.ctx, "c1", "fail", nil, &got); !errors.Is(err, errNotReady) {
		t.Fatalf("handler error: %v", err)
	} else {
		wantQueryError(t, err, herald.QueryHandlerError)
	}
	qe = wantQueryError(t, b.client.Query(b.ctx, "c1", "panic", nil, &got), herald.QueryHandlerPanic)
	if qe.Message != "boom" {
		t.Fatalf("panic message %q", qe.Message)
	}
	qe = wantQueryError(t, b.client.Query(b.ctx, "c1", "decide", nil, &got), herald.QueryHandlerPanic)
	if !strings.Contains(qe.Message, "cannot make decisions") {
		t.Fatalf("decision in a handler: %q", qe.Message)
	}
	wantQueryError(t, b.client.Query(b.ctx, "c1", "unencodable", nil, &got), herald.QueryHandlerError)
	wantQueryError(t, b.client.Query(b.ctx, "c1", "plus", "not a number", &got), herald.QueryBadArgs)
	for _, bad := range []struct {
		name string
		args any
	}{{"", nil}, {"a\x00b", nil}, {strings.Repeat("q", herald.MaxNameBytes+1), nil}, {"count", make(chan int)},
		{"count", strings.Repeat("x", 2<<20)}} {
		if err := b.client.Query(b.ctx, "c1", bad.name, bad.args, &got); !errors.Is(err, herald.ErrInvalidArgument) {
			t.Fatalf("query %.20q: %v, want ErrInvalidArgument", bad.name, err)
		}
	}
	var s string
	if err := b.client.Query(b.ctx, "c1", "count", nil, &s); err == nil || errors.Is(err, herald.ErrQueryFailed) {
		t.Fatalf("answer that does not decode into out: %v", err)
	}

	// A client without a runtime cannot run workflow code; nor can a
	// runtime without the workflow.
	bare, err := herald.NewClient(b.store, herald.DefaultTenant, nil)
	if err != nil {
		t.Fatal(err)
	}
	err = bare.Query(b.ctx, "c1", "count", nil, &got)
	wantQueryError(t, err, herald.QueryNotRegistered)
	if !errors.Is(err, herald.ErrNotRegistered) {
		t.Fatalf("no runtime: %v", err)
	}
	other, err := herald.NewRuntime(b.store, nil)
	if err != nil {
		t.Fatal(err)
	}
	oc, err := other.Client(herald.DefaultTenant)
	if err != nil {
		t.Fatal(err)
	}
	if err := oc.Query(b.ctx, "c1", "count", nil, &got); !errors.Is(err, herald.ErrNotRegistered) {
		t.Fatalf("runtime without the workflow: %v", err)
	}
	// Another tenant's client does not see the instance.
	t2, err := b.rt.Client("t2")
	if err != nil {
		t.Fatal(err)
	}
	if err := t2.Query(b.ctx, "c1", "count", nil, &got); !errors.Is(err, herald.ErrNotFound) {
		t.Fatalf("other tenant: %v", err)
	}

	// None of it wrote anything, and the instance goes on.
	if after := historyBytes(b, "c1"); string(after) != string(before) {
		t.Fatalf("failed queries changed the history")
	}
	b.enqueue("c1", "inc", 5, "")
	b.enqueue("c1", "inc", -1, "")
	if r := resultOf[int](b, "c1"); r != 5 {
		t.Fatalf("result %d", r)
	}
}

// A workflow whose code no longer replays its history: the query says so
// and changes nothing.
func TestQuery_NotReplayable(t *testing.T) {
	t.Parallel()
	b := setup(t, nil, func(rt *herald.Runtime) {
		herald.RegisterWorkflow(rt, "w", func(ctx *herald.Context, _ int) (int, error) {
			if err := herald.SetQuery(ctx, "q", func(struct{}) (int, error) { return 1, nil }); err != nil {
				return 0, err
			}
			return 0, ctx.WaitEvent("go").Get(nil)
		})
	})
	b.start("w", "w1", 0)
	b.waitHistory("w1", history.EventSubscribed, "go", 1)
	// A runtime with changed code (it sleeps first) answers no query.
	changed, err := herald.NewRuntime(b.store, nil)
	if err != nil {
		t.Fatal(err)
	}
	herald.RegisterWorkflow(changed, "w", func(ctx *herald.Context, _ int) (int, error) {
		if err := herald.SetQuery(ctx, "q", func(struct{}) (int, error) { return 2, nil }); err != nil {
			return 0, err
		}
		return 0, ctx.Sleep(5)
	})
	cc, err := changed.Client(herald.DefaultTenant)
	if err != nil {
		t.Fatal(err)
	}
	var got int
	wantQueryError(t, cc.Query(b.ctx, "w1", "q", nil, &got), herald.QueryNotReplayable)
	if err := b.client.Query(b.ctx, "w1", "q", nil, &got); err != nil || got != 1 {
		t.Fatalf("the right code: %d, %v", got, err)
	}
}

// Queries race with the instance's turns (run with -race): every answer is
// a state some committed turn left (the count never goes back), and the
// instance's history is what it would have been without them.
func TestQuery_ConcurrentWithTurns(t *testing.T) {
	t.Parallel()
	b := setup(t, nil, registerCounter)
	b.start("counter", "c1", 0)
	quiet(b, "c1", 0)
	const n = 60
	var wg sync.WaitGroup
	stop := make(chan struct{})
	errs := make(chan error, 8)
	for q := 0; q < 4; q++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			last := 0
			for {
				select {
				case <-stop:
					return
				default:
				}
				var got int
				if err := b.client.Query(b.ctx, "c1", "count", nil, &got); err != nil {
					errs <- err
					return
				}
				if got < last || got > n {
					errs <- fmt.Errorf("count %d after %d (of at most %d)", got, last, n)
					return
				}
				last = got
			}
		}()
	}
	for i := 0; i < n; i++ {
		b.enqueue("c1", "inc", 1, "")
	}
	quiet(b, "c1", n)
	close(stop)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	var got int
	if err := b.client.Query(b.ctx, "c1", "count", nil, &got); err != nil || got != n {
		t.Fatalf("final count %d, %v; want %d", got, err, n)
	}
	evs := b.history("c1", 0)
	for i, ev := range evs {
		if ev.Seq != i+1 {
			t.Fatalf("history seq %d at %d", ev.Seq, i)
		}
	}
	if k := countKind(evs, history.EventRaised, "inc"); k != n {
		t.Fatalf("%d inc events in history, want %d", k, n)
	}
	b.replayAll("c1")
}

// count returns how many records have message msg.
func (l *logRecorder) count(msg string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, r := range l.records {
		if r.Message == msg {
			n++
		}
	}
	return n
}

// An instance whose first turn has not run (no runtime is started) answers
// from its code run up to its first wait, and nothing is written or
// logged.
func TestQuery_Pending(t *testing.T) {
	t.Parallel()
	st := testStore(t)
	logs := &logRecorder{}
	rt, err := herald.NewRuntime(st, &herald.Config{ClientConfig: herald.ClientConfig{Logger: slog.New(logs)}})
	if err != nil {
		t.Fatal(err)
	}
	registerCounter(rt)
	c, err := rt.Client(herald.DefaultTenant)
	if err != nil {
		t.Fatal(err)
	}
	b := on(t, c)
	b.start("counter", "p1", 42)
	before := historyBytes(b, "p1")
	var got int
	if err := c.Query(b.ctx, "p1", "count", nil, &got); err != nil || got != 42 {
		t.Fatalf("count of a pending instance: %d, %v", got, err)
	}
	if after := historyBytes(b, "p1"); string(after) != string(before) || b.status("p1").Status != herald.StatusPending {
		t.Fatalf("a query of a pending instance wrote something: %s → %s", before, after)
	}
	if n := logs.count("counter running"); n != 0 {
		t.Fatalf("a query logged %d lines of the workflow", n)
	}
}

// A query whose handler never returns holds the caller only until its
// context ends.
func TestQuery_HandlerThatNeverReturnsLetsTheCallerGo(t *testing.T) {
	t.Parallel()
	st := testStore(t)
	rt, err := herald.NewRuntime(st, &herald.Config{})
	if err != nil {
		t.Fatal(err)
	}
	entered, release := make(chan struct{}), make(chan struct{})
	defer close(release)
	herald.RegisterWorkflow(rt, "stuck", func(ctx *herald.Context, _ int) (int, error) {
		if err := ctx.SetQueryHandler("spin", func(json.RawMessage) (any, error) {
			select {
			case entered <- struct{}{}:
			default:
			}
			<-release
			return "late", nil
		}); err != nil {
			return 0, err
		}
		return 0, ctx.WaitEvent("never").Get(nil)
	})
	c, err := rt.Client(herald.DefaultTenant)
	if err != nil {
		t.Fatal(err)
	}
	b := on(t, c)
	b.start("stuck", "s1", 0)
	qctx, cancel := context.WithCancel(b.ctx)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- c.Query(qctx, "s1", "spin", nil, nil) }()
	<-entered
	cancel()
	select {
	case err := <-done:
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("query with its context canceled: %v, want context.Canceled", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("Query did not return after its context was canceled")
	}
}
