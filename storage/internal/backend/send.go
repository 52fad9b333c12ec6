package backend

import (
	"fmt"

	"github.com/heraldwf/herald/heraldtype"
	"github.com/heraldwf/herald/history"
	"github.com/heraldwf/herald/storage"
)

// ValidateSends checks the events a turn sends (storage.TurnSend): a
// target, an event id and a name, the positional or queue lane, a trace
// context that can be stored. The error wraps ErrInvalidArgument.
func ValidateSends(sends []storage.TurnSend) error {
	for i := range sends {
		s := &sends[i]
		var problem string
		switch {
		case s.InstanceID == "":
			problem = "empty instance id"
		case s.EventID == "":
			problem = "empty event id"
		case s.Name == "":
			problem = "empty name"
		case s.Lane != history.LanePositional && s.Lane != history.LaneQueue:
			problem = fmt.Sprintf("lane %q is not positional or queue", s.Lane)
		default:
			problem = storage.TraceParentProblem(s.TraceParent)
		}
		if problem != "" {
			return fmt.Errorf("send %d (event %q): %s: %w", i, s.EventID, problem, heraldtype.ErrInvalidArgument)
		}
	}
	return nil
}

// SendTx is what SendEvents needs of a turn commit's transaction, of one
// tenant at one time, after the commit's fence.
type SendTx interface {
	// InsertSentEvent inserts the ledger row of s sent by sender (fate
	// pending, received now), unless its event id is in the ledger
	// already: inserted is then false and nothing is written.
	InsertSentEvent(sender string, s *storage.TurnSend) (inserted bool, err error)
	// SentEventKey returns the instance, lane and name of the ledger row
	// of eventID.
	SentEventKey(eventID string) (instance, lane, name string, err error)
	// LockReceiver locks the row of instance id until the transaction ends
	// (a missing one after the lock InstanceCreate of the id takes, so
	// that the instance cannot be created meanwhile) and returns its
	// status: "" if there is none.
	LockReceiver(id string) (heraldtype.Status, error)
	// DropSent marks the ledger row of eventID dropped for reason.
	DropSent(eventID string, reason history.DropReason) error
	// AddSentMessage adds the event inbox message of s to s.InstanceID's
	// inbox, visible now, expiring at expiresAt (unix nanos; 0: never).
	AddSentMessage(s *storage.TurnSend, expiresAt int64) error
	// LowerReady makes instance id's next claim due now at the latest.
	LowerReady(id string) error
}

// SendEvents writes the events a turn of sender sends (storage.TurnSend),
// in the turn's commit transaction, in order. It is the contract's
// reference: SQLite runs it; PostgreSQL runs herald_send (functions.sql),
// and the conformance suite holds both to the same cases (the store's Go
// reference mode runs this). Per send: the ledger row first; an event id
// already in the ledger is a retried commit's (nothing written) for the
// same instance, lane and name, and ErrEventIDConflict for another. Then,
// as EventRaise: a receiver that has ended gets no message and the row
// says dropped (instance_terminal); otherwise the message is added (it
// expires, at ExpiresAt, only if the receiver does not exist yet) and the
// receiver's ready time lowered.
func SendEvents(tx SendTx, sender string, sends []storage.TurnSend) error {
	for i := range sends {
		p := &sends[i]
		inserted, err := tx.InsertSentEvent(sender, p)
		if err != nil {
			return fmt.Errorf("send event %q: %w", p.EventID, err)
		}
		if !inserted {
			instance, lane, name, err := tx.SentEventKey(p.EventID)
			if err != nil {
				return fmt.Errorf("send event %q: check event id: %w", p.EventID, err)
			}
			if instance != p.InstanceID || lane != string(p.Lane) || name != p.Name {
				return fmt.Errorf("send event %q: first raised for instance %q, lane %q, name %q: %w",
					p.EventID, instance, lane, name, heraldtype.ErrEventIDConflict)
			}
			continue
		}
		status, err := tx.LockReceiver(p.InstanceID)
		if err != nil {
			return fmt.Errorf("send event %q: load instance: %w", p.EventID, err)
		}
		if status.Terminal() {
			if err := tx.DropSent(p.EventID, history.DropInstanceTerminal); err != nil {
				return fmt.Errorf("send event %q: %w", p.EventID, err)
			}
			continue
		}
		var expiresAt int64
		if status == "" {
			expiresAt = Nanos(p.ExpiresAt)
		}
		if err := tx.AddSentMessage(p, expiresAt); err != nil {
			return fmt.Errorf("send event %q: %w", p.EventID, err)
		}
		if status != "" {
			if err := tx.LowerReady(p.InstanceID); err != nil {
				return fmt.Errorf("send event %q: %w", p.EventID, err)
			}
		}
	}
	return nil
}
