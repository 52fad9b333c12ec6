package herald_test

import (
	"errors"
	"fmt"
	"testing"

	"github.com/heraldwf/herald"
	"github.com/heraldwf/herald/history"
)

// Terminate while the instance's turns commit as fast as they can (a loop
// that continues as new each turn): the end is appended after the last
// committed turn, never over it, on every backend. (PostgreSQL once read
// the history's end in the snapshot of the statement that waited for the
// instance's lock, and collided with the commit it had waited for.)
func TestTerminate_WhileTurnsCommit(t *testing.T) {
	t.Parallel()
	b := setup(t, nil, func(rt *herald.Runtime) {
		herald.RegisterWorkflow(rt, "spin", func(ctx *herald.Context, n int) (int, error) {
			return 0, ctx.ContinueAsNew(n + 1)
		})
	})
	const n = 8
	for i := range n {
		b.start("spin", fmt.Sprintf("spin-%d", i), 0)
	}
	for i := range n {
		id := fmt.Sprintf("spin-%d", i)
		b.waitFor(id+" in its third execution", func() bool {
			info, err := b.client.Status(b.ctx, id)
			return err == nil && info.Execution >= 3
		})
		if err := b.client.Terminate(b.ctx, id, "enough"); err != nil && !errors.Is(err, herald.ErrInstanceNotRunning) {
			t.Fatalf("terminate %s: %v", id, err)
		}
		info := b.waitDone(id)
		if info.Status != herald.StatusTerminated {
			t.Fatalf("%s: %s, want terminated", id, info.Status)
		}
		evs := b.history(id, 0)
		if last := evs[len(evs)-1]; last.Kind != history.ExecutionTerminated || last.Seq != len(evs) {
			t.Fatalf("%s: history ends with %s at seq %d of %d", id, last.Kind, last.Seq, len(evs))
		}
	}
}
