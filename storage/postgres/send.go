package postgres

import (
	"slices"

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
