package herald_test

import (
	"context"
	"fmt"
	"log"
	"math/rand/v2"
	"os"
	"path/filepath"

	"github.com/heraldwf/herald"
	"github.com/heraldwf/herald/storage/sqlite"
)

// Workflows talk to each other: a shop asks a warehouse for stock with
// ctx.Enqueue and waits for the answer, which the warehouse sends back with
// ctx.RaiseEvent. Each send is committed with the turn that makes it, and
// the receiver's ledger names the sender. ctx.Version lets new code run
// alongside instances that started under the old; ctx.SideEffect records a
// non-deterministic value once; ctx.Random draws from a seed kept in history.
func Example_workflowPrimitives() {
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

	herald.RegisterWorkflow(rt, "warehouse", func(ctx *herald.Context, _ struct{}) (string, error) {
		var order struct{ From, Item string }
		if err := ctx.Dequeue("orders").Get(&order); err != nil {
			return "", err
		}
		_, err := ctx.RaiseEvent(order.From, "stock", 3) // to the shop, committed with this turn
		return "answered " + order.From, err
	})
	herald.RegisterWorkflow(rt, "shop", func(ctx *herald.Context, item string) (string, error) {
		if _, err := ctx.Enqueue("warehouse-1", "orders", map[string]string{"From": ctx.InstanceID(), "Item": item}); err != nil {
			return "", err // *EventInvalidError: nothing was sent
		}
		var stock int
		if err := ctx.WaitEvent("stock").Get(&stock); err != nil {
			return "", err
		}
		// Instances that started before this change (no marker in their
		// history) keep the old branch; new ones record version 1.
		if ctx.Version("reserve", herald.DefaultVersion, 1) == 1 {
			// Run once; a replay reads the recorded value.
			ref, err := herald.SideEffect(ctx, func() string { return fmt.Sprintf("R-%04d", rand.IntN(10000)) })
			if err != nil {
				return "", err
			}
			_ = ctx.Random().IntN(100) // the same on every replay
			return fmt.Sprintf("%d in stock, reserved (%d chars ref)", stock, len(ref)), nil
		}
		return fmt.Sprintf("%d in stock", stock), nil
	})
	if err := rt.Start(ctx); err != nil {
		log.Fatal(err)
	}
	defer rt.Stop(ctx)

	c, err := rt.Client("acme")
	if err != nil {
		log.Fatal(err)
	}
	c.StartWorkflow(ctx, "warehouse", nil, herald.WithInstanceID("warehouse-1"))
	c.StartWorkflow(ctx, "shop", "lamp", herald.WithInstanceID("shop-1"))
	info, _ := c.WaitForCompletion(ctx, "shop-1")
	var result string
	_ = info.Result(&result)
	fmt.Println(result)
	answers, _ := c.Events(ctx, "shop-1")
	fmt.Println(answers[0].Name, answers[0].Fate, "from", answers[0].Sender)
	// Output:
	// 3 in stock, reserved (6 chars ref)
	// stock delivered from warehouse-1
}
