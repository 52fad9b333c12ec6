package pattern_test

import (
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"

	"github.com/heraldwf/herald/bus/pattern"
)

func TestIndexMatch(t *testing.T) {
	t.Parallel()
	var x pattern.Index[string]
	subs := []struct{ pattern, id string }{
		{">", "all"},
		{"user.>", "user-any"},
		{"user.*", "user-one"},
		{"user.created", "created-1"},
		{"user.created", "created-2"},
		{"*.created", "any-created"},
		{"user.*.updated", "user-x-updated"},
		{"user.profile.>", "profile-any"},
		{"order.created", "order-created"},
	}
	for _, s := range subs {
		if added, err := x.Add(s.pattern, s.id); !added || err != nil {
			t.Fatalf("Add(%q, %q) = %v, %v", s.pattern, s.id, added, err)
		}
	}
	tests := []struct {
		eventType string
		want      []string
	}{
		// Literal before "*" before ">", segment by segment; added order
		// within one pattern.
		{"user.created", []string{"created-1", "created-2", "user-one", "user-any", "any-created", "all"}},
		{"user.deleted", []string{"user-one", "user-any", "all"}},
		{"user", []string{"all"}},
		{"user.profile.updated", []string{"profile-any", "user-x-updated", "user-any", "all"}},
		{"user.profile", []string{"user-one", "user-any", "all"}},
		{"order.created", []string{"order-created", "any-created", "all"}},
		{"invoice.paid.late", []string{"all"}},
	}
	for _, tt := range tests {
		got, err := x.Match(tt.eventType)
		if err != nil || !slices.Equal(got, tt.want) {
			t.Errorf("Match(%q) = %q, %v; want %q", tt.eventType, got, err, tt.want)
		}
	}
	if x.Len() != len(subs) {
		t.Fatalf("Len() = %d, want %d", x.Len(), len(subs))
	}
}

func TestIndexOrderIndependentOfAddOrder(t *testing.T) {
	t.Parallel()
	patterns := []string{">", "a.>", "a.*", "a.b", "*.b", "*.*", "*.>", "a.b.>", "*.b.c", "a.*.c", "a.b.c"}
	var want [][]string
	for perm := range 20 {
		var x pattern.Index[string]
		order := slices.Clone(patterns)
		// A fixed shuffle per round: rotate and reverse.
		order = append(order[perm%len(order):], order[:perm%len(order)]...)
		if perm%2 == 1 {
			slices.Reverse(order)
		}
		for _, p := range order {
			mustAdd(t, &x, p, p)
		}
		var got [][]string
		for _, e := range []string{"a.b", "a.b.c", "a", "x.b.c", "a.x"} {
			m, err := x.Match(e)
			if err != nil {
				t.Fatal(err)
			}
			got = append(got, m)
		}
		if want == nil {
			want = got
			if !slices.Equal(got[1], []string{"a.b.c", "a.b.>", "a.*.c", "a.>", "*.b.c", "*.>", ">"}) {
				t.Fatalf("Match(a.b.c) = %q", got[1])
			}
			continue
		}
		for i := range want {
			if !slices.Equal(got[i], want[i]) {
				t.Fatalf("round %d: %q, first round %q", perm, got[i], want[i])
			}
		}
	}
}

func TestIndexAddRemove(t *testing.T) {
	t.Parallel()
	var x pattern.Index[int]
	mustAdd(t, &x, "a.b", 1)
	if added, err := x.Add("a.b", 1); added || err != nil {
		t.Fatalf("second Add = %v, %v; want false, nil", added, err)
	}
	mustAdd(t, &x, "a.b", 2)
	mustAdd(t, &x, "a.b", 3)
	mustAdd(t, &x, "a.*", 1) // the same value under another pattern
	expectMatch(t, &x, "a.b", 1, 2, 3, 1)

	if removed, err := x.Remove("a.b", 2); !removed || err != nil {
		t.Fatalf("Remove = %v, %v", removed, err)
	}
	expectMatch(t, &x, "a.b", 1, 3, 1)
	if removed, err := x.Remove("a.b", 2); removed || err != nil {
		t.Fatalf("Remove of an absent pair = %v, %v", removed, err)
	}
	if removed, _ := x.Remove("a.c", 1); removed {
		t.Fatal("Remove under a pattern never added reported true")
	}
	if removed, _ := x.Remove("a.b.c.d", 1); removed {
		t.Fatal("Remove under a longer pattern reported true")
	}
	// Re-adding puts the value last among its pattern's values.
	mustRemove(t, &x, "a.b", 1)
	mustAdd(t, &x, "a.b", 1)
	expectMatch(t, &x, "a.b", 3, 1, 1)
	for _, p := range []struct {
		p string
		v int
	}{{"a.b", 1}, {"a.b", 3}, {"a.*", 1}} {
		mustRemove(t, &x, p.p, p.v)
	}
	expectMatch(t, &x, "a.b")
	if x.Len() != 0 {
		t.Fatalf("Len() = %d after removing everything", x.Len())
	}
}

