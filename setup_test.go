package herald_test

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/heraldwf/herald"
	"github.com/heraldwf/herald/clock"
	"github.com/heraldwf/herald/heraldtest"
	"github.com/heraldwf/herald/history"
	"github.com/heraldwf/herald/internal/storeurl"
	"github.com/heraldwf/herald/internal/testdb"
	"github.com/heraldwf/herald/storage"
	"github.com/heraldwf/herald/storage/postgres"
	"github.com/heraldwf/herald/storage/sqlite"
)

// bundle is what an integration test gets from setup: a started runtime on a
// real SQLite file, its client, and a context bounded by the test deadline.
type bundle struct {
	t      *testing.T
	ctx    context.Context
	store  storage.Store
	rt     *herald.Runtime
	client *herald.Client
	logs   *logRecorder
	obs    *countingObserver
	// env, when set, drives rt synchronously on a virtual clock (setupEnv):
	// nothing runs in the background, and every wait runs what is due.
	env *heraldtest.Env
}

// newLocation returns the location of a fresh, empty store on backend
// ("sqlite" or "postgres") as one storeurl string: a file in the test's
// temporary directory, or a fresh schema (dropped when the test ends) on
// the server HERALD_TEST_POSTGRES_URL names. Tests, their worker
// subprocesses and the herald command all open stores from such a string
// (openStore), so the backend is chosen in one place.
func newLocation(t testing.TB, backend string) string {
	t.Helper()
	switch backend {
	case "postgres":
		url := os.Getenv(testdb.URLEnv)
		if url == "" {
			t.Fatalf("the PostgreSQL store needs %s", testdb.URLEnv)
		}
		loc, err := storeurl.PostgresLocation(url, testdb.NewSchema(t))
		if err != nil {
			t.Fatal(err)
		}
		return loc
	case "sqlite":
		return filepath.Join(t.TempDir(), "herald.db")
	default:
		t.Fatalf("unknown %s %q", testdb.BackendEnv, backend)
		return ""
	}
}

// openStore opens the store at loc (see newLocation) with the tests'
// PostgreSQL pool size unless opts say otherwise.
func openStore(ctx context.Context, loc string, opts ...postgres.Option) (storage.Store, error) {
	return storeurl.Open(ctx, loc, storeurl.WithPostgres(append([]postgres.Option{postgres.WithMaxConns(8)}, opts...)...))
}

// testStore opens a fresh store for a test, on the backend
// HERALD_TEST_BACKEND names (SQLite by default), so the same end-to-end
// tests run on every backend.
func testStore(t testing.TB) storage.Store {
	t.Helper()
	return testStoreWith(t)
}

// testStoreUncached is testStore with the stores' history cache off (see
// backend.HistoryCache), for a test that changes stored history behind the
// store's back and wants the next turn to read it.
func testStoreUncached(t testing.TB) storage.Store {
	t.Helper()
	return testStoreWith(t, storeurl.WithPostgres(postgres.WithHistoryCache(0)), storeurl.WithSQLite(sqlite.WithHistoryCache(0)))
}

// testStoreWith is testStore with opts after the tests' PostgreSQL pool
// size.
func testStoreWith(t testing.TB, opts ...storeurl.Option) storage.Store {
	t.Helper()
	loc := newLocation(t, testdb.Backend())
	st, err := storeurl.Open(context.Background(), loc, append([]storeurl.Option{storeurl.WithPostgres(postgres.WithMaxConns(8))}, opts...)...)
	if err != nil {
		t.Fatalf("open store: %v", err)
	}
	t.Cleanup(func() { st.Close() })
	storeLocations.Store(st, loc)
	return st
}

// storeLocations maps each store testStore opened to its location (see
// rawExec).
var storeLocations sync.Map

// setup starts a runtime with cfg (nil for defaults) on a fresh store, lets
// register add workflows and activities, and stops it when the test ends.
func setup(t *testing.T, cfg *herald.Config, register func(rt *herald.Runtime)) *bundle {
	t.Helper()
	return setupOn(t, testStore(t), cfg, register)
}

func setupOn(t *testing.T, st storage.Store, cfg *herald.Config, register func(rt *herald.Runtime)) *bundle {
	t.Helper()
	cfg, logs, obs, tenant := testConfig(cfg)
	if cfg.PollInterval == 0 {
		cfg.PollInterval = 50 * time.Millisecond
	}
	rt, err := herald.NewRuntime(st, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if register != nil {
		register(rt)
	}
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout(t))
	if err := rt.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cancel()
		stopCtx, c := context.WithTimeout(context.Background(), 10*time.Second)
		defer c()
		if err := rt.Stop(stopCtx); err != nil {
			t.Errorf("stop runtime: %v", err)
		}
	})
	client, err := rt.Client(tenant)
	if err != nil {
		t.Fatal(err)
	}
	return &bundle{t: t, ctx: ctx, store: st, rt: rt, client: client, logs: logs, obs: obs}
}

