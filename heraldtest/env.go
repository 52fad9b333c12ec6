package heraldtest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/heraldwf/herald"
	"github.com/heraldwf/herald/clock"
	"github.com/heraldwf/herald/history"
	"github.com/heraldwf/herald/internal/drive"
	"github.com/heraldwf/herald/storage"
	"github.com/heraldwf/herald/storage/sqlite"
)

// Epoch is where an Env's virtual clock starts unless WithStart says
// otherwise.
var Epoch = time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)

// DefaultMaxSteps bounds how many units one Settle (and each step of
// Advance) runs before it gives up: a workflow that never parks (a loop of
// zero-length timers, say) fails the test instead of hanging it.
const DefaultMaxSteps = 10_000

// Option configures New.
type Option func(*options)

type options struct {
	open     func(t testing.TB) storage.Store
	config   func(*herald.Config)
	tenant   string
	start    time.Time
	maxSteps int
}

// WithStore runs the Env on the store open returns instead of a temporary
// SQLite file; open registers its own cleanup (t.Cleanup) to close the
// store. A nil open keeps the SQLite default. heraldtest does not import
// the PostgreSQL backend, so that importing it keeps pgx out of a
// module's graph: a test on PostgreSQL opens its store here, e.g.
//
//	heraldtest.WithStore(func(t testing.TB) storage.Store {
//		st, err := postgres.Open(ctx, url, postgres.WithSchema(schema))
//		if err != nil {
//			t.Fatal(err)
//		}
//		t.Cleanup(func() { _ = st.Close() })
//		return st
//	})
func WithStore(open func(t testing.TB) storage.Store) Option {
	return func(o *options) { o.open = open }
}

// WithConfig lets fn adjust the runtime's config (limits, retry policy,
// bus settings) before the runtime is made. The clock is the Env's: a
// Clock fn sets is replaced.
func WithConfig(fn func(*herald.Config)) Option { return func(o *options) { o.config = fn } }

// WithTenant names the tenant the Env's client and helpers use (default
// herald.DefaultTenant).
func WithTenant(tenant string) Option { return func(o *options) { o.tenant = tenant } }

// WithStart sets the virtual clock's start (default Epoch).
func WithStart(t time.Time) Option { return func(o *options) { o.start = t } }

// WithMaxSteps sets the bound of DefaultMaxSteps.
func WithMaxSteps(n int) Option { return func(o *options) { o.maxSteps = n } }

// Env is a runtime on a store of its own with a virtual clock, driven
// synchronously: nothing runs in the background. Every helper that writes
// (Start, Raise, Enqueue, PutCorrelated, Publish) runs everything that
// becomes runnable before it returns, so the test reads settled state.
// An Env is for one test goroutine.
type Env struct {
	t        testing.TB
	ctx      context.Context
	rt       *herald.Runtime
	store    storage.Store
	clock    *clock.Virtual
	tenant   string
	client   *herald.Client
	maxSteps int
	units    []drive.Unit // every unit run, in order
}

// New returns an Env whose runtime has what register registers (workflows,
// activities, bus handlers), on a temporary SQLite file (synchronous=OFF:
// a test needs no fsync) or the store WithStore opens. Its
// clock is a clock.Virtual at Epoch. Everything is closed and removed when
// the test ends.
func New(t testing.TB, register func(rt *herald.Runtime), opts ...Option) *Env {
	t.Helper()
	o := options{tenant: herald.DefaultTenant, start: Epoch, maxSteps: DefaultMaxSteps}
	for _, opt := range opts {
		opt(&o)
	}
	if o.maxSteps <= 0 {
		t.Fatalf("heraldtest.New: WithMaxSteps(%d): want at least 1", o.maxSteps)
	}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	st := openStore(t, ctx, o.open)
	clk := clock.NewVirtual(o.start)
	cfg := &herald.Config{}
	if o.config != nil {
		o.config(cfg)
	}
	cfg.Clock = clk
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	rt, err := herald.NewRuntime(st, cfg)
	if err != nil {
		t.Fatalf("heraldtest.New: %v", err)
	}
	t.Cleanup(func() { drive.Close(rt) })
	if register != nil {
		register(rt)
	}
	client, err := rt.Client(o.tenant)
	if err != nil {
		t.Fatalf("heraldtest.New: client of tenant %q: %v", o.tenant, err)
	}
	if err := rt.EnsureTenant(ctx, o.tenant); err != nil {
		t.Fatalf("heraldtest.New: tenant %q: %v", o.tenant, err)
	}
	return &Env{t: t, ctx: ctx, rt: rt, store: st, clock: clk, tenant: o.tenant, client: client, maxSteps: o.maxSteps}
}

