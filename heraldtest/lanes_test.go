package heraldtest_test

import (
	"testing"

	"github.com/heraldwf/herald"
	"github.com/heraldwf/herald/heraldtest"
	"github.com/heraldwf/herald/history"
)

// Permute on the correlated lane and through the bus: a payment put under
// the order's key and a shipping notice published to the bus (a
// subscription enqueues it on the instance) reach the order in every order
// of arrival, each tenant set up by Spec.Setup.
func TestPermute_CorrelatedAndBusLanes(t *testing.T) {
	orders := 0
	rep := heraldtest.Permute(t, heraldtest.Spec{
		Register: func(rt *herald.Runtime) {
			herald.RegisterWorkflow(rt, "order", func(ctx *herald.Context, _ struct{}) ([2]string, error) {
				var out [2]string
				if err := ctx.WaitCorrelated("payment", "order-1").Get(&out[0]); err != nil {
					return out, err
				}
				var ship struct{ Carrier string }
				err := ctx.Dequeue("shipping").Get(&ship)
				out[1] = ship.Carrier
				return out, err
			})
		},
		Setup: func(c *herald.Client) error {
			ctx := t.Context()
			if _, err := c.PutEventDefinition(ctx, herald.EventDefinition{Name: "payment",
				Correlation: &herald.CorrelationConfig{}}); err != nil {
				return err
			}
			_, err := c.PutSubscription(ctx, herald.Subscription{ID: "ship", Pattern: "order.shipped", Enabled: true,
				Target: herald.Target{Kind: herald.TargetEnqueue, InstanceID: "permute", Name: "shipping"}})
			return err
		},
		Workflow: "order",
		Events: []heraldtest.Event{
			{Label: "pay", Lane: heraldtest.Correlated, Name: "payment", Key: "order-1", Payload: "paid"},
			{Label: "shipped", Lane: heraldtest.Bus, Name: "order.shipped", Payload: map[string]string{"Carrier": "dhl"}},
		},
		Options: []heraldtest.Option{withBackendFromEnv()},
		Check: func(t testing.TB, o *heraldtest.Outcome) {
			orders++
			var got [2]string
			if err := o.Result(&got); err != nil || got != [2]string{"paid", "dhl"} {
				t.Fatalf("result %q %v", got, err)
			}
			if ce := o.Correlated["pay"]; ce == nil {
				t.Fatalf("no correlated record for pay")
			}
			if f := o.Fates["shipped"]; f == nil || f.Bus == nil || f.Bus.Fate != herald.BusDone {
				t.Fatalf("shipped: %+v", f)
			}
			for _, ev := range o.History {
				if ev.Kind == history.EventDropped {
					t.Fatalf("dropped %s", ev.EventID)
				}
			}
		},
	})
	if rep.Failures != 0 || !rep.Exhaustive || orders < 6 {
		t.Fatalf("report %+v after %d checks", rep, orders)
	}
}
