package herald_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/heraldwf/herald"
	"github.com/heraldwf/herald/history"
	"github.com/heraldwf/herald/internal/testdb"
	"github.com/heraldwf/herald/storage"
)

// The soak test (issue 10) repeats the adversarial round against Herald with
// real processes: a worker process (the test binary re-executed, see
// startWorkerProcess) is SIGKILLed at random moments and restarted, over and
// over, while senders in the test process stream events to every instance on
// the positional lane (RaiseEvent) and the queue lane (Enqueue), each with an
// explicit event id. A sender re-sends after every error until the outcome
// is known (some sends are cut short on purpose: the caller gives up while
// the store may still commit), and re-sends some accepted ids: a re-send must
// return the first receipt, marked Duplicate.
//
// Each instance loops over plain WaitEvent and Dequeue, Selects of two
// receives (WaitEvent vs Dequeue both ways, two WaitEvents both ways),
// Selects of a receive and a timer, ctx.Sleep and activities, in a fixed
// cycle, and continues as new after every soakPerExecution iterations (so
// buffered events and queued messages are carried forward). It records the
// event id of every payload a receive gave it, and hands the list of an
// execution to the next one in its continue-as-new input (the last
// execution returns it): what each execution received is in the history.
// At the end each instance gets a "stop" message (queue "ctl", checked with
// TryDequeue at the top of every iteration); it drains queue "q" and
// completes. Senders keep each (instance, name) to at most soakWindow events
// not yet delivered or dropped, so no limit (MaxUnconsumedEvents,
// MaxQueuedEvents, MaxCarryForwardExecutions) can legitimately drop one.
//
// The checks, once every instance has completed (none may be stuck past a
// deadline): every accepted event id either was received by exactly one
// receive the workflow made (and its fate, by client.EventFate, is
// delivered in the execution that received it, with one delivery in
// history) or has fate dropped with a reason the workload allows
// (withdrawn_wait for the positional lane when the loops race a wait
// against something else, instance_terminal for what was still buffered at
// the end) and a breadcrumb in history; no id is received twice, received
// and dropped, received without being accepted, or missing; the ledger has
// no id the test did not send; every execution's history replays
// (Runtime.ReplayHistory) without non-determinism; the workers logged
// nothing but the drops.
//
// Environment:
//
//	HERALD_SOAK=1            the long version (5 minutes of kills, more instances)
//	HERALD_SOAK_DURATION=10m the long version, for that long (implies HERALD_SOAK=1)
//	HERALD_SOAK_SEED=n       the seed of the RNG that picks the kill moments, the
//	                         downtimes and the senders' choices; every run prints
//	                         its seed (the timing of real processes is not
//	                         reproducible, the choices are)
//	HERALD_SOAK_LOOPS=plain  only the loops without Select (default: all)
//	HERALD_TEST_BACKEND, HERALD_TEST_POSTGRES_URL
//	                         the backend, as for the other end-to-end tests:
//	                         a SQLite file by default, a fresh PostgreSQL schema
//	                         with HERALD_TEST_BACKEND=postgres
//
// By default (and in CI) the short version runs: a few kills, well under
// 30 s with -race. The long one needs a longer go test -timeout, e.g.
//
//	HERALD_SOAK=1 go test -race -run '^TestSoak$' -timeout 30m .

const (
	soakWorkflow = "soak.flow"
	soakActivity = "soak.work"
	// soakWindow: a sender keeps at most this many events of one
	// (instance, name) pending or buffered.
	soakWindow = 3
	// soakCtl is the queue of the final "stop" message.
	soakCtl = "ctl"
	// soakFinishTimeout: once told to stop, every instance must complete
	// within this.
	soakFinishTimeout = 60 * time.Second
)

// soakNames are the events the senders stream: "a" and "b" on the
// positional lane, "q" on the queue lane.
var soakNames = []string{"a", "b", "q"}

func soakLane(name string) history.Lane {
	if name == "q" || name == soakCtl {
		return history.LaneQueue
	}
	return history.LanePositional
}

// soakLoops are the cycles of loop kinds an instance runs, by
// HERALD_SOAK_LOOPS. Every cycle has a plain receive of each name, so every
// execution (longer than a cycle) takes the oldest buffered event of each
// name: with soakWindow events at most, none is carried
// MaxCarryForwardExecutions times.
var soakLoops = map[string][]string{
	"all": {"wait-a", "sel-a-q", "deq-q", "activity", "sel-a-b", "wait-b", "sel-q-timer", "sleep",
		"sel-q-a", "sel-b-timer", "sel-b-a"},
	"plain": {"wait-a", "deq-q", "activity", "wait-b", "sleep"},
}

// soakPerExecution is the number of iterations of an execution: more than a
// cycle, so every execution receives on every name, and not a multiple of
// it, so continue-as-new lands at a different point of the cycle each time.
func soakPerExecution(loops string) int { return len(soakLoops[loops]) + 3 }

type soakInput struct {
	Loops string `json:"loops"`
	// Iter is the number of iterations the earlier executions ran.
	Iter int `json:"iter"`
	// Prev are the event ids the previous execution received, in order.
	Prev []string `json:"prev,omitempty"`
}

type soakResult struct {
	Iter int `json:"iter"`
	// Got are the event ids the last execution received, in order.
	Got []string `json:"got"`
}

func soakWork(n int) string { return fmt.Sprintf("work-%d", n) }

// soakDelay is a short real duration: this soak runs on the wall clock.
func soakDelay(n int) time.Duration { return time.Duration(2+n%4*4) * time.Millisecond }