func openStore(t testing.TB, ctx context.Context, open func(t testing.TB) storage.Store) storage.Store {
	t.Helper()
	if open != nil {
		return open(t)
	}
	st, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "herald.db"), sqlite.WithSynchronous(sqlite.SynchronousOff))
	if err != nil {
		t.Fatalf("heraldtest: open SQLite store: %v", err)
	}
	t.Cleanup(func() { _ = st.Close() })
	return st
}

func (e *Env) Runtime() *herald.Runtime { return e.rt }

// Client returns the client of the Env's tenant. What it writes runs at
// the next Settle, Advance or helper call.
func (e *Env) Client() *herald.Client { return e.client }

// Clock returns the Env's virtual clock. Prefer Advance to moving it
// directly: Advance runs what each wake-up makes due.
func (e *Env) Clock() *clock.Virtual { return e.clock }

// Context returns a context that ends with the test.
func (e *Env) Context() context.Context { return e.ctx }

// Tenant returns the tenant the Env's helpers use.
func (e *Env) Tenant() string { return e.tenant }

// Now returns the virtual clock's time.
func (e *Env) Now() time.Time { return e.clock.Now() }

// step runs at most one unit of the tenant's work claimable now.
func (e *Env) step(tenant string) (drive.Unit, bool) {
	e.t.Helper()
	u, ran, err := drive.Step(e.ctx, e.rt, tenant)
	if err != nil {
		e.t.Fatalf("heraldtest: run pending work: %v", err)
	}
	if ran {
		e.units = append(e.units, u)
	}
	return u, ran
}

// Settle runs every turn, activity attempt and bus attempt claimable at the
// current virtual time, and what they make claimable in turn, until nothing
// is left (the instances are idle: parked on waits, timers or backoff).
// It returns how many units it ran.
func (e *Env) Settle() int {
	e.t.Helper()
	return e.settle(e.tenant)
}

func (e *Env) settle(tenant string) int {
	e.t.Helper()
	for n := 0; ; n++ {
		if n >= e.maxSteps {
			e.t.Fatalf("heraldtest: still runnable after %d units at %s: a workflow that never parks? (WithMaxSteps)",
				n, e.elapsed())
		}
		if _, ran := e.step(tenant); !ran {
			return n
		}
	}
}

// NextWake returns how long until the Env tenant's next work becomes due
// (a timer, a wait timeout, an activity or bus retry), and false if none
// is scheduled.
func (e *Env) NextWake() (time.Duration, bool) {
	e.t.Helper()
	at, ok := e.nextWake(e.tenant)
	return at.Sub(e.clock.Now()), ok
}

func (e *Env) nextWake(tenant string) (time.Time, bool) {
	e.t.Helper()
	at, ok, err := drive.NextWake(e.ctx, e.rt, tenant)
	if err != nil {
		e.t.Fatalf("heraldtest: next wake: %v", err)
	}
	return at, ok
}

// Advance moves the virtual clock forward by d: to each due wake-up in
// order — timers, wait timeouts, activity retry backoff, bus retry backoff
// — running what is due at each, then to now+d. The maintenance pass
// (retention expiry of events kept for instances that never started,
// correlated TTL, pruning of bus records) runs at each stop. A negative d
// fails the test.
func (e *Env) Advance(d time.Duration) {
	e.t.Helper()
	if d < 0 {
		e.t.Fatalf("heraldtest: Advance(%v): the clock does not go back", d)
	}
	e.advanceTo(e.tenant, e.clock.Now().Add(d))
}

