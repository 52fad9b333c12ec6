package backend

import (
	"fmt"
	"sync"
	"testing"

	"github.com/heraldwf/herald/heraldtype"
	"github.com/heraldwf/herald/history"
	"github.com/heraldwf/herald/storage"
)

func evs(from, to int) []history.Event {
	var out []history.Event
	for s := from; s <= to; s++ {
		out = append(out, history.Event{Seq: s, Kind: history.EventRaised, Name: fmt.Sprint("e", s)})
	}
	return out
}

func seqs(evs []history.Event) []int {
	out := make([]int, len(evs))
	for i := range evs {
		out[i] = evs[i].Seq
	}
	return out
}

func TestHistoryCache_PrefixAndTail(t *testing.T) {
	c := NewHistoryCache(1 << 20)
	if got, after := c.Get("t", "a", 1); got != nil || after != 0 {
		t.Fatalf("empty cache: %v, %d", got, after)
	}
	c.Put("t", "a", 1, evs(1, 3))
	got, after := c.Get("t", "a", 1)
	if after != 3 || fmt.Sprint(seqs(got)) != "[1 2 3]" {
		t.Fatalf("after Put: %v, %d", seqs(got), after)
	}
	if got, after := c.Get("t", "a", 2); got != nil || after != 0 {
		t.Fatalf("another execution: %v, %d; want nothing", got, after)
	}
	if got, _ := c.Get("other", "a", 1); got != nil {
		t.Fatalf("another tenant's instance of the same id: %v; want nothing", got)
	}
	c.Append("t", "a", 1, evs(4, 5))
	if got, after := c.Get("t", "a", 1); after != 5 || fmt.Sprint(seqs(got)) != "[1 2 3 4 5]" {
		t.Fatalf("after Append: %v, %d", seqs(got), after)
	}
	// A gap (events this cache did not see) drops the entry.
	c.Append("t", "a", 1, evs(7, 7))
	if got, after := c.Get("t", "a", 1); got != nil || after != 0 {
		t.Fatalf("after a gap: %v, %d; want the entry dropped", seqs(got), after)
	}
	// So does an append to another execution.
	c.Put("t", "a", 1, evs(1, 2))
	c.Append("t", "a", 2, evs(1, 1))
	if got, _ := c.Get("t", "a", 1); got != nil {
		t.Fatalf("after an append to execution 2: %v; want the entry dropped", seqs(got))
	}
	// An append with no entry keeps nothing: the cache does not know the prefix.
	c.Append("t", "b", 1, evs(3, 4))
	if got, _ := c.Get("t", "b", 1); got != nil {
		t.Fatalf("append without an entry: %v; want nothing", seqs(got))
	}
	// A history that is not numbered 1, 2, 3, … is not kept, and drops what was.
	c.Put("t", "a", 1, evs(1, 2))
	c.Put("t", "a", 1, append(evs(1, 1), evs(3, 3)...))
	if got, _ := c.Get("t", "a", 1); got != nil {
		t.Fatalf("history with a gap: %v; want nothing", seqs(got))
	}
	c.Drop("t", "a")
	if n, size := c.Len(); n != 0 || size != 0 {
		t.Fatalf("Len after dropping everything: %d, %d", n, size)
	}
}

// A slice from Get is the caller's to read and to append to: the cache's
// appends do not show in it and the caller's do not show in the cache.
func TestHistoryCache_HandedOutSlicesAreIsolated(t *testing.T) {
	c := NewHistoryCache(1 << 20)
	c.Put("t", "a", 1, evs(1, 2))
	view, _ := c.Get("t", "a", 1)
	c.Append("t", "a", 1, evs(3, 3))
	if fmt.Sprint(seqs(view)) != "[1 2]" {
		t.Fatalf("the caller's view changed: %v", seqs(view))
	}
	mine := append(view, history.Event{Seq: 99})
	c.Append("t", "a", 1, evs(4, 4))
	got, _ := c.Get("t", "a", 1)
	if fmt.Sprint(seqs(got)) != "[1 2 3 4]" || fmt.Sprint(seqs(mine)) != "[1 2 99]" {
		t.Fatalf("cache %v, caller %v; want [1 2 3 4] and [1 2 99]", seqs(got), seqs(mine))
	}
	second, _ := c.Get("t", "a", 1)
	_ = append(second, history.Event{Seq: 77})
	c.Append("t", "a", 1, evs(5, 5))
	if got, _ := c.Get("t", "a", 1); fmt.Sprint(seqs(got)) != "[1 2 3 4 5]" {
		t.Fatalf("after a caller appended to its view: %v", seqs(got))
	}
}

func TestHistoryCache_BudgetEvictsLeastRecentlyUsed(t *testing.T) {
	per := eventSize(&evs(1, 1)[0]) // every event of evs has the same size
	c := NewHistoryCache(8 * per)
	for i := range 8 {
		c.Put("t", fmt.Sprint("i", i), 1, evs(1, 1))
	}
	c.Get("t", "i0", 1) // i0 becomes the most recently used: i1 goes first
	c.Put("t", "new", 1, evs(1, 1))
	if got, _ := c.Get("t", "i1", 1); got != nil {
		t.Fatal("i1, the least recently used, was kept")
	}
	for _, id := range []string{"i0", "i2", "new"} {
		if got, _ := c.Get("t", id, 1); got == nil {
			t.Fatalf("%s was evicted", id)
		}
	}
	if n, size := c.Len(); n != 8 || size != 8*per {
		t.Fatalf("Len: %d entries, %d bytes; want 8, %d", n, size, 8*per)
	}
	// A history larger than a quarter of the budget is not kept; one that
	// grows past it is dropped.
	c.Put("t", "big", 1, evs(1, 3))
	if got, _ := c.Get("t", "big", 1); got != nil {
		t.Fatal("a history of more than a quarter of the budget was kept")
	}
	c.Put("t", "grows", 1, evs(1, 1))
	c.Append("t", "grows", 1, evs(2, 3))
	if got, _ := c.Get("t", "grows", 1); got != nil {
		t.Fatal("a history that grew past a quarter of the budget was kept")
	}
}

