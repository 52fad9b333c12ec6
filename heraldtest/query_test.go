package heraldtest_test

import (
	"errors"
	"testing"
	"time"

	"github.com/heraldwf/herald"
)

// A query on virtual time: the state after each step, nothing written.
func TestEnv_Query(t *testing.T) {
	env := newEnv(t, func(rt *herald.Runtime) {
		herald.RegisterWorkflow(rt, "steps", func(ctx *herald.Context, _ int) (int, error) {
			done := 0
			if err := herald.SetQuery(ctx, "done", func(struct{}) (int, error) { return done, nil }); err != nil {
				return 0, err
			}
			if err := ctx.SetAttributes(map[string]any{"stage": "sleeping"}); err != nil {
				return 0, err
			}
			for range 3 {
				if err := ctx.Sleep(24 * time.Hour); err != nil {
					return 0, err
				}
				done++
			}
			return done, ctx.SetAttributes(map[string]any{"stage": "done"})
		})
	})
	env.Start("steps", "s-1", nil)
	for day := 0; day <= 3; day++ {
		if day > 0 {
			env.Advance(24 * time.Hour)
		}
		var done int
		if err := env.Query("s-1", "done", nil, &done); err != nil || done != day {
			t.Fatalf("day %d: done %d, %v", day, done, err)
		}
	}
	env.RequireResult(t, "s-1", 3)
	if got := env.Info("s-1").Attributes["stage"]; got != "done" {
		t.Fatalf("stage %v", got)
	}
	if err := env.Query("s-1", "nope", nil, nil); !errors.Is(err, herald.ErrQueryFailed) {
		t.Fatalf("unknown query: %v", err)
	}
}
