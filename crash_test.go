package herald_test

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"runtime/debug"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/heraldwf/herald"
	"github.com/heraldwf/herald/heraldtype"
	"github.com/heraldwf/herald/history"
	"github.com/heraldwf/herald/internal/testdb"
	"github.com/heraldwf/herald/storage"
)

// The crash test runs the same scenario twice: once with a worker in a
// subprocess that is SIGKILLed mid-run and replaced, once in-process without
// a crash. Every event the parent raises is gated on what the instance's
// history shows, so the history of a clean run is fully determined by the
// workflow code: the crashed run must reproduce it exactly.

const (
	crashWorkflow = "crash.flow"
	crashActivity = "crash.work"
	// crashPhaseTimeout bounds each phase of the test (a phase takes 1-3 s
	// on an idle machine, several times that under -race on a busy one).
	crashPhaseTimeout = 60 * time.Second
)

var (
	// crashInstances: 40 instances, 20 under the race detector (which makes
	// the pure-Go SQLite roughly ten times slower).
	crashInstances = map[bool]int{false: 40, true: 20}[raceEnabled()]
	// Instances with index >= crashLateStart are started (and get their
	// pre-start event) only while no worker runs.
	crashLateStart = crashInstances - 6
	// crashWindow: the "go" event of instance i is raised only once at
	// least i-crashWindow instances have completed. This spreads the
	// completions out, so that when a third of the instances have completed
	// many others are mid-run.
	crashWindow = crashInstances * 3 / 10
)

// raceEnabled reports whether the test binary was built with -race.
func raceEnabled() bool {
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, s := range bi.Settings {
			if s.Key == "-race" {
				return s.Value == "true"
			}
		}
	}
	return false
}

type crashInput struct {
	N   int  `json:"n"`
	CAN bool `json:"can,omitempty"`
	// Carry is the trace of execution 1, handed to execution 2.
	Carry []string `json:"carry,omitempty"`
}

type crashWorkIn struct {
	N    int `json:"n"`
	Step int `json:"step"`
}

func crashInstanceID(i int) string { return fmt.Sprintf("crash-%02d", i) }

func crashEventID(i int, name string) string { return fmt.Sprintf("crash-%02d/%s", i, name) }

func crashPayload(i int, name string) string {
	return fmt.Sprintf("%s#%d", name, (i*31+len(name)*7)%101)
}

func crashUsesCAN(i int) bool { return i%3 == 0 }

// crashExpected is the result instance i must end with: a deterministic
// function of its input and the payloads raised to it.
func crashExpected(i int) []string {
	p := func(name string) string { return name + "=" + crashPayload(i, name) }
	out := []string{
		fmt.Sprintf("w%d.1", i), p("early"), p("go"), p("data"), p("answer"), "timeout", fmt.Sprintf("w%d.2", i),
	}
	if crashUsesCAN(i) {
		out = append(out, p("go2"), p("carry"), fmt.Sprintf("w%d.3", i))
	}
	return append(out, p("fin"))
}

// crashEventNames are the events the parent raises to instance i.
func crashEventNames(i int) []string {
	names := []string{"early", "go", "data", "answer"}
	if crashUsesCAN(i) {
		names = append(names, "go2", "carry")
	}
	return append(names, "fin")
}

// crashFlow: an activity, a durable timer, an event buffered before the
// instance started, a wait answered after it was made, an event buffered
// mid-run, a Select won by a wait (a long timer cancelled), a Select won by
// a timer (a wait withdrawn), a second activity, for some instances a
// ContinueAsNew carrying a buffered event into execution 2, and a last wait.
//
// slowTurn is called, outside replay, in the turn that receives "go": it
// makes that turn take a while, so that the kill can land in the middle of
// a turn (its lease held, nothing committed).
func crashFlow(ctx *herald.Context, in crashInput, slowTurn func(instance string)) ([]string, error) {
	trace := in.Carry
	wait := func(name string) error {
		var s string
		if err := ctx.WaitEvent(name).Get(&s); err != nil {
			return fmt.Errorf("wait %s: %w", name, err)
		}
		trace = append(trace, name+"="+s)
		return nil
	}
	work := func(step int) error {
		var s string
		if err := ctx.CallActivity(crashActivity, crashWorkIn{N: in.N, Step: step}).Get(&s); err != nil {
			return err
		}
		trace = append(trace, s)
		return nil
	}
	if len(in.Carry) == 0 { // execution 1
		if err := work(1); err != nil {
			return nil, err
		}
		if err := ctx.Sleep(time.Duration(5+in.N%4*5) * time.Millisecond); err != nil {
			return nil, err
		}
		for _, name := range []string{"early", "go", "data"} {
			if err := wait(name); err != nil {
				return nil, err
			}
		}
		if !ctx.IsReplaying() {
			slowTurn(ctx.InstanceID())
		}
		answer := ctx.WaitEvent("answer")
		if won := ctx.Select(answer, ctx.Timer(time.Hour)); won != 0 {
			return nil, fmt.Errorf("select answer/1h timer: branch %d won", won)
		}
		var s string
		if err := answer.Get(&s); err != nil {
			return nil, err
		}
		trace = append(trace, "answer="+s)
		if won := ctx.Select(ctx.WaitEvent("never"), ctx.Timer(15*time.Millisecond)); won != 1 {
			return nil, fmt.Errorf("select never/15ms timer: branch %d won", won)
		}
		trace = append(trace, "timeout")
		if err := work(2); err != nil {
			return nil, err
		}
		if in.CAN {
			if err := wait("go2"); err != nil {
				return nil, err
			}
			// "carry" was raised just before "go2" and is still buffered:
			// it must be carried into execution 2.
			return nil, ctx.ContinueAsNew(crashInput{N: in.N, CAN: true, Carry: trace})
		}
	} else {
		if err := wait("carry"); err != nil {
			return nil, err
		}
		if err := work(3); err != nil {
			return nil, err
		}
	}
	if err := wait("fin"); err != nil {
		return nil, err
	}
	return trace, nil
}

