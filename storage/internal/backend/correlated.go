package backend

import (
	"encoding/json"
	"fmt"

	"github.com/heraldwf/herald/heraldtype"
	"github.com/heraldwf/herald/storage"
)

// The correlated lane's two meetings of an event and a wait, written once:
// a turn commit registers a wait (RegisterWaits: a stored event is
// delivered at once, else a marker is stored) and a put meets the markers
// (CorrelatedPut: every marker is delivered to, or with delete-after-first
// only the oldest and the event is deleted). The contracts are those of
// storage.TurnCommitParams.CorrelatedWaits and storage.CorrelatedPutParams;
// these functions are their reference, and the conformance suite
// (storagetest) drives every backend through their cases.

// CorrelatedTx is what every correlated-lane rule needs of a transaction
// of one tenant at one time.
type CorrelatedTx interface {
	// Produce delivers payload to the wait of m (its instance, execution
	// and seq) under a new event id, as storage.CorrelatedPutParams says: a
	// ledger row (fate pending, lane correlated, Name def, Key set), an
	// event inbox message {Lane correlated, Name def, Key, Execution and
	// TaskSeq of m, Payload}, the instance's next claim made due; with
	// listed, also an entry in the produced list of the stored event (def,
	// key). The message carries trace (Message.TraceParent: the put's, or
	// the handed-on delivery's). It leaves markers alone.
	Produce(m Marker, def, key string, payload json.RawMessage, trace string, listed bool) error
	// DeleteMarker deletes the marker with row id.
	DeleteMarker(id int64) error
	// DeleteCorrelated deletes the stored correlated event (def, key) and
	// its produced list, if there is one.
	DeleteCorrelated(def, key string) error
}

// deliver delivers payload (with trace) to the wait of marker m and
// deletes m.
func deliver(tx CorrelatedTx, m Marker, def, key string, payload json.RawMessage, trace string, listed bool) error {
	if err := tx.Produce(m, def, key, payload, trace, listed); err != nil {
		return err
	}
	if err := tx.DeleteMarker(m.ID); err != nil {
		return fmt.Errorf("delete correlation marker: %w", err)
	}
	return nil
}

// WaitTx is what RegisterWaits needs of a turn commit's transaction, bound
// to the committing instance, after the fence and after the withdrawn
// waits' markers were deleted. On PostgreSQL the transaction holds the
// advisory locks of the waits' keys, so no put on them runs meanwhile.
type WaitTx interface {
	CorrelatedTx
	// LiveCorrelated returns the payload and trace context of the stored
	// correlated event (def, key) unless it has expired at the
	// transaction's time; ok is false if there is none. A backend whose
	// deletes and expiries can run concurrently locks the row, so they wait
	// or skip it.
	LiveCorrelated(def, key string) (payload json.RawMessage, trace string, ok bool, err error)
	// StoreMarker stores the marker of the committing instance's wait w on
	// execution (replacing one on the same seq).
	StoreMarker(execution int, w storage.CorrelatedWait) error
}

// RegisterWaits registers the correlated waits of a turn commit of
// instance id that does not end the execution
// (storage.TurnCommitParams.CorrelatedWaits), in order: each wait not
// withdrawn in the same turn is delivered the live correlated event stored
// under its (Def, Key) at once — listed in the event's produced list, or
// with DeleteAfterFirst the event is deleted instead, so a second wait on
// the key gets a marker — or, with none, a marker is stored for a later put.
func RegisterWaits(tx WaitTx, p *storage.TurnCommitParams) error {
	for _, w := range Waits(p) {
		payload, trace, ok, err := tx.LiveCorrelated(w.Def, w.Key)
		if err != nil {
			return fmt.Errorf("correlated wait seq %d: load correlated event: %w", w.TaskSeq, err)
		}
		if !ok {
			if err := tx.StoreMarker(p.Execution, w); err != nil {
				return fmt.Errorf("register correlated wait seq %d: %w", w.TaskSeq, err)
			}
			continue
		}
		m := Marker{InstanceID: p.InstanceID, Execution: p.Execution, TaskSeq: w.TaskSeq}
		if err := tx.Produce(m, w.Def, w.Key, payload, trace, !w.DeleteAfterFirst); err != nil {
			return fmt.Errorf("correlated wait seq %d: %w", w.TaskSeq, err)
		}
		if w.DeleteAfterFirst {
			if err := tx.DeleteCorrelated(w.Def, w.Key); err != nil {
				return fmt.Errorf("correlated wait seq %d: %w", w.TaskSeq, err)
			}
		}
	}
	return nil
}

