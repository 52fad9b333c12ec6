package backend

import (
	"sync"

	"github.com/heraldwf/herald/storage"
)

// Hub is the in-process broadcast of "new work for tenant" behind a store's
// Subscribe and SubscribeKinds. The zero Hub is ready to use.
type Hub struct {
	mu   sync.Mutex
	subs map[string]map[chan struct{}]storage.WorkKind
	all  map[chan struct{}]*allSub // SubscribeAll's subscribers
}

// Subscribe returns a channel that receives a value (at most one pending)
// after each Notify of tenant, and the function that unsubscribes; it is
// idempotent. The channel is never closed.
func (h *Hub) Subscribe(tenant string) (<-chan struct{}, func()) {
	return h.SubscribeKinds(tenant, storage.WorkAll)
}

// SubscribeKinds is Subscribe for the notifications of the kinds in the mask.
func (h *Hub) SubscribeKinds(tenant string, kinds storage.WorkKind) (<-chan struct{}, func()) {
	ch := make(chan struct{}, 1)
	h.mu.Lock()
	if h.subs == nil {
		h.subs = make(map[string]map[chan struct{}]storage.WorkKind)
	}
	m := h.subs[tenant]
	if m == nil {
		m = make(map[chan struct{}]storage.WorkKind)
		h.subs[tenant] = m
	}
	m[ch] = kinds
	h.mu.Unlock()
	var once sync.Once
	return ch, func() {
		once.Do(func() {
			h.mu.Lock()
			defer h.mu.Unlock()
			if m := h.subs[tenant]; m != nil {
				delete(m, ch)
				if len(m) == 0 {
					delete(h.subs, tenant)
				}
			}
		})
	}
}

// Notify wakes every subscriber of tenant, without blocking.
func (h *Hub) Notify(tenant string) { h.NotifyKinds(tenant, storage.WorkAll) }

// NotifyKinds wakes the subscribers of tenant to any kind in the mask,
// without blocking.
func (h *Hub) NotifyKinds(tenant string, kinds storage.WorkKind) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for ch, k := range h.subs[tenant] {
		if k&kinds == 0 {
			continue
		}
		select {
		case ch <- struct{}{}:
		default:
		}
	}
	h.notifyAllSubs(tenant, kinds)
}

// NotifyAll wakes every subscriber of every tenant.
func (h *Hub) NotifyAll() {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, m := range h.subs {
		for ch := range m {
			select {
			case ch <- struct{}{}:
			default:
			}
		}
	}
	h.notifyAllSubs(storage.AnyTenant, storage.WorkAll)
}