// registerCrash registers the crash scenario. Every activity attempt and
// every slow turn is appended to attemptsPath: the test uses it to time the
// kill and to report what ran twice (activities are at-least-once, so it
// asserts nothing about it).
func registerCrash(rt *herald.Runtime, attemptsPath string) {
	logLine := func(format string, args ...any) {
		if f, err := os.OpenFile(attemptsPath, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644); err == nil {
			fmt.Fprintf(f, format+"\n", args...)
			f.Close()
		}
	}
	herald.RegisterWorkflow(rt, crashWorkflow, func(ctx *herald.Context, in crashInput) ([]string, error) {
		return crashFlow(ctx, in, func(instance string) {
			logLine("turn %s %d", instance, os.Getpid())
			time.Sleep(40 * time.Millisecond) // a slow turn, not a wait for a condition
		})
	})
	herald.RegisterActivity(rt, crashActivity, func(ctx context.Context, in crashWorkIn) (string, error) {
		ai, _ := herald.ActivityInfoFrom(ctx)
		logLine("%s %d %d", ai.IdempotencyKey, ai.Attempt, os.Getpid())
		// Simulated work; the second step is slow enough that the kill
		// usually finds attempts running.
		d := time.Duration(2+in.N%3) * time.Millisecond
		if in.Step == 2 {
			d = time.Duration(20+in.N%5*10) * time.Millisecond
		}
		select {
		case <-time.After(d):
		case <-ctx.Done():
			return "", ctx.Err()
		}
		return fmt.Sprintf("w%d.%d", in.N, in.Step), nil
	})
}

func crashRuntimeConfig(logger *slog.Logger) *herald.Config {
	return &herald.Config{
		ClientConfig:    herald.ClientConfig{Logger: logger},
		TurnWorkers:     8,
		ActivityWorkers: 16,
		TurnLease:       time.Second,
		ActivityLease:   time.Second,
		PollInterval:    20 * time.Millisecond,
		DefaultRetry:    herald.RetryPolicy{MaxAttempts: 5, InitialInterval: 20 * time.Millisecond},
	}
}

// crashBackend is where the crash scenario keeps its stores: each run gets a
// fresh database, named by a locator that a worker subprocess can open too.
type crashBackend struct {
	name string
}

// newDB returns the location of a fresh, empty store of the backend (see
// newLocation): a string a worker subprocess opens too.
func (b crashBackend) newDB(t *testing.T) string { return newLocation(t, b.name) }

var (
	crashSQLite   = crashBackend{name: "sqlite"}
	crashPostgres = crashBackend{name: "postgres"}
)

// TestCrashWorkerProcess is the worker subprocess of TestCrashSafetyKillWorker
// and TestCrashSafetyKillWorkerPostgres. It does nothing unless
// HERALD_CRASH_WORKER=1. It runs a Runtime on the store HERALD_CRASH_DB (a
// location: see newLocation), logging attempts to HERALD_CRASH_ATTEMPTS, until
// its stdin closes (then it stops gracefully) or it is killed.
func TestCrashWorkerProcess(t *testing.T) {
	if os.Getenv("HERALD_CRASH_WORKER") != "1" {
		return
	}
	serveWorkerProcess(t, crashRuntimeConfig, func(rt *herald.Runtime) {
		registerCrash(rt, os.Getenv("HERALD_CRASH_ATTEMPTS"))
	})
}

// serveWorkerProcess is the body of a worker subprocess (TestCrashWorkerProcess,
// TestSoakWorkerProcess): it runs a Runtime configured by config, with what
// register adds, on the store HERALD_CRASH_DB, prints "worker ready", and
// runs until its stdin closes (then it stops gracefully) or it is killed.
func serveWorkerProcess(t *testing.T, config func(*slog.Logger) *herald.Config, register func(*herald.Runtime)) {
	loc := os.Getenv("HERALD_CRASH_DB")
	st, err := openStore(context.Background(), loc)
	if err != nil {
		t.Fatalf("worker: open %s: %v", loc, err)
	}
	logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	rt, err := herald.NewRuntime(st, config(logger))
	if err != nil {
		t.Fatal(err)
	}
	register(rt)
	if err := rt.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	fmt.Fprintln(os.Stdout, "worker ready")
	// Block until the parent closes our stdin (or dies); SIGKILL ends us
	// anywhere before that.
	_, _ = io.Copy(io.Discard, os.Stdin)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := rt.Stop(ctx); err != nil {
		t.Errorf("worker: stop: %v", err)
	}
	if err := st.Close(); err != nil {
		t.Errorf("worker: close: %v", err)
	}
}

// workerProcess is a running worker subprocess: the test binary re-executed
// to run one worker test function.
type workerProcess struct {
	cmd      *exec.Cmd
	stdin    io.WriteCloser
	output   *lockedWriter
	exited   chan error    // Wait's result, once
	finished chan struct{} // closed when the process has been waited for
	// onLine, if set before the process starts, sees every stdout line.
	onLine func(line string)
}

