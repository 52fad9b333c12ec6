package main

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/heraldwf/herald"
	"github.com/heraldwf/herald/storage"
)

// The event-bus scenarios (bench/README.md, "Event bus"):
//
//	bus-script   publish → a subscription whose target is the script
//	             `return 1;` → the attempt recorded succeeded
//	bus-handler  the same with a Go handler target (returns 1); the River
//	             peers run this scenario's workload
//	bus-dlq      the same with a Go handler that fails permanently: every
//	             event ends dead-lettered
//	bus-match    the router (bus.NewRouter + Route) with 10,000
//	             subscriptions of varied patterns and filters, in process
//
// Each of the first three runs, on a fresh store per backend: a warm-up (the
// script children start, the router is built), then N events published by
// -bus-publishers concurrent publishers (the rate: N / (first publish → last
// event done)), then -bus-samples events one at a time (isolated).
//
// "Done" is the moment Herald's BusAttempted report for the event's attempt
// arrives: the runtime reports it after BusFinish has returned, i.e. after
// the transaction that records the attempt and ends the execution (succeeded,
// or dead-lettered with its letter) has committed. With one subscription and
// no retry, that is the moment the event's fate became done.

// Bus scenario names (-scenarios).
const (
	scBusScript  = "bus-script"
	scBusHandler = "bus-handler"
	scBusDLQ     = "bus-dlq"
	scBusMatch   = "bus-match"
)

// busScenarioHandler is the row the River peers are compared on.
const busScenarioHandler = "bus publish → handler done"

// busOptions are the bus scenarios' knobs.
type busOptions struct {
	n, publishers, samples int
	workers, scriptProcs   int
	tenantScriptProcs      int // Bus.TenantScriptProcesses (0: Herald's default)
	warmup                 int
}

// busKind is one of the bus scenarios that run events through targets.
type busKind struct {
	scenario string // -scenarios name
	label    string // "script", "handler", "dead letter"
}

var busKinds = []busKind{
	{scBusScript, "script"},
	{scBusHandler, "handler"},
	{scBusDLQ, "dead letter"},
}

// Phases of a bus run; reports and BusFinish timings are filed under the
// phase they happened in.
const (
	phaseWarmup int32 = iota
	phaseLoad
	phaseIsolated
)

// busProbe collects what a bus run measures: done stamps (by event id),
// attempt durations and dead-letter BusFinish durations per phase.
type busProbe struct {
	herald.NopObserver
	phase    atomic.Int32
	done     chan Stamp
	mu       sync.Mutex
	attempts [3]dist // BusAttemptReport.Duration of recorded attempts
	dlWrites [3]dist // BusFinish calls that wrote a dead letter
	outcomes map[string]int
}

func newBusProbe() *busProbe {
	return &busProbe{done: make(chan Stamp, 1<<16), outcomes: map[string]int{}}
}

// BusAttempted is called by the runtime after the attempt's end was
// committed (or after the lease was found lost).
func (p *busProbe) BusAttempted(r herald.BusAttemptReport) {
	at := time.Now()
	ph := p.phase.Load()
	p.mu.Lock()
	p.outcomes[r.Outcome]++
	if r.Outcome == herald.BusOutcomeSucceeded || r.Outcome == herald.BusOutcomeDeadLetter {
		p.attempts[ph] = append(p.attempts[ph], r.Duration)
	}
	p.mu.Unlock()
	if r.Outcome == herald.BusOutcomeSucceeded || r.Outcome == herald.BusOutcomeDeadLetter {
		p.done <- Stamp{ID: r.EventID, At: at}
	}
}

func (p *busProbe) busFinished(fp *storage.BusFinishParams, took time.Duration) {
	for _, r := range fp.Results {
		if r.Outcome == storage.BusDeadLetter {
			ph := p.phase.Load()
			p.mu.Lock()
			p.dlWrites[ph] = append(p.dlWrites[ph], took)
			p.mu.Unlock()
			return
		}
	}
}

// runBus runs the selected bus scenarios on every backend.
func runBus(ctx context.Context, o *options, hopts func(string) heraldOptions, add func(...Result)) {
	for _, k := range busKinds {
		if !has(o, k.scenario) {
			continue
		}
		for _, b := range o.backends {
			if ctx.Err() != nil {
				return
			}
			add(busRun(ctx, o, k, b, hopts(busTag(k.scenario, b)))...)
		}
	}
}

func has(o *options, sc string) bool {
	for _, s := range o.scenarios {
		if s == sc {
			return true
		}
	}
	return false
}

func busTag(scenario, backend string) string {
	r := []rune(scenario + "_" + backend)
	for i, c := range r {
		if c == '-' {
			r[i] = '_'
		}
	}
	return string(r)
}

