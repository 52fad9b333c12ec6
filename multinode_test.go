package herald_test

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/heraldwf/herald"
	"github.com/heraldwf/herald/heraldtype"
	"github.com/heraldwf/herald/history"
	"github.com/heraldwf/herald/internal/testdb"
	"github.com/heraldwf/herald/storage"
	"github.com/heraldwf/herald/storage/postgres"
)

// The many-node test: three worker processes share one PostgreSQL schema and
// run 1,000 instances (300 under the race detector) started by the test
// process, which is only a client. Mid-run worker 1 is SIGKILLed and, a
// little later, worker 2 is stopped gracefully (SIGTERM); worker 3 alone
// finishes everything, including the work worker 1's expired leases leave
// behind. Nothing may be lost or duplicated: every instance completes with
// the result its payloads determine, every event is delivered exactly once,
// every history is a consistent sequence.

const (
	mnWorkflow = "mn.flow"
	mnActivity = "mn.work"
	mnWorkers  = 3
)

// mnInstances: 1,000 instances; 300 under the race detector, which makes the
// test binary (workers included) several times slower.
var mnInstances = map[bool]int{false: 1000, true: 300}[raceEnabled()]

type mnInput struct {
	N int `json:"n"`
}

func mnID(i int) string { return fmt.Sprintf("mn-%04d", i) }

func mnEventID(i int, name string) string { return mnID(i) + "/" + name }

func mnPayload(i int, name string) string {
	return fmt.Sprintf("%s:%d", name, (i*131+len(name)*17)%1009)
}

func mnActivityResult(n int) string { return fmt.Sprintf("a%d", n*37%101) }

// mnExpected is the result of instance i: a function of its input, its
// activity's result and the payloads sent to it.
func mnExpected(i int) string {
	return fmt.Sprintf("%d|%s|%s|%s|%s", i, mnActivityResult(i), mnPayload(i, "go"), mnPayload(i, "ready"),
		mnPayload(i, "mail"))
}

// When the parent sends instance i its queue-lane message.
type mnMailWhen int

const (
	mailBeforeStart mnMailWhen = iota // kept for the instance id, delivered at start
	mailAfterStart                    // right after StartWorkflow, racing the instance
	mailWithGo                        // just before "go": buffered before its Dequeue
	mailAfterWait                     // once the instance's Dequeue is open
)

func mnMail(i int) mnMailWhen { return mnMailWhen(i % 4) }

func (m mnMailWhen) String() string {
	return [...]string{"before start", "after start", "with go", "after its wait"}[m]
}

// mnFlow: an activity, a short durable timer, a positional event raised
// after its wait ("go": the parent raises it once it sees the wait), a
// positional event raised before its wait ("ready": raised just before
// "go", so it is buffered), and a queue-lane message ("mail").
func mnFlow(ctx *herald.Context, in mnInput) (string, error) {
	var a, goP, ready, mail string
	if err := ctx.CallActivity(mnActivity, in).Get(&a); err != nil {
		return "", err
	}
	if err := ctx.Sleep(time.Duration(5+in.N%4*5) * time.Millisecond); err != nil {
		return "", err
	}
	if err := ctx.WaitEvent("go").Get(&goP); err != nil {
		return "", fmt.Errorf("wait go: %w", err)
	}
	if err := ctx.WaitEvent("ready").Get(&ready); err != nil {
		return "", fmt.Errorf("wait ready: %w", err)
	}
	if err := ctx.Dequeue("mail").Get(&mail); err != nil {
		return "", fmt.Errorf("dequeue mail: %w", err)
	}
	return fmt.Sprintf("%d|%s|%s|%s|%s", in.N, a, goP, ready, mail), nil
}

// mnDecisions is the sequence of decisions every history must show: a turn
// committed twice would repeat some.
var mnDecisions = []string{
	string(history.ActivityScheduled) + " " + mnActivity,
	string(history.TimerCreated) + " ",
	string(history.EventSubscribed) + " go",
	string(history.EventSubscribed) + " ready",
	string(history.EventSubscribed) + " mail",
	string(history.ExecutionCompleted) + " ",
}

func mnRuntimeConfig(logger *slog.Logger) *herald.Config {
	return &herald.Config{
		ClientConfig:    herald.ClientConfig{Logger: logger},
		TurnWorkers:     8,
		ActivityWorkers: 16,
		// Short leases, so that worker 1's work is taken over within
		// seconds of the kill.
		TurnLease:     3 * time.Second,
		ActivityLease: 3 * time.Second,
		PollInterval:  100 * time.Millisecond,
		DefaultRetry:  herald.RetryPolicy{MaxAttempts: 5, InitialInterval: 50 * time.Millisecond},
	}
}

