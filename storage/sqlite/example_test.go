package sqlite_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/heraldwf/herald/storage"
	"github.com/heraldwf/herald/storage/sqlite"
)

func Example() {
	dir, err := os.MkdirTemp("", "herald-example")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer os.RemoveAll(dir)

	ctx := context.Background()
	// Durable by default (synchronous=FULL); NORMAL trades the last commits
	// on power loss for speed.
	store, err := sqlite.Open(ctx, filepath.Join(dir, "herald.db"), sqlite.WithSynchronous(sqlite.SynchronousNormal))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer store.Close()

	inst, err := store.InstanceCreate(ctx, &storage.InstanceCreateParams{Tenant: "default", ID: "order-1", Workflow: "approval"})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(inst.ID, inst.Status, inst.Execution)

	turns, err := store.TurnClaim(ctx, &storage.TurnClaimParams{Tenant: "default"})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(len(turns), turns[0].Messages[0].Kind)
	// Output:
	// order-1 pending 1
	// 1 kick
}
