package postgres

import (
	"github.com/heraldwf/herald/storage"
)

// SubscribeKinds is Subscribe for the work of the kinds in the mask: a
// subscriber to turns is not woken by a new activity task, nor one to
// activities by a raised event, whichever store on the schema wrote them
// (the NOTIFY payload carries the kinds, see notifyPayload).
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