func startCrashWorker(t *testing.T, backend crashBackend, loc, attemptsPath string) *workerProcess {
	t.Helper()
	return startWorkerProcess(t, "TestCrashWorkerProcess", nil, "HERALD_CRASH_WORKER=1",
		"HERALD_CRASH_DB="+loc, "HERALD_CRASH_ATTEMPTS="+attemptsPath)
}

// startWorkerProcess re-executes the test binary to run only the test
// function named test, with env added to the environment, and waits until it
// prints "worker ready". onLine, if not nil, sees every line it prints on
// stdout. The process is killed when the test ends, if it still runs.
func startWorkerProcess(t *testing.T, test string, onLine func(string), env ...string) *workerProcess {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^"+test+"$", "-test.count=1", "-test.timeout=5m")
	cmd.Env = append(os.Environ(), env...)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	out := &lockedWriter{}
	cmd.Stderr = out
	if err := cmd.Start(); err != nil {
		t.Fatalf("start worker: %v", err)
	}
	w := &workerProcess{cmd: cmd, stdin: stdin, output: out, exited: make(chan error, 1), finished: make(chan struct{}),
		onLine: onLine}
	ready := make(chan bool, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		signalled := false
		for sc.Scan() {
			line := sc.Text()
			if w.onLine != nil {
				w.onLine(line)
			}
			out.Write([]byte(line + "\n"))
			if !signalled && line == "worker ready" {
				signalled = true
				ready <- true
			}
		}
		if !signalled {
			ready <- false
		}
		err := cmd.Wait()
		close(w.finished)
		w.exited <- err
	}()
	t.Cleanup(func() {
		// A worker still running when the test ends (a failure) is killed.
		select {
		case <-w.finished:
		default:
			_ = cmd.Process.Kill()
			<-w.finished
		}
	})
	select {
	case ok := <-ready:
		if !ok {
			<-w.finished
			t.Fatalf("worker failed to start; output:\n%s", w.output)
		}
	case <-time.After(60 * time.Second):
		t.Fatalf("worker did not start; output:\n%s", w.output)
	}
	return w
}

func (w *workerProcess) kill(t *testing.T) {
	t.Helper()
	if err := w.cmd.Process.Signal(os.Kill); err != nil {
		t.Fatalf("kill worker: %v", err)
	}
	err := <-w.exited
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != -1 {
		t.Fatalf("worker should have died of SIGKILL, got %v; output:\n%s", err, w.output)
	}
}

// problems returns the WARN and ERROR lines the worker logged (storage
// errors such as SQLITE_BUSY across processes would show here), and the race
// detector's reports (a killed worker has no exit status to show them).
func (w *workerProcess) problems() []string {
	var out []string
	for _, line := range strings.Split(w.output.String(), "\n") {
		if strings.Contains(line, "level=WARN") || strings.Contains(line, "level=ERROR") || strings.Contains(line, "DATA RACE") {
			out = append(out, line)
		}
	}
	return out
}

func (w *workerProcess) stop(t *testing.T) {
	t.Helper()
	w.stdin.Close()
	select {
	case err := <-w.exited:
		if err != nil {
			t.Errorf("worker exited with %v; output:\n%s", err, w.output)
		}
	case <-time.After(30 * time.Second):
		t.Errorf("worker did not stop; output:\n%s", w.output)
	}
}

// lockedWriter serialises writes from the exec copier and the stdout reader,
// and reads of the output.
type lockedWriter struct {
	mu sync.Mutex
	w  bytes.Buffer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

func (l *lockedWriter) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.String()
}

// crashDriver raises the scenario's events, each only once the history of its
// instance shows the workflow is at the point where the event belongs.
type crashDriver struct {
	t      *testing.T
	ctx    context.Context
	st     storage.Store
	c      *herald.Client
	raised map[string]bool // event ids
	done   map[int]bool
	// What the last look at each instance saw: its version (to re-read
	// the history only after it changed) and its open waits.
	seen   map[int]string
	waits  map[int][]string
	passes int
	// holdFrom: instances from this index on do not get their "go" event
	// (they stay mid-run) until it is raised.
	holdFrom int
}

func newCrashDriver(t *testing.T, ctx context.Context, st storage.Store) *crashDriver {
	return &crashDriver{t: t, ctx: ctx, st: st, c: mustClient(st, herald.DefaultTenant, nil), raised: map[string]bool{},
		done: map[int]bool{}, seen: map[int]string{}, waits: map[int][]string{}, holdFrom: crashInstances}
}

func (d *crashDriver) raise(i int, name string) {
	d.t.Helper()
	if err := d.raiseAll(map[int][]string{i: {name}}); err != nil {
		d.t.Fatal(err)
	}
}

// raiseAll raises, for each instance, its events in the order given (one
// goroutine per instance, so that the raises share group commits). Events
// already raised are skipped.
func (d *crashDriver) raiseAll(byInstance map[int][]string) error {
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		errs []error
	)
	pending := map[int][]string{}
	for i, names := range byInstance {
		for _, name := range names {
			if !d.raised[crashEventID(i, name)] {
				pending[i] = append(pending[i], name)
			}
		}
	}
	for i, todo := range pending {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for _, name := range todo {
				id := crashEventID(i, name)
				rec, err := d.c.RaiseEvent(d.ctx, crashInstanceID(i), name, crashPayload(i, name), herald.WithEventID(id))
				if err == nil && rec.Duplicate {
					err = errors.New("unexpectedly a duplicate")
				}
				mu.Lock()
				if err != nil {
					errs = append(errs, fmt.Errorf("raise %s: %w", id, err))
				} else {
					d.raised[id] = true
				}
				mu.Unlock()
				if err != nil {
					return
				}
			}
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}

