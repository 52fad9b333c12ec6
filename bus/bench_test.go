package bus_test

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/heraldwf/herald/bus"
	"github.com/heraldwf/herald/heraldtype"
	"github.com/heraldwf/herald/storage"
)

// routerSubs makes n subscriptions of the shapes a tenant's bus sees, over
// 20 domains × 25 entities × 8 actions: 70 % exact types, 10 %
// "domain.entity.*", 5 % "domain.>", 5 % "*.entity.action", 5 %
// "domain.*.action", 5 % "domain.entity.>"; a third of them carry a filter
// (an eq, an in-list, a numeric range, or an AND with a nested OR). The
// same generator is in bench/cmd/heraldbench (busmatch.go).
func routerSubs(n int) []*heraldtype.Subscription {
	rng := rand.New(rand.NewPCG(4, 12))
	seg := func(kind string, n int) string { return fmt.Sprintf("%s%d", kind, rng.IntN(n)) }
	filters := []string{
		`{"field":"data.role","op":"eq","value":"admin"}`,
		`{"field":"data.plan","op":"in","value":["pro","team","enterprise"]}`,
		`{"logic":"AND","conditions":[{"field":"data.amount","op":"gte","value":100},{"field":"data.amount","op":"lt","value":5000}]}`,
		`{"logic":"AND","conditions":[{"field":"data.role","op":"ne","value":"guest"},{"logic":"OR","conditions":[` +
			`{"field":"data.plan","op":"eq","value":"pro"},{"field":"data.seats","op":"gte","value":10}]}]}`,
	}
	subs := make([]*heraldtype.Subscription, n)
	for i := range subs {
		d, e, a := seg("domain", 20), seg("entity", 25), seg("action", 8)
		var p string
		switch r := rng.IntN(100); {
		case r < 70:
			p = d + "." + e + "." + a
		case r < 80:
			p = d + "." + e + ".*"
		case r < 85:
			p = d + ".>"
		case r < 90:
			p = "*." + e + "." + a
		case r < 95:
			p = d + ".*." + a
		default:
			p = d + "." + e + ".>"
		}
		s := &heraldtype.Subscription{ID: fmt.Sprintf("sub-%05d", i), Pattern: p, Enabled: true,
			Target: heraldtype.Target{Kind: heraldtype.TargetHandler, Handler: "h"}}
		if i%3 == 0 {
			s.Filter = json.RawMessage(filters[rng.IntN(len(filters))])
		}
		subs[i] = s
	}
	return subs
}

// routerEvents makes n events to route: types over the same vocabulary (a
// tenth with a fourth, version segment; one in twenty of a domain no
// subscription names, which matches nothing) and small data objects.
func routerEvents(n int) []*storage.BusEvent {
	rng := rand.New(rand.NewPCG(7, 3))
	seg := func(kind string, n int) string { return fmt.Sprintf("%s%d", kind, rng.IntN(n)) }
	roles, plans := []string{"admin", "user", "guest", "owner"}, []string{"free", "pro", "team", "enterprise"}
	evs := make([]*storage.BusEvent, n)
	for i := range evs {
		t := seg("domain", 20) + "." + seg("entity", 25) + "." + seg("action", 8)
		switch {
		case i%10 == 0:
			t += ".v2"
		case i%20 == 5:
			t = seg("audit", 20) + "." + seg("entity", 25) + "." + seg("action", 8)
		}
		data := fmt.Sprintf(`{"role":%q,"plan":%q,"amount":%d,"seats":%d,"order_id":"o-%d"}`,
			roles[rng.IntN(len(roles))], plans[rng.IntN(len(plans))], rng.IntN(10000), rng.IntN(50), i)
		evs[i] = &storage.BusEvent{ID: fmt.Sprintf("ev-%d", i), Type: t, Data: json.RawMessage(data),
			PublishedAt: time.Unix(1_700_000_000, 0), Source: "client"}
	}
	return evs
}

// BenchmarkRoute10k routes one event against 10,000 subscriptions with
// Router.Route: the pattern trie, then the filters of the matched
// subscriptions (the event's data decoded once if any has one). The
// target (docs/bus.md, seed 004): median under 10 µs per event. "route"
// reports ns/op and allocations; "latency" times each call alone and
// reports the median, p95 and p99 as metrics.
func BenchmarkRoute10k(b *testing.B) {
	subs := routerSubs(10_000)
	r := bus.NewRouter(1, subs)
	if r.Len() != len(subs) {
		b.Fatalf("router indexed %d of %d subscriptions", r.Len(), len(subs))
	}
	evs := routerEvents(4096)
	b.Run("route", func(b *testing.B) {
		b.ReportAllocs()
		i, decisions, matched := 0, 0, 0
		for b.Loop() {
			ds := r.Route(evs[i%len(evs)])
			decisions += len(ds)
			for _, d := range ds {
				if d.Matched {
					matched++
				}
			}
			i++
		}
		b.ReportMetric(float64(decisions)/float64(i), "decisions/op")
		b.ReportMetric(float64(matched)/float64(i), "matched/op")
	})
	b.Run("latency", func(b *testing.B) {
		var took []time.Duration
		i := 0
		for b.Loop() {
			start := time.Now()
			r.Route(evs[i%len(evs)])
			took = append(took, time.Since(start))
			i++
		}
		slices.Sort(took)
		b.ReportMetric(float64(took[len(took)/2].Nanoseconds()), "p50-ns")
		b.ReportMetric(float64(took[len(took)*95/100].Nanoseconds()), "p95-ns")
		b.ReportMetric(float64(took[len(took)*99/100].Nanoseconds()), "p99-ns")
	})
}

// BenchmarkNewRouter10k measures building the router of 10,000
// subscriptions (done when a tenant's subscriptions change).
func BenchmarkNewRouter10k(b *testing.B) {
	subs := routerSubs(10_000)
	b.ReportAllocs()
	for b.Loop() {
		bus.NewRouter(1, subs)
	}
}

// TestRouterSubsShape guards the benchmark's inputs: every generated
// subscription is indexed, the events match some subscriptions and not
// others, and filters both pass and refuse.
func TestRouterSubsShape(t *testing.T) {
	subs := routerSubs(10_000)
	r := bus.NewRouter(1, subs)
	if r.Len() != len(subs) {
		t.Fatalf("router indexed %d of %d subscriptions", r.Len(), len(subs))
	}
	var none, matched, filtered int
	for _, ev := range routerEvents(1000) {
		ds := r.Route(ev)
		if len(ds) == 0 {
			none++
		}
		for _, d := range ds {
			if d.Matched {
				matched++
			} else {
				filtered++
				if d.FilteredBy == "" {
					t.Fatalf("event %s: %s filtered without a reason", ev.ID, d.Subscription)
				}
			}
		}
	}
	if none == 0 || matched == 0 || filtered == 0 {
		t.Fatalf("inputs too uniform: %d events with no match, %d matched, %d filtered decisions", none, matched, filtered)
	}
}
