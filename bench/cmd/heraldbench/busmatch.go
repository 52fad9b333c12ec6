package main

import (
	"fmt"
	"time"

	"github.com/heraldwf/herald/bus"
	"github.com/heraldwf/herald/internal/busload"
)

// busMatch is the bus-match scenario: the router of 10,000 subscriptions
// (bus.NewRouter) routes `events` events one call at a time (Router.Route:
// the pattern trie, then the filters of the matched subscriptions); the
// median, p95 and p99 of a call. In process, no store.
func busMatch(events int) Result {
	subs := busload.Subscriptions(10_000)
	t0 := time.Now()
	r := bus.NewRouter(1, subs)
	built := time.Since(t0)
	evs := busload.Events(4096)
	took := make(dist, 0, events)
	decisions := 0
	for i := range events {
		start := time.Now()
		ds := r.Route(evs[i%len(evs)])
		took = append(took, time.Since(start))
		decisions += len(ds)
	}
	us := func(d time.Duration) float64 { return float64(d) / float64(time.Microsecond) }
	return Result{Scenario: "bus matching, 10,000 subscriptions", System: "herald router (in process)", Durability: "in memory, no store", N: events,
		Rate: us(took.pct(50)), RateUnit: "µs/event p50",
		Note: fmt.Sprintf("Router.Route per event: p50 %.1f µs, p95 %.1f µs, p99 %.1f µs, max %.0f µs; %.1f decisions per event (a third of the subscriptions have filters); router built in %.0f ms",
			us(took.pct(50)), us(took.pct(95)), us(took.pct(99)), us(took.pct(100)), float64(decisions)/float64(events), ms(built))}
}
