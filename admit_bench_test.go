package herald_test

import (
	"encoding/json"
	"testing"

	"github.com/heraldwf/herald"
)

// BenchmarkDoor measures a raise and a publish of an event with a
// definition (schema) through a client, store included: with -benchmem,
// the door's allocations per event.
func BenchmarkDoor(b *testing.B) {
	st := testStore(b)
	c := mustClient(st, herald.DefaultTenant, nil)
	ctx := b.Context()
	schema := json.RawMessage(`{"type":"object","properties":{"amount":{"type":"number"}},"required":["amount"]}`)
	for _, name := range []string{"paid", "order.paid"} {
		if _, err := c.PutEventDefinition(ctx, herald.EventDefinition{Name: name, Schema: schema}); err != nil {
			b.Fatal(err)
		}
	}
	payload := json.RawMessage(`{"amount":12.5}`)
	b.Run("raise", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := c.RaiseEvent(ctx, "i", "paid", payload); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("publish", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := c.Publish(ctx, "order.paid", payload); err != nil {
				b.Fatal(err)
			}
		}
	})
}
