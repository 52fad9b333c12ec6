package sqlite

import (
	"database/sql"
	"errors"

	"github.com/heraldwf/herald/heraldtype"
	"github.com/heraldwf/herald/history"
	"github.com/heraldwf/herald/storage"
	"github.com/heraldwf/herald/storage/internal/backend"
)

// sendTurn writes the events a turn of sender sends (storage.TurnSend), in
// the turn's write transaction, by the contract's rule, backend.SendEvents.
func sendTurn(w *wtx, tenant, sender string, sends []storage.TurnSend, nowN int64) error {
	if len(sends) == 0 {
		return nil
	}
	if err := backend.SendEvents(sendTx{w: w, tenant: tenant, now: nowN}, sender, sends); err != nil {
		return err
	}
	w.signalKinds(tenant, storage.WorkTurns)
	return nil
}

// sendTx is backend.SendTx in a write transaction (which holds the
// database's write lock: LockReceiver has nothing more to lock).
type sendTx struct {
	w      *wtx
	tenant string
	now    int64
}

func (t sendTx) InsertSentEvent(sender string, p *storage.TurnSend) (bool, error) {
	ins, err := t.w.exec(`INSERT INTO events (tenant, event_id, instance_id, lane, name, fate, received_at, updated_at, sender)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (tenant, event_id) DO NOTHING`,
		t.tenant, p.EventID, p.InstanceID, string(p.Lane), p.Name, string(history.FatePending), t.now, t.now, sender)
	if err != nil {
		return false, err
	}
	n, err := ins.RowsAffected()
	return n > 0, err
}

func (t sendTx) SentEventKey(eventID string) (instance, lane, name string, err error) {
	err = t.w.queryRow(`SELECT instance_id, lane, name FROM events WHERE tenant = ? AND event_id = ?`,
		t.tenant, eventID).Scan(&instance, &lane, &name)
	return instance, lane, name, err
}

func (t sendTx) LockReceiver(id string) (heraldtype.Status, error) {
	var status string
	err := t.w.queryRow(`SELECT status FROM instances WHERE tenant = ? AND id = ?`, t.tenant, id).Scan(&status)
	if errors.Is(err, sql.ErrNoRows) {
		return "", nil
	}
	return heraldtype.Status(status), err
}

func (t sendTx) DropSent(eventID string, reason history.DropReason) error {
	_, err := t.w.exec(`UPDATE events SET fate = ?, reason = ? WHERE tenant = ? AND event_id = ?`,
		string(history.FateDropped), string(reason), t.tenant, eventID)
	return err
}

func (t sendTx) AddSentMessage(p *storage.TurnSend, expiresAt int64) error {
	_, err := insertExpiringMessage(t.w, t.tenant, p.InstanceID, &storage.Message{
		Kind: storage.MsgEvent, Lane: p.Lane, EventID: p.EventID, Name: p.Name, Payload: p.Payload,
		Latest: p.Latest, TraceParent: p.TraceParent, VisibleAt: backend.FromNanos(t.now),
	}, expiresAt, t.now)
	return err
}

func (t sendTx) LowerReady(id string) error { return lowerReady(t.w, t.tenant, id, t.now) }
