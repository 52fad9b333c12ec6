package backend

import (
	"testing"

	"github.com/heraldwf/herald/storage"
)

func woken(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

func TestHubKinds(t *testing.T) {
	var h Hub
	turns, cancelTurns := h.SubscribeKinds("t", storage.WorkTurns)
	acts, cancelActs := h.SubscribeKinds("t", storage.WorkActivities)
	all, cancelAll := h.Subscribe("t")
	other, cancelOther := h.Subscribe("u")
	defer cancelOther()

	h.NotifyKinds("t", storage.WorkActivities)
	if woken(turns) || !woken(acts) || !woken(all) || woken(other) {
		t.Fatal("activity wake-up reached the wrong subscribers")
	}
	h.NotifyKinds("t", storage.WorkTurns)
	h.NotifyKinds("t", storage.WorkTurns) // coalesced: one value pending
	if !woken(turns) || woken(turns) || woken(acts) || !woken(all) {
		t.Fatal("turn wake-up reached the wrong subscribers, or was not coalesced")
	}
	h.Notify("t")
	if !woken(turns) || !woken(acts) || !woken(all) || woken(other) {
		t.Fatal("Notify did not wake every kind of the tenant")
	}
	cancelTurns()
	cancelTurns() // idempotent
	cancelActs()
	cancelAll()
	h.Notify("t")
	if woken(turns) || woken(acts) || woken(all) {
		t.Fatal("a cancelled subscription was woken")
	}
}
