package backend

import (
	"slices"
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

func TestHubSubscribeAll(t *testing.T) {
	var h Hub
	turns, drainTurns, cancelTurns := h.SubscribeAll(storage.WorkTurns)
	acts, drainActs, cancelActs := h.SubscribeAll(storage.WorkActivities)
	defer cancelActs()
	one, cancelOne := h.SubscribeKinds("a", storage.WorkTurns)
	defer cancelOne()
	h.NotifyKinds("a", storage.WorkTurns)
	h.NotifyKinds("b", storage.WorkTurns) // coalesced into one wake-up
	if !woken(turns) || woken(turns) || woken(acts) || !woken(one) {
		t.Fatal("turn wake-ups reached the wrong subscribers, or were not coalesced")
	}
	got := drainTurns()
	slices.Sort(got)
	if !slices.Equal(got, []string{"a", "b"}) || len(drainTurns()) != 0 || len(drainActs()) != 0 {
		t.Fatalf("drain = %q, then not empty", got)
	}
	h.NotifyAll()
	if !woken(turns) || !woken(acts) {
		t.Fatal("NotifyAll did not wake SubscribeAll")
	}
	if got := drainActs(); !slices.Equal(got, []string{storage.AnyTenant}) {
		t.Fatalf("drain after NotifyAll = %q, want AnyTenant", got)
	}
	drainTurns()
	cancelTurns()
	cancelTurns()
	h.Notify("c")
	if woken(turns) || len(drainTurns()) != 0 {
		t.Fatal("a cancelled SubscribeAll was woken")
	}
}