func (e *Env) advanceTo(tenant string, target time.Time) {
	e.t.Helper()
	e.settle(tenant)
	for {
		at, ok := e.nextWake(tenant)
		if !ok || at.After(target) {
			break
		}
		e.clock.Set(at)
		drive.Maintain(e.ctx, e.rt, tenant)
		e.settle(tenant)
	}
	e.clock.Set(target)
	drive.Maintain(e.ctx, e.rt, tenant)
	e.settle(tenant)
}

// AdvanceUntilIdle advances to each wake-up in turn until none is left
// (every instance ended or waits for an event with no timeout), at most
// limit of virtual time; it returns how far the clock moved.
func (e *Env) AdvanceUntilIdle(limit time.Duration) time.Duration {
	e.t.Helper()
	start := e.clock.Now()
	e.settle(e.tenant)
	for {
		at, ok := e.nextWake(e.tenant)
		if !ok {
			break
		}
		if at.Sub(start) > limit {
			e.t.Fatalf("heraldtest: AdvanceUntilIdle(%v): work still scheduled at +%v", limit, at.Sub(start))
		}
		e.clock.Set(at)
		drive.Maintain(e.ctx, e.rt, e.tenant)
		e.settle(e.tenant)
	}
	return e.clock.Now().Sub(start)
}

func (e *Env) elapsed() string { return "+" + e.clock.Now().Sub(Epoch).String() + " virtual" }

// Start starts workflow as instance id with input and settles. It returns
// the id.
func (e *Env) Start(workflow, id string, input any, opts ...herald.StartOption) string {
	e.t.Helper()
	got, err := e.client.StartWorkflow(e.ctx, workflow, input, append([]herald.StartOption{herald.WithInstanceID(id)}, opts...)...)
	if err != nil {
		e.t.Fatalf("heraldtest: start %s as %q: %v", workflow, id, err)
	}
	e.Settle()
	return got
}

// Raise raises a positional event on the instance and settles.
func (e *Env) Raise(instanceID, name string, payload any, opts ...herald.RaiseOption) *herald.EventReceipt {
	e.t.Helper()
	rec, err := e.client.RaiseEvent(e.ctx, instanceID, name, payload, opts...)
	if err != nil {
		e.t.Fatalf("heraldtest: raise %q on %s: %v", name, instanceID, err)
	}
	e.Settle()
	return rec
}

// Enqueue enqueues a message on the instance's queue and settles.
func (e *Env) Enqueue(instanceID, queue string, payload any, opts ...herald.RaiseOption) *herald.EventReceipt {
	e.t.Helper()
	rec, err := e.client.Enqueue(e.ctx, instanceID, queue, payload, opts...)
	if err != nil {
		e.t.Fatalf("heraldtest: enqueue on %s queue %q: %v", instanceID, queue, err)
	}
	e.Settle()
	return rec
}

// PutCorrelated puts a correlated event under (def, key) and settles.
func (e *Env) PutCorrelated(def, key string, payload any) *herald.CorrelatedEvent {
	e.t.Helper()
	ce, err := e.client.PutCorrelatedEvent(e.ctx, def, key, payload)
	if err != nil {
		e.t.Fatalf("heraldtest: put correlated %s/%s: %v", def, key, err)
	}
	e.Settle()
	return ce
}

// DefineEvent puts an event definition (needed by the correlated lane,
// retention, schemas).
func (e *Env) DefineEvent(def herald.EventDefinition) *herald.EventDefinition {
	e.t.Helper()
	got, err := e.client.PutEventDefinition(e.ctx, def)
	if err != nil {
		e.t.Fatalf("heraldtest: define event %q: %v", def.Name, err)
	}
	return got
}

// Info returns the instance's status record.
func (e *Env) Info(id string) *herald.InstanceInfo {
	e.t.Helper()
	info, err := e.client.Status(e.ctx, id)
	if err != nil {
		e.t.Fatalf("heraldtest: status of %s: %v", id, err)
	}
	return info
}

