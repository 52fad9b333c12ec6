package main

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"
)

// target is a System with the book its resumed stamps go into.
type target struct {
	System
	book *stampBook
}

func newTarget(s System) *target { return &target{System: s, book: newStampBook(s.Resumed())} }

// scenarioTimeout bounds each scenario, so that an instance that never
// resumes (or a worker process that never started) fails the row instead of
// hanging the run.
const scenarioTimeout = 10 * time.Minute

func ids(prefix string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("%s-%06d", prefix, i)
	}
	return out
}

// park starts the instances and reports how fast.
func park(ctx context.Context, t *target, lane Lane, ids []string, key func(i int) string) (float64, error) {
	progress("  %s: starting %d instances that wait on the %s lane", t.Name(), len(ids), lane)
	start := time.Now()
	stop := ticker(func() string { return fmt.Sprintf("  %s: starting…", t.Name()) })
	err := t.Park(ctx, lane, ids, key)
	stop()
	if err != nil {
		return 0, fmt.Errorf("park: %w", err)
	}
	return float64(len(ids)) / time.Since(start).Seconds(), nil
}

// roundTrip is the round-trip scenario (bench/README.md): n instances each wait for one event, the
// events are sent to all of them from `clients` concurrent goroutines, and
// every instance completes. Rate is instances resumed per second from the
// first send to the last resumed commit; latency is send → resumed commit
// of each instance, under that load.
func roundTrip(ctx context.Context, t *target, lane Lane, n, clients int) Result {
	return roundTripAs(ctx, t, lane, n, clients, "rt-"+string(lane))
}

// roundTripAs is roundTrip on instances named prefix-000000…: a system runs
// several round trips (the sweep) on fresh ids.
func roundTripAs(ctx context.Context, t *target, lane Lane, n, clients int, prefix string) Result {
	ctx, cancel := context.WithTimeout(ctx, scenarioTimeout)
	defer cancel()
	r := Result{Scenario: "round trip (" + string(lane) + ")", System: t.Name(), Durability: t.Durability(),
		N: n, RateUnit: "inst/s"}
	list := ids(prefix, n)
	parkRate, err := park(ctx, t, lane, list, nil)
	if err != nil {
		r.Error = err.Error()
		return r
	}
	sent := make([]time.Time, n)
	var nsent atomic.Int64
	progress("  %s: sending %d events from %d clients", t.Name(), n, clients)
	before := t.book.n()
	stop := ticker(func() string {
		return fmt.Sprintf("  %s: sent %d/%d, resumed %d", t.Name(), nsent.Load(), n, t.book.n()-before)
	})
	defer stop()
	cpu := startCPU()
	start := time.Now()
	err = parallel(ctx, clients, n, func(i int) error {
		sent[i] = time.Now()
		err := t.Send(ctx, lane, list[i])
		nsent.Add(1)
		return err
	})
	if err != nil {
		r.Error = "send: " + err.Error()
		return r
	}
	lat := make(dist, n)
	var last time.Time
	for i, id := range list {
		at, err := t.book.wait(ctx, id)
		if err != nil {
			r.Error = err.Error()
			return r
		}
		lat[i] = at.Sub(sent[i])
		if at.After(last) {
			last = at
		}
	}
	r.Rate = float64(n) / last.Sub(start).Seconds()
	lat.fill(&r)
	r.Note = fmt.Sprintf("%d concurrent clients; started and parked at %.0f inst/s", clients, parkRate)
	cpu.fill(&r, n)
	return r
}

// isolated sends to one parked instance at a time and waits for it to
// resume before the next: the latency of one round trip with nothing else
// going on.
//
// On Herald it also returns one row per stage of the round trip (stages.go).
func isolated(ctx context.Context, t *target, lane Lane, samples int) []Result {
	ctx, cancel := context.WithTimeout(ctx, scenarioTimeout)
	defer cancel()
	r := Result{Scenario: "isolated latency (" + string(lane) + ")", System: t.Name(), Durability: t.Durability(), N: samples}
	list := ids("iso-"+string(lane), samples)
	if _, err := park(ctx, t, lane, list, nil); err != nil {
		r.Error = err.Error()
		return []Result{r}
	}
	rec := stagesOf(t.System)
	if rec != nil {
		rec.start()
		defer rec.stop()
	}
	lat := make(dist, 0, samples)
	var stages [][]time.Duration
	for _, id := range list {
		start := time.Now()
		if err := t.Send(ctx, lane, id); err != nil {
			r.Error = "send: " + err.Error()
			return []Result{r}
		}
		at, err := t.book.wait(ctx, id)
		if err != nil {
			r.Error = err.Error()
			return []Result{r}
		}
		lat = append(lat, at.Sub(start))
		if rec != nil {
			if st, ok := rec.take(id); ok {
				if d, ok := st.durations(start); ok {
					stages = append(stages, d)
				}
			}
		}
	}
	lat.fill(&r)
	r.Note = "one send at a time, send → resumed commit"
	if rec == nil {
		return []Result{r}
	}
	if len(stages) < len(list) {
		r.Note += fmt.Sprintf("; %d of %d round trips split into stages", len(stages), len(list))
	}
	return append([]Result{r}, stageResults(r, stages)...)
}