// start raises instance i's pre-start event, then starts it.
func (d *crashDriver) start(i int) {
	d.t.Helper()
	d.raise(i, "early")
	_, err := d.c.StartWorkflow(d.ctx, crashWorkflow, crashInput{N: i, CAN: crashUsesCAN(i)},
		herald.WithInstanceID(crashInstanceID(i)))
	if err != nil {
		d.t.Fatalf("start %d: %v", i, err)
	}
}

// refresh marks the instances that have ended and returns the others, by
// index.
func (d *crashDriver) refresh() map[int]*storage.Instance {
	d.t.Helper()
	insts, _, err := d.st.InstanceList(d.ctx, &storage.InstanceListParams{Tenant: herald.DefaultTenant,
		Workflow: crashWorkflow, Limit: 1000})
	if err != nil {
		d.t.Fatalf("list instances: %v", err)
	}
	running := map[int]*storage.Instance{}
	for _, in := range insts {
		var i int
		if _, err := fmt.Sscanf(in.ID, "crash-%d", &i); err != nil {
			d.t.Fatalf("unexpected instance %q", in.ID)
		}
		if in.Status.Terminal() {
			d.done[i] = true
		} else {
			running[i] = in
		}
	}
	return running
}

// busy returns the unfinished instances not known to wait for an event (an
// instance waiting for an event has no activity pending: the workflow waits
// for each activity before it goes on).
func (d *crashDriver) busy() []int {
	var out []int
	for i := range crashInstances {
		if _, seen := d.seen[i]; seen && !d.done[i] && len(d.waits[i]) == 0 {
			out = append(out, i)
		}
	}
	return out
}

// unfinished returns the started instances not known to have ended.
func (d *crashDriver) unfinished() []int {
	var out []int
	for i := range crashInstances {
		if _, seen := d.seen[i]; seen && !d.done[i] {
			out = append(out, i)
		}
	}
	return out
}

// pass looks at every unfinished instance once and raises what its history
// asks for. It returns the number of events raised.
func (d *crashDriver) pass() int {
	d.t.Helper()
	before := len(d.raised)
	d.passes++
	todo := map[int][]string{}
	for i, in := range d.refresh() {
		version := fmt.Sprintf("%s/%d/%d", in.Status, in.Execution, in.UpdatedAt.UnixNano())
		// Re-read a history when the instance changed, and every so often
		// regardless (cheap insurance should a change not bump the version).
		if version != d.seen[i] || d.passes%25 == 0 {
			evs, err := d.c.History(d.ctx, crashInstanceID(i), 0)
			if err != nil {
				d.t.Fatalf("history: %v", err)
			}
			d.seen[i], d.waits[i] = version, openWaitNames(evs)
			for _, name := range d.waits[i] {
				switch name {
				case "go", "answer", "fin", "go2", "never":
				default:
					// early, data and carry are buffered before their
					// wait is made: an open wait for them means one was
					// lost.
					d.t.Fatalf("instance %d waits for %q, which should have been buffered; history:\n%s",
						i, name, formatHistory(evs))
				}
			}
		}
		for _, name := range d.waits[i] {
			switch name {
			case "go":
				if len(d.done) >= i-crashWindow && i < d.holdFrom {
					// "data" first: it is buffered (no wait for it yet)
					// and consumed by the wait after "go".
					todo[i] = append(todo[i], "data", "go")
				}
			case "answer", "fin":
				todo[i] = append(todo[i], name)
			case "go2":
				todo[i] = append(todo[i], "carry", "go2")
			}
		}
	}
	if err := d.raiseAll(todo); err != nil {
		d.t.Fatal(err)
	}
	return len(d.raised) - before
}

// until runs driver passes until cond holds; after timeout it fails the
// test, showing the histories of (some of) the unfinished instances.
func (d *crashDriver) until(what string, started int, timeout time.Duration, cond func() bool) {
	d.t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		d.pass()
		if cond() {
			return
		}
		if time.Now().After(deadline) {
			var b strings.Builder
			shown := 0
			for i := range started {
				if d.done[i] || shown == 3 {
					continue
				}
				shown++
				evs, err := d.c.History(d.ctx, crashInstanceID(i), 0)
				fmt.Fprintf(&b, "%s (%v):\n%s", crashInstanceID(i), err, formatHistory(evs))
			}
			d.t.Fatalf("timed out after %v waiting for %s (%d/%d instances done); unfinished:\n%s",
				timeout, what, len(d.done), started, b.String())
		}
		select {
		case <-d.ctx.Done():
			d.t.Fatalf("waiting for %s: %v", what, d.ctx.Err())
		case <-time.After(5 * time.Millisecond):
		}
	}
}

// crashStep is one history event as compared between runs.
type crashStep struct {
	Execution  int
	Kind       history.Kind
	Name       string
	EventID    string
	TaskSeq    int
	WaitNumber int
}

func (s crashStep) String() string {
	return fmt.Sprintf("e%d %s %q id=%q task=%d wait=%d", s.Execution, s.Kind, s.Name, s.EventID, s.TaskSeq, s.WaitNumber)
}

