package herald_test

// End-to-end test of a flood past the limit: every event keeps its own fate
// in the ledger (dropped/limit), while history gets one breadcrumb per
// burst of limit drops (history.Event.Count) instead of one per event, the
// log one WARN line per burst (later turns' drops at DEBUG, with counts),
// and the stats count every drop.

import (
	"fmt"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/heraldwf/herald"
	"github.com/heraldwf/herald/history"
)

func TestFlood_HistoryStaysBounded(t *testing.T) {
	t.Parallel()
	const (
		limit = 5
		n     = 2000
	)
	b := setup(t, &herald.Config{MaxUnconsumedEvents: limit}, func(rt *herald.Runtime) {
		herald.RegisterWorkflow(rt, "idle", func(ctx *herald.Context, _ struct{}) (struct{}, error) {
			return struct{}{}, ctx.Sleep(24 * time.Hour) // never waits for an event
		})
	})
	b.start("idle", "i", nil)
	b.waitHistory("i", history.TimerCreated, "", 1)
	// The first events fill the limit; every later one is dropped.
	for i := range limit {
		b.raise("i", "flood", i, fmt.Sprintf("f%04d", i))
		b.waitFate(fmt.Sprintf("f%04d", i), history.FateBuffered)
	}
	var wg sync.WaitGroup
	errs := make(chan error, n)
	next := make(chan int, n)
	for i := limit; i < n; i++ {
		next <- i
	}
	close(next)
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				id := fmt.Sprintf("f%04d", i)
				if _, err := b.client.RaiseEvent(b.ctx, "i", "flood", i, herald.WithEventID(id)); err != nil {
					errs <- fmt.Errorf("raise %s: %w", id, err)
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	b.waitFor("every event seen by the instance", func() bool {
		evs, err := b.client.Events(b.ctx, "i", herald.EventFilter{Fate: history.FatePending, Limit: n})
		return err == nil && len(evs) == 0
	})

	// Every event has its own fate.
	dropped, err := b.client.Events(b.ctx, "i", herald.EventFilter{Fate: history.FateDropped, Limit: n})
	if err != nil {
		t.Fatal(err)
	}
	if len(dropped) != n-limit {
		t.Fatalf("%d events dropped, want %d", len(dropped), n-limit)
	}
	for _, e := range dropped {
		if e.Reason != history.DropLimit || e.Execution != 1 || e.Name != "flood" {
			t.Fatalf("dropped event %+v", e)
		}
	}
	for _, i := range []int{limit, n / 2, n - 1} {
		b.checkFate(fmt.Sprintf("f%04d", i), wantFate{Lane: history.LanePositional, Name: "flood", Fate: history.FateDropped,
			Reason: history.DropLimit, Execution: 1, Origin: 1})
	}
	b.checkFate("f0000", wantFate{Lane: history.LanePositional, Name: "flood", Fate: history.FateBuffered, Execution: 1, Origin: 1})

	// History: the start, the timer, the buffered events and one
	// breadcrumb for the burst.
	evs := b.history("i", 0)
	crumbs := ofKind(evs, history.EventDropped, "", "")
	if len(evs) > limit+4 || len(crumbs) != 1 {
		t.Fatalf("%d history events (%d breadcrumbs) for %d events; history:%s", len(evs), len(crumbs), n, dumpHistory(evs))
	}
	if c := crumbs[0]; c.Reason != history.DropLimit || c.Name != "flood" || b.fate(c.EventID).Reason != history.DropLimit {
		t.Fatalf("breadcrumb %+v", c)
	}
	b.replayAll("i")

	// Stats count every drop; the log has one WARN line for the burst and
	// reports the drops of later turns at DEBUG, with their counts.
	b.waitFor("every drop counted", func() bool {
		return b.obs.droppedBy(string(history.DropLimit)) == n-limit
	})
	warns, reported := floodLogged(b)
	if warns != 1 || reported != n-limit {
		t.Fatalf("%d WARN lines, %d drops reported in the log, want 1 line and %d drops", warns, reported, n-limit)
	}
	t.Logf("%d raises: %d history events", n, len(evs))
}

// floodLogged returns the number of WARN lines about limit drops and the
// number of drops the log reports (a line's count attribute, or one).
func floodLogged(b *bundle) (warns, reported int) {
	b.logs.mu.Lock()
	defer b.logs.mu.Unlock()
	for _, r := range b.logs.records {
		limitDrop, count := false, 1
		r.Attrs(func(a slog.Attr) bool {
			switch a.Key {
			case "reason":
				limitDrop = a.Value.String() == string(history.DropLimit)
			case "count":
				count = int(a.Value.Int64())
			}
			return true
		})
		if !limitDrop {
			continue
		}
		if r.Level >= slog.LevelWarn {
			warns++
		}
		reported += count
	}
	return warns, reported
}