// registerMultiNode registers the workflow and its activity. Every activity
// attempt writes "start" and "end" lines to log (one write each, with the
// idempotency key, the attempt number, the worker and the time), so the
// parent can tell what ran more than once and what a worker left unfinished.
func registerMultiNode(rt *herald.Runtime, worker string, log io.Writer) {
	var mu sync.Mutex
	logLine := func(what string, ai herald.ActivityInfo) {
		mu.Lock()
		defer mu.Unlock()
		fmt.Fprintf(log, "%s %s %d %s %d\n", what, ai.IdempotencyKey, ai.Attempt, worker, time.Now().UnixNano())
	}
	herald.RegisterWorkflow(rt, mnWorkflow, mnFlow)
	herald.RegisterActivity(rt, mnActivity, func(ctx context.Context, in mnInput) (string, error) {
		ai, _ := herald.ActivityInfoFrom(ctx)
		logLine("start", ai)
		select {
		case <-time.After(time.Duration(40+in.N%5*20) * time.Millisecond): // simulated work
		case <-ctx.Done():
			logLine("cancelled", ai)
			return "", ctx.Err()
		}
		logLine("end", ai)
		return mnActivityResult(in.N), nil
	})
}

// TestMultiNodeWorkerProcess is a worker process of TestMultiNodePostgres. It
// does nothing unless HERALD_MN_WORKER names the worker. It runs a Runtime on
// the store HERALD_MN_DB (a location: see newLocation), logs activity
// attempts to HERALD_MN_ATTEMPTS and prints its counters every 100 ms. On
// SIGTERM (or when its stdin closes: the parent is gone) it stops gracefully
// and exits 0; SIGKILL ends it anywhere.
func TestMultiNodeWorkerProcess(t *testing.T) {
	worker := os.Getenv("HERALD_MN_WORKER")
	if worker == "" {
		t.Skip("a worker process of TestMultiNodePostgres (runs only with HERALD_MN_WORKER set)")
	}
	term := make(chan os.Signal, 1)
	signal.Notify(term, syscall.SIGTERM)
	ctx := context.Background()
	st, err := openStore(ctx, os.Getenv("HERALD_MN_DB"), postgres.WithMaxConns(6))
	if err != nil {
		t.Fatalf("worker %s: open: %v", worker, err)
	}
	defer st.Close()
	attempts, err := os.OpenFile(os.Getenv("HERALD_MN_ATTEMPTS"), os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer attempts.Close()
	logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	obs := newCountingObserver()
	cfg := mnRuntimeConfig(logger)
	cfg.Observer = obs
	rt, err := herald.NewRuntime(st, cfg)
	if err != nil {
		t.Fatal(err)
	}
	registerMultiNode(rt, worker, attempts)
	if err := rt.Start(ctx); err != nil {
		t.Fatal(err)
	}
	var out sync.Mutex
	stats := func(what string) {
		out.Lock()
		defer out.Unlock()
		fmt.Printf("%s turns=%d failed=%d leases_lost=%d activities=%d\n", what,
			obs.turnCount(herald.TurnCommitted, herald.TurnCommitFailed, herald.TurnLeaseLost),
			obs.turnCount(herald.TurnCommitFailed, herald.TurnLeaseLost), obs.turnCount(herald.TurnLeaseLost),
			obs.activityCount())
	}
	fmt.Println("worker ready")
	statsDone := make(chan struct{})
	statsStopped := make(chan struct{})
	go func() {
		defer close(statsStopped)
		tick := time.NewTicker(100 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-statsDone:
				return
			case <-tick.C:
				stats("stats")
			}
		}
	}()
	stdinClosed := make(chan struct{})
	go func() { _, _ = io.Copy(io.Discard, os.Stdin); close(stdinClosed) }()
	select {
	case <-term:
	case <-stdinClosed:
	}
	began := time.Now()
	stopCtx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	if err := rt.Stop(stopCtx); err != nil {
		t.Errorf("worker %s: stop: %v", worker, err)
	}
	close(statsDone)
	<-statsStopped
	stats(fmt.Sprintf("stopped in %v:", time.Since(began).Round(time.Millisecond)))
}

// mnCounters are a worker's counters, as it last printed them.
type mnCounters struct {
	turns, failed, leasesLost, activities int64
	stoppedIn                             string
}

// mnWorker is a worker process and its last counters.
type mnWorker struct {
	name string
	*workerProcess
	mu   sync.Mutex
	last mnCounters
}

