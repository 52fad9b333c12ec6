package backend

import "sync"

// Hub is the in-process broadcast of "new work for tenant" behind a store's
// Subscribe. The zero Hub is ready to use.
type Hub struct {
	mu   sync.Mutex
	subs map[string]map[chan struct{}]struct{}
}

// Subscribe returns a channel that receives a value (at most one pending)
// after each Notify of tenant, and the function that unsubscribes; it is
// idempotent. The channel is never closed.
func (h *Hub) Subscribe(tenant string) (<-chan struct{}, func()) {
	ch := make(chan struct{}, 1)
	h.mu.Lock()
	if h.subs == nil {
		h.subs = make(map[string]map[chan struct{}]struct{})
	}
	m := h.subs[tenant]
	if m == nil {
		m = make(map[chan struct{}]struct{})
		h.subs[tenant] = m
	}
	m[ch] = struct{}{}
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
func (h *Hub) Notify(tenant string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for ch := range h.subs[tenant] {
		select {
		case ch <- struct{}{}:
		default:
		}
	}
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
}
