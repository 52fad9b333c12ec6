// Package busload generates the event bus's benchmark workload: a
// tenant's subscriptions of varied patterns and filters, and events over the
// same types. One generator serves the bus package's Go benchmarks and
// heraldbench's bus-match scenario, so both measure the same thing.
package busload

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/heraldwf/herald/heraldtype"
	"github.com/heraldwf/herald/storage"
)

// Pattern draws one subscription pattern from rng, over 20 domains × 25
// entities × 8 actions: 70 % exact types ("domain3.entity7.action1"), 10 %
// "domain.entity.*", 5 % "domain.>", 5 % "*.entity.action", 5 %
// "domain.*.action", 5 % "domain.entity.>".
func Pattern(rng *rand.Rand) string {
	seg := func(kind string, n int) string { return fmt.Sprintf("%s%d", kind, rng.IntN(n)) }
	d, e, a := seg("domain", 20), seg("entity", 25), seg("action", 8)
	switch r := rng.IntN(100); {
	case r < 70:
		return d + "." + e + "." + a
	case r < 80:
		return d + "." + e + ".*"
	case r < 85:
		return d + ".>"
	case r < 90:
		return "*." + e + "." + a
	case r < 95:
		return d + ".*." + a
	default:
		return d + "." + e + ".>"
	}
}

// Subscriptions makes n subscriptions of the shapes a tenant's bus sees
// (patterns from Pattern); a third of them carry a filter (an eq, an
// in-list, a numeric range, or an AND with a nested OR).
func Subscriptions(n int) []*heraldtype.Subscription {
	rng := rand.New(rand.NewPCG(4, 12))
	filters := []string{
		`{"field":"data.role","op":"eq","value":"admin"}`,
		`{"field":"data.plan","op":"in","value":["pro","team","enterprise"]}`,
		`{"logic":"AND","conditions":[{"field":"data.amount","op":"gte","value":100},{"field":"data.amount","op":"lt","value":5000}]}`,
		`{"logic":"AND","conditions":[{"field":"data.role","op":"ne","value":"guest"},{"logic":"OR","conditions":[` +
			`{"field":"data.plan","op":"eq","value":"pro"},{"field":"data.seats","op":"gte","value":10}]}]}`,
	}
	subs := make([]*heraldtype.Subscription, n)
	for i := range subs {
		s := &heraldtype.Subscription{ID: fmt.Sprintf("sub-%05d", i), Pattern: Pattern(rng), Enabled: true,
			Target: heraldtype.Target{Kind: heraldtype.TargetHandler, Handler: "h"}}
		if i%3 == 0 {
			s.Filter = json.RawMessage(filters[rng.IntN(len(filters))])
		}
		subs[i] = s
	}
	return subs
}

// Events makes n events to route: types over the same vocabulary (a
// tenth with a fourth, version segment; one in twenty of a domain no
// subscription names, which matches nothing) and small data objects.
func Events(n int) []*storage.BusEvent {
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