func startMultiNodeWorker(t *testing.T, loc, name, attemptsPath string) *mnWorker {
	t.Helper()
	w := &mnWorker{name: name}
	onLine := func(line string) {
		f := strings.Fields(line)
		if len(f) < 5 || (f[0] != "stats" && f[0] != "stopped") {
			return
		}
		var c mnCounters
		for _, kv := range f {
			k, v, ok := strings.Cut(kv, "=")
			n, err := strconv.ParseInt(v, 10, 64)
			if !ok || err != nil {
				continue
			}
			switch k {
			case "turns":
				c.turns = n
			case "failed":
				c.failed = n
			case "leases_lost":
				c.leasesLost = n
			case "activities":
				c.activities = n
			}
		}
		if f[0] == "stopped" {
			c.stoppedIn = strings.TrimSuffix(f[2], ":")
		}
		w.mu.Lock()
		w.last = c
		w.mu.Unlock()
	}
	w.workerProcess = startWorkerProcess(t, "TestMultiNodeWorkerProcess", onLine,
		"HERALD_MN_WORKER="+name, "HERALD_MN_DB="+loc,
		"HERALD_MN_ATTEMPTS="+attemptsPath)
	return w
}

func (w *mnWorker) counters() mnCounters {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.last
}

// terminate sends SIGTERM and waits for the worker to stop gracefully: it
// must exit 0 within the deadline.
func (w *mnWorker) terminate(t *testing.T, deadline time.Duration) time.Duration {
	t.Helper()
	began := time.Now()
	if err := w.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatalf("SIGTERM %s: %v", w.name, err)
	}
	select {
	case err := <-w.exited:
		if err != nil {
			var ee *exec.ExitError
			code := -2
			if errors.As(err, &ee) {
				code = ee.ExitCode()
			}
			t.Errorf("%s did not stop gracefully: exit code %d (%v); output:\n%s", w.name, code, err, w.output)
		}
	case <-time.After(deadline):
		t.Fatalf("%s did not exit within %v of SIGTERM; output:\n%s", w.name, deadline, w.output)
	}
	return time.Since(began)
}

// mnDriver plays the outside world: it starts the instances and sends them
// their events from several goroutines, each event at its point.
type mnDriver struct {
	ctx context.Context
	st  storage.Store
	c   *herald.Client
	n   int

	mu       sync.Mutex
	raised   map[string]bool // event ids
	errs     []error
	inflight map[int]bool // instances a raiser is looking at

	// credits: a starter takes one before it starts an instance; the
	// poller adds one per completion. Starting with mnWindow credits keeps
	// at most mnWindow instances in flight, so that completions spread out
	// and the kill finds instances at every stage.
	credits chan struct{}

	completed atomic.Int64
	started   atomic.Int64
	passes    atomic.Int64
}

// mnWindow is how many instances run at once at most.
func mnWindow(n int) int { return n / 4 }

func (d *mnDriver) fail(err error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.errs = append(d.errs, err)
}

func (d *mnDriver) err() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if len(d.errs) > 10 {
		return errors.Join(append(d.errs[:10:10], fmt.Errorf("... and %d more", len(d.errs)-10))...)
	}
	return errors.Join(d.errs...)
}

// send sends instance i's event name (on the queue lane for "mail"), once.
func (d *mnDriver) send(i int, name string) bool {
	id := mnEventID(i, name)
	d.mu.Lock()
	done := d.raised[id]
	d.mu.Unlock()
	if done {
		return true
	}
	var rec *herald.EventReceipt
	var err error
	if name == "mail" {
		rec, err = d.c.Enqueue(d.ctx, mnID(i), name, mnPayload(i, name), herald.WithEventID(id))
	} else {
		rec, err = d.c.RaiseEvent(d.ctx, mnID(i), name, mnPayload(i, name), herald.WithEventID(id))
	}
	if err == nil && rec.Duplicate {
		err = errors.New("a duplicate, but it was sent once")
	}
	if err != nil {
		if d.ctx.Err() == nil {
			d.fail(fmt.Errorf("send %s: %w", id, err))
		}
		return false
	}
	d.mu.Lock()
	d.raised[id] = true
	d.mu.Unlock()
	return true
}

func (d *mnDriver) sent(i int, name string) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.raised[mnEventID(i, name)]
}

// starter starts the instances it receives, sending the mail of some of them
// before or right after the start.
func (d *mnDriver) starter(todo <-chan int) {
	for i := range todo {
		select {
		case <-d.credits:
		case <-d.ctx.Done():
			return
		}
		if mnMail(i) == mailBeforeStart && !d.send(i, "mail") {
			continue
		}
		if _, err := d.c.StartWorkflow(d.ctx, mnWorkflow, mnInput{N: i}, herald.WithInstanceID(mnID(i))); err != nil {
			if d.ctx.Err() == nil {
				d.fail(fmt.Errorf("start %d: %w", i, err))
			}
			continue
		}
		d.started.Add(1)
		if mnMail(i) == mailAfterStart {
			d.send(i, "mail")
		}
	}
}