// soakFlow is the soak's workflow (see the top of this file): iterations of
// the cycle soakLoops[in.Loops], a continue-as-new after soakPerExecution of
// them, until a "stop" message.
func soakFlow(ctx *herald.Context, in soakInput) (soakResult, error) {
	kinds, ok := soakLoops[in.Loops]
	if !ok {
		return soakResult{}, fmt.Errorf("unknown loops %q", in.Loops)
	}
	var got []string
	take := func(f herald.Future) error {
		var id string
		if err := f.Get(&id); err != nil {
			return err
		}
		got = append(got, id)
		return nil
	}
	// either receives from whichever of a and b wins the Select.
	either := func(a, b herald.Future) error {
		return take([]herald.Future{a, b}[ctx.Select(a, b)])
	}
	orTimer := func(f herald.Future, d time.Duration) error {
		if ctx.Select(f, ctx.Timer(d)) == 0 {
			return take(f)
		}
		return nil
	}
	per := soakPerExecution(in.Loops)
	for n := in.Iter; n < in.Iter+per; n++ {
		var id string
		if ok, err := ctx.TryDequeue(soakCtl, &id); err != nil {
			return soakResult{}, err
		} else if ok {
			got = append(got, id)
			for {
				ok, err := ctx.TryDequeue("q", &id)
				if err != nil {
					return soakResult{}, err
				}
				if !ok {
					return soakResult{Iter: n, Got: got}, nil
				}
				got = append(got, id)
			}
		}
		var err error
		switch kind := kinds[n%len(kinds)]; kind {
		case "wait-a":
			err = take(ctx.WaitEvent("a"))
		case "wait-b":
			err = take(ctx.WaitEvent("b"))
		case "deq-q":
			err = take(ctx.Dequeue("q"))
		case "sel-a-q":
			err = either(ctx.WaitEvent("a"), ctx.Dequeue("q"))
		case "sel-q-a":
			err = either(ctx.Dequeue("q"), ctx.WaitEvent("a"))
		case "sel-a-b":
			err = either(ctx.WaitEvent("a"), ctx.WaitEvent("b"))
		case "sel-b-a":
			err = either(ctx.WaitEvent("b"), ctx.WaitEvent("a"))
		case "sel-q-timer":
			err = orTimer(ctx.Dequeue("q"), 10*time.Millisecond)
		case "sel-b-timer":
			err = orTimer(ctx.WaitEvent("b"), 10*time.Millisecond)
		case "sleep":
			err = ctx.Sleep(soakDelay(n))
		case "activity":
			var s string
			if err = ctx.CallActivity(soakActivity, n).Get(&s); err == nil && s != soakWork(n) {
				err = fmt.Errorf("activity returned %q, want %q", s, soakWork(n))
			}
		default:
			err = fmt.Errorf("unknown loop kind %q", kind)
		}
		if err != nil {
			return soakResult{}, fmt.Errorf("iteration %d (%s): %w", n, kinds[n%len(kinds)], err)
		}
	}
	return soakResult{}, ctx.ContinueAsNew(soakInput{Loops: in.Loops, Iter: in.Iter + per, Prev: got})
}

// registerSoak registers the soak workflow and its activity. Every activity
// attempt is appended to attemptsPath, if not empty (see reportAttempts).
func registerSoak(rt *herald.Runtime, attemptsPath string) {
	herald.RegisterWorkflow(rt, soakWorkflow, soakFlow)
	herald.RegisterActivity(rt, soakActivity, func(ctx context.Context, n int) (string, error) {
		if attemptsPath != "" {
			ai, _ := herald.ActivityInfoFrom(ctx)
			if f, err := os.OpenFile(attemptsPath, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644); err == nil {
				fmt.Fprintf(f, "%s %d %d\n", ai.IdempotencyKey, ai.Attempt, os.Getpid())
				f.Close()
			}
		}
		select { // simulated work
		case <-time.After(time.Duration(1+n%5*2) * time.Millisecond):
		case <-ctx.Done():
			return "", ctx.Err()
		}
		return soakWork(n), nil
	})
}

// TestSoakWorkerProcess is the worker subprocess of TestSoak. It does
// nothing unless HERALD_SOAK_WORKER=1 (see serveWorkerProcess).
func TestSoakWorkerProcess(t *testing.T) {
	if os.Getenv("HERALD_SOAK_WORKER") != "1" {
		return
	}
	serveWorkerProcess(t, crashRuntimeConfig, func(rt *herald.Runtime) {
		registerSoak(rt, os.Getenv("HERALD_SOAK_ATTEMPTS"))
	})
}

func startSoakWorker(t *testing.T, backend crashBackend, loc, attemptsPath string) *workerProcess {
	t.Helper()
	return startWorkerProcess(t, "TestSoakWorkerProcess", nil, "HERALD_SOAK_WORKER=1",
		"HERALD_CRASH_DB="+loc, "HERALD_SOAK_ATTEMPTS="+attemptsPath)
}

// soakSettings is what the environment asks of a run.
type soakSettings struct {
	long      bool
	duration  time.Duration // long: kill and restart until this much time has passed
	kills     int           // short: this many kills
	seed      uint64
	loops     string
	instances int
	// Each worker lives for a random time in [minUp, maxUp) after it is
	// ready, then no worker runs for a random time in [0, maxDown).
	minUp, maxUp, maxDown time.Duration
	// pause: a sender waits a random time in [0, pause) between sends.
	pause time.Duration
	// cutShort: the share of first sends made with a context that ends
	// within 3 ms (the caller gives up mid-call); resend: the share of
	// accepted ids sent again at once.
	cutShort, resend float64
}

