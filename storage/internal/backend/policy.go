package backend

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/heraldwf/herald/heraldtype"
	"github.com/heraldwf/herald/history"
	"github.com/heraldwf/herald/storage"
)

// The lane rules a store applies inside its own transactions live here,
// once, in Go: what happens to the events of an instance that ends
// (EndInstance), how a delete-after-first correlated event that an
// instance does not keep is handed on (HandOnWithdrawn, HandOnReturned),
// and how correlated events meet waits (correlated.go: RegisterWaits,
// CorrelatedPut). Each backend implements the primitives (EndTx, HandOnTx,
// WaitTx, PutTx) in its transaction, bound to one tenant, instance and
// time; it stores, fences and batches, and decides nothing.

// Undelivered is an event still pending or buffered for an instance.
type Undelivered struct {
	EventID string
	Lane    history.Lane
	Name    string
}

// EndTx is what EndInstance needs of a transaction that ends an instance
// (a terminal turn commit, InstanceTerminate). The transaction has fenced
// the instance, so no event can be raised to it meanwhile.
type EndTx interface {
	// Undelivered returns the instance's events that are pending or
	// buffered, in ledger (insertion) order, and the last seq of the
	// execution's history (0 if it has none).
	Undelivered(execution int) (evs []Undelivered, lastSeq int, err error)
	// AppendHistory appends events to the execution's history.
	AppendHistory(execution int, evs []history.Event) error
	// DropEvents sets the instance's ledger rows of ids to dropped with
	// reason; a row not yet in an execution (execution 0) gets execution.
	DropEvents(ids []string, reason history.DropReason, execution int) error
}

// EndInstance is what every terminal transition does after the final
// history event: every event still pending or buffered for the instance is
// dropped (instance_terminal), with an EventDropped breadcrumb appended to
// the execution's history, in ledger order. It returns the breadcrumbs
// (nil if there were none), so the caller can log and count them. The
// caller then clears the instance's inbox, activity tasks and correlation
// markers and updates its row.
func EndInstance(tx EndTx, execution int, now time.Time) ([]history.Event, error) {
	evs, lastSeq, err := tx.Undelivered(execution)
	if err != nil {
		return nil, fmt.Errorf("load undelivered events: %w", err)
	}
	if len(evs) == 0 {
		return nil, nil
	}
	crumbs := make([]history.Event, len(evs))
	ids := make([]string, len(evs))
	for i, e := range evs {
		crumbs[i] = history.Event{
			Seq:     lastSeq + 1 + i,
			Time:    now,
			Kind:    history.EventDropped,
			Lane:    e.Lane,
			EventID: e.EventID,
			Name:    e.Name,
			Reason:  history.DropInstanceTerminal,
		}
		ids[i] = e.EventID
	}
	if err := tx.DropEvents(ids, history.DropInstanceTerminal, execution); err != nil {
		return nil, fmt.Errorf("drop undelivered events: %w", err)
	}
	if err := tx.AppendHistory(execution, crumbs); err != nil {
		return nil, fmt.Errorf("drop undelivered events: %w", err)
	}
	return crumbs, nil
}

// Delivery is a correlated-lane event message in an instance's inbox.
type Delivery struct {
	MessageID int64
	EventID   string
	Def, Key  string
	Payload   json.RawMessage
	Trace     string // the message's trace context
}

// Marker is a correlation marker: a wait of an instance's execution on
// (Def, Key).
type Marker struct {
	ID         int64 // the store's row id
	InstanceID string
	Execution  int
	TaskSeq    int
}

// HandOnTx is what the hand-on of a delete-after-first correlated event
// needs of a turn commit's transaction (bound to the committing instance).
// On PostgreSQL the transaction holds the advisory locks of the keys
// involved, so no put on them runs meanwhile.
type HandOnTx interface {
	EndTx
	CorrelatedTx
	// Deliveries returns the correlated-lane event messages of the
	// instance's inbox for the waits seqs of execution (every wait of it
	// with all), oldest first.
	Deliveries(execution int, seqs []int, all bool) ([]Delivery, error)
	// Correlation returns the correlation config of the tenant's event
	// definition def, or nil if the definition does not exist (it was
	// deleted) or has none.
	Correlation(def string) (*heraldtype.CorrelationConfig, error)
	// DeleteMessage deletes one of the instance's inbox messages.
	DeleteMessage(id int64) error
	// OldestMarker returns the oldest marker on (def, key) of a pending or
	// running instance that is still on the marker's execution, leaving
	// out the committing instance's own markers if notOwn; ok is false if
	// there is none.
	OldestMarker(def, key string, notOwn bool) (m Marker, ok bool, err error)
	// StoreCorrelated stores payload (with trace) as the correlated event
	// (def, key), created now, expiring at expiresAt (zero: never), unless
	// one is stored.
	StoreCorrelated(def, key string, payload json.RawMessage, trace string, expiresAt time.Time) error
}

