package postgres

import (
	"slices"

	"github.com/jackc/pgx/v5"

	"github.com/heraldwf/herald/heraldtype"
	"github.com/heraldwf/herald/history"
	"github.com/heraldwf/herald/storage"
	"github.com/heraldwf/herald/storage/internal/backend"
)

// codeSendConflict: herald_send found the event id of a send in the ledger
// for another target (migration 0013).
const codeSendConflict = "HL010"

// queueSendLocks queues, before a commit's fence, the row locks of the
// instances the commit sends to and of the sender, in id order, as every
// transaction that locks several instances does: two instances sending to
// each other at once then wait for one another instead of deadlocking. The
// fence locks the sender again, which it already holds.
func (s *Store) queueSendLocks(b *batch, tenant, sender string, sends []storage.TurnSend) {
	if len(sends) == 0 {
		return
	}
	ids := []string{sender}
	for i := range sends {
		ids = append(ids, sends[i].InstanceID)
	}
	slices.Sort(ids)
	ids = slices.Compact(ids)
	b.exec("lock send targets", `SELECT 1 FROM instances WHERE tenant = $1 AND id = ANY($2::text[]) ORDER BY id FOR NO KEY UPDATE`,
		tenant, ids)
}

// queueSends queues a commit's sends (storage.TurnSend), after its fence,
// one herald_send call each, in order.
func (s *Store) queueSends(b *batch, tenant, sender string, sends []storage.TurnSend, nowN int64) {
	for i := range sends {
		p := &sends[i]
		b.exec("send event", `SELECT herald_send($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12)`,
			tenant, sender, p.InstanceID, p.EventID, string(p.Lane), p.Name, backend.RawArg(p.Payload), p.Latest,
			backend.Nanos(p.ExpiresAt), nowN, p.TraceParent, s.instanceLockKey(tenant, p.InstanceID))
	}
}

// sendTx is backend.SendTx over an interactive commit transaction: the
// contract's reference rule (backend.SendEvents), which the store runs
// instead of herald_send only with the Go reference rules (tests; see
// WithGoReferenceRules), so that the suite holds herald_send to it.
type sendTx struct {
	s  *Store
	lt *laneTx
}

// one runs a statement that returns at most one row and scans it into
// dest; ok says whether there was one.
func (t sendTx) one(what, sql string, args []any, dest ...any) (ok bool, err error) {
	t.lt.b.query(what, func(rows pgx.Rows) error {
		if !rows.Next() {
			return nil
		}
		ok = true
		return rows.Scan(dest...)
	}, sql, args...)
	return ok, t.lt.flush()
}

func (t sendTx) InsertSentEvent(sender string, p *storage.TurnSend) (bool, error) {
	var one int
	now := t.lt.now.UnixNano()
	return t.one("send event: ledger", `INSERT INTO events (tenant, event_id, instance_id, lane, name, fate, received_at, updated_at, sender)
		VALUES ($1, $2, $3, $4, $5, 'pending', $6, $6, $7) ON CONFLICT (tenant, event_id) DO NOTHING RETURNING 1`,
		[]any{t.lt.tenant, p.EventID, p.InstanceID, string(p.Lane), p.Name, now, sender}, &one)
}

func (t sendTx) SentEventKey(eventID string) (instance, lane, name string, err error) {
	_, err = t.one("send event: check event id", `SELECT instance_id, lane, name FROM events WHERE tenant = $1 AND event_id = $2`,
		[]any{t.lt.tenant, eventID}, &instance, &lane, &name)
	return instance, lane, name, err
}

func (t sendTx) LockReceiver(id string) (heraldtype.Status, error) {
	const lock = `SELECT status FROM instances WHERE tenant = $1 AND id = $2 FOR NO KEY UPDATE`
	var status string
	ok, err := t.one("send event: lock receiver", lock, []any{t.lt.tenant, id}, &status)
	if err != nil || ok {
		return heraldtype.Status(status), err
	}
	t.lt.b.exec("send event: lock receiver id", `SELECT pg_advisory_xact_lock($1)`, t.s.instanceLockKey(t.lt.tenant, id))
	_, err = t.one("send event: lock receiver", lock, []any{t.lt.tenant, id}, &status)
	return heraldtype.Status(status), err
}

func (t sendTx) DropSent(eventID string, reason history.DropReason) error {
	t.lt.b.exec("send event: drop", `UPDATE events SET fate = 'dropped', reason = $3 WHERE tenant = $1 AND event_id = $2`,
		t.lt.tenant, eventID, string(reason))
	return nil
}

func (t sendTx) AddSentMessage(p *storage.TurnSend, expiresAt int64) error {
	now := t.lt.now.UnixNano()
	t.lt.b.exec("send event: message", `INSERT INTO inbox (tenant, instance_id, kind, lane, event_id, name, payload, latest, visible_at, created_at, expires_at, trace)
		VALUES ($1, $2, 'event', $3, $4, $5, $6, $7, $8, $8, $9, $10)`,
		t.lt.tenant, p.InstanceID, string(p.Lane), p.EventID, p.Name, backend.RawArg(p.Payload), p.Latest, now, expiresAt, p.TraceParent)
	return nil
}

func (t sendTx) LowerReady(id string) error {
	t.lt.b.exec("send event: ready", lowerReadySQL, t.lt.tenant, id, t.lt.now.UnixNano())
	return nil
}