// Result decodes the result of the completed instance id into out; the
// test fails if the instance has not completed (with its status and, if it
// failed, its error).
func (e *Env) Result(id string, out any) {
	e.t.Helper()
	info := e.Info(id)
	if info.Status != herald.StatusCompleted {
		e.t.Fatalf("heraldtest: %s is %s, not completed%s", id, info.Status, failureText(info))
	}
	if err := info.Result(out); err != nil {
		e.t.Fatalf("heraldtest: decode the result of %s (%s) into %T: %v", id, info.Output, out, err)
	}
}

func failureText(info *herald.InstanceInfo) string {
	if info.Failure != nil {
		return ": " + info.Err().Error()
	}
	if info.Blocked != "" {
		return " (blocked: " + info.Blocked + ")"
	}
	return ""
}

// RequireStatus fails t unless the instance's status is want.
func (e *Env) RequireStatus(t testing.TB, id string, want herald.Status) {
	t.Helper()
	info := e.Info(id)
	if info.Status != want {
		t.Fatalf("heraldtest: %s is %s, want %s%s", id, info.Status, want, failureText(info))
	}
}

// RequireResult fails t unless the instance completed with a result equal
// to want as JSON (want is encoded and both are compared as decoded JSON).
func (e *Env) RequireResult(t testing.TB, id string, want any) {
	t.Helper()
	info := e.Info(id)
	if info.Status != herald.StatusCompleted {
		t.Fatalf("heraldtest: %s is %s, not completed%s", id, info.Status, failureText(info))
	}
	if ok, err := jsonEqual(info.Output, want); err != nil || !ok {
		wantRaw, _ := json.Marshal(want)
		t.Fatalf("heraldtest: result of %s\n  got:  %s\n  want: %s%s", id, info.Output, wantRaw, errText(err))
	}
}

func errText(err error) string {
	if err != nil {
		return "\n  (" + err.Error() + ")"
	}
	return ""
}

func jsonEqual(got json.RawMessage, want any) (bool, error) {
	wantRaw, err := json.Marshal(want)
	if err != nil {
		return false, fmt.Errorf("encode want: %w", err)
	}
	var g, w any
	if err := json.Unmarshal(got, &g); err != nil {
		return false, fmt.Errorf("decode result: %w", err)
	}
	if err := json.Unmarshal(wantRaw, &w); err != nil {
		return false, err
	}
	return reflect.DeepEqual(g, w), nil
}

// Fate returns the event's fate record.
func (e *Env) Fate(eventID string) *herald.EventRecord {
	e.t.Helper()
	rec, err := e.client.EventFate(e.ctx, eventID)
	if err != nil {
		e.t.Fatalf("heraldtest: fate of %s: %v", eventID, err)
	}
	return rec
}

// RequireFate fails t unless the event's fate is want (history.FatePending,
// FateBuffered, FateDelivered or FateDropped).
func (e *Env) RequireFate(t testing.TB, eventID string, want history.Fate) *herald.EventRecord {
	t.Helper()
	rec := e.Fate(eventID)
	if rec.Fate != want {
		t.Fatalf("heraldtest: event %s is %s, want %s", eventID, fateText(rec), want)
	}
	return rec
}

// RequireDropped fails t unless the event was dropped for reason.
func (e *Env) RequireDropped(t testing.TB, eventID string, reason history.DropReason) *herald.EventRecord {
	t.Helper()
	rec := e.Fate(eventID)
	if rec.Fate != history.FateDropped || rec.Reason != reason {
		t.Fatalf("heraldtest: event %s is %s, want dropped: %s", eventID, fateText(rec), reason)
	}
	return rec
}

func fateText(rec *herald.EventRecord) string {
	s := string(rec.Fate)
	switch {
	case rec.Fate == history.FateDropped && rec.Reason != "":
		s += ": " + string(rec.Reason)
	case rec.Fate == history.FateDelivered && rec.WaitNumber > 0:
		s += fmt.Sprintf(" (wait #%d of execution %d)", rec.WaitNumber, rec.Execution)
	}
	return s
}