func soakSettingsFromEnv(t *testing.T) soakSettings {
	t.Helper()
	s := soakSettings{kills: 4, loops: "all", instances: map[bool]int{false: 6, true: 4}[raceEnabled()],
		minUp: 500 * time.Millisecond, maxUp: 2 * time.Second, maxDown: 300 * time.Millisecond,
		pause: 4 * time.Millisecond, cutShort: 0.05, resend: 0.1}
	if v := os.Getenv("HERALD_SOAK"); v != "" && v != "0" {
		s.long, s.duration = true, 5*time.Minute
	}
	if v := os.Getenv("HERALD_SOAK_DURATION"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d <= 0 {
			t.Fatalf("HERALD_SOAK_DURATION=%q: want a positive duration such as 5m", v)
		}
		s.long, s.duration = true, d
	}
	if s.long {
		s.instances = map[bool]int{false: 16, true: 8}[raceEnabled()]
		s.minUp, s.maxUp, s.maxDown, s.pause = 100*time.Millisecond, 3*time.Second, time.Second, 10*time.Millisecond
	}
	s.seed = uint64(time.Now().UnixNano())
	if v := os.Getenv("HERALD_SOAK_SEED"); v != "" {
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			t.Fatalf("HERALD_SOAK_SEED=%q: want an unsigned integer", v)
		}
		s.seed = n
	}
	if v := os.Getenv("HERALD_SOAK_LOOPS"); v != "" {
		if _, ok := soakLoops[v]; !ok {
			t.Fatalf("HERALD_SOAK_LOOPS=%q: want all or plain", v)
		}
		s.loops = v
	}
	return s
}

func soakInstanceID(i int) string { return fmt.Sprintf("soak-%02d", i) }

// soakEvent is an event the store accepted.
type soakEvent struct {
	id, instance, name string
	lane               history.Lane
	// receivedAt is its first receipt's (from a re-send when the first
	// send's outcome was unknown).
	receivedAt time.Time
	// uncertain: a send of it failed before one was accepted.
	uncertain bool
}

// soakRun is the state of one soak: what was accepted, and the senders'
// counters and failures.
type soakRun struct {
	t   *testing.T
	ctx context.Context
	c   *herald.Client
	set soakSettings

	mu       sync.Mutex
	events   map[string]*soakEvent
	order    []string // accepted ids in acceptance order
	errs     []error  // the senders' failures
	sendErrs map[string]int
	stats    struct{ cutShort, uncertain, storedAnyway, resent, refused int }

	finishing atomic.Bool // the instances are being told to stop
	// halted is closed when the senders must stop: a sender failed, or the
	// wait for the instances to complete is over.
	halted   chan struct{}
	haltOnce sync.Once
}

// errSoakHalted: a send gave up because the senders were halted.
var errSoakHalted = errors.New("senders halted")

func (r *soakRun) halt() { r.haltOnce.Do(func() { close(r.halted) }) }

// fail records a sender's failure and halts the others.
func (r *soakRun) fail(err error) {
	if errors.Is(err, errSoakHalted) {
		return
	}
	r.mu.Lock()
	r.errs = append(r.errs, err)
	r.mu.Unlock()
	r.halt()
}

func (r *soakRun) senderErrors() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	return errors.Join(r.errs...)
}

// pause waits d unless the run ends or the senders are halted first; it
// reports whether to go on. (Pacing, not a wait for a condition.)
func (r *soakRun) pause(d time.Duration) bool {
	select {
	case <-r.ctx.Done():
		return false
	case <-r.halted:
		return false
	case <-time.After(d):
		return true
	}
}

func (r *soakRun) sendOn(ctx context.Context, inst, name, id string) (*herald.EventReceipt, error) {
	if soakLane(name) == history.LaneQueue {
		return r.c.Enqueue(ctx, inst, name, id, herald.WithEventID(id))
	}
	return r.c.RaiseEvent(ctx, inst, name, id, herald.WithEventID(id))
}

// send sends event id (its payload is the id) and re-sends after errors
// until the outcome is known: accepted (true), or refused because the
// instance has ended (false). Some first sends are cut short on purpose.
func (r *soakRun) send(rng *rand.Rand, inst, name, id string) (bool, error) {
	uncertain := false
	for attempt := 1; ; attempt++ {
		ctx, cancel := r.ctx, context.CancelFunc(func() {})
		if attempt == 1 && rng.Float64() < r.set.cutShort {
			ctx, cancel = context.WithTimeout(r.ctx, time.Duration(rng.IntN(3000))*time.Microsecond)
			r.mu.Lock()
			r.stats.cutShort++
			r.mu.Unlock()
		}
		rec, err := r.sendOn(ctx, inst, name, id)
		cancel()
		switch {
		case err == nil && rec.Duplicate && !uncertain:
			return false, fmt.Errorf("send %s: a fresh event id came back as a duplicate", id)
		case err == nil:
			ev := &soakEvent{id: id, instance: inst, name: name, lane: soakLane(name), receivedAt: rec.ReceivedAt,
				uncertain: uncertain}
			r.mu.Lock()
			r.events[id] = ev
			r.order = append(r.order, id)
			if uncertain {
				r.stats.uncertain++
				if rec.Duplicate {
					r.stats.storedAnyway++
				}
			}
			r.mu.Unlock()
			if rng.Float64() < r.set.resend {
				return true, r.resend(ev)
			}
			return true, nil
		case errors.Is(err, herald.ErrInstanceNotRunning):
			r.mu.Lock()
			r.stats.refused++
			r.mu.Unlock()
			return false, nil
		case errors.Is(err, herald.ErrEventIDConflict), errors.Is(err, herald.ErrEventInvalid):
			return false, fmt.Errorf("send %s: %w", id, err)
		case r.ctx.Err() != nil:
			return false, fmt.Errorf("send %s: %w", id, r.ctx.Err())
		}
		uncertain = true
		r.mu.Lock()
		r.sendErrs[soakErrorClass(err)]++
		r.mu.Unlock()
		if attempt == 200 {
			return false, fmt.Errorf("send %s: still failing after %d attempts: %w", id, attempt, err)
		}
		if !r.pause(time.Duration(min(attempt, 20)) * 5 * time.Millisecond) {
			return false, fmt.Errorf("send %s: %w (last error: %w)", id, errSoakHalted, err)
		}
	}
}

