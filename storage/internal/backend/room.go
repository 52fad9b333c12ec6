package backend

import (
	"context"
	"errors"
	"time"

	"github.com/heraldwf/herald/heraldtype"
)

// RoomRetry is how often UntilRoom tries again, at most.
const RoomRetry = 100 * time.Millisecond

// UntilRoom runs write, and runs it again while it fails with
// heraldtype.ErrStorageFull (after 2 ms, then twice as long each time, up to
// RoomRetry), until it succeeds or fails otherwise, ctx ends or closing is
// closed; it then returns write's last error. The backends use it for the
// calls that hand back work the runtime holds (TurnAbandon, ActivityComplete,
// ActivityRetry): the runtime does not retry them, and one lost to a full
// disk would leave the work leased until its lease ran out, long after room
// was made.
func UntilRoom(ctx context.Context, closing <-chan struct{}, write func() error) error {
	wait := time.Millisecond
	for {
		err := write()
		if !errors.Is(err, heraldtype.ErrStorageFull) {
			return err
		}
		wait = min(2*wait, RoomRetry)
		t := time.NewTimer(wait)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return err
		case <-closing:
			t.Stop()
			return err
		}
	}
}
