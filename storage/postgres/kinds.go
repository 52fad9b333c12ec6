package postgres

import (
	"github.com/heraldwf/herald/storage"
)

// SubscribeKinds: see storage.Notifier. A subscriber is woken whenever
// new work of its kinds is committed for the tenant, by this store or,
// through NOTIFY, by any other store on the same schema (the NOTIFY
// payload carries the kinds, see notifyPayload); a subscriber to turns is
// not woken by a new activity task, nor one to activities by a raised
// event. It is also woken whenever the store's LISTEN connection is
// re-established after it was lost, because notifications sent meanwhile
// are lost. The first call starts that connection and waits (at most 5 s)
// until LISTEN is in effect, so that a write committed after
// SubscribeKinds returns wakes the subscriber wherever it happens.
func (s *Store) SubscribeKinds(tenant string, kinds storage.WorkKind) (<-chan struct{}, func()) {
	ch, cancel := s.hub.SubscribeKinds(tenant, kinds)
	if !s.closed.Load() {
		s.listener.ensure()
	}
	return ch, cancel
}

// kindsMark starts a NOTIFY payload that names the kinds of work: the mark,
// one byte '0'+kinds, then the tenant. A payload without the mark (the
// tenant alone, as NOTIFY by hand or an older Herald sends) is work of
// every kind.
const kindsMark = "\x01"

// notifyPayload is the NOTIFY payload of new work of kinds for tenant.
func notifyPayload(tenant string, kinds storage.WorkKind) string {
	if kinds&storage.WorkAll == storage.WorkAll {
		return tenant
	}
	return kindsMark + string(rune('0'+kinds)) + tenant
}

// parsePayload reads a NOTIFY payload.
func parsePayload(payload string) (tenant string, kinds storage.WorkKind) {
	if len(payload) >= 2 && payload[:1] == kindsMark {
		if k := storage.WorkKind(payload[1] - '0'); k != 0 && k&^storage.WorkAll == 0 {
			return payload[2:], k
		}
	}
	return payload, storage.WorkAll
}
