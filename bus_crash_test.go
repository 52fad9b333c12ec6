package herald_test

// The event bus's crash safety: a worker process runs a script target and
// Go handler targets while events stream in; it is SIGKILLed while attempts
// run, a new worker takes over once the leases run out, and every published
// event must end with a complete, exactly-once record of what became of it.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/heraldwf/herald"
	"github.com/heraldwf/herald/internal/testdb"
)

const (
	// busCrashLease is the workers' Bus.Lease: the takeover after the kill
	// waits for it in real time (the worker is another process).
	busCrashLease       = 2 * time.Second
	busCrashEnvWorker   = "HERALD_BUSCRASH_WORKER"
	busCrashEnvAttempts = "HERALD_BUSCRASH_ATTEMPTS"
	// busCrashEnvHold, in the first worker's environment: its handler
	// attempts of events numbered this or higher work until the process
	// dies, so that the kill finds attempts running however slowly the
	// test's own checks run (a loaded machine once let every attempt the
	// kill was aimed at finish first).
	busCrashEnvHold = "HERALD_BUSCRASH_HOLD_FROM"
)

// busCrashEvents: 200 events, 100 under the race detector.
var busCrashEvents = map[bool]int{false: 200, true: 100}[raceEnabled()]

// busCrashEvent is event i of the stream. By i%5:
//
//	0: order.created → script "s" and handler "h" (two executions)
//	1: order.created, skip → "s" filters it out, "h" runs
//	2: audit.log, level low → "f" filters it out: fate filtered
//	3: misc.thing → no subscription: fate no_match
//	4: audit.log, level high → handler "f" runs
//
// The handler fails permanently for n%7 == 3 and the script for n%11 == 4:
// those executions are dead-lettered at their first attempt.
func busCrashEvent(i int) (id, typ string, data map[string]any) {
	id = fmt.Sprintf("bc-%03d", i)
	data = map[string]any{"n": i}
	switch i % 5 {
	case 0:
		typ = "order.created"
		data["skip"] = false // "ne" is false on an absent field
	case 1:
		typ = "order.created"
		data["skip"] = true
	case 2:
		typ, data["level"] = "audit.log", "low"
	case 3:
		typ = "misc.thing"
	case 4:
		typ, data["level"] = "audit.log", "high"
	}
	return id, typ, data
}

// busCrashExpect is what must become of event i: the fate, and for each
// subscription whose pattern matched, whether its filter let the event
// through and, if so, whether the execution succeeds.
func busCrashExpect(i int) (herald.BusFate, map[string]string) {
	handler := "succeeded"
	if i%7 == 3 {
		handler = "dead_lettered"
	}
	script := "succeeded"
	if i%11 == 4 {
		script = "dead_lettered"
	}
	switch i % 5 {
	case 0:
		return herald.BusDone, map[string]string{"s": script, "h": handler}
	case 1:
		return herald.BusDone, map[string]string{"s": "filtered", "h": handler}
	case 2:
		return herald.BusFiltered, map[string]string{"f": "filtered"}
	case 3:
		return herald.BusNoMatch, map[string]string{}
	default:
		return herald.BusDone, map[string]string{"f": handler}
	}
}

func busCrashConfig(logger *slog.Logger) *herald.Config {
	return &herald.Config{
		ClientConfig: herald.ClientConfig{Logger: logger},
		PollInterval: 20 * time.Millisecond,
		Bus:          herald.BusConfig{Workers: 8, ScriptProcesses: 2, Lease: busCrashLease, Timeout: 10 * time.Second},
	}
}

