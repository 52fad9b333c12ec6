package herald

import (
	"testing"
	"time"
)

// The turn loop's worker pool bounds claims and hand-offs together, and
// hand-offs take no more than half of it.
func TestWorkerPoolBoundsHandOffs(t *testing.T) {
	p := newWorkerPool(4)
	if !p.tryTake() || !p.tryTake() {
		t.Fatal("tryTake refused a slot of a pool more than half free")
	}
	if p.tryTake() {
		t.Fatal("tryTake took a slot of a pool half taken")
	}
	p.take()
	p.take() // claims may take the rest
	if got := p.free(); got != 0 {
		t.Fatalf("free = %d, want 0", got)
	}
	p.release()
	p.release()
	select {
	case <-p.freed:
	default:
		t.Fatal("a release did not say a slot was freed")
	}
	p.release()
	if got := p.free(); got != 3 {
		t.Fatalf("free after three releases = %d, want 3", got)
	}

	// While the claim loop waits for a slot, the next free one is its own.
	p.starved.Store(true)
	if p.tryTake() {
		t.Fatal("a hand-off took the slot the starved claim loop waits for")
	}
	p.starved.Store(false)
	if !p.tryTake() {
		t.Fatal("tryTake refused a slot of a pool more than half free")
	}
	p.release()
	p.release()
}

// close refuses hand-offs from then on and waits for every slot in use.
func TestWorkerPoolClose(t *testing.T) {
	p := newWorkerPool(4)
	p.take() // a claimed turn
	if !p.tryTake() {
		t.Fatal("tryTake refused a slot of a pool more than half free")
	}
	closed := make(chan struct{})
	go func() { p.close(); close(closed) }()
	for !func() bool { p.mu.Lock(); defer p.mu.Unlock(); return p.closed }() {
		time.Sleep(time.Millisecond) // wait for close to begin; not a timing assertion
	}
	p.release()
	if p.tryTake() {
		t.Fatal("a closed pool gave a slot to a hand-off")
	}
	select {
	case <-closed:
		t.Fatal("close returned while a turn still held a slot")
	default:
	}
	p.release()
	<-closed
}