// underLoad sends at a fixed rate (open loop: each send starts at its
// scheduled time whatever the earlier ones are doing) for dur and measures
// scheduled send → resumed commit, so a stall is counted for every send it
// delays.
//
// pace says where rate comes from, for the result's note. d says what
// else to record of the paced part: a runtime/trace, a CPU profile, each
// send's scheduled offset and latency as CSV (runFile names the file of
// each run).
func underLoad(ctx context.Context, t *target, lane Lane, rate float64, pace string, dur time.Duration, d loadDiag) Result {
	ctx, cancel := context.WithTimeout(ctx, scenarioTimeout)
	defer cancel()
	n := max(int(rate*dur.Seconds()), 1)
	r := Result{Scenario: "latency under load (" + string(lane) + ")", System: t.Name(), Durability: t.Durability(),
		N: n, RateUnit: "inst/s"}
	list := ids("load-"+string(lane), n)
	var settled string
	if st, ok := t.System.(settler); ok {
		note, err := st.Settle(ctx)
		if err != nil {
			r.Error = "settle: " + err.Error()
			return r
		}
		settled = note
	}
	if _, err := park(ctx, t, lane, list, nil); err != nil {
		r.Error = err.Error()
		return r
	}
	progress("  %s: sending %d events at %.0f/s", t.Name(), n, rate)
	stopRecorders, err := startRecorders(d)
	if err != nil {
		r.Error = err.Error()
		return r
	}
	defer stopRecorders()
	sem := make(chan struct{}, 512)
	errs := make(chan error, 1)
	sched := make([]time.Time, n)
	sent := make([]time.Time, n)
	var rec *stageRecorder
	if d.stages {
		if rec = stagesOf(t.System); rec != nil {
			rec.start()
			defer rec.stop()
		}
	}
	cpu := startCPU()
	start := time.Now()
	var nsent atomic.Int64
	before := t.book.n()
	stop := ticker(func() string {
		return fmt.Sprintf("  %s: sent %d/%d, resumed %d", t.Name(), nsent.Load(), n, t.book.n()-before)
	})
	defer stop()
	for i, id := range list {
		sched[i] = start.Add(time.Duration(float64(i) / rate * float64(time.Second)))
		if d := time.Until(sched[i]); d > 0 {
			time.Sleep(d)
		}
		sem <- struct{}{}
		go func() {
			defer func() { <-sem }()
			sent[i] = time.Now()
			if err := t.Send(ctx, lane, id); err != nil {
				select {
				case errs <- err:
				default:
				}
			}
			nsent.Add(1)
		}()
	}
	for range cap(sem) { // every send has returned
		sem <- struct{}{}
	}
	select {
	case err := <-errs:
		r.Error = "send: " + err.Error()
		return r
	default:
	}
	lat := make(dist, n)
	var last time.Time
	for i, id := range list {
		at, err := t.book.wait(ctx, id)
		if err != nil {
			r.Error = err.Error()
			return r
		}
		lat[i] = at.Sub(sched[i])
		if at.After(last) {
			last = at
		}
	}
	r.Rate = float64(n) / last.Sub(start).Seconds()
	lat.fill(&r)
	r.Note = fmt.Sprintf("paced at %.0f sends/s (%s), latency from each send's scheduled time", rate, pace)
	if settled != "" {
		r.Note += "; " + settled
	}
	cpu.fill(&r, n)
	var stageReport string
	if rec != nil {
		stageReport = loadStages(rec, list, sched, sent, lat)
	}
	if d.dump != "" {
		progress("  %s: paced load started at %s", t.Name(), start.UTC().Format("15:04:05.000"))
		if err := dumpLoad(runFile(d.dump), start, sched, lat); err != nil {
			progress("  %s: -load-dump: %v", t.Name(), err)
		}
	}
	if stageReport != "" {
		progress("  %s: stages of the paced sends (ms)\n%s", t.Name(), stageReport)
	}
	return r
}

// fanOut parks n instances in groups of `per` waiting on one correlated key
// each, then puts one correlated event per key (from `clients` concurrent
// goroutines): each put reaches every instance of its group. Rate is
// instances resumed per second from the first put to the last resumed
// commit; latency is the put's start → each instance's resumed commit.
func fanOut(ctx context.Context, t *target, n, per, clients int) Result {
	ctx, cancel := context.WithTimeout(ctx, scenarioTimeout)
	defer cancel()
	keys := (n + per - 1) / per
	r := Result{Scenario: fmt.Sprintf("correlated fan-out (1 put → %d)", per), System: t.Name(),
		Durability: t.Durability(), N: n, RateUnit: "inst/s"}
	list := ids("fan", n)
	keyOf := func(i int) string { return fmt.Sprintf("doc-%06d", i%keys) }
	parkRate, err := park(ctx, t, LaneCorrelated, list, keyOf)
	if err != nil {
		r.Error = err.Error()
		return r
	}
	sent := make([]time.Time, keys)
	progress("  %s: putting %d correlated events from %d clients", t.Name(), keys, clients)
	before := t.book.n()
	stop := ticker(func() string { return fmt.Sprintf("  %s: resumed %d/%d", t.Name(), t.book.n()-before, n) })
	defer stop()
	start := time.Now()
	if err := parallel(ctx, clients, keys, func(k int) error {
		sent[k] = time.Now()
		return t.Send(ctx, LaneCorrelated, fmt.Sprintf("doc-%06d", k))
	}); err != nil {
		r.Error = "put: " + err.Error()
		return r
	}
	lat := make(dist, n)
	var last time.Time
	for i, id := range list {
		at, err := t.book.wait(ctx, id)
		if err != nil {
			r.Error = err.Error()
			return r
		}
		lat[i] = at.Sub(sent[i%keys])
		if at.After(last) {
			last = at
		}
	}
	r.Rate = float64(n) / last.Sub(start).Seconds()
	lat.fill(&r)
	r.Note = fmt.Sprintf("%d keys × %d waiting instances, %d concurrent clients; started and parked at %.0f inst/s",
		keys, per, clients, parkRate)
	return r
}
