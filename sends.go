package herald

import (
	"context"
	"errors"
	"fmt"

	"github.com/heraldwf/herald/heraldtype"
	"github.com/heraldwf/herald/history"
	"github.com/heraldwf/herald/storage"
)

// FailureSend is the kind of an instance's failure (WorkflowError.Kind)
// when an event it sent (Context.RaiseEvent, Context.Enqueue) was refused
// as its turn committed: the event's definition refused the payload, or its
// event id had been used for another target.
const FailureSend = heraldtype.FailureSend

// prepareSends applies each event definition to the events a turn sends,
// as a client's send does (the payload checked against its schema and
// size cap; latest-value buffering and retention filled in), and gives
// them the turn's trace context. refused is the first event a definition
// refused (the instance is to fail with it); err is a store error (the turn
// is to be retried).
func (r *Runtime) prepareSends(ctx context.Context, tenant string, sends []storage.TurnSend, traceParent string) (refused, err error) {
	if len(sends) == 0 {
		return nil, nil
	}
	c, err := r.Client(tenant)
	if err != nil {
		return nil, err
	}
	lim := c.limitsFor(ctx)
	now := r.cfg.Clock.Now()
	for i := range sends {
		s := &sends[i]
		s.TraceParent = traceParent
		p := &storage.EventRaiseParams{Tenant: tenant, InstanceID: s.InstanceID, EventID: s.EventID, Lane: s.Lane,
			Name: s.Name, Payload: s.Payload, Now: now}
		// Read from the store, not from the client's definition cache: a
		// turn's sends are not conditional on a definition version.
		def, err := c.storedDefinition(ctx, s.Name)
		if err != nil {
			return nil, err
		}
		if err := c.applyDefinition(p, def, lim); err != nil {
			var ei *EventInvalidError
			var di *DefinitionInvalidError
			if errors.As(err, &ei) || errors.As(err, &di) {
				return fmt.Errorf("send %s %q to %s (event %s): %w", s.Lane, s.Name, s.InstanceID, s.EventID, err), nil
			}
			return nil, err
		}
		s.Latest, s.ExpiresAt = p.Latest, p.ExpiresAt
	}
	return nil, nil
}

// failSend ends an instance whose turn sent an event that was refused
// (prepareSends, or the commit's ErrEventIDConflict): failed, with a
// failure of kind FailureSend naming the event, its pending and buffered
// events dropped (instance_terminal) as for any end. Nothing of the turn
// is written.
func (r *Runtime) failSend(ctx context.Context, t *storage.Turn, cause error) {
	msg := failureText(cause)
	if r.endFromTurn(ctx, t, "record instance failure", "", &history.Failure{Kind: FailureSend, Message: msg}) {
		r.logger.Error("herald: instance failed: an event it sent was refused", "instance", t.Instance.ID,
			"workflow", t.Instance.Workflow, "err", msg)
	}
}

// reportSends reports the events a committed turn sent as accepted
// (Observer.EventAccepted), as a client's sends are.
func (r *Runtime) reportSends(tenant string, sends []storage.TurnSend) {
	for i := range sends {
		s := &sends[i]
		r.obs.EventAccepted(EventReport{Tenant: tenant, InstanceID: s.InstanceID, EventID: s.EventID,
			Lane: string(s.Lane), Name: s.Name})
	}
}
