package herald_test

import (
	"testing"

	"github.com/heraldwf/herald"
)

func TestRaiseAfterWaitCompletes(t *testing.T) {
	t.Parallel()
	b := setup(t, nil, func(rt *herald.Runtime) {
		herald.RegisterWorkflow(rt, "w", func(ctx *herald.Context, _ struct{}) (string, error) {
			var s string
			err := ctx.WaitEvent("approval").Get(&s)
			return s, err
		})
	})
	id, err := b.client.StartWorkflow(b.ctx, "w", nil)
	if err != nil {
		t.Fatal(err)
	}
	b.waitHistory(id, "EventSubscribed", "approval", 1)
	b.raise(id, "approval", "yes", "")
	var out string
	if err := b.waitDone(id).Result(&out); err != nil || out != "yes" {
		t.Fatalf("got %q, %v", out, err)
	}
}