// testConfig fills in what the tests' runtimes share (nil cfg for
// defaults): a log recorder, a counting observer, and the tenant the
// bundle's client serves — the one named tenant of a runtime serving one,
// else the default tenant.
func testConfig(cfg *herald.Config) (*herald.Config, *logRecorder, *countingObserver, string) {
	if cfg == nil {
		cfg = &herald.Config{}
	}
	logs := &logRecorder{}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(logs)
	}
	obs, _ := cfg.Observer.(*countingObserver)
	if cfg.Observer == nil {
		obs = newCountingObserver()
		cfg.Observer = obs
	}
	tenant := herald.DefaultTenant
	if len(cfg.Tenants) == 1 {
		tenant = cfg.Tenants[0]
	}
	return cfg, logs, obs, tenant
}

// setupEnv is setup on a heraldtest.Env: the same store, config, logs and
// observer, but the runtime is not started. The bundle's waits settle the
// Env (and move its virtual clock to the next wake-up when nothing is
// runnable) instead of polling background loops, so a scenario runs as
// fast as its store and the same way on a loaded machine. A cfg.Clock that
// is a *clock.Virtual becomes the Env's clock; any other fails the test.
func setupEnv(t *testing.T, cfg *herald.Config, register func(rt *herald.Runtime)) *bundle {
	t.Helper()
	cfg, logs, obs, tenant := testConfig(cfg)
	st := testStoreWith(t, storeurl.WithSQLite(sqlite.WithSynchronous(sqlite.SynchronousOff)))
	opts := []heraldtest.Option{heraldtest.WithStore(st), heraldtest.WithTenant(tenant),
		heraldtest.WithConfig(func(c *herald.Config) { *c = *cfg })}
	if vc, ok := cfg.Clock.(*clock.Virtual); ok {
		opts = append(opts, heraldtest.WithClock(vc))
	} else if cfg.Clock != nil {
		t.Fatalf("setupEnv: cfg.Clock is a %T; an Env runs on a *clock.Virtual (or use setup)", cfg.Clock)
	}
	env := heraldtest.New(t, register, opts...)
	ctx, cancel := context.WithTimeout(env.Context(), envTimeout(t))
	t.Cleanup(cancel)
	return &bundle{t: t, ctx: ctx, store: st, rt: env.Runtime(), client: env.Client(), logs: logs, obs: obs, env: env}
}

// settleEnv runs what is runnable now when b drives an Env (a no-op on
// background loops), for a test that reads state a wait did not settle.
func (b *bundle) settleEnv() {
	b.t.Helper()
	if b.env != nil {
		b.env.Settle()
	}
}

// now is the engine's time: the Env's virtual clock, or the real one.
func (b *bundle) now() time.Time {
	if b.env != nil {
		return b.env.Now()
	}
	return time.Now()
}

// envTimeout bounds an Env scenario's context: the test binary's own
// deadline, less time to report. An Env runs nothing in the background, so
// how long a scenario takes is only how fast the machine is; a minute of
// wall clock (testTimeout) would fail it on a loaded machine, not catch a
// bug. A workflow that never parks fails at heraldtest's step bound.
func envTimeout(t *testing.T) time.Duration {
	if dl, ok := t.Deadline(); ok {
		if d := time.Until(dl) - 5*time.Second; d > 0 {
			return d
		}
	}
	return 10 * time.Minute
}

func testTimeout(t *testing.T) time.Duration {
	if dl, ok := t.Deadline(); ok {
		if d := time.Until(dl) - 5*time.Second; d > 0 && d < time.Minute {
			return d
		}
	}
	return time.Minute
}

// waitDone waits for the instance to end and returns its info.
func (b *bundle) waitDone(id string) *herald.InstanceInfo {
	b.t.Helper()
	if b.env != nil {
		var info *herald.InstanceInfo
		b.waitFor("the end of "+id, func() bool {
			i, err := b.client.Status(b.ctx, id)
			if err != nil {
				return false
			}
			info = i
			return i.Status.Terminal()
		})
		return info
	}
	info, err := b.client.WaitForCompletion(b.ctx, id)
	if err != nil {
		b.t.Fatalf("wait for %s: %v", id, err)
	}
	return info
}

// waitFor polls cond until it holds or the test context ends.
func (b *bundle) waitFor(what string, cond func() bool) {
	b.t.Helper()
	if b.env != nil {
		b.envWait(what, cond)
		return
	}
	for !cond() {
		select {
		case <-b.ctx.Done():
			b.t.Fatalf("timed out waiting for %s", what)
		case <-time.After(5 * time.Millisecond):
		}
	}
}

// envIdleStep is how far envWait moves the virtual clock when nothing is
// scheduled.
const envIdleStep = 10 * time.Millisecond

