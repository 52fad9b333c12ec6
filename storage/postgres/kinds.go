package postgres

import "github.com/heraldwf/herald/storage"

// SubscribeKinds is Subscribe: this store's wake-ups (local and through
// NOTIFY) do not say which kind of work is new, so a subscriber is woken
// for any kind.
func (s *Store) SubscribeKinds(tenant string, _ storage.WorkKind) (<-chan struct{}, func()) {
	return s.Subscribe(tenant)
}
