package storage

import (
	"encoding/json"
	"time"

	"github.com/heraldwf/herald/history"
)

// TurnSend is an event a turn sends to an instance of its own tenant
// (ctx.RaiseEvent, ctx.Enqueue in a workflow). The commit writes it in the
// same transaction as the turn, in order, as EventRaise writes a client's
// event (ledger row with fate pending, inbox message, the receiver's
// ready time lowered), with the sending instance recorded on the ledger row
// (heraldtype.EventRecord.Sender). The engine has validated it; the
// runtime has applied the event's definition (Latest, ExpiresAt).
//
//   - An event id already in the ledger for the same instance, lane and
//     name is a duplicate (a commit retried): nothing is written. One for
//     another target is refused: the commit fails with ErrEventIDConflict
//     and writes nothing.
//   - An instance that does not exist keeps the event (pending) until it
//     starts, or ExpiresAt (as EventRaise).
//   - An instance that has ended gets no message: the ledger row is
//     written with fate dropped, reason instance_terminal, so the send is
//     never lost silently.
type TurnSend struct {
	InstanceID string
	EventID    string
	Lane       history.Lane
	Name       string
	Payload    json.RawMessage
	Latest     bool
	ExpiresAt  time.Time
	// TraceParent is stored on the inbox message (Message.TraceParent).
	TraceParent string
}