// soakErrorClass names an error for the counters: the context errors, or the
// error's text with numbers left out.
func soakErrorClass(err error) string {
	switch {
	case errors.Is(err, context.DeadlineExceeded):
		return "deadline exceeded (cut short)"
	case errors.Is(err, context.Canceled):
		return "canceled"
	}
	s := err.Error()
	if len(s) > 100 {
		s = s[:100]
	}
	return strings.Map(func(r rune) rune {
		if r >= '0' && r <= '9' {
			return '#'
		}
		return r
	}, s)
}

// resend sends an accepted event again: it must come back as a duplicate
// with its first receipt, whatever happened to the event since.
func (r *soakRun) resend(ev *soakEvent) error {
	for attempt := 1; ; attempt++ {
		rec, err := r.sendOn(r.ctx, ev.instance, ev.name, ev.id)
		if err == nil {
			r.mu.Lock()
			r.stats.resent++
			r.mu.Unlock()
			if !rec.Duplicate || !rec.ReceivedAt.Equal(ev.receivedAt) {
				return fmt.Errorf("re-send of accepted %s: duplicate=%v received at %v, want the first receipt (duplicate, received at %v)",
					ev.id, rec.Duplicate, rec.ReceivedAt, ev.receivedAt)
			}
			return nil
		}
		if r.ctx.Err() != nil || attempt == 200 || errors.Is(err, herald.ErrInstanceNotRunning) ||
			errors.Is(err, herald.ErrEventIDConflict) || errors.Is(err, herald.ErrEventInvalid) {
			return fmt.Errorf("re-send of accepted %s: %w", ev.id, err)
		}
		r.mu.Lock()
		r.sendErrs[soakErrorClass(err)]++
		r.mu.Unlock()
		if !r.pause(time.Duration(min(attempt, 20)) * 5 * time.Millisecond) {
			return fmt.Errorf("re-send of accepted %s: %w (last error: %w)", ev.id, errSoakHalted, err)
		}
	}
}

// unsettled returns the ids whose fate is still pending or buffered (or
// could not be read).
func (r *soakRun) unsettled(ids []string) []string {
	var out []string
	for _, id := range ids {
		rec, err := r.c.EventFate(r.ctx, id)
		if err != nil || rec.Fate == history.FatePending || rec.Fate == history.FateBuffered {
			out = append(out, id)
		}
	}
	return out
}

// sender streams events to instance i until the instance has ended after
// being told to stop. Each (instance, name) has at most soakWindow events
// unsettled.
func (r *soakRun) sender(i int, rng *rand.Rand) {
	inst := soakInstanceID(i)
	outstanding := map[string][]string{}
	seq := map[string]int{}
	stopSent := false
	for {
		select {
		case <-r.halted:
			return
		default:
		}
		if r.ctx.Err() != nil {
			r.fail(fmt.Errorf("sender of %s: %w", inst, r.ctx.Err()))
			return
		}
		if r.finishing.Load() && !stopSent {
			id := inst + "/" + soakCtl + "/stop"
			ok, err := r.send(rng, inst, soakCtl, id)
			if err == nil && !ok {
				err = fmt.Errorf("%s ended before it was told to stop", inst)
			}
			if err != nil {
				r.fail(err)
				return
			}
			stopSent = true
		}
		var open []string
		for _, name := range soakNames {
			if len(outstanding[name]) >= soakWindow {
				outstanding[name] = r.unsettled(outstanding[name])
			}
			if len(outstanding[name]) < soakWindow {
				open = append(open, name)
			}
		}
		if len(open) == 0 {
			if stopSent {
				if info, err := r.c.Status(r.ctx, inst); err == nil && info.Status.Terminal() {
					return
				}
			}
			if !r.pause(5 * time.Millisecond) {
				return
			}
			continue
		}
		name := open[rng.IntN(len(open))]
		seq[name]++
		id := fmt.Sprintf("%s/%s/%05d", inst, name, seq[name])
		accepted, err := r.send(rng, inst, name, id)
		if err != nil {
			r.fail(err)
			return
		}
		if !accepted {
			if !stopSent {
				r.fail(fmt.Errorf("%s ended before it was told to stop: %s refused", inst, id))
			}
			return // the instance has ended: nothing more to send
		}
		outstanding[name] = append(outstanding[name], id)
		if !r.pause(time.Duration(rng.Int64N(int64(r.set.pause)))) {
			return
		}
	}
}

