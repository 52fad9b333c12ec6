package herald

import (
	"context"

	"github.com/heraldwf/herald/heraldtype"
	"github.com/heraldwf/herald/history"
	"github.com/heraldwf/herald/storage"
)

// FailureSend is the kind of an instance's failure (WorkflowError.Kind)
// when an event it sent (Context.RaiseEvent, Context.Enqueue) was refused
// as its turn committed: the event's definition refused the payload, or its
// event id had been used for another target.
const FailureSend = heraldtype.FailureSend

// failSend ends an instance whose turn sent an event that was refused
// (admission.admitTurnSends, or the commit's ErrEventIDConflict): failed, with a
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
