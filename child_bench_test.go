package herald_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/heraldwf/herald"
)

// BenchmarkChildCall and BenchmarkActivityCall measure one sequential call
// from a workflow: a child workflow (start with the parent's turn, the
// child's turn, its end told to the parent, the parent's turn) against an
// activity (scheduled with the turn, run, its result in the next turn).
// One parent makes b.N calls one after the other.
func BenchmarkChildCall(b *testing.B)    { benchmarkCalls(b, true) }
func BenchmarkActivityCall(b *testing.B) { benchmarkCalls(b, false) }

func benchmarkCalls(b *testing.B, child bool) {
	st := testStore(b)
	rt, err := herald.NewRuntime(st, nil)
	if err != nil {
		b.Fatal(err)
	}
	herald.RegisterActivity(rt, "inc", func(_ context.Context, n int) (int, error) { return n + 1, nil })
	herald.RegisterWorkflow(rt, "inc", func(ctx *herald.Context, n int) (int, error) { return n + 1, nil })
	herald.RegisterWorkflow(rt, "loop", func(ctx *herald.Context, n int) (int, error) {
		v := 0
		for range n {
			f := ctx.CallActivity("inc", v)
			if child {
				f = ctx.CallWorkflow("inc", v)
			}
			if err := f.Get(&v); err != nil {
				return 0, err
			}
		}
		return v, nil
	})
	ctx := context.Background()
	if err := rt.Start(ctx); err != nil {
		b.Fatal(err)
	}
	defer rt.Stop(ctx)
	c, _ := rt.Client(herald.DefaultTenant)
	b.ResetTimer()
	id, err := c.StartWorkflow(ctx, "loop", b.N)
	if err != nil {
		b.Fatal(err)
	}
	info, err := c.WaitForCompletion(ctx, id)
	if err != nil {
		b.Fatal(err)
	}
	var v int
	if err := info.Result(&v); err != nil || v != b.N {
		b.Fatal(fmt.Sprint(v, err))
	}
}