// crashHistories reads every execution of instance i and checks the
// invariants that hold for any run: contiguous unique seqs, each scheduled
// activity completed exactly once, each event id delivered exactly once.
func crashHistories(t *testing.T, ctx context.Context, c *herald.Client, i int) []crashStep {
	t.Helper()
	id := crashInstanceID(i)
	info, err := c.Status(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	var steps []crashStep
	delivered := map[string]int{}
	for e := 1; e <= info.Execution; e++ {
		evs, err := c.History(ctx, id, e)
		if err != nil {
			t.Fatalf("history of %s execution %d: %v", id, e, err)
		}
		scheduled := map[int]int{} // ActivityScheduled seq → results
		for k, ev := range evs {
			if ev.Seq != k+1 {
				t.Errorf("%s execution %d: event %d has seq %d (duplicate or gap); history:\n%s", id, e, k, ev.Seq, formatHistory(evs))
			}
			switch ev.Kind {
			case history.ActivityScheduled:
				scheduled[ev.Seq] = 0
			case history.ActivityCompleted, history.ActivityFailed:
				if _, ok := scheduled[ev.TaskSeq]; !ok {
					t.Errorf("%s execution %d: %s seq %d for unknown activity seq %d", id, e, ev.Kind, ev.Seq, ev.TaskSeq)
				}
				scheduled[ev.TaskSeq]++
				if ev.Kind == history.ActivityFailed {
					t.Errorf("%s execution %d: activity failed: %v", id, e, ev.Failure)
				}
			case history.EventRaised:
				if ev.TaskSeq > 0 {
					delivered[ev.EventID]++
				}
			case history.EventSubscribed:
				if ev.EventID != "" {
					delivered[ev.EventID]++
				}
			case history.EventDropped:
				t.Errorf("%s execution %d: event %s dropped (%s)", id, e, ev.EventID, ev.Reason)
			}
			steps = append(steps, crashStep{Execution: e, Kind: ev.Kind, Name: ev.Name, EventID: ev.EventID,
				TaskSeq: ev.TaskSeq, WaitNumber: ev.WaitNumber})
		}
		for seq, n := range scheduled {
			if n != 1 {
				t.Errorf("%s execution %d: activity scheduled at seq %d has %d results in history, want 1", id, e, seq, n)
			}
		}
	}
	for _, name := range crashEventNames(i) {
		if n := delivered[crashEventID(i, name)]; n != 1 {
			t.Errorf("%s: event %s delivered %d times in history, want exactly 1", id, crashEventID(i, name), n)
		}
	}
	if len(delivered) != len(crashEventNames(i)) {
		t.Errorf("%s: deliveries %v, want exactly the raised events %v", id, delivered, crashEventNames(i))
	}
	return steps
}

// crashCheckOutcome checks instance i completed with its expected result and
// every event raised to it is delivered (once, in the ledger).
func crashCheckOutcome(t *testing.T, ctx context.Context, c *herald.Client, i int) {
	t.Helper()
	id := crashInstanceID(i)
	info, err := c.Status(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	if err := info.Result(&got); err != nil {
		t.Errorf("%s: %s: %v", id, info.Status, err)
		return
	}
	if want := crashExpected(i); !reflect.DeepEqual(got, want) {
		t.Errorf("%s result\n got  %q\n want %q", id, got, want)
	}
	if wantExec := map[bool]int{true: 2, false: 1}[crashUsesCAN(i)]; info.Execution != wantExec {
		t.Errorf("%s ended in execution %d, want %d", id, info.Execution, wantExec)
	}
	recs, err := c.Events(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, r := range recs {
		seen[r.EventID] = true
		if r.Fate != history.FateDelivered {
			t.Errorf("%s: event %s has fate %s/%s, want delivered", id, r.EventID, r.Fate, r.Reason)
		}
	}
	for _, name := range crashEventNames(i) {
		if !seen[crashEventID(i, name)] {
			t.Errorf("%s: event %s missing from the ledger", id, crashEventID(i, name))
		}
	}
	if len(recs) != len(crashEventNames(i)) {
		t.Errorf("%s: ledger has %d events, want %d", id, len(recs), len(crashEventNames(i)))
	}
}

// crashContext bounds the whole test by its deadline (go test -timeout).
func crashContext(t *testing.T) context.Context {
	ctx, cancel := context.WithCancel(context.Background())
	if dl, ok := t.Deadline(); ok {
		ctx, cancel = context.WithDeadline(context.Background(), dl.Add(-5*time.Second))
	}
	t.Cleanup(cancel)
	return ctx
}

// cleanCrashRun runs the scenario in-process, without a crash, and returns
// every instance's steps.
func cleanCrashRun(t *testing.T, ctx context.Context, backend crashBackend) map[int][]crashStep {
	t.Helper()
	dir := t.TempDir()
	st, err := openStore(ctx, backend.newDB(t))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	logs := &logRecorder{}
	rt, err := herald.NewRuntime(st, crashRuntimeConfig(slog.New(logs)))
	if err != nil {
		t.Fatal(err)
	}
	registerCrash(rt, filepath.Join(dir, "attempts.log"))
	if err := rt.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer rt.Stop(context.Background())
	d := newCrashDriver(t, ctx, st)
	for i := range crashInstances {
		d.start(i)
	}
	d.until("clean run", crashInstances, crashPhaseTimeout, func() bool { return len(d.done) == crashInstances })
	if w := logs.warnings(); len(w) > 0 {
		t.Errorf("clean run logged problems:\n%s", strings.Join(w, "\n"))
	}
	out := map[int][]crashStep{}
	for i := range crashInstances {
		crashCheckOutcome(t, ctx, d.c, i)
		out[i] = crashHistories(t, ctx, d.c, i)
	}
	return out
}

// TestCrashSafetyKillWorker SIGKILLs a worker process in the middle of a run
// of 40 instances on a SQLite file, raises events while no worker runs,
// starts a new worker, and checks that every instance completes with the
// result and the history a run without a crash produces: nothing lost,
// nothing duplicated.
func TestCrashSafetyKillWorker(t *testing.T) {
	if testing.Short() {
		t.Skip("spawns worker processes")
	}
	runCrashSafety(t, crashSQLite)
}

// TestCrashSafetyKillWorkerPostgres is TestCrashSafetyKillWorker on
// PostgreSQL: the workers and the clean run each use a fresh schema on the
// server named by HERALD_TEST_POSTGRES_URL (skipped when it is not set).
func TestCrashSafetyKillWorkerPostgres(t *testing.T) {
	testdb.PostgresURL(t)
	if testing.Short() {
		t.Skip("spawns worker processes")
	}
	runCrashSafety(t, crashPostgres)
}

func runCrashSafety(t *testing.T, backend crashBackend) {
	ctx := crashContext(t)
	began := time.Now()
	clean := cleanCrashRun(t, ctx, backend)
	if t.Failed() {
		t.FailNow()
	}
	t.Logf("clean run on %s: %v", backend.name, time.Since(began).Round(time.Millisecond))

	dir := t.TempDir()
	loc := backend.newDB(t)
	st, err := openStore(ctx, loc)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	d := newCrashDriver(t, ctx, st)
	c := d.c

	began = time.Now()
	attemptsPath := filepath.Join(dir, "attempts.log")
	w1 := startCrashWorker(t, backend, loc, attemptsPath)
	for i := range crashLateStart {
		d.start(i)
	}
	// Kill once a third of the instances have completed, an activity
	// attempt is running (started, its result not in history) and a slow
	// turn is running (started, not committed); the last
	// two instances started are held mid-run, so there is always something
	// left to do.
	d.holdFrom = crashLateStart - 2
	d.until("a third of the instances to complete with an activity running", crashLateStart, crashPhaseTimeout, func() bool {
		if len(d.done) < crashInstances/3 {
			return false
		}
		if len(d.done) >= d.holdFrom {
			return true // nothing left running but the held instances
		}
		return len(runningTurns(t, ctx, c, attemptsPath, d.unfinished())) > 0 &&
			len(runningActivities(t, ctx, c, attemptsPath, d.busy())) > 0
	})
	w1.kill(t)
	inFlight := runningActivities(t, ctx, c, attemptsPath, d.busy())
	inTurn := runningTurns(t, ctx, c, attemptsPath, d.unfinished())
	killedAfter := time.Since(began)

	// The worker is dead: look at what it left behind.
	progressed, waiting := 0, 0
	for i := range crashLateStart {
		info, err := c.Status(ctx, crashInstanceID(i))
		if err != nil {
			t.Fatal(err)
		}
		evs, err := c.History(ctx, crashInstanceID(i), 0)
		if err != nil {
			t.Fatal(err)
		}
		if !info.Status.Terminal() && (len(evs) > 1 || info.Execution > 1) {
			progressed++
		}
		if len(openWaitNames(evs)) > 0 {
			waiting++
		}
	}
	d.refresh()
	doneAtKill := len(d.done)
	if doneAtKill >= crashInstances || progressed == 0 {
		t.Fatalf("the kill did not land mid-run: %d done, %d in progress", doneAtKill, progressed)
	}

	// Raise events while no worker runs: pre-start events and starts of the
	// last instances, and whatever the stopped instances are waiting for.
	raisedDown := 0
	for i := crashLateStart; i < crashInstances; i++ {
		d.start(i)
		raisedDown++
	}
	raisedDown += d.pass()
	d.refresh()
	if n := len(d.done); n != doneAtKill {
		t.Fatalf("%d instances completed while no worker ran (was %d)", n, doneAtKill)
	}

	d.holdFrom = crashInstances
	raisedDown += d.pass()
	w2 := startCrashWorker(t, backend, loc, attemptsPath)
	d.until("every instance to complete after the restart", crashInstances, crashPhaseTimeout, func() bool { return len(d.done) == crashInstances })
	w2.stop(t)
	for k, w := range []*workerProcess{w1, w2} {
		if p := w.problems(); len(p) > 0 {
			t.Errorf("worker %d logged problems:\n%s", k+1, strings.Join(p, "\n"))
		}
	}
	t.Logf("crash run on %s: killed worker 1 after %v with %d/%d instances done, %d in progress (%d waiting for an event, "+
		"activity attempts %v started, no result in history, turns of %v started, not committed); "+
		"%d events raised with no worker; all done %v after start",
		backend.name, killedAfter.Round(time.Millisecond), doneAtKill, crashLateStart, progressed, waiting, inFlight, inTurn, raisedDown,
		time.Since(began).Round(time.Millisecond))

	for i := range crashInstances {
		crashCheckOutcome(t, ctx, c, i)
		got := crashHistories(t, ctx, c, i)
		if !reflect.DeepEqual(got, clean[i]) {
			t.Errorf("%s: history differs from the clean run:\n%s", crashInstanceID(i), diffSteps(got, clean[i]))
		}
	}
	// Nothing pending or buffered anywhere in the ledger.
	all, err := st.EventList(ctx, &storage.EventListParams{Tenant: herald.DefaultTenant})
	if err != nil {
		t.Fatal(err)
	}
	if len(all) != len(d.raised) {
		t.Errorf("ledger has %d events, the test raised %d", len(all), len(d.raised))
	}
	for _, r := range all {
		if r.Fate != history.FateDelivered {
			t.Errorf("event %s: fate %s/%s, want delivered", r.EventID, r.Fate, r.Reason)
		}
	}
	reportAttempts(t, attemptsPath)
}

// runningTurns returns the instances whose slow turn has started (per the
// attempts log) but not committed (its history does not go past it yet).
func runningTurns(t *testing.T, ctx context.Context, c *herald.Client, attemptsPath string, instances []int) []string {
	t.Helper()
	data, err := os.ReadFile(attemptsPath)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		t.Fatal(err)
	}
	started := map[string]bool{}
	for _, line := range strings.Split(string(data), "\n") {
		if f := strings.Fields(line); len(f) == 3 && f[0] == "turn" {
			started[f[1]] = true
		}
	}
	var running []string
	for _, i := range instances {
		id := crashInstanceID(i)
		if !started[id] {
			continue
		}
		evs, err := c.History(ctx, id, 0)
		if err != nil {
			t.Fatal(err)
		}
		if evs[0].Execution == 1 && findEvent(evs, history.EventSubscribed, "answer") == nil {
			running = append(running, id)
		}
	}
	return running
}

// runningActivities returns the idempotency keys of activity attempts that
// have started (per the attempts log) and whose result is not in history.
func runningActivities(t *testing.T, ctx context.Context, c *herald.Client, attemptsPath string, instances []int) []string {
	t.Helper()
	data, err := os.ReadFile(attemptsPath)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		t.Fatal(err)
	}
	started := map[string]bool{}
	for _, line := range strings.Split(string(data), "\n") {
		if f := strings.Fields(line); len(f) == 3 && f[0] != "turn" {
			started[f[0]] = true
		}
	}
	var running []string
	for _, i := range instances {
		evs, err := c.History(ctx, crashInstanceID(i), 0)
		if err != nil {
			t.Fatal(err)
		}
		pending := map[int]bool{}
		for _, ev := range evs {
			switch ev.Kind {
			case history.ActivityScheduled:
				pending[ev.Seq] = true
			case history.ActivityCompleted, history.ActivityFailed:
				delete(pending, ev.TaskSeq)
			}
		}
		for seq := range pending {
			key := fmt.Sprintf("%s/%d/%d", crashInstanceID(i), evs[0].Execution, seq)
			if started[key] {
				running = append(running, key)
			}
		}
	}
	slices.Sort(running)
	return running
}

// reportAttempts logs how many activity attempts and slow turns ran more than
// once (the crash makes some run again; that is allowed: activities are
// at-least-once, and a turn that did not commit is redone).
func reportAttempts(t *testing.T, path string) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Logf("attempts log: %v", err)
		return
	}
	runs, turns := map[string]int{}, map[string]int{}
	numbers := map[string][]string{} // attempt numbers reported per activity
	pids := map[string]bool{}
	attempts := 0
	for _, line := range strings.Split(string(data), "\n") {
		f := strings.Fields(line)
		switch {
		case len(f) == 3 && f[0] == "turn":
			turns[f[1]]++
		case len(f) == 3:
			runs[f[0]]++
			numbers[f[0]] = append(numbers[f[0]], f[1])
			attempts++
			pids[f[2]] = true
		}
	}
	again := func(m map[string]int) int {
		n := 0
		for _, v := range m {
			if v > 1 {
				n++
			}
		}
		return n
	}
	var rerun []string
	for key, n := range numbers {
		if len(n) > 1 {
			rerun = append(rerun, key+" attempts "+strings.Join(n, ","))
		}
	}
	slices.Sort(rerun)
	t.Logf("activities: %d scheduled, %d attempts in %d worker processes, %d ran more than once %q; "+
		"slow turns: %d, %d ran more than once", len(runs), attempts, len(pids), again(runs), rerun, len(turns), again(turns))
}

