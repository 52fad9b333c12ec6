package clock_test

import (
	"sync"
	"testing"
	"time"

	"github.com/heraldwf/herald/clock"
)

func TestVirtual(t *testing.T) {
	t0 := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	v := clock.NewVirtual(t0)
	armed := v.TimerArmed()
	late, early, stopped := v.NewTimer(2*time.Hour), v.NewTimer(time.Hour), v.NewTimer(time.Minute)
	select {
	case <-armed:
	default:
		t.Fatal("TimerArmed not closed by NewTimer")
	}
	if n := v.Timers(); n != 3 {
		t.Fatalf("Timers = %d, want 3", n)
	}
	if !stopped.Stop() || stopped.Stop() {
		t.Fatal("Stop: want true once, then false")
	}
	v.Advance(90 * time.Minute)
	if got := <-early.C(); !got.Equal(t0.Add(time.Hour)) {
		t.Fatalf("early fired with %v, want its deadline", got)
	}
	select {
	case <-late.C():
		t.Fatal("late fired before its deadline")
	case <-stopped.C():
		t.Fatal("a stopped timer fired")
	default:
	}
	if !v.Now().Equal(t0.Add(90 * time.Minute)) {
		t.Fatalf("Now = %v", v.Now())
	}
	v.Set(t0) // never backwards
	if !v.Now().Equal(t0.Add(90 * time.Minute)) {
		t.Fatalf("Set moved the clock back to %v", v.Now())
	}
	// Reset of a fired-but-unread timer discards the stale value and, as
	// time.Timer's, reports the timer active.
	v.Advance(time.Hour)
	if !late.Reset(time.Minute) {
		t.Fatal("Reset of a fired-but-unread timer reported it inactive")
	}
	select {
	case <-late.C():
		t.Fatal("stale value after Reset")
	default:
	}
	v.Advance(time.Minute)
	<-late.C()
	// A timer of zero fires at once.
	if now := <-v.NewTimer(0).C(); !now.Equal(v.Now()) {
		t.Fatalf("zero timer fired with %v, want %v", now, v.Now())
	}
	if n := v.Timers(); n != 0 {
		t.Fatalf("Timers = %d after all fired, want 0", n)
	}
}

func TestReal(t *testing.T) {
	c := clock.Real()
	if !clock.IsReal(c) || clock.IsReal(clock.NewVirtual(time.Now())) {
		t.Fatal("IsReal")
	}
	tm := c.NewTimer(time.Millisecond)
	<-tm.C()
	if tm.Stop() {
		t.Fatal("Stop of a fired timer reported true")
	}
}

// TestVirtual_ConcurrentAdvance: Advance from several goroutines at once
// moves the clock by the sum of their steps. (Found in review: Advance
// read the time and set it in two critical sections, so concurrent steps
// were lost.)
func TestVirtual_ConcurrentAdvance(t *testing.T) {
	t0 := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	v := clock.NewVirtual(t0)
	const goroutines, steps = 8, 2000
	var wg sync.WaitGroup
	for range goroutines {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range steps {
				v.Advance(time.Second)
			}
		}()
	}
	wg.Wait()
	if got, want := v.Now().Sub(t0), goroutines*steps*time.Second; got != want {
		t.Fatalf("clock moved %v, want %v", got, want)
	}
}

// TestVirtual_StopAfterUnreceivedFiring: as time.Timer since Go 1.23, a
// timer whose firing nobody received is still active for Stop and Reset:
// they return true and the value is discarded. (Found in review: they
// returned false.)
func TestVirtual_StopAfterUnreceivedFiring(t *testing.T) {
	v := clock.NewVirtual(time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC))
	for _, op := range []string{"Stop", "Reset"} {
		tm := v.NewTimer(time.Minute)
		v.Advance(time.Minute)
		var active bool
		if op == "Stop" {
			active = tm.Stop()
		} else {
			active = tm.Reset(time.Hour)
		}
		if !active {
			t.Errorf("%s after an unreceived firing = false, want true (as time.Timer)", op)
		}
		select {
		case <-tm.C():
			t.Errorf("%s: the discarded firing was received", op)
		default:
		}
		if tm.Stop() != (op == "Reset") {
			t.Errorf("Stop after %s: want %v", op, op == "Reset")
		}
	}
}
