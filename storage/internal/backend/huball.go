package backend

import (
	"sync"

	"github.com/heraldwf/herald/storage"
)

// allSub is one SubscribeAll subscription: the kinds it wants and the
// tenants notified since its last drain. Both are guarded by Hub.mu.
type allSub struct {
	kinds   storage.WorkKind
	tenants map[string]struct{}
}

// SubscribeAll is SubscribeKinds for every tenant: ch receives a value (at
// most one pending) after each Notify of any tenant to a kind in the mask,
// and drain returns, in no particular order, the tenants notified since the
// previous drain (storage.AnyTenant among them after NotifyAll). cancel is
// idempotent. The channel is never closed.
func (h *Hub) SubscribeAll(kinds storage.WorkKind) (<-chan struct{}, func() []string, func()) {
	ch := make(chan struct{}, 1)
	sub := &allSub{kinds: kinds, tenants: make(map[string]struct{})}
	h.mu.Lock()
	if h.all == nil {
		h.all = make(map[chan struct{}]*allSub)
	}
	h.all[ch] = sub
	h.mu.Unlock()
	drain := func() []string {
		h.mu.Lock()
		defer h.mu.Unlock()
		if len(sub.tenants) == 0 {
			return nil
		}
		out := make([]string, 0, len(sub.tenants))
		for t := range sub.tenants {
			out = append(out, t)
		}
		clear(sub.tenants)
		return out
	}
	var once sync.Once
	cancel := func() {
		once.Do(func() {
			h.mu.Lock()
			defer h.mu.Unlock()
			delete(h.all, ch)
		})
	}
	return ch, drain, cancel
}

// notifyAllSubs records tenant in the SubscribeAll subscriptions to any of
// kinds and wakes them. The caller holds h.mu.
func (h *Hub) notifyAllSubs(tenant string, kinds storage.WorkKind) {
	for ch, sub := range h.all {
		if sub.kinds&kinds == 0 {
			continue
		}
		sub.tenants[tenant] = struct{}{}
		select {
		case ch <- struct{}{}:
		default:
		}
	}
}
