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

// An approval workflow waits for a "decision" event, racing it against a
// deadline. The decision is raised before the workflow gets to its wait: it
// is buffered, not lost, and every event's fate can be asked for by id.
func Example() {
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
	herald.RegisterActivity(rt, "notify", func(ctx context.Context, item string) (string, error) {
		return "notified about " + item, nil // send an e-mail, call an API...
	})
	herald.RegisterWorkflow(rt, "approval", func(ctx *herald.Context, item string) (string, error) {
		if err := ctx.CallActivity("notify", item).Get(nil); err != nil {
			return "", err
		}
		decision := ctx.WaitEvent("decision")
		if ctx.Select(decision, ctx.Timer(24*time.Hour)) == 1 {
			return item + ": no answer in time", nil
		}
		var approved bool
		if err := decision.Get(&approved); err != nil {
			return "", err
		}
		return fmt.Sprintf("%s: approved=%v", item, approved), nil
	})
	if err := rt.Start(ctx); err != nil {
		log.Fatal(err)
	}
	defer rt.Stop(ctx)

	c, err := rt.Client("acme") // a client of one tenant; the runtime serves every tenant
	if err != nil {
		log.Fatal(err)
	}
	// With IDReuseUseExisting a second run finds order-42 instead of failing.
	id, _ := c.StartWorkflow(ctx, "approval", "laptop", herald.WithInstanceID("order-42"),
		herald.WithIDReusePolicy(herald.IDReuseUseExisting))
	receipt, _ := c.RaiseEvent(ctx, id, "decision", true, herald.WithEventID("order-42/decision"))

	info, _ := c.WaitForCompletion(ctx, id)
	var result string
	_ = info.Result(&result)
	fate, _ := c.EventFate(ctx, receipt.EventID)
	fmt.Println(result)
	fmt.Println(fate.Fate, "to wait", fate.WaitNumber)
	// Output:
	// laptop: approved=true
	// delivered to wait 1
}
