package herald

import (
	"context"
	"errors"
	"time"

	"github.com/heraldwf/herald/heraldtype"
)

// retryDelays are the pauses between the attempts of an idempotent call
// that failed with heraldtype.ErrUnavailable (a connection lost under it): five
// attempts over about a third of a second, enough for a pool to replace a
// terminated connection, short enough not to hide an outage.
var retryDelays = []time.Duration{10 * time.Millisecond, 30 * time.Millisecond, 90 * time.Millisecond, 200 * time.Millisecond}

// idempotent runs fn, again after a short pause while it fails with
// heraldtype.ErrUnavailable, at most len(retryDelays) more times. Only calls
// that are safe to repeat use it: reads, and event sends (the event id,
// chosen before the first attempt, makes a repeat return the first
// receipt). The pauses are on the wall clock, not the engine's Clock: they
// wait for a connection, which a virtual clock does not bring back.
func idempotent[T any](ctx context.Context, fn func() (T, error)) (T, error) {
	for attempt := 0; ; attempt++ {
		v, err := fn()
		if err == nil || !errors.Is(err, heraldtype.ErrUnavailable) || attempt >= len(retryDelays) {
			return v, err
		}
		t := time.NewTimer(retryDelays[attempt])
		select {
		case <-ctx.Done():
			t.Stop()
			return v, err
		case <-t.C:
		}
	}
}
