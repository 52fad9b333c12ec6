package herald_test

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/heraldwf/herald"
	"github.com/heraldwf/herald/bus/rule"
)

// TestBusFilter_AbsentFieldAndNumericOrdering (issue 32 item 8): a
// subscription whose rule says "status ne cancelled" does not receive an
// event without a status (nin likewise), and an ordering op with a string
// operand is refused at save with a typed problem, nothing stored.
func TestBusFilter_AbsentFieldAndNumericOrdering(t *testing.T) {
	t.Parallel()
	b := setup(t, nil, func(rt *herald.Runtime) { okHandler(rt, "h", nil) })
	for id, cond := range map[string]string{
		"ne":  `{"field":"data.status","op":"ne","value":"cancelled"}`,
		"nin": `{"field":"data.status","op":"nin","value":["cancelled"]}`,
	} {
		b.subscribe(herald.Subscription{ID: id, Pattern: "order.*",
			Filter: json.RawMessage(`{"logic":"AND","conditions":[` + cond + `]}`),
			Target: herald.Target{Kind: herald.TargetHandler, Handler: "h"}})
	}
	b.publish("order.paid", map[string]any{"amount": 5}, "no-status")
	b.publish("order.paid", map[string]any{"status": "open"}, "open")
	ev := b.waitEnded("no-status")
	for _, sub := range []string{"ne", "nin"} {
		r := routeOf(ev, sub)
		if r == nil || r.Matched || !strings.Contains(r.FilteredBy, "data.status "+sub+"): absent") {
			t.Errorf("no status, %s: %s; want filtered out as absent", sub, describeBus(ev))
		}
	}
	if ev.Fate != herald.BusFiltered {
		t.Errorf("no status: fate %s, want filtered", ev.Fate)
	}
	ev = b.waitEnded("open")
	for _, sub := range []string{"ne", "nin"} {
		if r := routeOf(ev, sub); r == nil || !r.Matched {
			t.Errorf("status open, %s: %s; want matched", sub, describeBus(ev))
		}
	}

	_, err := b.client.PutSubscription(b.ctx, herald.Subscription{ID: "big", Pattern: "order.*",
		Filter: json.RawMessage(`{"logic":"AND","conditions":[{"field":"data.amount","op":"gt","value":"abc"},{"field":"data.n","op":"lte","value":"10"}]}`),
		Target: herald.Target{Kind: herald.TargetHandler, Handler: "h"}})
	var se *herald.SubscriptionInvalidError
	var ie *rule.InvalidError
	if !errors.As(err, &se) || !errors.As(err, &ie) || !errors.Is(err, herald.ErrInvalidArgument) || !errors.Is(err, rule.ErrNotNumeric) {
		t.Fatalf("gt \"abc\": %v; want a *SubscriptionInvalidError with the filter's not-numeric problems", err)
	}
	if len(ie.Problems) != 2 || ie.Problems[0].Code != rule.CodeNotNumeric || ie.Problems[0].Path != "$.conditions[0].value" ||
		ie.Problems[1].Code != rule.CodeNotNumeric || ie.Problems[1].Path != "$.conditions[1].value" {
		t.Errorf("problems %+v, want both ordering operands named", ie.Problems)
	}
	if len(se.Reasons) != 2 || !strings.Contains(se.Reasons[0], `op gt needs a number, not "abc"`) {
		t.Errorf("reasons %q", se.Reasons)
	}
	if _, err := b.client.Subscription(b.ctx, "big"); !errors.Is(err, herald.ErrNotFound) {
		t.Errorf("refused subscription: Subscription = %v, want ErrNotFound (nothing stored)", err)
	}
}