func TestIndexRefusesInvalidInput(t *testing.T) {
	t.Parallel()
	var x pattern.Index[int]
	mustAdd(t, &x, "a.>", 1)
	for _, p := range []string{"", "a..b", "a.>.b", "a*", "\xff", "a\x00"} {
		if _, err := x.Add(p, 2); !errors.Is(err, pattern.ErrInvalidPattern) {
			t.Errorf("Add(%q) error %v, want ErrInvalidPattern", p, err)
		}
		if _, err := x.Remove(p, 1); !errors.Is(err, pattern.ErrInvalidPattern) {
			t.Errorf("Remove(%q) error %v, want ErrInvalidPattern", p, err)
		}
	}
	if x.Len() != 1 {
		t.Fatalf("refused Adds changed the index: Len() = %d", x.Len())
	}
	dst := []int{7}
	for _, e := range []string{"", "a.*", "a.>", "a..b", "a.", "a.\xff", "a.b\x00"} {
		got, err := x.AppendMatch(dst, e)
		if !errors.Is(err, pattern.ErrInvalidEventType) || !slices.Equal(got, dst) {
			t.Errorf("AppendMatch(%q) = %v, %v; want dst unchanged and ErrInvalidEventType", e, got, err)
		}
	}
}

func TestIndexConcurrentReadersAndWriter(t *testing.T) {
	t.Parallel()
	var x pattern.Index[int]
	for i := range 100 {
		mustAdd(t, &x, "steady.>", i)
	}
	var writer, readers sync.WaitGroup
	stop := make(chan struct{})
	writer.Add(1)
	go func() { // the writer churns patterns under another prefix
		defer writer.Done()
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			p := fmt.Sprintf("churn.%d.*", i%50)
			if _, err := x.Add(p, i); err != nil {
				t.Error(err)
				return
			}
			if _, err := x.Remove(p, i); err != nil {
				t.Error(err)
				return
			}
		}
	}()
	for range 4 {
		readers.Add(1)
		go func() {
			defer readers.Done()
			var buf []int
			for range 2000 {
				var err error
				buf, err = x.AppendMatch(buf[:0], "steady.event")
				if err != nil || len(buf) != 100 {
					t.Errorf("AppendMatch = %d values, %v", len(buf), err)
					return
				}
			}
		}()
	}
	readers.Wait()
	close(stop)
	writer.Wait()
	if x.Len() != 100 {
		t.Fatalf("Len() = %d after the churn, want 100", x.Len())
	}
}

func TestMatchAllocations(t *testing.T) {
	var x pattern.Index[int]
	mustAdd(t, &x, "a.b.c", 1)
	mustAdd(t, &x, "a.*.c", 2)
	mustAdd(t, &x, "a.>", 3)
	buf := make([]int, 0, 8)
	allocs := testing.AllocsPerRun(100, func() {
		buf, _ = x.AppendMatch(buf[:0], "a.b.c")
	})
	if allocs != 0 || len(buf) != 3 {
		t.Fatalf("AppendMatch with room: %v allocations, %d values", allocs, len(buf))
	}
}

func mustAdd[V comparable](t *testing.T, x *pattern.Index[V], p string, v V) {
	t.Helper()
	if added, err := x.Add(p, v); !added || err != nil {
		t.Fatalf("Add(%q, %v) = %v, %v", p, v, added, err)
	}
}

func mustRemove[V comparable](t *testing.T, x *pattern.Index[V], p string, v V) {
	t.Helper()
	if removed, err := x.Remove(p, v); !removed || err != nil {
		t.Fatalf("Remove(%q, %v) = %v, %v", p, v, removed, err)
	}
}

func expectMatch(t *testing.T, x *pattern.Index[int], e string, want ...int) {
	t.Helper()
	got, err := x.Match(e)
	if err != nil || !slices.Equal(got, want) {
		t.Fatalf("Match(%q) = %v, %v; want %v", e, got, err, want)
	}
}