// HandOnWithdrawn hands on the delete-after-first events that a put
// delivered to waits of the committing instance while its turn ran and
// that the turn withdraws: the waits seqs of execution, or with ending (the
// turn ends the execution: terminal or continue-as-new) every wait of the
// execution. Such a delivery sits in the inbox as a correlated-lane message
// for a wait whose marker is gone; the next turn would drop it
// (withdrawn_wait) and no waiter would ever receive the event. So, as a
// put with delete-after-first would have done had the wait been withdrawn
// first, the message is deleted, its ledger row marked dropped
// (withdrawn_wait), and the payload handed on (HandOn). A fan-out delivery
// (or one whose definition was deleted) is left alone: its correlated event
// is still stored, and the engine drops this instance's copy itself.
// The caller has deleted the turn's consumed messages (a delivery the turn
// saw is never handed on) and the withdrawn markers.
func HandOnWithdrawn(tx HandOnTx, execution int, seqs []int, ending bool, now time.Time) error {
	if !ending && len(seqs) == 0 {
		return nil
	}
	ds, err := tx.Deliveries(execution, seqs, ending)
	if err != nil {
		return fmt.Errorf("find withdrawn correlated deliveries: %w", err)
	}
	for _, d := range ds {
		cfg, err := tx.Correlation(d.Def)
		if err != nil {
			return fmt.Errorf("withdrawn delivery %q: %w", d.EventID, err)
		}
		if cfg == nil || !cfg.DeleteAfterFirstCorrelation {
			continue
		}
		if err := tx.DeleteMessage(d.MessageID); err != nil {
			return fmt.Errorf("withdrawn delivery %q: %w", d.EventID, err)
		}
		if err := tx.DropEvents([]string{d.EventID}, history.DropWithdrawnWait, execution); err != nil {
			return fmt.Errorf("withdrawn delivery %q: %w", d.EventID, err)
		}
		if err := handOn(tx, cfg, d.Def, d.Key, d.Payload, d.Trace, ending, now); err != nil {
			return fmt.Errorf("withdrawn delivery %q: %w", d.EventID, err)
		}
	}
	return nil
}

// HandOnReturned hands on the delete-after-first events of a commit's
// ReturnedCorrelated (events a wait gave back; the commit's fates dropped
// the instance's copies) as HandOnWithdrawn does. The caller runs it after
// the commit registered its waits, so a wait of this very turn can receive
// the event, unless the commit ends the execution (ending). A fan-out
// event is still stored, and an event whose definition was deleted has no
// rule to follow: nothing to do.
func HandOnReturned(tx HandOnTx, returned []storage.ReturnedCorrelated, ending bool, now time.Time) error {
	for _, r := range returned {
		cfg, err := tx.Correlation(r.Def)
		if err != nil {
			return fmt.Errorf("returned event %q: %w", r.EventID, err)
		}
		if cfg == nil || !cfg.DeleteAfterFirstCorrelation {
			continue
		}
		if err := handOn(tx, cfg, r.Def, r.Key, r.Payload, r.TraceParent, ending, now); err != nil {
			return fmt.Errorf("returned event %q: %w", r.EventID, err)
		}
	}
	return nil
}

// handOn delivers a delete-after-first event the committing instance does
// not keep to the oldest live marker on (def, key) (not one of its own if
// ending); with none it stores the event again (expiring after the
// definition's TTL) unless a newer put stored one. The event keeps its
// trace context either way.
func handOn(tx HandOnTx, cfg *heraldtype.CorrelationConfig, def, key string, payload json.RawMessage, trace string, ending bool, now time.Time) error {
	m, ok, err := tx.OldestMarker(def, key, ending)
	if err != nil {
		return fmt.Errorf("find correlation markers: %w", err)
	}
	if ok {
		// No produced entry: the correlated event is gone.
		if err := deliver(tx, m, def, key, payload, trace, false); err != nil {
			return fmt.Errorf("hand on to %q: %w", m.InstanceID, err)
		}
		return nil
	}
	var expiresAt time.Time
	if cfg.TTL > 0 {
		expiresAt = now.Add(cfg.TTL)
	}
	if err := tx.StoreCorrelated(def, key, payload, trace, expiresAt); err != nil {
		return fmt.Errorf("store again: %w", err)
	}
	return nil
}