func diffSteps(got, want []crashStep) string {
	var b strings.Builder
	for k := 0; k < max(len(got), len(want)); k++ {
		var g, w string
		if k < len(got) {
			g = got[k].String()
		}
		if k < len(want) {
			w = want[k].String()
		}
		mark := "  "
		if g != w {
			mark = "≠ "
		}
		fmt.Fprintf(&b, "%s#%-3d got  %-60s want %s\n", mark, k+1, g, w)
	}
	return b.String()
}

// TestLeaseFencingStaleTurn: a worker whose turn lease ran out and whose
// instance was claimed by another worker cannot commit: its commit fails with
// ErrLeaseLost and writes nothing, while the new owner commits.
func TestLeaseFencingStaleTurn(t *testing.T) {
	t.Parallel()
	st := testStore(t)
	ctx := context.Background()
	const tenant, id = "default", "fenced"
	t0 := time.Now().UTC().Truncate(time.Millisecond)
	if _, err := st.InstanceCreate(ctx, &storage.InstanceCreateParams{Tenant: tenant, ID: id, Workflow: "w",
		Input: []byte(`{}`), Now: t0}); err != nil {
		t.Fatal(err)
	}
	claim := func(at time.Time) []*storage.Turn {
		t.Helper()
		turns, err := st.TurnClaim(ctx, &storage.TurnClaimParams{Tenant: tenant, Now: at, Lease: time.Second, Max: 10})
		if err != nil {
			t.Fatal(err)
		}
		return turns
	}
	turns := claim(t0)
	if len(turns) != 1 {
		t.Fatalf("first claim: %d turns, want 1", len(turns))
	}
	stale := turns[0]
	if len(stale.Messages) != 1 || stale.Messages[0].Kind != storage.MsgKick {
		t.Fatalf("first claim messages: %+v", stale.Messages)
	}
	if n := len(claim(t0.Add(500 * time.Millisecond))); n != 0 {
		t.Fatalf("claim during a live lease returned %d turns", n)
	}
	turns = claim(t0.Add(2 * time.Second)) // the first lease has expired
	if len(turns) != 1 {
		t.Fatalf("claim after the lease expired: %d turns, want 1", len(turns))
	}
	fresh := turns[0]
	if fresh.LockToken == stale.LockToken {
		t.Fatal("the second claim reused the first lock token")
	}
	if len(fresh.Messages) != 1 || fresh.Messages[0].ID != stale.Messages[0].ID {
		t.Fatalf("second claim messages: %+v", fresh.Messages)
	}
	histBefore, err := st.HistoryList(ctx, &storage.HistoryListParams{Tenant: tenant, InstanceID: id})
	if err != nil {
		t.Fatal(err)
	}

	// The stale worker's turn: it would schedule an activity, consume the
	// kick and complete the instance.
	staleCommit := &storage.TurnCommitParams{
		Tenant: tenant, InstanceID: id, LockToken: stale.LockToken, Execution: 1, Now: t0.Add(2100 * time.Millisecond),
		NewEvents: []history.Event{
			{Seq: 2, Time: t0, Kind: history.ActivityScheduled, Name: "stale"},
			{Seq: 3, Time: t0, Kind: history.ExecutionCompleted, Result: []byte(`"stale"`)},
		},
		ConsumedMessages: []int64{stale.Messages[0].ID},
		Activities:       []storage.ActivityTask{{TaskSeq: 2, Name: "stale", Input: []byte(`null`), Attempt: 1}},
		Status:           heraldtype.StatusCompleted,
		Output:           []byte(`"stale"`),
	}
	if _, err := st.TurnCommit(ctx, staleCommit); !errors.Is(err, heraldtype.ErrLeaseLost) {
		t.Fatalf("stale commit: %v, want ErrLeaseLost", err)
	}
	histAfter, err := st.HistoryList(ctx, &storage.HistoryListParams{Tenant: tenant, InstanceID: id})
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(histAfter, histBefore) {
		t.Fatalf("stale commit changed history:\n%s", formatHistory(histAfter))
	}
	inst, err := st.InstanceGet(ctx, &storage.InstanceGetParams{Tenant: tenant, ID: id})
	if err != nil {
		t.Fatal(err)
	}
	if inst.Status.Terminal() || len(inst.Output) > 0 {
		t.Fatalf("stale commit changed the instance: status %s, output %s", inst.Status, inst.Output)
	}
	if tasks, err := st.ActivityClaim(ctx, &storage.ActivityClaimParams{Tenant: tenant, Now: t0.Add(time.Hour), Max: 10}); err != nil || len(tasks) != 0 {
		t.Fatalf("stale commit scheduled activities: %d, %v", len(tasks), err)
	}

	// The new owner commits its own turn.
	if _, err := st.TurnCommit(ctx, &storage.TurnCommitParams{
		Tenant: tenant, InstanceID: id, LockToken: fresh.LockToken, Execution: 1, Now: t0.Add(2200 * time.Millisecond),
		NewEvents: []history.Event{{Seq: 2, Time: t0.Add(2200 * time.Millisecond), Kind: history.TimerCreated,
			FireAt: t0.Add(time.Hour)}},
		ConsumedMessages: []int64{fresh.Messages[0].ID},
		Timers:           []storage.TimerSchedule{{TaskSeq: 2, FireAt: t0.Add(time.Hour)}},
		Status:           heraldtype.StatusRunning,
	}); err != nil {
		t.Fatalf("fresh commit: %v", err)
	}
	hist, err := st.HistoryList(ctx, &storage.HistoryListParams{Tenant: tenant, InstanceID: id})
	if err != nil {
		t.Fatal(err)
	}
	if len(hist) != 2 || hist[1].Kind != history.TimerCreated {
		t.Fatalf("history after the fresh commit:\n%s", formatHistory(hist))
	}
	// Neither token owns the instance any more: both are fenced off.
	for name, tok := range map[string]string{"stale": stale.LockToken, "fresh": fresh.LockToken} {
		p := *staleCommit
		p.LockToken = tok
		p.NewEvents = []history.Event{{Seq: 3, Time: t0, Kind: history.ExecutionCompleted}}
		p.Activities = nil
		if _, err := st.TurnCommit(ctx, &p); !errors.Is(err, heraldtype.ErrLeaseLost) {
			t.Errorf("%s token after the fresh commit: %v, want ErrLeaseLost", name, err)
		}
	}
	if hist2, _ := st.HistoryList(ctx, &storage.HistoryListParams{Tenant: tenant, InstanceID: id}); len(hist2) != 2 {
		t.Fatalf("history changed by a fenced commit:\n%s", formatHistory(hist2))
	}
	inst, err = st.InstanceGet(ctx, &storage.InstanceGetParams{Tenant: tenant, ID: id})
	if err != nil {
		t.Fatal(err)
	}
	if inst.Status != heraldtype.StatusRunning {
		t.Fatalf("instance status %s, want running", inst.Status)
	}
}