func TestHistoryCache_Nil(t *testing.T) {
	var c *HistoryCache
	if NewHistoryCache(0) != nil {
		t.Fatal("NewHistoryCache(0) is not nil")
	}
	c.Put("t", "a", 1, evs(1, 2))
	c.Append("t", "a", 1, evs(3, 3))
	c.Drop("t", "a")
	if got, after := c.Get("t", "a", 1); got != nil || after != 0 {
		t.Fatalf("nil cache: %v, %d", got, after)
	}
}

// Readers of handed-out slices and the cache's appends run concurrently
// (go test -race).
func TestHistoryCache_Concurrent(t *testing.T) {
	c := NewHistoryCache(1 << 20)
	c.Put("t", "a", 1, evs(1, 1))
	var wg sync.WaitGroup
	wg.Go(func() {
		for s := 2; s <= 500; s++ {
			c.Append("t", "a", 1, evs(s, s))
		}
	})
	for range 4 {
		wg.Go(func() {
			for range 500 {
				got, after := c.Get("t", "a", 1)
				if len(got) != after {
					t.Errorf("Get: %d events, after %d", len(got), after)
					return
				}
				for i := range got {
					if got[i].Seq != i+1 {
						t.Errorf("event %d has seq %d", i, got[i].Seq)
						return
					}
				}
			}
		})
	}
	wg.Wait()
	if _, after := c.Get("t", "a", 1); after != 500 {
		t.Fatalf("after the appends: last seq %d, want 500", after)
	}
}

// Attach hands a claim the whole history from what the cache gave it and
// what it read after, and leaves the cache holding that whole history.
func TestHistoryCache_Attach(t *testing.T) {
	c := NewHistoryCache(1 << 20)
	if got := c.Attach("t", "a", 1, nil, evs(1, 2)); fmt.Sprint(seqs(got)) != "[1 2]" {
		t.Fatalf("nothing held: %v", seqs(got))
	}
	held, _ := c.Get("t", "a", 1)
	got := c.Attach("t", "a", 1, held, evs(3, 4))
	if fmt.Sprint(seqs(got)) != "[1 2 3 4]" {
		t.Fatalf("held [1 2], read [3 4]: %v", seqs(got))
	}
	if cached, after := c.Get("t", "a", 1); after != 4 || fmt.Sprint(seqs(cached)) != "[1 2 3 4]" {
		t.Fatalf("cache after Attach: %v, %d", seqs(cached), after)
	}
	// The caller's history is its own: the cache's later appends do not
	// show in it.
	c.Append("t", "a", 1, evs(5, 5))
	if fmt.Sprint(seqs(got)) != "[1 2 3 4]" {
		t.Fatalf("a turn's history changed under it: %v", seqs(got))
	}
}

// Committed extends the entry with a successful commit's events, and drops
// it when the commit failed, ended the instance or continued as new.
func TestHistoryCache_Committed(t *testing.T) {
	docs := func(from, to int) []string {
		var out []string
		for i, ev := range evs(from, to) {
			d, err := EncodeHistoryEvent(i, &ev)
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, d)
		}
		return out
	}
	commit := func(status heraldtype.Status, can bool) *storage.TurnCommitParams {
		p := &storage.TurnCommitParams{Tenant: "t", InstanceID: "a", Execution: 1, Status: status, NewEvents: evs(3, 4)}
		if can {
			p.ContinueAsNew = &storage.ContinueAsNewParams{}
		}
		return p
	}
	c := NewHistoryCache(1 << 20)
	c.Put("t", "a", 1, evs(1, 2))
	c.Committed(commit(heraldtype.StatusRunning, false), docs(3, 4), true)
	if got, after := c.Get("t", "a", 1); after != 4 || fmt.Sprint(seqs(got)) != "[1 2 3 4]" {
		t.Fatalf("after a running commit: %v, %d", seqs(got), after)
	}
	for _, tc := range []struct {
		name   string
		status heraldtype.Status
		can    bool
		ok     bool
	}{
		{"a failed commit", heraldtype.StatusRunning, false, false},
		{"an ending commit", heraldtype.StatusCompleted, false, true},
		{"a continue-as-new", heraldtype.StatusRunning, true, true},
	} {
		c.Put("t", "a", 1, evs(1, 2))
		c.Committed(commit(tc.status, tc.can), docs(3, 4), tc.ok)
		if got, after := c.Get("t", "a", 1); after != 0 {
			t.Errorf("after %s: the cache still holds %v", tc.name, seqs(got))
		}
	}
}

func TestEndsAt(t *testing.T) {
	two := []history.Event{{Seq: 1}, {Seq: 2}}
	for _, c := range []struct {
		held []history.Event
		end  int
		want bool
	}{
		{two, 2, true},
		{two, 3, false},  // the store has more
		{two, -1, false}, // not known
		{nil, 0, false},  // nothing held
		{nil, -1, false},
	} {
		if got := EndsAt(c.held, c.end); got != c.want {
			t.Errorf("EndsAt(%d events, %d) = %v, want %v", len(c.held), c.end, got, c.want)
		}
	}
}