// Waits returns the correlated waits a commit registers: those of
// p.CorrelatedWaits not withdrawn in the same turn (CancelCorrelatedWaits).
func Waits(p *storage.TurnCommitParams) []storage.CorrelatedWait {
	if len(p.CancelCorrelatedWaits) == 0 {
		return p.CorrelatedWaits
	}
	cancelled := make(map[int]bool, len(p.CancelCorrelatedWaits))
	for _, seq := range p.CancelCorrelatedWaits {
		cancelled[seq] = true
	}
	var waits []storage.CorrelatedWait
	for _, w := range p.CorrelatedWaits {
		if !cancelled[w.TaskSeq] {
			waits = append(waits, w)
		}
	}
	return waits
}

// PutTx is what CorrelatedPut needs of a transaction. On PostgreSQL it
// holds the key's advisory lock and has locked the waiting instances.
type PutTx interface {
	CorrelatedTx
	// UpsertCorrelated creates the correlated event of p or updates its
	// payload, trace, UpdatedAt and ExpiresAt; one that has expired (but is
	// still stored) is replaced, produced list and all, as if it were gone.
	UpsertCorrelated(p *storage.CorrelatedPutParams) error
	// Markers returns the markers on (def, key) of pending or running
	// instances still on the marker's execution, oldest first, at most
	// limit of them (0: all).
	Markers(def, key string, limit int) ([]Marker, error)
	// LoadCorrelated returns the stored event (def, key) with its produced
	// list.
	LoadCorrelated(def, key string) (*heraldtype.CorrelatedEvent, error)
}

// CorrelatedPut is storage.CorrelatedStore.CorrelatedPut inside tx: the
// event is stored, then delivered (and listed as produced) to every live
// marker on its key, oldest first, or with DeleteAfterFirst only to the
// oldest, after which the event is deleted (returned as it was, with its
// one produced entry). Every delivery carries the put's trace context. Without a marker a delete-after-first event stays
// stored for the first wait. It returns the event and how many waits it
// was delivered to.
func CorrelatedPut(tx PutTx, p *storage.CorrelatedPutParams) (*heraldtype.CorrelatedEvent, int, error) {
	if err := tx.UpsertCorrelated(p); err != nil {
		return nil, 0, fmt.Errorf("upsert correlated event: %w", err)
	}
	limit := 0
	if p.DeleteAfterFirst {
		limit = 1
	}
	ms, err := tx.Markers(p.Def, p.Key, limit)
	if err != nil {
		return nil, 0, fmt.Errorf("find correlation markers: %w", err)
	}
	for _, m := range ms {
		if err := deliver(tx, m, p.Def, p.Key, p.Payload, p.TraceParent, true); err != nil {
			return nil, 0, fmt.Errorf("deliver to %q: %w", m.InstanceID, err)
		}
	}
	out, err := tx.LoadCorrelated(p.Def, p.Key)
	if err != nil {
		return nil, 0, err
	}
	if p.DeleteAfterFirst && len(ms) > 0 {
		if err := tx.DeleteCorrelated(p.Def, p.Key); err != nil {
			return nil, 0, fmt.Errorf("delete correlated event: %w", err)
		}
	}
	return out, len(ms), nil
}