// TestSoak is the soak test described at the top of this file, on the
// backend HERALD_TEST_BACKEND names (SQLite by default).
func TestSoak(t *testing.T) {
	if testing.Short() {
		t.Skip("spawns worker processes")
	}
	var backend crashBackend
	switch b := testdb.Backend(); b {
	case "sqlite":
		backend = crashSQLite
	case "postgres":
		if os.Getenv(testdb.URLEnv) == "" {
			t.Fatalf("%s=postgres needs %s", testdb.BackendEnv, testdb.URLEnv)
		}
		backend = crashPostgres
	default:
		t.Fatalf("unknown %s %q", testdb.BackendEnv, b)
	}
	set := soakSettingsFromEnv(t)
	version := fmt.Sprintf("short, %d kills", set.kills)
	if set.long {
		version = fmt.Sprintf("long, %v", set.duration)
	}
	t.Logf("soak on %s (%s), loops %s, %d instances: seed %d (HERALD_SOAK_SEED=%d repeats its choices)",
		backend.name, version, set.loops, set.instances, set.seed, set.seed)
	ctx := crashContext(t)
	loc := backend.newDB(t)
	attemptsPath := filepath.Join(t.TempDir(), "attempts.log")
	st, err := openStore(ctx, loc)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	r := &soakRun{t: t, ctx: ctx, c: mustClient(st, herald.DefaultTenant, nil), set: set, events: map[string]*soakEvent{},
		sendErrs: map[string]int{}, halted: make(chan struct{})}
	rng := rand.New(rand.NewPCG(set.seed, 0))
	began := time.Now()

	// The senders start before the instances do: their first events wait
	// for the instance (docs/positional.md, rule 6).
	var senders sync.WaitGroup
	for i := range set.instances {
		senders.Add(1)
		go func() {
			defer senders.Done()
			r.sender(i, rand.New(rand.NewPCG(set.seed, uint64(i)+1)))
		}()
	}
	defer func() { r.halt(); senders.Wait() }()
	workers := []*workerProcess{startSoakWorker(t, backend, loc, attemptsPath)}
	for i := range set.instances {
		if _, err := r.c.StartWorkflow(ctx, soakWorkflow, soakInput{Loops: set.loops},
			herald.WithInstanceID(soakInstanceID(i))); err != nil {
			t.Fatalf("start %s: %v", soakInstanceID(i), err)
		}
	}

	// Kill the worker at random moments and start another, until the
	// kills are done (short) or the time is up (long).
	var ups, downs []time.Duration
	for k := 0; ; k++ {
		if set.long && time.Since(began) >= set.duration || !set.long && k == set.kills {
			break
		}
		up := set.minUp + time.Duration(rng.Int64N(int64(set.maxUp-set.minUp)))
		down := time.Duration(rng.Int64N(int64(set.maxDown)))
		if !r.pause(up) {
			break
		}
		workers[len(workers)-1].kill(t)
		if !r.pause(down) {
			break
		}
		ups, downs = append(ups, up), append(downs, down)
		workers = append(workers, startSoakWorker(t, backend, loc, attemptsPath))
	}
	kills := len(ups)
	killedFor := time.Since(began)
	if err := r.senderErrors(); err != nil {
		t.Fatalf("senders failed (seed %d):\n%v", set.seed, err)
	}

	// The last worker runs to the end: every instance is told to stop,
	// the senders keep streaming (a receive may wait for them) until it
	// has completed.
	r.finishing.Store(true)
	stuck := r.waitCompleted()
	r.halt() // the senders of instances that did not complete
	senders.Wait()
	if err := r.senderErrors(); err != nil {
		t.Errorf("senders failed (seed %d):\n%v", set.seed, err)
	}
	workers[len(workers)-1].stop(t)
	for k, w := range workers {
		var p []string
		for _, line := range w.problems() {
			if !strings.Contains(line, "herald: event dropped") { // drops are logged at WARN by design
				p = append(p, line)
			}
		}
		if len(p) > 0 {
			t.Errorf("worker %d logged problems:\n%s", k+1, strings.Join(p, "\n"))
		}
	}
	if len(stuck) > 0 {
		t.Errorf("%d instances did not complete within %v of being told to stop (seed %d):\n%s",
			len(stuck), soakFinishTimeout, set.seed, strings.Join(stuck, "\n"))
	}
	finishedAfter := time.Since(began)

	rep := r.check(st)
	t.Logf("soak on %s: %d kills in %v (each worker up %s, none running for %s), all done after %v; %s",
		backend.name, kills, killedFor.Round(time.Millisecond), soakDurations(ups), soakDurations(downs),
		finishedAfter.Round(time.Millisecond), rep)
	reportAttempts(t, attemptsPath)
}

// soakDurations lists ds, or for many sums them up.
func soakDurations(ds []time.Duration) string {
	if len(ds) <= 8 {
		out := make([]time.Duration, len(ds))
		for i, d := range ds {
			out[i] = d.Round(time.Millisecond)
		}
		return fmt.Sprint(out)
	}
	var sum time.Duration
	for _, d := range ds {
		sum += d
	}
	return fmt.Sprintf("%v to %v, mean %v", slices.Min(ds).Round(time.Millisecond), slices.Max(ds).Round(time.Millisecond),
		(sum / time.Duration(len(ds))).Round(time.Millisecond))
}