// poller watches the instance list and hands every instance that changed
// since a raiser last looked at it (and every instance every 25 passes,
// should a change not show) to the raisers; it counts completions.
func (d *mnDriver) poller(jobs chan<- int) {
	defer close(jobs)
	seen := map[int]string{}
	failed := map[int]bool{}
	lastCompleted := 0
	for d.ctx.Err() == nil {
		pass := d.passes.Add(1)
		insts, _, err := d.st.InstanceList(d.ctx, &storage.InstanceListParams{Tenant: herald.DefaultTenant,
			Workflow: mnWorkflow, Limit: 2 * d.n})
		if err != nil {
			if d.ctx.Err() == nil {
				d.fail(fmt.Errorf("list instances: %w", err))
			}
			return
		}
		completed := 0
		for _, in := range insts {
			var i int
			if _, err := fmt.Sscanf(in.ID, "mn-%d", &i); err != nil {
				d.fail(fmt.Errorf("unexpected instance %q", in.ID))
				return
			}
			if in.Status.Terminal() {
				if in.Status == heraldtype.StatusCompleted {
					completed++
				} else if !failed[i] {
					failed[i] = true
					d.fail(fmt.Errorf("%s ended %s: %v", in.ID, in.Status, in.Failure))
				}
				continue
			}
			version := fmt.Sprintf("%s/%d/%d", in.Status, in.Execution, in.UpdatedAt.UnixNano())
			d.mu.Lock()
			busy := d.inflight[i]
			if !busy && (version != seen[i] || pass%25 == 0) {
				d.inflight[i] = true
				seen[i] = version
				jobs <- i // buffered for every instance: never blocks
			}
			d.mu.Unlock()
		}
		d.completed.Store(int64(completed))
		for ; lastCompleted < completed; lastCompleted++ {
			d.credits <- struct{}{} // buffered for every instance: never blocks
		}
		if completed == d.n {
			return
		}
		select {
		case <-d.ctx.Done():
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// raiser reads the history of each instance it is handed and sends what the
// instance waits for: "ready" (to be buffered), the mail if its turn has
// come, and "go" once the wait for "go" is open; the mail of the last kind
// once the Dequeue is open.
func (d *mnDriver) raiser(jobs <-chan int) {
	for i := range jobs {
		d.look(i)
		d.mu.Lock()
		delete(d.inflight, i)
		d.mu.Unlock()
	}
}

func (d *mnDriver) look(i int) {
	if d.ctx.Err() != nil {
		return
	}
	evs, err := d.c.History(d.ctx, mnID(i), 0)
	if err != nil {
		if d.ctx.Err() == nil {
			d.fail(err)
		}
		return
	}
	for _, name := range openWaitNames(evs) {
		switch {
		case name == "go":
			_ = d.send(i, "ready") && (mnMail(i) != mailWithGo || d.send(i, "mail")) && d.send(i, "go")
		case name == "mail" && mnMail(i) == mailAfterWait:
			d.send(i, "mail")
		case name == "mail" && mnMail(i) == mailAfterStart && !d.sent(i, "mail"):
			// The starter has not sent it yet.
		default:
			// "ready" and the mail of the other kinds were sent before
			// "go": an open wait for them means an event was lost.
			d.fail(fmt.Errorf("%s waits for %q, which it should have had (mail sent %s); history:\n%s",
				mnID(i), name, mnMail(i), formatHistory(evs)))
		}
	}
}

// TestMultiNodePostgres runs 1,000 instances (300 under -race) on three
// worker processes sharing a PostgreSQL schema, SIGKILLs worker 1 once a
// third have completed, SIGTERMs worker 2 once half have, and lets worker 3
// finish alone. See the comment at the top of the file.
func TestMultiNodePostgres(t *testing.T) {
	testdb.PostgresURL(t) // skips, or fails under CI, without a server
	if testing.Short() {
		t.Skip("spawns worker processes")
	}
	ctx := crashContext(t)
	loc := newLocation(t, "postgres")
	st, err := openStore(ctx, loc, postgres.WithMaxConns(12))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	c := mustClient(st, herald.DefaultTenant, nil)
	dir := t.TempDir()
	n := mnInstances

	var workers []*mnWorker
	for k := 1; k <= mnWorkers; k++ {
		name := fmt.Sprintf("worker%d", k)
		workers = append(workers, startMultiNodeWorker(t, loc, name, filepath.Join(dir, name+".log")))
	}
	w1, w2, w3 := workers[0], workers[1], workers[2]

	// The driver: 8 starters, a poller, 8 raisers.
	dctx, stopDriver := context.WithCancel(ctx)
	d := &mnDriver{ctx: dctx, st: st, c: c, n: n, raised: map[string]bool{}, inflight: map[int]bool{},
		credits: make(chan struct{}, n+mnWindow(n))}
	for range mnWindow(n) {
		d.credits <- struct{}{}
	}
	var wg sync.WaitGroup
	todo := make(chan int, n)
	for i := range n {
		todo <- i
	}
	close(todo)
	jobs := make(chan int, n)
	began := time.Now()
	for range 8 {
		wg.Add(2)
		go func() { defer wg.Done(); d.starter(todo) }()
		go func() { defer wg.Done(); d.raiser(jobs) }()
	}
	wg.Add(1)
	go func() { defer wg.Done(); d.poller(jobs) }()
	stopped := false
	stop := func() {
		if !stopped {
			stopped = true
			stopDriver()
			wg.Wait()
		}
	}
	t.Cleanup(stop)

	phaseTimeout := map[bool]time.Duration{false: 2 * time.Minute, true: 4 * time.Minute}[raceEnabled()]
	until := func(what string, cond func() bool) {
		t.Helper()
		deadline := time.Now().Add(phaseTimeout)
		for !cond() {
			if err := d.err(); err != nil {
				t.Fatalf("waiting for %s: %v", what, err)
			}
			if time.Now().After(deadline) {
				t.Fatalf("timed out after %v waiting for %s: %d started, %d completed; some unfinished:\n%s",
					phaseTimeout, what, d.started.Load(), d.completed.Load(), mnUnfinished(ctx, c, n, 3))
			}
			select {
			case <-ctx.Done():
				t.Fatalf("waiting for %s: %v", what, ctx.Err())
			case <-time.After(5 * time.Millisecond):
			}
		}
	}

	// Kill worker 1 once a third of the instances have completed and it is
	// running an activity; stop worker 2 once half have completed, also
	// while it runs an activity (which it must finish before it exits).
	busy := func(w *mnWorker) bool { return len(mnUnended(t, filepath.Join(dir, w.name+".log"))) > 0 }
	until("a third of the instances to complete with worker 1 running an activity", func() bool {
		return d.completed.Load() >= int64(n/3) && busy(w1)
	})
	w1.kill(t)
	w1Dead := time.Now()
	killedAt, doneAtKill := time.Since(began), d.completed.Load()
	w1Counters := w1.counters()
	w1Unended := mnUnended(t, filepath.Join(dir, w1.name+".log"))

	until("half of the instances to complete with worker 2 running an activity", func() bool {
		return d.completed.Load() >= int64(n/2) && busy(w2)
	})
	termAt, doneAtTerm := time.Since(began), d.completed.Load()
	w2Unended := mnUnended(t, filepath.Join(dir, w2.name+".log"))
	w2Termed := time.Now()
	w2Stop := w2.terminate(t, 30*time.Second)

	until("every instance to complete", func() bool { return d.completed.Load() == int64(n) })
	elapsed := time.Since(began)
	stop()
	if err := d.err(); err != nil {
		t.Fatal(err)
	}
	w3Stop := w3.terminate(t, 30*time.Second)
	for _, w := range workers {
		for _, line := range w.problems() {
			t.Errorf("%s logged: %s", w.name, line)
		}
	}

	// Every instance completed with its result; every history is consistent.
	delivered, scheduledAt := mnCheckHistories(t, ctx, c, n)
	// The ledger: exactly the events sent, each delivered to wait 1 of
	// execution 1 of its instance, and each delivered exactly once across
	// all histories.
	recs, err := st.EventList(ctx, &storage.EventListParams{Tenant: herald.DefaultTenant, Limit: 10 * n})
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) != 3*n || len(d.raised) != 3*n {
		t.Errorf("ledger has %d events, the test sent %d, want %d", len(recs), len(d.raised), 3*n)
	}
	bad := 0
	for _, r := range recs {
		inst, name, _ := strings.Cut(r.EventID, "/")
		ok := d.raised[r.EventID] && r.InstanceID == inst && r.Name == name && r.Fate == history.FateDelivered &&
			r.Execution == 1 && r.WaitNumber == 1
		if !ok {
			if bad++; bad <= 10 {
				t.Errorf("ledger: event %s of %s: %s %q fate %s/%s execution %d wait %d, want sent and delivered to wait 1 of execution 1",
					r.EventID, r.InstanceID, r.Lane, r.Name, r.Fate, r.Reason, r.Execution, r.WaitNumber)
			}
		}
	}
	for id := range d.raised {
		if k := delivered[id]; k != 1 {
			if bad++; bad <= 10 {
				t.Errorf("event %s delivered %d times across all histories, want 1", id, k)
			}
		}
	}
	for id := range delivered {
		if !d.raised[id] {
			t.Errorf("histories deliver event %s, which was never sent", id)
		}
	}

	// Activities: every attempt of worker 2 (stopped gracefully) ended and
	// was not run again; report what ran more than once.
	att := mnReadAttempts(t, dir, workers)
	for key, starts := range att.starts {
		if k := slices.Index(starts, w2.name); k >= 0 {
			if !slices.Contains(att.ends[key], w2.name) {
				t.Errorf("activity %s: worker 2 started it and did not finish it before it stopped (starts %v, ends %v)",
					key, starts, att.ends[key])
			} else if k < len(starts)-1 {
				t.Errorf("activity %s ran again after worker 2 finished it: starts %v", key, starts)
			}
		}
		if len(att.ends[key]) == 0 {
			t.Errorf("activity %s: no attempt ended (starts %v), yet its result is in history", key, starts)
		}
	}
	// An attempt claimed and never started is a claim lost with its worker.
	// Worker 1's claims may be lost (it was killed), worker 3 ran until
	// everything was done; an activity scheduled after worker 1 died can
	// only have been claimed by worker 2, whose graceful stop had to finish
	// or release it (docs/engine.md, Leases), not leave it leased until the lease ran out.
	for _, u := range att.unstarted {
		if at, ok := scheduledAt[u.key]; ok && at.After(w1Dead) {
			t.Errorf("activity %s (scheduled %v after worker 1 died): attempt %d was claimed, by worker 2, and never run "+
				"nor released by its graceful stop; attempt %d ran on %s %v after worker 2 got SIGTERM, once the lease ran out",
				u.key, at.Sub(w1Dead).Round(time.Millisecond), u.attempt, u.nextRan, u.nextOn,
				u.nextAt.Sub(w2Termed).Round(time.Millisecond))
		}
	}
	if len(att.starts) != n {
		t.Errorf("%d activities ran, want %d", len(att.starts), n)
	}
	var rerun []string
	for key, starts := range att.starts {
		if len(starts) > 1 {
			rerun = append(rerun, fmt.Sprintf("%s by %s", key, strings.Join(starts, ",")))
		}
	}
	slices.Sort(rerun)

	// Every worker did its share before it went.
	var perWorker []string
	for _, w := range workers {
		cn := w.counters()
		if w == w1 {
			cn = w1Counters
		}
		if cn.turns-cn.failed <= 0 || cn.activities <= 0 {
			t.Errorf("%s committed %d turns and ran %d activities, want some of each", w.name, cn.turns-cn.failed, cn.activities)
		}
		s := fmt.Sprintf("%s %d turns committed (%d failed, %d leases lost), %d activity attempts", w.name,
			cn.turns-cn.failed, cn.failed, cn.leasesLost, cn.activities)
		switch w {
		case w1:
			s += " (at the kill, ±100 ms)"
		case w2:
			s += fmt.Sprintf(" (stopped in %s, exited 0 after %v)", cn.stoppedIn, w2Stop.Round(time.Millisecond))
		case w3:
			s += fmt.Sprintf(" (stopped after the run in %v)", w3Stop.Round(time.Millisecond))
		}
		perWorker = append(perWorker, s)
	}
	t.Logf("%d instances (%d events) on %d worker processes in %v (%.0f instances/s); worker 1 SIGKILLed at %v with %d done "+
		"and %d activity attempts running; worker 2 SIGTERMed at %v with %d done and %d activity attempts running; "+
		"worker 3 finished alone",
		n, 3*n, mnWorkers, elapsed.Round(time.Millisecond), float64(n)/elapsed.Seconds(), killedAt.Round(time.Millisecond),
		doneAtKill, len(w1Unended), termAt.Round(time.Millisecond), doneAtTerm, len(w2Unended))
	t.Logf("per worker: %s", strings.Join(perWorker, "; "))
	t.Logf("activities: %d scheduled, %d attempts, %d ran more than once %q; %d attempts claimed and never started %q",
		len(att.starts), att.total, len(rerun), rerun[:min(len(rerun), 10)], len(att.unstarted),
		att.unstarted[:min(len(att.unstarted), 10)])
}

// mnAttempts is what the workers' activity logs show: per idempotency key,
// the workers that started an attempt and those that ended one, in order.
type mnAttempts struct {
	starts, ends map[string][]string
	total        int
	// unstarted lists the attempts that were claimed but never started (the
	// logged attempt numbers of a key skip them): claims lost with a
	// worker.
	unstarted []mnUnstarted
}

type mnUnstarted struct {
	key              string
	attempt, nextRan int
	nextOn           string
	nextAt           time.Time
}

func (u mnUnstarted) String() string {
	return fmt.Sprintf("%s attempt %d (attempt %d ran on %s)", u.key, u.attempt, u.nextRan, u.nextOn)
}

func mnReadAttempts(t *testing.T, dir string, workers []*mnWorker) *mnAttempts {
	t.Helper()
	type line struct {
		what, key, worker string
		attempt           int
		at                int64
	}
	var lines []line
	for _, w := range workers {
		data, err := os.ReadFile(filepath.Join(dir, w.name+".log"))
		if err != nil {
			t.Fatal(err)
		}
		for _, l := range strings.Split(string(data), "\n") {
			f := strings.Fields(l)
			if len(f) != 5 {
				continue // the last line of a killed worker may be cut short
			}
			at, _ := strconv.ParseInt(f[4], 10, 64)
			attempt, _ := strconv.Atoi(f[2])
			lines = append(lines, line{what: f[0], key: f[1], worker: f[3], attempt: attempt, at: at})
		}
	}
	slices.SortStableFunc(lines, func(a, b line) int { return cmp.Compare(a.at, b.at) })
	att := &mnAttempts{starts: map[string][]string{}, ends: map[string][]string{}}
	for _, l := range lines {
		switch l.what {
		case "start":
			for a := len(att.starts[l.key]) + 1; a < l.attempt; a++ {
				att.unstarted = append(att.unstarted, mnUnstarted{key: l.key, attempt: a, nextRan: l.attempt, nextOn: l.worker,
					nextAt: time.Unix(0, l.at)})
			}
			att.starts[l.key] = append(att.starts[l.key], l.worker)
			att.total++
		case "end":
			att.ends[l.key] = append(att.ends[l.key], l.worker)
		}
	}
	return att
}

// mnUnended returns the activity attempts a worker's log shows started and
// not ended.
func mnUnended(t *testing.T, path string) []string {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	open := map[string]bool{}
	for _, l := range strings.Split(string(data), "\n") {
		f := strings.Fields(l)
		if len(f) != 5 {
			continue
		}
		k := f[1] + " " + f[2]
		if f[0] == "start" {
			open[k] = true
		} else {
			delete(open, k)
		}
	}
	var out []string
	for k := range open {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// mnCheckHistories checks every instance's outcome and history and returns
// how many times each event id is delivered across all histories, and when
// each activity was scheduled (by idempotency key).
func mnCheckHistories(t *testing.T, ctx context.Context, c *herald.Client, n int) (delivered map[string]int, scheduledAt map[string]time.Time) {
	t.Helper()
	var (
		mu       sync.Mutex
		problems []string
		mailHow  = map[string]int{}
	)
	delivered, scheduledAt = map[string]int{}, map[string]time.Time{}
	report := func(format string, args ...any) {
		mu.Lock()
		problems = append(problems, fmt.Sprintf(format, args...))
		mu.Unlock()
	}
	todo := make(chan int, n)
	for i := range n {
		todo <- i
	}
	close(todo)
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range todo {
				id := mnID(i)
				info, err := c.Status(ctx, id)
				if err != nil {
					report("%s: %v", id, err)
					continue
				}
				var got string
				if err := info.Result(&got); err != nil {
					report("%s: %s: %v", id, info.Status, err)
				} else if got != mnExpected(i) || info.Execution != 1 {
					report("%s: result %q in execution %d, want %q in execution 1", id, got, info.Execution, mnExpected(i))
				}
				evs, err := c.History(ctx, id, 0)
				if err != nil {
					report("%s: %v", id, err)
					continue
				}
				dl, how, errs := mnCheckHistory(i, evs)
				mu.Lock()
				for k, v := range dl {
					delivered[k] += v
				}
				for _, ev := range evs {
					if ev.Kind == history.ActivityScheduled {
						scheduledAt[fmt.Sprintf("%s/%d/%d", id, info.Execution, ev.Seq)] = ev.Time
					}
				}
				mailHow[mnMail(i).String()+": "+how]++
				mu.Unlock()
				if len(errs) > 0 {
					report("%s:\n  %s\nhistory:\n%s", id, strings.Join(errs, "\n  "), formatHistory(evs))
				}
			}
		}()
	}
	wg.Wait()
	slices.Sort(problems)
	for k, p := range problems {
		if k == 10 {
			t.Errorf("... and %d more instances with problems", len(problems)-10)
			break
		}
		t.Error(p)
	}
	var how []string
	for k, v := range mailHow {
		how = append(how, fmt.Sprintf("%s %d", k, v))
	}
	slices.Sort(how)
	t.Logf("mail (queue lane) sent %s", strings.Join(how, ", "))
	return delivered, scheduledAt
}

// mnCheckHistory checks one history: seqs 1..n, the expected decisions
// exactly once each, each activity and timer with exactly one result, each
// wait with exactly one delivery, "go" delivered to its open wait and
// "ready" taken from the buffer. It returns the deliveries by event id and
// how the mail reached its Dequeue.
func mnCheckHistory(i int, evs []history.Event) (delivered map[string]int, mailHow string, errs []string) {
	delivered = map[string]int{}
	bad := func(format string, args ...any) { errs = append(errs, fmt.Sprintf(format, args...)) }
	var decisions []string
	results := map[int]int{}        // ActivityScheduled / TimerCreated seq → results
	waits := map[int]string{}       // EventSubscribed seq → name
	waitDeliveries := map[int]int{} // EventSubscribed seq → deliveries
	buffered := map[string]bool{}   // event ids seen as buffered (EventRaised without a wait)
	atStart := map[string]bool{}
	how := map[string]string{} // name → "buffered" or "to its open wait"
	for k, ev := range evs {
		if ev.Seq != k+1 {
			bad("event %d has seq %d: duplicate or missing seqs", k, ev.Seq)
		}
		if ev.Kind.IsDecision() {
			decisions = append(decisions, string(ev.Kind)+" "+ev.Name)
		}
		switch ev.Kind {
		case history.ExecutionStarted:
			if k != 0 {
				bad("ExecutionStarted at seq %d", ev.Seq)
			}
		case history.ActivityScheduled, history.TimerCreated:
			results[ev.Seq] = 0
		case history.ActivityCompleted, history.TimerFired:
			if _, ok := results[ev.TaskSeq]; !ok {
				bad("%s seq %d for unknown seq %d", ev.Kind, ev.Seq, ev.TaskSeq)
			}
			results[ev.TaskSeq]++
		case history.ActivityFailed, history.EventDropped, history.EventSubscribedCancelled:
			bad("unexpected %s at seq %d", ev.Kind, ev.Seq)
		case history.EventSubscribed:
			waits[ev.Seq] = ev.Name
			if ev.EventID != "" {
				waitDeliveries[ev.Seq]++
				delivered[ev.EventID]++
				how[ev.Name] = "buffered"
				if !buffered[ev.EventID] {
					bad("wait seq %d took %s, which was not buffered before it", ev.Seq, ev.EventID)
				}
			}
		case history.EventRaised:
			if ev.EventID != mnEventID(i, ev.Name) {
				bad("event %s named %q at seq %d, want id %s", ev.EventID, ev.Name, ev.Seq, mnEventID(i, ev.Name))
			}
			if ev.TaskSeq == 0 {
				if buffered[ev.EventID] {
					bad("event %s buffered twice", ev.EventID)
				}
				buffered[ev.EventID] = true
				atStart[ev.EventID] = ev.AtStart
				continue
			}
			if name, ok := waits[ev.TaskSeq]; !ok || name != ev.Name {
				bad("event %s delivered at seq %d to seq %d, which is not a wait for %q", ev.EventID, ev.Seq, ev.TaskSeq, ev.Name)
			}
			waitDeliveries[ev.TaskSeq]++
			delivered[ev.EventID]++
			how[ev.Name] = "to its open wait"
		}
	}
	if !slices.Equal(decisions, mnDecisions) {
		bad("decisions %q, want %q", decisions, mnDecisions)
	}
	for seq, k := range results {
		if k != 1 {
			bad("seq %d (an activity or a timer) has %d results, want 1", seq, k)
		}
	}
	for seq, name := range waits {
		if waitDeliveries[seq] != 1 {
			bad("wait for %q at seq %d has %d deliveries, want 1", name, seq, waitDeliveries[seq])
		}
	}
	if how["go"] != "to its open wait" {
		bad(`"go" was raised after its wait opened, yet it was %s`, how["go"])
	}
	if how["ready"] != "buffered" {
		bad(`"ready" was raised before its wait, yet it was delivered %s`, how["ready"])
	}
	switch mail := mnEventID(i, "mail"); mnMail(i) {
	case mailBeforeStart:
		if how["mail"] != "buffered" || !atStart[mail] {
			bad("mail sent before the start: delivered %s (at start: %v), want buffered at start", how["mail"], atStart[mail])
		}
	case mailWithGo:
		if how["mail"] != "buffered" {
			bad(`mail sent before "go": delivered %s, want buffered`, how["mail"])
		}
	case mailAfterWait:
		if how["mail"] != "to its open wait" {
			bad("mail sent after its Dequeue opened: delivered %s", how["mail"])
		}
	}
	return delivered, how["mail"], errs
}

// mnUnfinished shows the histories of up to limit unfinished instances.
func mnUnfinished(ctx context.Context, c *herald.Client, n, limit int) string {
	var b strings.Builder
	shown := 0
	for i := 0; i < n && shown < limit; i++ {
		info, err := c.Status(ctx, mnID(i))
		if err == nil && info.Status.Terminal() {
			continue
		}
		shown++
		evs, err := c.History(ctx, mnID(i), 0)
		fmt.Fprintf(&b, "%s (%v):\n%s", mnID(i), err, formatHistory(evs))
	}
	return b.String()
}