// History returns the instance's history, every execution in order.
func (e *Env) History(id string) []history.Event {
	e.t.Helper()
	evs, err := historyOf(e.ctx, e.client, id)
	if err != nil {
		e.t.Fatalf("heraldtest: %v", err)
	}
	return evs
}

func historyOf(ctx context.Context, c *herald.Client, id string) ([]history.Event, error) {
	info, err := c.Status(ctx, id)
	if err != nil {
		return nil, fmt.Errorf("history of %s: %w", id, err)
	}
	var all []history.Event
	for x := 1; x <= info.Execution; x++ {
		evs, err := c.History(ctx, id, x)
		if err != nil {
			return nil, err
		}
		all = append(all, evs...)
	}
	return all, nil
}

// Shape is a history as lines "Kind" or "Kind name" (name: the activity,
// event, queue or definition; the workflow of ExecutionStarted), the form
// RequireHistory compares.
func Shape(evs []history.Event) []string {
	out := make([]string, len(evs))
	for i, ev := range evs {
		out[i] = string(ev.Kind)
		switch {
		case ev.Name != "":
			out[i] += " " + ev.Name
		case ev.Workflow != "":
			out[i] += " " + ev.Workflow
		}
	}
	return out
}

// RequireHistory fails t unless the instance's history (every execution)
// has exactly the shape want (see Shape), printing both side by side.
func (e *Env) RequireHistory(t testing.TB, id string, want ...string) {
	t.Helper()
	got := Shape(e.History(id))
	if d := shapeDiff(got, want); d != "" {
		t.Fatalf("heraldtest: history of %s differs (- want, + got):\n%s", id, d)
	}
}

// shapeDiff returns a line diff of two shapes ("" if equal): lines of both,
// marked where they differ, by their longest common subsequence.
func shapeDiff(got, want []string) string {
	if slicesEqual(got, want) {
		return ""
	}
	n, m := len(want), len(got)
	lcs := make([][]int, n+1)
	for i := range lcs {
		lcs[i] = make([]int, m+1)
	}
	for i := n - 1; i >= 0; i-- {
		for j := m - 1; j >= 0; j-- {
			if want[i] == got[j] {
				lcs[i][j] = lcs[i+1][j+1] + 1
			} else {
				lcs[i][j] = max(lcs[i+1][j], lcs[i][j+1])
			}
		}
	}
	var b strings.Builder
	i, j := 0, 0
	for i < n || j < m {
		switch {
		case i < n && j < m && want[i] == got[j]:
			fmt.Fprintf(&b, "    %s\n", want[i])
			i++
			j++
		case i < n && (j == m || lcs[i+1][j] >= lcs[i][j+1]):
			fmt.Fprintf(&b, "  - %s\n", want[i])
			i++
		default:
			fmt.Fprintf(&b, "  + %s\n", got[j])
			j++
		}
	}
	return b.String()
}

func slicesEqual(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// Calls records the calls of a mocked activity.
type Calls struct {
	mu     sync.Mutex
	inputs []json.RawMessage
}

// Count returns how many times the mock was called (every attempt counts).
func (c *Calls) Count() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.inputs)
}

// Inputs returns the input of each call, as JSON, in order.
func (c *Calls) Inputs() []json.RawMessage {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]json.RawMessage(nil), c.inputs...)
}

// MockActivity registers fn as the activity name in the Env's runtime,
// replacing what register registered under that name, and records each
// call (each attempt) in the returned Calls.
func MockActivity[I, O any](e *Env, name string, fn func(ctx context.Context, in I) (O, error)) *Calls {
	e.t.Helper()
	if fn == nil {
		e.t.Fatalf("heraldtest: MockActivity(%q): nil function", name)
	}
	calls := &Calls{}
	herald.RegisterActivity(e.rt, name, func(ctx context.Context, in I) (O, error) {
		raw, err := json.Marshal(in)
		if err != nil {
			raw = json.RawMessage(fmt.Sprintf("%q", fmt.Sprint(in)))
		}
		calls.mu.Lock()
		calls.inputs = append(calls.inputs, raw)
		calls.mu.Unlock()
		return fn(ctx, in)
	})
	return calls
}