const busEventType = "bench.event"

// busRun runs one bus scenario on one backend.
func busRun(ctx context.Context, o *options, k busKind, backend string, hopt heraldOptions) []Result {
	ctx, cancel := context.WithTimeout(ctx, scenarioTimeout)
	defer cancel()
	bo := o.bus
	loadScenario := "bus publish → " + k.label + " done"
	fail := func(err error) []Result {
		return []Result{{Scenario: loadScenario, System: "herald " + backend, Error: err.Error()}}
	}
	probe := newBusProbe()
	hopt.bus = herald.BusConfig{Workers: bo.workers, ScriptProcesses: bo.scriptProcs, TenantScriptProcesses: bo.tenantScriptProcs}
	hopt.observer = probe
	hopt.onBusFinish = probe.busFinished
	progress("Herald bus (%s) on %s: %d workers, %d script processes", k.label, backend, bo.workers, bo.scriptProcs)
	h, err := openHerald(ctx, backend, hopt)
	if err != nil {
		return fail(err)
	}
	defer func() {
		if err := h.Close(); err != nil {
			progress("  close: %v", err)
		}
	}()
	c := h.client
	target := herald.Target{Kind: herald.TargetHandler, Handler: "bench"}
	switch k.scenario {
	case scBusScript:
		if _, err := c.PutScript(ctx, "bench", "return 1;"); err != nil {
			return fail(err)
		}
		target = herald.Target{Kind: herald.TargetScript, Script: "bench"}
	case scBusHandler:
		herald.RegisterBusHandler(h.rt, "bench", func(context.Context, herald.BusEvent) (any, error) { return 1, nil })
	case scBusDLQ:
		herald.RegisterBusHandler(h.rt, "bench", func(context.Context, herald.BusEvent) (any, error) {
			return nil, herald.Permanent(errors.New("bench: refused"))
		})
	}
	if _, err := c.PutSubscription(ctx, herald.Subscription{ID: "bench", Pattern: busEventType, Target: target,
		Enabled: true}); err != nil {
		return fail(err)
	}
	book := newStampBook(probe.done)
	publish := func(id string, i int) error {
		_, err := c.Publish(ctx, busEventType, map[string]int{"i": i}, herald.WithEventID(id))
		return err
	}

	// Warm-up: the script children start, the router is built.
	warm := ids("bus-warm", bo.warmup)
	for i, id := range warm {
		if err := publish(id, i); err != nil {
			return fail(fmt.Errorf("warm-up publish: %w", err))
		}
	}
	for _, id := range warm {
		if _, err := book.wait(ctx, id); err != nil {
			return fail(err)
		}
	}

	// Under load: N events from concurrent publishers.
	probe.phase.Store(phaseLoad)
	list := ids("bus-ev", bo.n)
	sent := make([]time.Time, bo.n)
	var nsent atomic.Int64
	progress("  herald %s: publishing %d events from %d publishers", backend, bo.n, bo.publishers)
	stop := ticker(func() string {
		return fmt.Sprintf("  herald %s: published %d/%d, done %d", backend, nsent.Load(), bo.n, book.n()-len(warm))
	})
	start := time.Now()
	err = parallel(ctx, bo.publishers, bo.n, func(i int) error {
		sent[i] = time.Now()
		err := publish(list[i], i)
		nsent.Add(1)
		return err
	})
	if err != nil {
		stop()
		return fail(fmt.Errorf("publish: %w", err))
	}
	e2e := make(dist, bo.n)
	var last time.Time
	for i, id := range list {
		at, err := book.wait(ctx, id)
		if err != nil {
			stop()
			return fail(err)
		}
		e2e[i] = at.Sub(sent[i])
		if at.After(last) {
			last = at
		}
	}
	stop()
	rate := float64(bo.n) / last.Sub(start).Seconds()

	// Isolated: one event at a time.
	probe.phase.Store(phaseIsolated)
	iso := ids("bus-iso", bo.samples)
	isoE2E := make(dist, 0, bo.samples)
	for i, id := range iso {
		t0 := time.Now()
		if err := publish(id, i); err != nil {
			return fail(fmt.Errorf("publish: %w", err))
		}
		at, err := book.wait(ctx, id)
		if err != nil {
			return fail(err)
		}
		isoE2E = append(isoE2E, at.Sub(t0))
	}

	// Check the fates: every event of the run done, with the outcome the
	// target implies.
	if err := busVerify(ctx, c, k, list, iso); err != nil {
		return fail(fmt.Errorf("verify: %w", err))
	}

	sys, dur := h.Name(), h.Durability()+"; the event committed before Publish returns, each attempt's end committed (BusFinish)"
	cfg := fmt.Sprintf("Bus.Workers %d, Bus.ScriptProcesses %d, %d publishers", bo.workers, bo.scriptProcs, bo.publishers)
	if bo.tenantScriptProcs > 0 {
		cfg += fmt.Sprintf(", Bus.TenantScriptProcesses %d", bo.tenantScriptProcs)
	}
	probe.mu.Lock()
	defer probe.mu.Unlock()
	r := Result{Scenario: loadScenario, System: sys, Durability: dur, N: bo.n, Rate: rate, RateUnit: "events/s",
		Note: cfg + "; rate N / (first publish → last event done), latency publish → done (attempt end committed)"}
	e2e.fill(&r)
	out := []Result{r}
	ri := Result{Scenario: loadScenario + " (isolated)", System: sys, Durability: dur, N: bo.samples,
		Note: "one event at a time, publish → done (attempt end committed)"}
	isoE2E.fill(&ri)
	out = append(out, ri)
	if k.scenario == scBusDLQ {
		for _, x := range []struct {
			name string
			ph   int32
			note string
		}{
			{"bus dead-letter write (under load)", phaseLoad, "duration of the BusFinish call that records the failed attempt and writes its dead letter (one transaction; the letter is visible when it returns), while " + cfg},
			{"bus dead-letter write (isolated)", phaseIsolated, "duration of the BusFinish call that records the failed attempt and writes its dead letter, one event at a time"},
		} {
			d := probe.dlWrites[x.ph]
			rw := Result{Scenario: x.name, System: sys, Durability: dur, N: len(d), Note: x.note}
			d.fill(&rw)
			out = append(out, rw)
		}
	} else {
		for _, x := range []struct {
			name string
			ph   int32
			note string
		}{
			{"bus " + k.label + " attempt (under load)", phaseLoad, "attempt durations (BusAttemptReport.Duration: " + attemptIncludes(k) + ") while " + cfg},
			{"bus " + k.label + " attempt (isolated)", phaseIsolated, "attempt durations (" + attemptIncludes(k) + "), one event at a time"},
		} {
			d := probe.attempts[x.ph]
			ra := Result{Scenario: x.name, System: sys, Durability: dur, N: len(d), Note: x.note}
			d.fill(&ra)
			out = append(out, ra)
		}
	}
	if n := probe.outcomes[herald.BusOutcomeLeaseLost] + probe.outcomes[herald.BusOutcomeRetry]; n > 0 {
		out[0].Note += fmt.Sprintf("; %d attempts lost their lease or were retried", n)
	}
	return out
}

