package herald

import (
	"errors"
	"fmt"
	"time"

	"github.com/heraldwf/herald/heraldtype"
	"github.com/heraldwf/herald/history"
	"github.com/heraldwf/herald/internal/replay"
)

// ReplayHistory re-runs the registered workflow named in events (one
// execution's history, as Client.History returns it) over that history and
// checks the code still makes the same decisions. It returns a
// *NondeterminismError if the code diverges, or an error if it would make
// decisions the history does not have. Use it in tests to guard workflow
// changes against recorded histories.
func (r *Runtime) ReplayHistory(events []history.Event) error {
	if len(events) == 0 || events[0].Kind != history.ExecutionStarted {
		return errors.New("herald: ReplayHistory: history must start with ExecutionStarted")
	}
	wf := r.workflow(events[0].Workflow)
	if wf == nil {
		return fmt.Errorf("herald: workflow %q: %w", events[0].Workflow, ErrNotRegistered)
	}
	out, err := replay.Run(&replay.Input{
		InstanceID: "replay",
		Workflow:   wf,
		History:    events,
		Now:        events[len(events)-1].Time.Add(time.Nanosecond),
		Limits:     r.replayLimits(heraldtype.TenantLimits{}), // no tenant: the runtime's own limits
	})
	if err != nil {
		return err
	}
	if out.Failure != nil && out.Failure.Kind == replay.FailureNondeterminism {
		return out.Failure.Err()
	}
	if len(out.NewEvents) > 0 {
		ev := out.NewEvents[0]
		return &NondeterminismError{Seq: ev.Seq, Expected: "end of history", Actual: fmt.Sprintf("%s %q", ev.Kind, ev.Name)}
	}
	return nil
}

// replayLimits is the one home of the limits a replay enforces: the
// tenant's own where it sets one, else the runtime's. A turn, a query and
// ReplayHistory (which has no tenant, so passes none) all replay under it.
func (r *Runtime) replayLimits(tl heraldtype.TenantLimits) replay.Limits {
	return replay.Limits{
		MaxUnconsumedEvents:       override(tl.MaxUnconsumedEvents, r.cfg.MaxUnconsumedEvents),
		MaxCarryForwardExecutions: override(tl.MaxCarryForwardExecutions, r.cfg.MaxCarryForwardExecutions),
		MaxQueuedEvents:           override(tl.MaxQueuedEvents, r.cfg.MaxQueuedEvents),
	}
}