// ---- the event bus

// PutScript stores a bus script (a new version if id exists).
func (e *Env) PutScript(id, source string) *herald.Script {
	e.t.Helper()
	s, err := e.client.PutScript(e.ctx, id, source)
	if err != nil {
		e.t.Fatalf("heraldtest: put script %q: %v", id, err)
	}
	return s
}

// Subscribe puts a subscription, enabled unless it says otherwise.
func (e *Env) Subscribe(s herald.Subscription) *herald.Subscription {
	e.t.Helper()
	got, err := e.client.PutSubscription(e.ctx, s)
	if err != nil {
		e.t.Fatalf("heraldtest: put subscription %q: %v", s.ID, err)
	}
	return got
}

// Publish publishes an event to the bus and settles: it is routed and the
// first attempt of each matching subscription's target has run (scripts
// too, in a child process) before Publish returns. Retries are due after
// their backoff: Advance runs them.
func (e *Env) Publish(eventType string, data any, opts ...herald.RaiseOption) *herald.PublishReceipt {
	e.t.Helper()
	rec, err := e.client.Publish(e.ctx, eventType, data, opts...)
	if err != nil {
		e.t.Fatalf("heraldtest: publish %q: %v", eventType, err)
	}
	e.Settle()
	return rec
}

// Published returns a published event with its routes and executions.
func (e *Env) Published(eventID string) *herald.PublishedEvent {
	e.t.Helper()
	ev, err := e.client.PublishedEvent(e.ctx, eventID)
	if err != nil {
		e.t.Fatalf("heraldtest: published event %s: %v", eventID, err)
	}
	return ev
}

// Attempts returns the attempt records of a published event's executions
// (of every subscription when subscription is ""), oldest first.
func (e *Env) Attempts(eventID, subscription string) []*herald.Attempt {
	e.t.Helper()
	var out []*herald.Attempt
	f := herald.AttemptFilter{EventID: eventID, Subscription: subscription, Limit: 1000}
	for {
		page, err := e.client.Attempts(e.ctx, f)
		if err != nil {
			e.t.Fatalf("heraldtest: attempts of %s: %v", eventID, err)
		}
		out = append(out, page.Attempts...)
		if page.NextCursor == 0 {
			return out
		}
		f.Cursor = page.NextCursor
	}
}

// DeadLetters returns the tenant's dead letters not reprocessed yet (of
// subscription, or of all when "").
func (e *Env) DeadLetters(subscription string) []*herald.DeadLetter {
	e.t.Helper()
	var out []*herald.DeadLetter
	f := herald.DeadLetterFilter{Subscription: subscription, Limit: 1000}
	for {
		page, err := e.client.DeadLetters(e.ctx, f)
		if err != nil {
			e.t.Fatalf("heraldtest: dead letters: %v", err)
		}
		out = append(out, page.Letters...)
		if page.NextCursor == 0 {
			return out
		}
		f.Cursor = page.NextCursor
	}
}

// Units returns a description of every unit of work the Env has run so
// far, in order ("turn order-1", "activity notify#1 order-1", "bus
// fraud#2 pay-1").
func (e *Env) Units() []string {
	out := make([]string, len(e.units))
	for i, u := range e.units {
		out[i] = unitText(u)
	}
	return out
}

func unitText(u drive.Unit) string {
	switch u.Kind {
	case drive.Turn:
		return "turn " + u.Instance
	case drive.Activity:
		return fmt.Sprintf("activity %s#%d %s", u.Name, u.Attempt, u.Instance)
	case drive.Bus:
		return fmt.Sprintf("bus %s#%d %s", u.Name, u.Attempt, u.EventID)
	}
	return u.Kind
}