func attemptIncludes(k busKind) string {
	if k.scenario == scBusScript {
		return "the script (cached; read from the store after a put), the round trip to a free child process and the run; the wait for a child is spent queued, before the attempt"
	}
	return "the handler call"
}

// busVerify checks the fate of every isolated event and of up to 200
// events of the loaded run (spread over it): done, its one execution
// succeeded (dead-lettered in bus-dlq).
func busVerify(ctx context.Context, c *herald.Client, k busKind, load, iso []string) error {
	want := herald.ExecSucceeded
	if k.scenario == scBusDLQ {
		want = herald.ExecDeadLettered
	}
	check := iso
	step := max(len(load)/200, 1)
	for i := 0; i < len(load); i += step {
		check = append(check, load[i])
	}
	for _, id := range check {
		ev, err := c.PublishedEvent(ctx, id)
		if err != nil {
			return err
		}
		if ev.Fate != herald.BusDone || len(ev.Routes) != 1 || ev.Routes[0].Execution == nil ||
			ev.Routes[0].Execution.Status != want {
			return fmt.Errorf("event %s: fate %s, routes %d, want done with one %s execution", id, ev.Fate, len(ev.Routes), want)
		}
	}
	if k.scenario == scBusDLQ {
		// Every event of the run has its letter (warm-up ones too).
		n, cursor := 0, int64(0)
		for {
			page, err := c.DeadLetters(ctx, herald.DeadLetterFilter{Subscription: "bench", Limit: 1000, Cursor: cursor})
			if err != nil {
				return err
			}
			n += len(page.Letters)
			if cursor = page.NextCursor; cursor == 0 {
				break
			}
		}
		if n < len(load)+len(iso) {
			return fmt.Errorf("%d dead letters, want at least %d", n, len(load)+len(iso))
		}
	}
	return nil
}

// defaultScriptProcs is the script child processes the bench gives the
// runtime by default: one per core.
func defaultScriptProcs() int { return runtime.NumCPU() }
