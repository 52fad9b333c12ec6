package herald_test

import (
	"errors"
	"testing"

	"github.com/heraldwf/herald"
)

// A start under a taken id fails by default; with IDReuseUseExisting it
// returns the existing instance of the same workflow (running or ended),
// changes nothing, and still refuses an instance of another workflow.
func TestStartWorkflow_IDReusePolicy(t *testing.T) {
	t.Parallel()
	b := setup(t, nil, func(rt *herald.Runtime) {
		herald.RegisterWorkflow(rt, "echo", func(ctx *herald.Context, in string) (string, error) { return in, nil })
		herald.RegisterWorkflow(rt, "other", func(ctx *herald.Context, in string) (string, error) { return in, nil })
	})
	ctx := t.Context()
	c := b.client
	id, err := c.StartWorkflow(ctx, "echo", "first", herald.WithInstanceID("order-1"))
	if err != nil || id != "order-1" {
		t.Fatalf("first start: %q, %v", id, err)
	}
	if _, err := c.StartWorkflow(ctx, "echo", "second", herald.WithInstanceID("order-1")); !errors.Is(err, herald.ErrInstanceExists) {
		t.Fatalf("second start with the default policy: %v, want ErrInstanceExists", err)
	}
	if _, err := c.StartWorkflow(ctx, "echo", "second", herald.WithInstanceID("order-1"),
		herald.WithIDReusePolicy(herald.IDReuseFail)); !errors.Is(err, herald.ErrInstanceExists) {
		t.Fatalf("second start with IDReuseFail: %v, want ErrInstanceExists", err)
	}
	var out string
	b.result("order-1", &out)
	if out != "first" {
		t.Fatalf("result %q, want first", out)
	}
	before, err := c.Status(ctx, "order-1")
	if err != nil {
		t.Fatal(err)
	}
	// The tour run twice: the same start finds the completed instance.
	for range 2 {
		id, err := c.StartWorkflow(ctx, "echo", "again", herald.WithInstanceID("order-1"),
			herald.WithIDReusePolicy(herald.IDReuseUseExisting))
		if err != nil || id != "order-1" {
			t.Fatalf("start with IDReuseUseExisting: %q, %v; want order-1", id, err)
		}
	}
	after, err := c.Status(ctx, "order-1")
	if err != nil || string(after.Input) != string(before.Input) || !after.UpdatedAt.Equal(before.UpdatedAt) || after.Status != herald.StatusCompleted {
		t.Fatalf("instance after reuse: %+v, %v; want it unchanged: %+v", after, err, before)
	}
	// Another workflow under the id is refused, policy or not.
	if _, err := c.StartWorkflow(ctx, "other", "x", herald.WithInstanceID("order-1"),
		herald.WithIDReusePolicy(herald.IDReuseUseExisting)); !errors.Is(err, herald.ErrInstanceExists) {
		t.Fatalf("start of another workflow under the id: %v, want ErrInstanceExists", err)
	}
	// A policy that is not one of the constants is refused; nothing starts.
	if _, err := c.StartWorkflow(ctx, "echo", "x", herald.WithInstanceID("order-3"),
		herald.WithIDReusePolicy(herald.IDReusePolicy(7))); !errors.Is(err, herald.ErrInvalidArgument) {
		t.Fatalf("start with policy 7: %v, want ErrInvalidArgument", err)
	}
	if _, err := c.Status(ctx, "order-3"); !errors.Is(err, herald.ErrNotFound) {
		t.Fatalf("order-3 after a refused start: %v, want ErrNotFound", err)
	}
	// A fresh id starts normally with the policy set.
	if id, err := c.StartWorkflow(ctx, "echo", "new", herald.WithInstanceID("order-2"),
		herald.WithIDReusePolicy(herald.IDReuseUseExisting)); err != nil || id != "order-2" {
		t.Fatalf("fresh start: %q, %v", id, err)
	}
	b.result("order-2", &out)
	if out != "new" {
		t.Fatalf("order-2 result %q, want new", out)
	}
}