// envWait is waitFor on an Env: settle, check, and when nothing is runnable
// move the virtual clock to the next wake-up, as real time would. With
// nothing scheduled it polls on the real clock, for a condition another
// goroutine of the test brings about.
func (b *bundle) envWait(what string, cond func() bool) {
	b.t.Helper()
	for {
		b.env.Settle()
		if cond() {
			return
		}
		if b.ctx.Err() != nil {
			b.t.Fatalf("timed out waiting for %s (%s virtual)", what, b.env.Now().Sub(heraldtest.Epoch))
		}
		if d, ok := b.env.NextWake(); ok {
			b.env.Advance(max(d, 0))
			continue
		}
		// Nothing scheduled: let a little virtual time pass (the
		// maintenance pass runs, retention and TTLs expire) and a little
		// real time, for a condition another goroutine brings about.
		b.env.Advance(envIdleStep)
		select {
		case <-b.ctx.Done():
		case <-time.After(time.Millisecond):
		}
	}
}

// waitHistory waits until the instance's current execution has n events of
// kind (name "" matches any name).
func (b *bundle) waitHistory(id string, kind history.Kind, name string, n int) {
	b.t.Helper()
	b.waitFor(string(kind)+" "+name+" in "+id, func() bool {
		evs, err := b.client.History(b.ctx, id, 0)
		if err != nil {
			return false
		}
		return countKind(evs, kind, name) >= n
	})
}

func countKind(evs []history.Event, kind history.Kind, name string) int {
	n := 0
	for _, ev := range evs {
		if ev.Kind == kind && (name == "" || ev.Name == name) {
			n++
		}
	}
	return n
}

// fate returns an event's fate record.
func (b *bundle) fate(eventID string) *herald.EventRecord {
	b.t.Helper()
	rec, err := b.client.EventFate(b.ctx, eventID)
	if err != nil {
		b.t.Fatalf("fate of %s: %v", eventID, err)
	}
	return rec
}

// logRecorder is a slog handler that keeps records for assertions.
type logRecorder struct {
	mu      sync.Mutex
	records []slog.Record
}

func (l *logRecorder) Enabled(context.Context, slog.Level) bool { return true }
func (l *logRecorder) Handle(_ context.Context, r slog.Record) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.records = append(l.records, r.Clone())
	return nil
}
func (l *logRecorder) WithAttrs([]slog.Attr) slog.Handler { return l }
func (l *logRecorder) WithGroup(string) slog.Handler      { return l }

// warnings returns the messages logged at WARN or above.
func (l *logRecorder) warnings() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []string
	for _, r := range l.records {
		if r.Level >= slog.LevelWarn {
			msg := r.Message
			r.Attrs(func(a slog.Attr) bool { msg += " " + a.String(); return true })
			out = append(out, msg)
		}
	}
	return out
}

// history returns one execution's history (0: the current one).
func (b *bundle) history(id string, execution int) []history.Event {
	b.t.Helper()
	evs, err := b.client.History(b.ctx, id, execution)
	if err != nil {
		b.t.Fatalf("history of %s (execution %d): %v", id, execution, err)
	}
	return evs
}

// dumpHistory renders a history for failure messages.
func dumpHistory(evs []history.Event) string {
	var sb strings.Builder
	for _, ev := range evs {
		fmt.Fprintf(&sb, "\n  %3d %-26s lane=%-10s name=%q key=%q task=%d id=%q payload=%.40s origin=%d at_start=%v wait=%d no_wait=%v reason=%s",
			ev.Seq, ev.Kind, ev.Lane, ev.Name, ev.Key, ev.TaskSeq, ev.EventID, ev.Payload, ev.OriginExecution, ev.AtStart,
			ev.WaitNumber, ev.NoWait, ev.Reason)
	}
	return sb.String()
}

// waitFate waits until the event's fate is fate and returns its record.
func (b *bundle) waitFate(eventID string, fate history.Fate) *herald.EventRecord {
	b.t.Helper()
	var rec *herald.EventRecord
	b.waitFor("fate "+string(fate)+" of "+eventID, func() bool {
		r, err := b.client.EventFate(b.ctx, eventID)
		if err != nil {
			return false
		}
		rec = r
		return r.Fate == fate
	})
	return rec
}

// result waits for the instance to complete and decodes its result into out;
// an instance that failed or was terminated fails the test with its history.
func (b *bundle) result(id string, out any) *herald.InstanceInfo {
	b.t.Helper()
	info := b.waitDone(id)
	if info.Status != herald.StatusCompleted {
		b.t.Fatalf("%s ended %s: %v\nhistory:%s", id, info.Status, info.Err(), dumpHistory(b.history(id, 0)))
	}
	if err := info.Result(out); err != nil {
		b.t.Fatalf("result of %s: %v", id, err)
	}
	return info
}

// wantWarn waits for a WARN line containing every fragment. The runtime logs
// a drop just after its turn commits, so the line may trail the history the
// test has seen.
func (b *bundle) wantWarn(fragments ...string) {
	b.t.Helper()
	b.waitFor(fmt.Sprintf("a WARN line with %q", fragments), func() bool {
		for _, w := range b.logs.warnings() {
			ok := true
			for _, f := range fragments {
				ok = ok && strings.Contains(w, f)
			}
			if ok {
				return true
			}
		}
		return false
	})
}
