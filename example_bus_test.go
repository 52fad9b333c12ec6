package herald_test

import (
	"context"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"time"

	"github.com/heraldwf/herald"
	"github.com/heraldwf/herald/storage/sqlite"
)

// The event bus: an order.paid event is published; a subscription with a
// filter hands big orders to a script. The script refuses orders over 5,000
// with a PermanentError, so that event lands in the dead-letter queue;
// once the script is fixed, the dead letter is reprocessed. Every published
// event has a fate.
//
// A program whose runtime runs scripts calls herald.ServeScriptChild()
// first thing in main: scripts run sandboxed in child processes of the
// program (this test binary does it in TestMain).
func Example_eventBus() {
	ctx := context.Background()
	dir, _ := os.MkdirTemp("", "herald-example")
	defer os.RemoveAll(dir)
	store, err := sqlite.Open(ctx, filepath.Join(dir, "herald.db"))
	if err != nil {
		log.Fatal(err)
	}
	defer store.Close()
	rt, err := herald.NewRuntime(store, nil)
	if err != nil {
		log.Fatal(err)
	}
	if err := rt.Start(ctx); err != nil {
		log.Fatal(err)
	}
	defer rt.Stop(ctx)
	c, _ := rt.Client("acme")

	_, err = c.PutScript(ctx, "review", `
		if (ctx.event.data.amount > 5000) throw new PermanentError("needs a human");
		log("reviewed", ctx.event.id);
		return {ok: ctx.event.data.order_id};`)
	if err != nil {
		log.Fatal(err)
	}
	_, err = c.PutSubscription(ctx, herald.Subscription{
		ID: "big-orders", Pattern: "order.*", Enabled: true,
		Filter: []byte(`{"logic":"AND","conditions":[{"field":"data.amount","op":"gte","value":1000}]}`),
		Target: herald.Target{Kind: herald.TargetScript, Script: "review"},
	})
	if err != nil {
		log.Fatal(err)
	}

	for i, amount := range []int{1200, 30, 9000} {
		id := fmt.Sprintf("pay-%d", i+1)
		if _, err := c.Publish(ctx, "order.paid", map[string]int{"order_id": i + 1, "amount": amount},
			herald.WithEventID(id)); err != nil {
			log.Fatal(err)
		}
		ev := waitSettled(ctx, c, id)
		r := ev.Routes[0]
		switch {
		case !r.Matched:
			fmt.Println(id, ev.Fate, "by", r.FilteredBy)
		case r.Execution.Status == herald.ExecDeadLettered:
			fmt.Println(id, ev.Fate, r.Execution.Status, "dead letter", r.Execution.DeadLetter)
		default:
			fmt.Println(id, ev.Fate, r.Execution.Status, string(r.Execution.Result))
		}
	}

	page, _ := c.DeadLetters(ctx, herald.DeadLetterFilter{Subscription: "big-orders"})
	d := page.Letters[0]
	fmt.Println("dead letter:", d.EventID, d.ErrorKind, d.Error)

	// Fix the script; reprocess: the dead letter's execution runs again
	// against the script's latest version.
	_, _ = c.PutScript(ctx, "review", `return {ok: ctx.event.data.order_id, manual: true};`)
	n, _ := c.ReprocessDeadLetters(ctx, herald.DeadLetterFilter{Subscription: "big-orders"})
	ev := waitSettled(ctx, c, "pay-3")
	x := ev.Routes[0].Execution
	fmt.Println("reprocessed", n, "→ pay-3", x.Status, string(x.Result))
	// Output:
	// pay-1 done succeeded {"ok":1}
	// pay-2 filtered by $.conditions[0] (data.amount gte): value
	// pay-3 done dead_lettered dead letter 1
	// dead letter: pay-3 permanent needs a human
	// reprocessed 1 → pay-3 succeeded {"ok":3,"manual":true}
}

// waitSettled polls a published event until every execution has ended.
func waitSettled(ctx context.Context, c *herald.Client, id string) *herald.PublishedEvent {
	for {
		ev, err := c.PublishedEvent(ctx, id)
		if err != nil {
			log.Fatal(err)
		}
		settled := ev.Fate == herald.BusDone || ev.Fate == herald.BusNoMatch || ev.Fate == herald.BusFiltered
		for _, r := range ev.Routes {
			if r.Execution != nil && !r.Execution.Status.Terminal() {
				settled = false
			}
		}
		if settled {
			return ev
		}
		time.Sleep(5 * time.Millisecond)
	}
}
