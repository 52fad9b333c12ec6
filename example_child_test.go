package herald_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"time"

	"github.com/heraldwf/herald"
	"github.com/heraldwf/herald/storage/sqlite"
)

// An order workflow charges the customer in a child workflow, racing it
// against a deadline; a shipment is canceled while it waits, and cleans up
// before it ends canceled.
func ExampleContext_CallWorkflow() {
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

	herald.RegisterWorkflow(rt, "charge", func(ctx *herald.Context, cents int) (string, error) {
		if cents > 100_000 {
			return "", errors.New("over the card's limit")
		}
		return fmt.Sprintf("charged %d cents", cents), nil
	})
	herald.RegisterWorkflow(rt, "order", func(ctx *herald.Context, cents int) (string, error) {
		charge := ctx.CallWorkflow("charge", cents, herald.WithChildID(ctx.InstanceID()+"/charge"))
		if ctx.Select(charge, ctx.Timer(time.Hour)) == 1 {
			return "gave up: the charge took too long", nil // the child is asked to cancel
		}
		var receipt string
		var failed *herald.ChildWorkflowError
		if err := charge.Get(&receipt); errors.As(err, &failed) {
			return "not charged: " + failed.Failure.Message, nil
		} else if err != nil {
			return "", err
		}
		return receipt, nil
	})
	herald.RegisterActivity(rt, "release", func(ctx context.Context, item string) (string, error) {
		return "released " + item, nil
	})
	herald.RegisterWorkflow(rt, "shipment", func(ctx *herald.Context, item string) (string, error) {
		if ctx.Select(ctx.WaitEvent("picked"), ctx.Done()) == 1 { // canceled first
			var s string
			if err := ctx.CallActivity("release", item).Get(&s); err != nil { // cleanup runs
				return "", err
			}
			return s, ctx.Err()
		}
		return item + " shipped", nil
	})
	if err := rt.Start(ctx); err != nil {
		log.Fatal(err)
	}
	defer rt.Stop(ctx)
	c, err := rt.Client("acme")
	if err != nil {
		log.Fatal(err)
	}

	for _, o := range []struct {
		id    string
		cents int
	}{{"order-1", 4_200}, {"order-2", 250_000}} {
		if _, err := c.StartWorkflow(ctx, "order", o.cents, herald.WithInstanceID(o.id)); err != nil {
			log.Fatal(err)
		}
		info, _ := c.WaitForCompletion(ctx, o.id)
		var result string
		_ = info.Result(&result)
		child, _ := c.Status(ctx, o.id+"/charge")
		fmt.Printf("%s: %s (child %s of %s, %s)\n", o.id, result, child.ID, child.ParentID, child.Status)
	}

	id, _ := c.StartWorkflow(ctx, "shipment", "desk", herald.WithInstanceID("ship-1"))
	if err := c.CancelWorkflow(ctx, id, "order withdrawn"); err != nil {
		log.Fatal(err)
	}
	info, _ := c.WaitForCompletion(ctx, id)
	fmt.Println(info.Status, errors.Is(info.Err(), herald.ErrCanceled), info.Err())
	fmt.Println(errors.Is(c.CancelWorkflow(ctx, id, "again"), herald.ErrInstanceNotRunning))
	// Output:
	// order-1: charged 4200 cents (child order-1/charge of order-1, completed)
	// order-2: not charged: over the card's limit (child order-2/charge of order-2, failed)
	// canceled true herald: canceled: order withdrawn
	// true
}
