package main

import (
	"context"
	"fmt"
	"time"

	"github.com/heraldwf/herald"
)

const loopWorkflow = "bench.loop"

// registerLoop registers a workflow that waits for events named "e" for
// ever: every event adds two history events (the wait and the arrival).
func registerLoop(rt *herald.Runtime) {
	herald.RegisterWorkflow(rt, loopWorkflow, func(ctx *herald.Context, _ struct{}) (int, error) {
		for i := 0; ; i++ {
			if err := ctx.WaitEvent("e").Get(nil); err != nil {
				return i, err
			}
		}
	})
}

// replayCost grows one instance's history to about size events, then times
// (a) a pure replay of that history in this process (rt.ReplayHistory: the
// CPU part of a turn) and (b) whole turns: one event raised at a time, from
// the raise to the commit of the turn that took it (history loaded from the
// store, replayed, new events committed).
func replayCost(ctx context.Context, h *heraldSystem, size, samples int) []Result {
	base := Result{Scenario: fmt.Sprintf("replay cost, %d-event history", size), System: h.Name(), Durability: h.Durability()}
	fail := func(err error) []Result { base.Error = err.Error(); return []Result{base} }
	id := fmt.Sprintf("replay-%d", size)
	if _, err := h.client.StartWorkflow(ctx, loopWorkflow, struct{}{}, herald.WithInstanceID(id)); err != nil {
		return fail(err)
	}
	raises := max((size-2)/2, 0)
	progress("  %s: growing a history to %d events (%d raises)", h.Name(), size, raises)
	if err := parallel(ctx, 16, raises, func(int) error {
		_, err := h.client.RaiseEvent(ctx, id, "e", nil)
		return err
	}); err != nil {
		return fail(err)
	}
	want := 2 + 2*raises // ExecutionStarted, the first wait, then arrival + next wait per raise
	if err := poll(ctx, 50*time.Millisecond, func() bool {
		evs, err := h.client.History(ctx, id, 0)
		return err == nil && len(evs) >= want
	}); err != nil {
		return fail(err)
	}
	evs, err := h.client.History(ctx, id, 0)
	if err != nil {
		return fail(err)
	}

	// (a) pure replay.
	reps := 0
	start := time.Now()
	for reps < 3 || time.Since(start) < 300*time.Millisecond {
		if err := h.rt.ReplayHistory(evs); err != nil {
			return fail(fmt.Errorf("replay: %w", err))
		}
		reps++
	}
	pure := time.Since(start) / time.Duration(reps)

	// (b) whole turns.
	done := make(chan time.Time, 1)
	fn := func(got string, at time.Time) {
		if got == id {
			select {
			case done <- at:
			default:
			}
		}
	}
	h.onTurn.Store(&fn)
	defer h.onTurn.Store(nil)
	var lat dist
	for range samples {
		t0 := time.Now()
		if _, err := h.client.RaiseEvent(ctx, id, "e", nil); err != nil {
			return fail(err)
		}
		select {
		case at := <-done:
			lat = append(lat, at.Sub(t0))
		case <-ctx.Done():
			return fail(ctx.Err())
		}
	}
	nev := float64(len(evs))
	a := base
	a.System = "herald (in process)"
	a.Durability = "none (CPU only)"
	a.N = len(evs)
	a.Rate = float64(pure.Microseconds())
	a.RateUnit = "µs/replay"
	a.Note = fmt.Sprintf("rt.ReplayHistory: %.0f µs, %.3f µs per history event", float64(pure.Nanoseconds())/1e3, float64(pure.Nanoseconds())/1e3/nev)
	b := base
	b.N = len(evs)
	lat.fill(&b)
	b.Note = fmt.Sprintf("raise → turn committed, %d turns one at a time: p50 %.0f µs, %.3f µs per history event",
		samples, float64(lat.pct(50).Nanoseconds())/1e3, float64(lat.pct(50).Nanoseconds())/1e3/nev)
	return []Result{a, b}
}
