package sqlite

import (
	"database/sql"
	"errors"
	"fmt"

	"github.com/heraldwf/herald/heraldtype"
	"github.com/heraldwf/herald/history"
	"github.com/heraldwf/herald/storage"
	"github.com/heraldwf/herald/storage/internal/backend"
)

// sendTurn writes the events a turn of sender sends (storage.TurnSend), in
// the turn's write transaction: the ledger row first (a duplicate id is
// the only reason it is not inserted), then, as EventRaise does, the inbox
// message and the receiver's ready time; a receiver that has ended gets no
// message and the row says dropped (instance_terminal).
func sendTurn(w *wtx, tenant, sender string, sends []storage.TurnSend, nowN int64) error {
	for i := range sends {
		p := &sends[i]
		ins, err := w.exec(`INSERT INTO events (tenant, event_id, instance_id, lane, name, fate, received_at, updated_at, sender)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (tenant, event_id) DO NOTHING`,
			tenant, p.EventID, p.InstanceID, string(p.Lane), p.Name, string(history.FatePending), nowN, nowN, sender)
		if err != nil {
			return fmt.Errorf("send event %q: %w", p.EventID, err)
		}
		if n, err := ins.RowsAffected(); err != nil {
			return fmt.Errorf("send event %q: %w", p.EventID, err)
		} else if n == 0 {
			var instanceID, lane, name string
			if err := w.queryRow(`SELECT instance_id, lane, name FROM events WHERE tenant = ? AND event_id = ?`,
				tenant, p.EventID).Scan(&instanceID, &lane, &name); err != nil {
				return fmt.Errorf("send event %q: check event id: %w", p.EventID, err)
			}
			if instanceID != p.InstanceID || lane != string(p.Lane) || name != p.Name {
				return fmt.Errorf("send event %q: first raised for instance %q, lane %q, name %q: %w",
					p.EventID, instanceID, lane, name, heraldtype.ErrEventIDConflict)
			}
			continue // sent before: a retried commit
		}
		var status string
		err = w.queryRow(`SELECT status FROM instances WHERE tenant = ? AND id = ?`, tenant, p.InstanceID).Scan(&status)
		switch {
		case errors.Is(err, sql.ErrNoRows):
		case err != nil:
			return fmt.Errorf("send event %q: load instance: %w", p.EventID, err)
		case heraldtype.Status(status).Terminal():
			if _, err := w.exec(`UPDATE events SET fate = ?, reason = ? WHERE tenant = ? AND event_id = ?`,
				string(history.FateDropped), string(history.DropInstanceTerminal), tenant, p.EventID); err != nil {
				return fmt.Errorf("send event %q: %w", p.EventID, err)
			}
			continue
		}
		// Only an event kept for an instance that does not exist can expire.
		var expiresAt int64
		if status == "" {
			expiresAt = backend.Nanos(p.ExpiresAt)
		}
		if _, err := insertExpiringMessage(w, tenant, p.InstanceID, &storage.Message{
			Kind: storage.MsgEvent, Lane: p.Lane, EventID: p.EventID, Name: p.Name, Payload: p.Payload,
			Latest: p.Latest, TraceParent: p.TraceParent, VisibleAt: backend.FromNanos(nowN),
		}, expiresAt, nowN); err != nil {
			return fmt.Errorf("send event %q: %w", p.EventID, err)
		}
		if status != "" {
			if err := lowerReady(w, tenant, p.InstanceID, nowN); err != nil {
				return err
			}
		}
	}
	if len(sends) > 0 {
		w.signalKinds(tenant, storage.WorkTurns)
	}
	return nil
}
