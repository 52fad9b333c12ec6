package herald_test

import (
	"encoding/json"
	"slices"
	"testing"

	"github.com/heraldwf/herald"
)

// publishedBehind is a store with two runtimes: pub, whose bus is off,
// publishes and changes subscriptions while nothing routes; route, started
// by routeNow, routes and runs what pub left (handler "h").
type publishedBehind struct {
	t   *testing.T
	pub *bundle
}

func newPublishedBehind(t *testing.T) *publishedBehind {
	st := testStore(t)
	return &publishedBehind{t: t, pub: setupOn(t, st, &herald.Config{Bus: herald.BusConfig{Disabled: true}}, nil)}
}

func (p *publishedBehind) routeNow() *bundle {
	return setupOn(p.t, p.pub.store, nil, func(rt *herald.Runtime) { okHandler(rt, "h", nil) })
}

func handlerSubscription(id, pattern, filter string) herald.Subscription {
	s := herald.Subscription{ID: id, Pattern: pattern, Target: herald.Target{Kind: herald.TargetHandler, Handler: "h"}}
	if filter != "" {
		s.Filter = json.RawMessage(filter)
	}
	return s
}

// wantRoutes checks an event's routes once it ended: matched and filtered
// name exactly the subscriptions it was matched against and those whose
// filter said no.
func wantRoutes(b *bundle, eventID string, matched, filtered []string) *herald.PublishedEvent {
	b.t.Helper()
	ev := b.waitEnded(eventID)
	m, f := matchedSubs(ev)
	if !slices.Equal(m, matched) || !slices.Equal(f, filtered) {
		b.t.Fatalf("%s: matched %v filtered %v, want matched %v filtered %v (%s)", eventID, m, f, matched, filtered, describeBus(ev))
	}
	return ev
}

// An event is matched against the subscriptions in force when it was
// published, however late it is routed: e1, published while only old
// existed, goes to old (whose execution then finds it deleted, as one
// queued before the delete does) and never to young, created after it;
// e2, published after the change, goes to young only. Issue 32 item 6:
// e1 went to young and never to old.
func TestRoutingUsesSubscriptionsAsOfPublish(t *testing.T) {
	t.Parallel()
	p := newPublishedBehind(t)
	pub := p.pub
	pub.subscribe(handlerSubscription("old", "order.*", ""))
	pub.publish("order.placed", map[string]int{"n": 1}, "e1")
	if err := pub.client.DeleteSubscription(pub.ctx, "old"); err != nil {
		t.Fatal(err)
	}
	pub.subscribe(handlerSubscription("young", "order.*", ""))
	pub.publish("order.placed", map[string]int{"n": 2}, "e2")

	b := p.routeNow()
	ev := wantRoutes(b, "e1", []string{"old"}, nil)
	if x := routeOf(ev, "old").Execution; x.Status != herald.ExecDeadLettered {
		t.Fatalf("e1's execution of the deleted old: %s, want dead-lettered (%s)", x.Status, describeBus(ev))
	}
	ev = wantRoutes(b, "e2", []string{"young"}, nil)
	if x := routeOf(ev, "young").Execution; x.Status != herald.ExecSucceeded {
		t.Fatalf("e2's execution of young: %s, want succeeded (%s)", x.Status, describeBus(ev))
	}
}

// A subscription's update (its filter, here) applies to the events
// published after it; those published before are matched against the
// version they were published under, and so are those published before a
// disable.
func TestRoutingUsesSubscriptionVersionAsOfPublish(t *testing.T) {
	t.Parallel()
	p := newPublishedBehind(t)
	pub := p.pub
	one := `{"logic":"AND","conditions":[{"field":"data.n","op":"eq","value":1}]}`
	two := `{"logic":"AND","conditions":[{"field":"data.n","op":"eq","value":2}]}`
	pub.subscribe(handlerSubscription("f", "job", one))
	pub.publish("job", map[string]int{"n": 1}, "before-1")
	pub.publish("job", map[string]int{"n": 2}, "before-2")
	pub.subscribe(handlerSubscription("f", "job", two))
	pub.publish("job", map[string]int{"n": 1}, "after-1")
	pub.publish("job", map[string]int{"n": 2}, "after-2")
	off := handlerSubscription("f", "job", two)
	if _, err := pub.client.PutSubscription(pub.ctx, off); err != nil { // Enabled false
		t.Fatal(err)
	}
	pub.publish("job", map[string]int{"n": 2}, "disabled")

	b := p.routeNow()
	wantRoutes(b, "before-1", []string{"f"}, nil)
	wantRoutes(b, "before-2", nil, []string{"f"})
	wantRoutes(b, "after-1", nil, []string{"f"})
	wantRoutes(b, "after-2", []string{"f"}, nil)
	if ev := wantRoutes(b, "disabled", nil, nil); ev.Fate != herald.BusNoMatch {
		t.Fatalf("an event published while f is disabled: %s", describeBus(ev))
	}
	for _, id := range []string{"before-1", "after-2"} {
		if x := routeOf(b.published(id), "f").Execution; x.Status != herald.ExecSucceeded {
			t.Fatalf("%s's execution: %s, want succeeded", id, x.Status)
		}
	}
}