// registerBusCrash registers the Go handler "work": each attempt appends
// "<event id> <pid>" to attemptsPath before it works for 40-120 ms, or,
// for events numbered holdFrom or higher (holdFrom > 0), until its process
// dies.
func registerBusCrash(rt *herald.Runtime, attemptsPath string, holdFrom int) {
	var mu sync.Mutex
	herald.RegisterBusHandler(rt, "work", func(ctx context.Context, ev herald.BusEvent) (any, error) {
		mu.Lock()
		f, err := os.OpenFile(attemptsPath, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
		if err == nil {
			_, err = fmt.Fprintf(f, "%s %d\n", ev.ID, os.Getpid())
			if cerr := f.Close(); err == nil {
				err = cerr
			}
		}
		mu.Unlock()
		if err != nil {
			return nil, fmt.Errorf("log the attempt: %w", err)
		}
		var d struct{ N int }
		if err := json.Unmarshal(ev.Data, &d); err != nil {
			return nil, herald.Permanent(err)
		}
		work := time.After(time.Duration(40+d.N%5*20) * time.Millisecond) // simulated work
		if holdFrom > 0 && d.N >= holdFrom {
			work = nil // until the process is killed
		}
		select {
		case <-work:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		if d.N%7 == 3 {
			return nil, herald.Permanent(fmt.Errorf("event %d is refused for good", d.N))
		}
		return map[string]any{"handled": ev.ID, "n": d.N}, nil
	})
}

// TestBusCrashWorkerProcess is the worker subprocess of
// TestBusCrash_KillWhileExecuting; it does nothing unless
// HERALD_BUSCRASH_WORKER=1.
func TestBusCrashWorkerProcess(t *testing.T) {
	if os.Getenv(busCrashEnvWorker) != "1" {
		return
	}
	serveWorkerProcess(t, busCrashConfig, func(rt *herald.Runtime) {
		holdFrom, _ := strconv.Atoi(os.Getenv(busCrashEnvHold))
		registerBusCrash(rt, os.Getenv(busCrashEnvAttempts), holdFrom)
	})
}

// busHandlerAttempts reads the handler's attempts log: event id → the pids
// of the processes that started an attempt of it, in order.
func busHandlerAttempts(t *testing.T, path string) map[string][]string {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		t.Fatal(err)
	}
	out := map[string][]string{}
	for _, line := range strings.Split(string(data), "\n") {
		if f := strings.Fields(line); len(f) == 2 {
			out[f[0]] = append(out[f[0]], f[1])
		}
	}
	return out
}

// handlerSubOf names the handler subscription that runs event i, or "".
func handlerSubOf(i int) string {
	switch i % 5 {
	case 0, 1:
		return "h"
	case 4:
		return "f"
	}
	return ""
}

// TestBusCrash_KillWhileExecuting streams published events at a worker
// process running a script target and two Go handler targets, SIGKILLs it
// while handler attempts run, starts a new worker and checks, once it has
// drained: every event has a final fate that matches its routing; every
// execution ended as expected with exactly one attempt record (succeeded,
// or failed with the dead letter it ended in); the attempts the kill
// interrupted were taken over as attempt 2. Handler attempts are
// at-least-once: the log shows which ran twice (each, once in each worker).
func TestBusCrash_KillWhileExecuting(t *testing.T) {
	if testing.Short() {
		t.Skip("spawns worker processes")
	}
	backend := testdb.Backend()
	if backend == "postgres" {
		testdb.PostgresURL(t)
	}
	ctx := crashContext(t)
	began := time.Now()
	loc := newLocation(t, backend)
	st, err := openStore(ctx, loc)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	b := on(t, mustClient(st, herald.DefaultTenant, nil))
	b.script("tally", `const n = ctx.event.data.n;
		if (n % 11 === 4) throw new PermanentError('script refuses ' + n);
		let x = 0;
		for (let i = 0; i < 20000; i++) x = (x + i * n) % 1000003;
		return {n: n, x: x};`)
	b.subscribe(herald.Subscription{ID: "s", Pattern: "order.*", Target: herald.Target{Kind: herald.TargetScript, Script: "tally"},
		Filter: json.RawMessage(`{"logic":"AND","conditions":[{"field":"data.skip","op":"ne","value":true}]}`)})
	b.subscribe(herald.Subscription{ID: "h", Pattern: "order.>", Target: herald.Target{Kind: herald.TargetHandler, Handler: "work"}})
	b.subscribe(herald.Subscription{ID: "f", Pattern: "audit.*", Target: herald.Target{Kind: herald.TargetHandler, Handler: "work"},
		Filter: json.RawMessage(`{"logic":"AND","conditions":[{"field":"data.level","op":"eq","value":"high"}]}`)})

	attemptsPath := filepath.Join(t.TempDir(), "attempts.log")
	start := func(env ...string) *workerProcess {
		return startWorkerProcess(t, "TestBusCrashWorkerProcess", nil, append([]string{busCrashEnvWorker + "=1",
			"HERALD_CRASH_DB=" + loc, busCrashEnvAttempts + "=" + attemptsPath}, env...)...)
	}
	// The first worker holds its handler attempts from a third of the
	// stream on: the kill comes once two of them run.
	w1 := start(fmt.Sprintf("%s=%d", busCrashEnvHold, busCrashEvents/3))

	// Publish the stream, one event every few milliseconds, while the
	// workers come and go.
	var published sync.WaitGroup
	var mu sync.Mutex
	sent := 0
	published.Go(func() {
		tick := time.NewTicker(8 * time.Millisecond) // pacing, not a wait for anything
		defer tick.Stop()
		for i := range busCrashEvents {
			id, typ, data := busCrashEvent(i)
			if _, err := b.client.Publish(ctx, typ, data, herald.WithEventID(id)); err != nil {
				t.Errorf("publish %s: %v", id, err)
				return
			}
			mu.Lock()
			sent++
			mu.Unlock()
			select {
			case <-tick.C:
			case <-ctx.Done():
				return
			}
		}
	})
	sentSoFar := func() int { mu.Lock(); defer mu.Unlock(); return sent }

	// running returns the events whose handler attempt started in worker
	// pid (per the log) while its execution is still running: attempts
	// in flight, not recorded.
	running := func(pid int) []string {
		var out []string
		for id, pids := range busHandlerAttempts(t, attemptsPath) {
			if !slices.Contains(pids, strconv.Itoa(pid)) {
				continue
			}
			i, _ := strconv.Atoi(strings.TrimPrefix(id, "bc-"))
			ev, err := b.client.PublishedEvent(ctx, id)
			if err != nil {
				t.Fatalf("PublishedEvent(%s): %v", id, err)
			}
			if r := routeOf(ev, handlerSubOf(i)); r != nil && r.Execution != nil && r.Execution.Status == herald.ExecRunning {
				out = append(out, id)
			}
		}
		slices.Sort(out)
		return out
	}
	// Kill once a third of the stream is published and handler attempts
	// are running.
	b.waitFor("a third of the events published with handler attempts running", func() bool {
		return sentSoFar() >= busCrashEvents/3 && len(running(w1.cmd.Process.Pid)) >= 2
	})
	w1.kill(t)
	killedAt, sentAtKill := time.Since(began), sentSoFar()
	inFlight := running(w1.cmd.Process.Pid)
	if len(inFlight) == 0 {
		t.Fatalf("the kill found no handler attempt running")
	}
	w2 := start()
	published.Wait()
	if t.Failed() {
		t.FailNow()
	}

	// Drain: every event's fate final.
	ids := make([]string, busCrashEvents)
	for i := range ids {
		ids[i], _, _ = busCrashEvent(i)
	}
	final := map[string]*herald.PublishedEvent{}
	b.waitFor("every published event to end", func() bool {
		for _, id := range ids {
			if final[id] != nil {
				continue
			}
			ev, err := b.client.PublishedEvent(ctx, id)
			if err != nil {
				t.Fatalf("PublishedEvent(%s): %v", id, err)
			}
			if ev.Fate == herald.BusDone || ev.Fate == herald.BusNoMatch || ev.Fate == herald.BusFiltered {
				final[id] = ev
			}
		}
		return len(final) == len(ids)
	})
	drained := time.Since(began)
	w2.stop(t)
	for k, w := range []*workerProcess{w1, w2} {
		if p := w.problems(); len(p) > 0 {
			t.Errorf("worker %d logged problems:\n%s", k+1, strings.Join(p, "\n"))
		}
	}

	// Every event's record is complete and as expected.
	handlerRuns := busHandlerAttempts(t, attemptsPath)
	w1pid, w2pid := strconv.Itoa(w1.cmd.Process.Pid), strconv.Itoa(w2.cmd.Process.Pid)
	counts := map[string]int{}
	takenOver := 0
	for i, id := range ids {
		ev := final[id]
		fate, want := busCrashExpect(i)
		if ev.Fate != fate || len(ev.Routes) != len(want) {
			t.Errorf("%s: %s, want fate %s with routes %v", id, describeBus(ev), fate, want)
			continue
		}
		counts[string(ev.Fate)]++
		as := b.attempts(id)
		for sub, w := range want {
			r := routeOf(ev, sub)
			if r == nil {
				t.Errorf("%s: no route for %s: %s", id, sub, describeBus(ev))
				continue
			}
			if w == "filtered" {
				if r.Matched || r.Execution != nil || r.FilteredBy == "" {
					t.Errorf("%s: route %s %+v, want filtered", id, sub, r)
				}
				continue
			}
			x := r.Execution
			if !r.Matched || x == nil || string(x.Status) != w {
				t.Errorf("%s: route %s: %s, want %s", id, sub, describeBus(ev), w)
				continue
			}
			counts[sub+" "+w]++
			var mine []*herald.Attempt
			for _, a := range as {
				if a.Execution == x.ID {
					mine = append(mine, a)
				}
			}
			// Exactly one record per execution: the one that ended it.
			if len(mine) != 1 || mine[0].Subscription != sub || mine[0].Number != x.Attempts {
				var recs []string
				for _, a := range mine {
					recs = append(recs, fmt.Sprintf("{#%d %s ok=%v %s: %s}", a.Number, a.Subscription, a.Succeeded, a.ErrorKind, a.Error))
				}
				t.Errorf("%s: execution %d (%s, %d attempts started) has records %v, want exactly one, the last", id, x.ID, sub, x.Attempts, recs)
				continue
			}
			a := mine[0]
			if a.Number > 1 {
				takenOver++
			}
			if w == "succeeded" {
				if !a.Succeeded || string(a.Result) != string(x.Result) || len(x.Result) == 0 {
					t.Errorf("%s: %s succeeded with record %+v (result %s)", id, sub, a, x.Result)
				}
				continue
			}
			if a.Succeeded || a.ErrorKind != herald.ErrorPermanent {
				t.Errorf("%s: %s dead-lettered with record %+v", id, sub, a)
			}
			dl, err := b.client.DeadLetterByID(ctx, x.DeadLetter)
			if err != nil || dl.EventID != id || dl.Subscription != sub || dl.ErrorKind != herald.ErrorPermanent {
				t.Errorf("%s: %s dead letter %d: %+v %v", id, sub, x.DeadLetter, dl, err)
			}
		}
		executions := 0
		for _, w := range want {
			if w != "filtered" {
				executions++
			}
		}
		if len(as) != executions {
			t.Errorf("%s: %d attempt records for routes %v", id, len(as), want)
		}
		// The handler ran for every event it handles; more than once only
		// when the kill interrupted it (once in each worker).
		runs := handlerRuns[id]
		if sub := handlerSubOf(i); sub == "" || want[sub] == "filtered" {
			if len(runs) != 0 {
				t.Errorf("%s: the handler ran for an event it does not handle: %v", id, runs)
			}
		} else if len(runs) == 0 || len(runs) > 2 || (len(runs) == 2 && !slices.Equal(runs, []string{w1pid, w2pid})) {
			t.Errorf("%s: handler attempts in processes %v (worker 1 %s, worker 2 %s)", id, runs, w1pid, w2pid)
		}
	}
	// The attempts the kill interrupted were taken over by worker 2: a
	// second attempt, recorded once. (On PostgreSQL the server may still
	// commit the end of an attempt whose COMMIT the worker sent just before
	// it died, after the look above: then it ran once and is recorded as
	// attempt 1.)
	interrupted := 0
	for _, id := range inFlight {
		i, _ := strconv.Atoi(strings.TrimPrefix(id, "bc-"))
		x := routeOf(final[id], handlerSubOf(i)).Execution
		switch {
		case x.Attempts == 2 && slices.Equal(handlerRuns[id], []string{w1pid, w2pid}):
			interrupted++
		case x.Attempts == 1 && slices.Equal(handlerRuns[id], []string{w1pid}):
			t.Logf("%s: its attempt's end committed as worker 1 died", id)
		default:
			t.Errorf("%s was running at the kill: now %d attempts, handler ran in %v", id, x.Attempts, handlerRuns[id])
		}
	}
	if interrupted == 0 {
		t.Errorf("none of the handler attempts running at the kill %v was taken over", inFlight)
	}
	// A handler that ran twice did so because its first attempt was not
	// recorded: its record is attempt 2. One that ran only in worker 1
	// was recorded there, as attempt 1.
	rerun := 0
	for i, id := range ids {
		runs, sub := handlerRuns[id], handlerSubOf(i)
		if len(runs) == 0 || sub == "" {
			continue
		}
		x := routeOf(final[id], sub).Execution
		if len(runs) > 1 {
			rerun++
		}
		if (len(runs) == 2 && x.Attempts != 2) || (slices.Equal(runs, []string{w1pid}) && x.Attempts != 1) {
			t.Errorf("%s: handler ran in %v, execution has %d attempts", id, runs, x.Attempts)
		}
	}
	t.Logf("%s: %d events, killed worker 1 after %v with %d published and %d handler attempts in flight %v; "+
		"drained %v after start; fates %v; %d handler attempts ran twice (at-least-once; %d of those in flight at the kill), "+
		"%d executions recorded as attempt 2 (taken over)",
		backend, busCrashEvents, killedAt.Round(time.Millisecond), sentAtKill, len(inFlight), inFlight,
		drained.Round(time.Millisecond), counts, rerun, interrupted, takenOver)
}
