package replay

import (
	"encoding/json"
	"fmt"

	"github.com/heraldwf/herald/history"
	"github.com/heraldwf/herald/storage"
)

// Send sends an event on lane (positional or queue) to the instance target
// of the same tenant, as a decision: it is recorded in history as EventSent
// and committed with the turn (outbox), the receiver's inbox message and
// ledger row written in the same transaction (Output.Sends). An empty id is
// derived from the sender's instance, execution and the decision's seq, so a
// replay sends under the same id and sends nothing: only a new decision is
// sent, and the ledger's dedup by event id covers a commit that is retried.
// It returns the event id.
func (s *State) Send(lane history.Lane, target, name, id string, payload json.RawMessage) string {
	if id == "" {
		// The seq the decision gets if it is new; on replay the recorded
		// id is read back below.
		id = fmt.Sprintf("%s/%d/%d", s.in.InstanceID, s.execution, s.nextSeq)
	}
	ev := history.Event{Kind: history.EventSent, Lane: lane, Target: target, Name: name, EventID: id, Payload: payload}
	if h, ok := s.recorded(ev); ok && h.Lane == lane && h.Target == target {
		ev.EventID = h.EventID
	}
	if _, isNew := s.decide(ev); isNew {
		s.out.Sends = append(s.out.Sends, storage.TurnSend{InstanceID: target, EventID: ev.EventID, Lane: lane,
			Name: name, Payload: payload})
	}
	return ev.EventID
}