// waitCompleted waits until every instance has ended, or soakFinishTimeout
// has passed; it describes the instances still running then.
func (r *soakRun) waitCompleted() []string {
	ctx, cancel := context.WithTimeout(r.ctx, soakFinishTimeout)
	defer cancel()
	var stuck []string
	for i := range r.set.instances {
		id := soakInstanceID(i)
		if _, err := r.c.WaitForCompletion(ctx, id); err == nil {
			continue
		}
		s := fmt.Sprintf("%s: still running", id)
		if info, err := r.c.Status(r.ctx, id); err == nil {
			s = fmt.Sprintf("%s: %s in execution %d", id, info.Status, info.Execution)
		}
		evs, _ := r.c.History(r.ctx, id, 0)
		recs, _ := r.c.Events(r.ctx, id, herald.EventFilter{Limit: 1 << 30})
		var unsettled []string
		for _, rec := range recs {
			if rec.Fate == history.FatePending || rec.Fate == history.FateBuffered {
				unsettled = append(unsettled, rec.EventID+" "+string(rec.Fate))
			}
		}
		stuck = append(stuck, fmt.Sprintf("%s, open receives %v, unsettled events %v; history tail:\n%s",
			s, openWaitLabels(evs), unsettled, soakTail(evs, 20)))
	}
	return stuck
}

func soakTail(evs []history.Event, n int) string {
	if len(evs) > n {
		evs = evs[len(evs)-n:]
	}
	return formatHistory(evs)
}

// soakAround shows the history events of execution exec within radius of
// seq, marking seq, each with the iteration of the loop it belongs to.
func (si *soakInstance) around(exec, seq, radius int) string {
	var b strings.Builder
	for _, ev := range si.execs[exec] {
		if ev.Seq < seq-radius || ev.Seq > seq+radius {
			continue
		}
		mark := "     "
		if ev.Seq == seq {
			mark = "  →  "
		}
		fmt.Fprintf(&b, "%s%-28s #%d %s", mark, si.where(soakAt{exec, ev.Seq}), ev.Seq, ev.Kind)
		if ev.Name != "" {
			fmt.Fprintf(&b, " %q", ev.Name)
		}
		for _, f := range []struct {
			name string
			val  any
			set  bool
		}{
			{"id", ev.EventID, ev.EventID != ""}, {"task", ev.TaskSeq, ev.TaskSeq != 0},
			{"wait", ev.WaitNumber, ev.WaitNumber != 0}, {"reason", ev.Reason, ev.Reason != ""},
			{"no_wait", true, ev.NoWait}, {"at_start", true, ev.AtStart},
		} {
			if f.set {
				fmt.Fprintf(&b, " %s=%v", f.name, f.val)
			}
		}
		b.WriteString("\n")
	}
	return b.String()
}

// where names the loop iteration a history event belongs to.
func (si *soakInstance) where(at soakAt) string {
	n, ok := si.iter[at.exec][at.seq]
	switch {
	case !ok || n < si.first[at.exec]:
		return fmt.Sprintf("e%d before the loop", at.exec)
	case n == si.stopped[at.exec]:
		return fmt.Sprintf("e%d it%d stop", at.exec, n)
	}
	kinds := soakLoops[si.loops]
	return fmt.Sprintf("e%d it%d %s", at.exec, n, kinds[n%len(kinds)])
}

// kindAt names the loop kind of a history event (for the tallies).
func (si *soakInstance) kindAt(at soakAt) string {
	w := si.where(at)
	if _, after, ok := strings.Cut(w, " it"); ok {
		_, kind, _ := strings.Cut(after, " ")
		return kind
	}
	return "before the loop"
}

// soakProblem is a broken invariant: the loop kind it happened in (if
// about one event) and its description.
type soakProblem struct{ kind, line string }

// soakAt is a place in an instance's history: execution and seq.
type soakAt struct{ exec, seq int }

// soakInstance is what one instance's histories say.
type soakInstance struct {
	info  *herald.InstanceInfo
	loops string
	execs map[int][]history.Event
	// iter: execution → seq → the loop iteration the event belongs to;
	// first: execution → its first iteration; stopped: execution → the
	// iteration that received "stop" (-1: none).
	iter           map[int]map[int]int
	first, stopped map[int]int
	// received: event id → where the workflow received it (execution,
	// position in that execution's list).
	received map[string][]soakAt
	// delivered and dropped: event id → the history events that delivered
	// or dropped it.
	delivered, dropped map[string][]soakAt
	// incomplete: the instance did not complete (its events are not
	// checked).
	incomplete bool
}

