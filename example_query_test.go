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

// A cart workflow answers a query about its contents from its replayed
// state (writing nothing), and tags its instance with searchable
// attributes that ListInstances filters on.
func Example_queriesAndAttributes() {
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

	herald.RegisterWorkflow(rt, "cart", func(ctx *herald.Context, customer string) ([]string, error) {
		var items []string
		// A query handler reads the workflow's variables; it writes no history.
		if err := herald.SetQuery(ctx, "items", func(struct{}) ([]string, error) { return items, nil }); err != nil {
			return nil, err
		}
		// Attributes are a decision: stored on the instance with this turn.
		if err := ctx.SetAttributes(map[string]any{"customer": customer, "items": 0}); err != nil {
			return nil, err
		}
		for {
			var item string
			if err := ctx.Dequeue("add").Get(&item); err != nil {
				return nil, err
			}
			if item == "checkout" {
				return items, nil
			}
			items = append(items, item)
			if err := ctx.SetAttributes(map[string]any{"items": len(items)}); err != nil {
				return nil, err
			}
		}
	})
	if err := rt.Start(ctx); err != nil {
		log.Fatal(err)
	}
	defer rt.Stop(ctx)

	c, err := rt.Client(herald.DefaultTenant) // a runtime's client: it can run the workflow's query handlers
	if err != nil {
		log.Fatal(err)
	}
	id, _ := c.StartWorkflow(ctx, "cart", "ada", herald.WithInstanceID("cart-1"))
	c.Enqueue(ctx, id, "add", "book")
	c.Enqueue(ctx, id, "add", "lamp")
	for { // wait until both items are in (a real program would not poll)
		page, _ := c.ListInstances(ctx, herald.InstanceFilter{Attributes: map[string]any{"customer": "ada", "items": 2}})
		if len(page.Instances) == 1 {
			fmt.Println("found", page.Instances[0].ID, page.Instances[0].Attributes["items"])
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	var items []string
	if err := c.Query(ctx, id, "items", nil, &items); err != nil {
		log.Fatal(err)
	}
	fmt.Println("items:", items)
	err = c.Query(ctx, id, "total", nil, nil)
	fmt.Println(err)

	// Output:
	// found cart-1 2
	// items: [book lamp]
	// herald: query "total" of "cart-1": unknown_query: the workflow has no such query handler (registered: items)
}
