package herald_test

// Tests of the door every entering event passes (admit.go): a publish
// checks its data against the cached definition, and a bus delivery to a
// lane is admitted once, in the bus attempt's span.

import (
	"encoding/json"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/heraldwf/herald"
	"github.com/heraldwf/herald/clock"
	"github.com/heraldwf/herald/history"
)

// A publish reads the definition of its type from the store only when the
// cache does not hold it or holds it for longer than about a second
// (engine clock), or after this process changed it; a publish its cached
// definition refuses reads it again and is refused, nothing stored, with
// the typed error.
func TestAdmission_PublishUsesCachedDefinition(t *testing.T) {
	t.Parallel()
	raw := testStore(t)
	st := &defCountingStore{Store: raw}
	clk := clock.NewVirtual(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	b := on(t, mustClient(st, herald.DefaultTenant, &herald.ClientConfig{Clock: clk}))
	other := on(t, mustClient(raw, herald.DefaultTenant, nil)) // another process
	amount := json.RawMessage(`{"type":"object","properties":{"amount":{"type":"number"}},"required":["amount"]}`)
	currency := json.RawMessage(`{"type":"object","required":["amount","currency"]}`)
	publish := func(id string, data any) error {
		t.Helper()
		_, err := b.client.Publish(b.ctx, "order.paid", data, herald.WithEventID(id))
		return err
	}
	refused := func(id string, data any, kind herald.EventInvalidKind) {
		t.Helper()
		err := publish(id, data)
		var ei *herald.EventInvalidError
		if !errors.As(err, &ei) || !errors.Is(err, herald.ErrEventInvalid) || ei.Kind != kind {
			t.Fatalf("publish %s: %v, want an *EventInvalidError of kind %d", id, err, kind)
		}
		if ev, err := b.client.PublishedEvent(b.ctx, id); !errors.Is(err, herald.ErrNotFound) {
			t.Fatalf("refused publish %s stored: %+v, %v", id, ev, err)
		}
	}

	b.define(herald.EventDefinition{Name: "order.paid", Schema: amount})
	st.reads()
	for _, id := range []string{"p1", "p2", "p3", "p4"} {
		if err := publish(id, map[string]any{"amount": 1}); err != nil {
			t.Fatal(err)
		}
	}
	wantDefReads(t, "four publishes after a put", st, 1)

	// Refused by the cached definition: read again before the refusal
	// stands.
	refused("bad", map[string]any{"amount": "one"}, herald.EventSchemaViolation)
	wantDefReads(t, "a publish the cached definition refuses", st, 1)
	if err := publish("p5", map[string]any{"amount": 5}); err != nil {
		t.Fatal(err)
	}
	wantDefReads(t, "a publish after a refusal", st, 0)

	// Changed by another process: the cached entry serves until it is
	// older than about a second, then the new definition applies.
	other.define(herald.EventDefinition{Name: "order.paid", Schema: currency})
	if err := publish("p6", map[string]any{"amount": 6}); err != nil {
		t.Fatal(err)
	}
	wantDefReads(t, "a publish within a second of the read", st, 0)
	clk.Advance(2 * time.Second)
	refused("p7", map[string]any{"amount": 7}, herald.EventSchemaViolation)
	wantDefReads(t, "a publish past a second", st, 1)
	if err := publish("p7", map[string]any{"amount": 7, "currency": "EUR"}); err != nil {
		t.Fatal(err)
	}
	wantDefReads(t, "the next publish", st, 0)

	// Changed through this client: applies to its next publish.
	b.define(herald.EventDefinition{Name: "order.paid", Schema: amount, MaxPayloadBytes: 20})
	refused("p8", map[string]any{"amount": 8, "note": "longer than twenty bytes"}, herald.EventTooLarge)
	wantDefReads(t, "a publish after this client's put", st, 1)
}

// A bus delivery to a positional or queue lane passes the runtime's door
// once per delivered event (one check against its definition), makes no
// span of its own (the event carries the bus attempt's trace: the turn
// that consumes it is the attempt's child), and is refused by its
// definition as a validation failure, nothing stored.
func TestAdmission_BusDeliveryToLaneAdmittedOnce(t *testing.T) {
	t.Parallel()
	sp := newSpans(t)
	var (
		mu       sync.Mutex
		admitted = map[string]int{}
	)
	b := setup(t, &herald.Config{ClientConfig: herald.ClientConfig{TracerProvider: sp.tp}}, func(rt *herald.Runtime) {
		herald.OnAdmit(rt, func(_, name string) {
			mu.Lock()
			admitted[name]++
			mu.Unlock()
		})
		herald.RegisterWorkflow(rt, "order", func(ctx *herald.Context, _ string) (string, error) {
			var paid, shipped map[string]any
			if err := ctx.WaitEvent("paid").Get(&paid); err != nil {
				return "", err
			}
			if err := ctx.Dequeue("shipments").Get(&shipped); err != nil {
				return "", err
			}
			return paid["amount"].(string) + "/" + shipped["carrier"].(string), nil
		})
	})
	b.define(herald.EventDefinition{Name: "shipments",
		Schema: json.RawMessage(`{"type":"object","required":["carrier"]}`)})
	b.subscribe(herald.Subscription{ID: "pay", Pattern: "order.paid",
		Target: herald.Target{Kind: herald.TargetSignal, Name: "paid", InstanceID: "order-{data.order}"}})
	b.subscribe(herald.Subscription{ID: "ship", Pattern: "order.shipped", MaxRetries: intp(0),
		Target: herald.Target{Kind: herald.TargetEnqueue, Name: "shipments", InstanceID: "order-{data.order}"}})
	b.start("order", "order-7", "7")

	b.publish("order.paid", map[string]any{"order": 7, "amount": "12.50"}, "p1")
	b.waitExecution("p1", "pay", "succeeded", statusIs(herald.ExecSucceeded))
	// Refused by the queue's definition: a validation failure, nothing
	// delivered.
	b.publish("order.shipped", map[string]any{"order": 7}, "s0")
	x := b.waitExecution("s0", "ship", "dead-lettered", statusIs(herald.ExecDeadLettered))
	if d, err := b.client.DeadLetterByID(b.ctx, x.DeadLetter); err != nil || d.ErrorKind != herald.ErrorValidation {
		t.Fatalf("dead letter of s0: %+v, %v; want kind validation", d, err)
	}
	if rec, err := b.client.EventFate(b.ctx, "bus:ship:s0"); !errors.Is(err, herald.ErrNotFound) {
		t.Fatalf("the refused delivery was stored: %+v, %v", rec, err)
	}
	b.publish("order.shipped", map[string]any{"order": 7, "carrier": "ups"}, "s1")
	if got := resultOf[string](b, "order-7"); got != "12.50/ups" {
		t.Fatalf("order-7: %q", got)
	}
	b.waitExecution("s1", "ship", "succeeded", statusIs(herald.ExecSucceeded))

	mu.Lock()
	got := map[string]int{"paid": admitted["paid"], "shipments": admitted["shipments"]}
	mu.Unlock()
	if got["paid"] != 1 || got["shipments"] != 2 {
		t.Fatalf("admissions %v, want paid 1 (p1), shipments 2 (s0 refused, s1)", got)
	}
	for _, name := range []string{"herald.raise_event", "herald.enqueue"} {
		if n := len(sp.named(name)); n != 0 {
			t.Fatalf("%d %s spans: a bus delivery makes none of its own", n, name)
		}
	}
	for _, c := range []struct{ ev, sub string }{{"p1", "pay"}, {"s1", "ship"}} {
		var attempt, turn any
		b.waitFor("the delivery's attempt span and the turn that consumed it", func() bool {
			for _, a := range sp.named("herald.bus.attempt") {
				if attrOf(a, "herald.event_id").AsString() != c.ev {
					continue
				}
				attempt = a
				if tr := sp.childOf("herald.turn", a.SpanContext()); tr != nil {
					turn = tr
					return true
				}
			}
			return false
		})
		if attempt == nil || turn == nil {
			t.Fatalf("%s: no turn child of its bus attempt", c.ev)
		}
	}
	if rec, err := b.client.EventFate(b.ctx, "bus:pay:p1"); err != nil || rec.Fate != history.FateDelivered {
		t.Fatalf("fate of bus:pay:p1: %+v, %v", rec, err)
	}
}