// check reads back every instance and the ledger and reports what breaks the
// soak's invariants; it returns a summary of the run.
func (r *soakRun) check(st storage.Store) string {
	t, ctx, c := r.t, r.ctx, r.c
	rt, err := herald.NewRuntime(st, crashRuntimeConfig(slog.New(&logRecorder{})))
	if err != nil {
		t.Fatal(err)
	}
	registerSoak(rt, "") // not started: it only replays
	var (
		problems = map[string][]soakProblem{} // by category
		count    = func(cat, kind, line string) { problems[cat] = append(problems[cat], soakProblem{kind, line}) }
		insts    = map[string]*soakInstance{}
		execs    int
		iters    int
	)
	for i := range r.set.instances {
		id := soakInstanceID(i)
		si := &soakInstance{loops: r.set.loops, execs: map[int][]history.Event{}, iter: map[int]map[int]int{},
			first: map[int]int{}, stopped: map[int]int{}, received: map[string][]soakAt{},
			delivered: map[string][]soakAt{}, dropped: map[string][]soakAt{}}
		insts[id] = si
		info, err := c.Status(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		si.info = info
		execs += info.Execution
		for e := 1; e <= info.Execution; e++ {
			evs, err := c.History(ctx, id, e)
			if err != nil {
				t.Fatal(err)
			}
			si.execs[e] = evs
			if err := rt.ReplayHistory(evs); err != nil {
				count("history does not replay", "", fmt.Sprintf("%s execution %d: %v", id, e, err))
			}
			// A delivery counts unless its receive was cancelled after it
			// (should a Select ever hand an event back that way).
			cancelled := map[int]bool{}
			for _, ev := range evs {
				if ev.Kind == history.EventSubscribedCancelled {
					cancelled[ev.TaskSeq] = true
				}
			}
			var in soakInput
			if err := json.Unmarshal(evs[0].Input, &in); err != nil {
				count("bad execution input", "", fmt.Sprintf("%s execution %d: %v", id, e, err))
			}
			// Every iteration starts with a TryDequeue of "ctl".
			si.iter[e], si.first[e], si.stopped[e] = map[int]int{}, in.Iter, -1
			n := in.Iter - 1
			for _, ev := range evs {
				if ev.Kind == history.EventSubscribed && ev.NoWait && ev.Name == soakCtl {
					n++
					if ev.EventID != "" {
						si.stopped[e] = n
					}
				}
				si.iter[e][ev.Seq] = n
			}
			for _, ev := range evs {
				switch {
				case ev.Kind == history.EventRaised && ev.TaskSeq > 0 && !cancelled[ev.TaskSeq],
					ev.Kind == history.EventSubscribed && ev.EventID != "" && !cancelled[ev.Seq]:
					si.delivered[ev.EventID] = append(si.delivered[ev.EventID], soakAt{e, ev.Seq})
				case ev.Kind == history.EventDropped:
					si.dropped[ev.EventID] = append(si.dropped[ev.EventID], soakAt{e, ev.Seq})
				}
			}
			if e > 1 { // the input of execution e says what e-1 received
				for k, eid := range in.Prev {
					si.received[eid] = append(si.received[eid], soakAt{e - 1, k + 1})
				}
			}
		}
		if info.Status != herald.StatusCompleted {
			si.incomplete = true
			count("instance did not complete", "", fmt.Sprintf("%s: %s in execution %d: %v; history tail:\n%s",
				id, info.Status, info.Execution, info.Err(), soakTail(si.execs[info.Execution], 20)))
			continue
		}
		var res soakResult
		if err := info.Result(&res); err != nil {
			si.incomplete = true
			count("instance did not complete", "", fmt.Sprintf("%s: result: %v", id, err))
			continue
		}
		iters += res.Iter
		for k, eid := range res.Got {
			si.received[eid] = append(si.received[eid], soakAt{info.Execution, k + 1})
		}
	}

	// show describes event id's fate and the instance's history where the
	// event was delivered or dropped.
	show := func(ev *soakEvent, rec *herald.EventRecord) string {
		var b strings.Builder
		fmt.Fprintf(&b, "%s (%s %q of %s): ", ev.id, ev.lane, ev.name, ev.instance)
		if rec != nil {
			fmt.Fprintf(&b, "fate %s", rec.Fate)
			if rec.Reason != "" {
				fmt.Fprintf(&b, "/%s", rec.Reason)
			}
			if rec.Fate == history.FateDelivered {
				fmt.Fprintf(&b, " to receive #%d of %q in execution %d", rec.WaitNumber, rec.Name, rec.Execution)
			}
			if rec.OriginExecution != rec.Execution {
				fmt.Fprintf(&b, " (arrived in execution %d)", rec.OriginExecution)
			}
		}
		si := insts[ev.instance]
		var got []string
		for _, at := range si.received[ev.id] {
			got = append(got, fmt.Sprintf("execution %d, #%d of its list", at.exec, at.seq))
		}
		fmt.Fprintf(&b, "; received by the workflow %d times %v", len(got), got)
		if ev.uncertain {
			b.WriteString("; its first send failed")
		}
		b.WriteString("\n")
		for _, at := range append(slices.Clone(si.delivered[ev.id]), si.dropped[ev.id]...) {
			fmt.Fprintf(&b, "    %s execution %d around #%d (%s):\n%s", ev.instance, at.exec, at.seq, si.where(at),
				si.around(at.exec, at.seq, 6))
		}
		return b.String()
	}
	// kindOf is the loop kind where the event was delivered or dropped.
	kindOf := func(ev *soakEvent) string {
		si := insts[ev.instance]
		for _, at := range append(slices.Clone(si.delivered[ev.id]), si.dropped[ev.id]...) {
			return si.kindAt(at)
		}
		return "nowhere in history"
	}

	r.mu.Lock()
	order := slices.Clone(r.order)
	r.mu.Unlock()
	lanes := map[history.Lane]int{}
	fates := map[string]int{}
	carried := 0   // delivered in a later execution than they arrived in
	unchecked := 0 // events of instances that did not complete
	for _, id := range order {
		ev := r.events[id]
		lanes[ev.lane]++
		rec, err := c.EventFate(ctx, id)
		if err != nil {
			count("accepted, missing from the ledger", "", fmt.Sprintf("%s: %v", id, err))
			continue
		}
		key := string(rec.Fate)
		if rec.Reason != "" {
			key += "/" + string(rec.Reason)
		}
		fates[string(ev.lane)+" "+key]++
		if rec.Fate == history.FateDelivered && rec.OriginExecution != rec.Execution {
			carried++
		}
		if rec.InstanceID != ev.instance || rec.Lane != ev.lane || rec.Name != ev.name {
			count("ledger disagrees with the send", kindOf(ev), fmt.Sprintf("%s: ledger has %s %s %q", show(ev, rec),
				rec.InstanceID, rec.Lane, rec.Name))
		}
		si := insts[ev.instance]
		if si.incomplete { // what its last execution received is unknown
			unchecked++
			continue
		}
		got, deliveries, drops := si.received[id], si.delivered[id], si.dropped[id]
		switch rec.Fate {
		case history.FateDelivered:
			switch {
			case len(got) == 0:
				count("LOST: delivered, but no receive gave it to the workflow", kindOf(ev), show(ev, rec))
			case len(got) > 1:
				count("DUPLICATED: received more than once", kindOf(ev), show(ev, rec))
			case got[0].exec != rec.Execution:
				count("received in another execution than the ledger says", kindOf(ev), show(ev, rec))
			}
			if len(deliveries) != 1 {
				count("delivered in history other than once", kindOf(ev), show(ev, rec))
			}
			if len(drops) > 0 {
				count("delivered and dropped in history", kindOf(ev), show(ev, rec))
			}
		case history.FateDropped:
			if len(got) > 0 {
				count("received, yet dropped", kindOf(ev), show(ev, rec))
			}
			if !r.dropAllowed(ev, rec.Reason) {
				count("dropped for a reason the workload rules out", kindOf(ev), show(ev, rec))
			}
			if len(drops) != 1 {
				count("dropped without exactly one breadcrumb in history", kindOf(ev), show(ev, rec))
			}
			if len(deliveries) > 0 {
				count("dropped, yet delivered in history", kindOf(ev), show(ev, rec))
			}
		default:
			count("not settled after the instance ended", kindOf(ev), show(ev, rec))
		}
	}
	// What the workflows received and the ledger holds must have been
	// accepted.
	for i := range r.set.instances {
		id := soakInstanceID(i)
		si := insts[id]
		for eid, at := range si.received {
			if r.events[eid] == nil {
				count("received, never accepted", "", fmt.Sprintf("%s received %s at %v", id, eid, at))
			}
		}
		recs, err := c.Events(ctx, id, herald.EventFilter{Limit: 1 << 30})
		if err != nil {
			t.Fatal(err)
		}
		for _, rec := range recs {
			if r.events[rec.EventID] == nil {
				count("in the ledger, never accepted", "", fmt.Sprintf("%s: %s %s %q fate %s/%s", rec.EventID, rec.InstanceID,
					rec.Lane, rec.Name, rec.Fate, rec.Reason))
			}
		}
	}
	// Every accepted id, sent again now that its instance has ended, is a
	// duplicate with its first receipt (a sample in the long version).
	sample := order
	if len(sample) > 2000 {
		sample = slices.Clone(order)
		rand.New(rand.NewPCG(r.set.seed, 1<<32)).Shuffle(len(sample), func(i, j int) { sample[i], sample[j] = sample[j], sample[i] })
		sample = sample[:2000]
	}
	for _, id := range sample {
		if err := r.resend(r.events[id]); err != nil {
			count("re-send after the end not a duplicate with the first receipt", "", err.Error())
		}
	}

	cats := make([]string, 0, len(problems))
	for cat := range problems {
		cats = append(cats, cat)
	}
	slices.Sort(cats)
	for _, cat := range cats {
		list := problems[cat]
		byKind := map[string]int{}
		for _, p := range list {
			if p.kind != "" {
				byKind[p.kind]++
			}
		}
		var b strings.Builder
		fmt.Fprintf(&b, "%s: %d (seed %d)", cat, len(list), r.set.seed)
		if len(byKind) > 0 {
			kinds := slices.Sorted(maps.Keys(byKind))
			var parts []string
			for _, k := range kinds {
				parts = append(parts, fmt.Sprintf("%s %d", k, byKind[k]))
			}
			fmt.Fprintf(&b, "; by the loop it happened in: %s", strings.Join(parts, ", "))
		}
		b.WriteString("\n")
		for k, p := range list {
			if k == 10 {
				fmt.Fprintf(&b, "  ... and %d more\n", len(list)-10)
				break
			}
			fmt.Fprintf(&b, "  %s\n", strings.TrimRight(p.line, "\n"))
		}
		r.t.Error(b.String())
	}

	r.mu.Lock()
	defer r.mu.Unlock()
	var fateList []string
	for k, n := range fates {
		fateList = append(fateList, fmt.Sprintf("%s %d", k, n))
	}
	slices.Sort(fateList)
	var errList []string
	for k, n := range r.sendErrs {
		errList = append(errList, fmt.Sprintf("%dx %s", n, k))
	}
	slices.Sort(errList)
	if unchecked > 0 {
		r.t.Errorf("%d events of instances that did not complete were not checked", unchecked)
	}
	return fmt.Sprintf("%d events accepted (%d positional, %d queue): %s (%d delivered after a continue-as-new); "+
		"%d executions, %d iterations; %d sends cut short, %d accepted after a failed send (%d of them stored by it), "+
		"%d send errors re-sent %q, %d accepted ids re-sent (duplicates with the first receipt), %d sends refused after the end",
		len(order), lanes[history.LanePositional], lanes[history.LaneQueue], strings.Join(fateList, ", "), carried,
		execs, iters, r.stats.cutShort, r.stats.uncertain, r.stats.storedAnyway, soakSum(r.sendErrs), errList,
		r.stats.resent, r.stats.refused)
}

func soakSum(m map[string]int) int {
	n := 0
	for _, v := range m {
		n += v
	}
	return n
}

// dropAllowed reports whether the workload allows ev to be dropped for
// reason: instance_terminal (still buffered or on its way when its instance
// completed), and on the positional lane withdrawn_wait when the loops race
// a wait against another receive or a timer. The senders' windows rule out
// the limits.
func (r *soakRun) dropAllowed(ev *soakEvent, reason history.DropReason) bool {
	switch reason {
	case history.DropInstanceTerminal:
		return ev.name != soakCtl
	case history.DropWithdrawnWait:
		return ev.lane == history.LanePositional && r.set.loops == "all"
	}
	return false
}
