package herald_test

import (
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/heraldwf/herald"
)

// ListInstances pages through a tenant's instances newest first, filters by
// workflow, status and creation time, stays stable while instances are
// created between pages, and refuses bad filters and cursors.
func TestListInstances_Paging(t *testing.T) {
	t.Parallel()
	clock := &offsetClock{}
	st := testStore(t)
	c := mustClient(st, herald.DefaultTenant, &herald.ClientConfig{Clock: funcClock(clock.Now)})
	ctx := t.Context()
	start := clock.Now()
	var all []string // oldest first
	for i := range 25 {
		wf := "even"
		if i%2 == 1 {
			wf = "odd"
		}
		id := fmt.Sprintf("i-%02d", i)
		if _, err := c.StartWorkflow(ctx, wf, i, herald.WithInstanceID(id)); err != nil {
			t.Fatal(err)
		}
		all = append(all, id)
		clock.Advance(time.Second)
	}
	newestFirst := slices.Clone(all)
	slices.Reverse(newestFirst)

	list := func(f herald.InstanceFilter) []string {
		t.Helper()
		var ids []string
		for pages := 0; ; pages++ {
			p, err := c.ListInstances(ctx, f)
			if err != nil {
				t.Fatalf("ListInstances(%+v): %v", f, err)
			}
			if f.Limit > 0 && len(p.Instances) > f.Limit {
				t.Fatalf("page of %d, limit %d", len(p.Instances), f.Limit)
			}
			for _, in := range p.Instances {
				ids = append(ids, in.ID)
			}
			if p.Next == "" {
				return ids
			}
			if pages > 100 {
				t.Fatal("paging does not end")
			}
			f.Cursor = p.Next
		}
	}
	if got := list(herald.InstanceFilter{}); !slices.Equal(got, newestFirst) {
		t.Fatalf("one default page: %v, want %v", got, newestFirst)
	}
	if got := list(herald.InstanceFilter{Limit: 7}); !slices.Equal(got, newestFirst) {
		t.Fatalf("pages of 7: %v, want %v", got, newestFirst)
	}
	var odd []string
	for _, id := range newestFirst {
		var n int
		fmt.Sscanf(id, "i-%d", &n)
		if n%2 == 1 {
			odd = append(odd, id)
		}
	}
	if got := list(herald.InstanceFilter{Workflow: "odd", Limit: 5}); !slices.Equal(got, odd) {
		t.Fatalf("workflow odd: %v, want %v", got, odd)
	}
	if got := list(herald.InstanceFilter{Status: herald.StatusPending, Limit: 10}); !slices.Equal(got, newestFirst) {
		t.Fatalf("status pending: %v, want all", got)
	}
	if got := list(herald.InstanceFilter{Status: herald.StatusCompleted}); len(got) != 0 {
		t.Fatalf("status completed: %v, want none", got)
	}
	// [start+10s, start+15s) holds i-10 … i-14.
	from, to := start.Add(10*time.Second), start.Add(15*time.Second)
	if got := list(herald.InstanceFilter{CreatedAfter: from, CreatedBefore: to, Limit: 2}); !slices.Equal(got, []string{"i-14", "i-13", "i-12", "i-11", "i-10"}) {
		t.Fatalf("time range: %v", got)
	}

	// Instances created between pages do not shift the listing: the next
	// page continues after the last instance of the previous one.
	p1, err := c.ListInstances(ctx, herald.InstanceFilter{Limit: 10})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 5 {
		if _, err := c.StartWorkflow(ctx, "even", i, herald.WithInstanceID(fmt.Sprintf("late-%d", i))); err != nil {
			t.Fatal(err)
		}
		clock.Advance(time.Second)
	}
	rest := list(herald.InstanceFilter{Limit: 10, Cursor: p1.Next})
	var got []string
	for _, in := range p1.Instances {
		got = append(got, in.ID)
	}
	if got = append(got, rest...); !slices.Equal(got, newestFirst) {
		t.Fatalf("listing across inserts: %v, want %v", got, newestFirst)
	}
	if p1.Instances[0].Workflow != "even" || p1.Instances[0].Status != herald.StatusPending || p1.Instances[0].CreatedAt.IsZero() {
		t.Fatalf("listed info: %+v", p1.Instances[0])
	}

	// Bad filters are refused with the reasons; nothing is listed.
	for _, f := range []herald.InstanceFilter{
		{Limit: -1},
		{Limit: herald.MaxListLimit + 1},
		{Status: "sleeping"},
		{Workflow: "bad\x00name"},
		{CreatedAfter: to, CreatedBefore: from},
		{Cursor: "not-a-cursor"},
	} {
		p, err := c.ListInstances(ctx, f)
		if !errors.Is(err, herald.ErrInvalidArgument) || p != nil {
			t.Fatalf("ListInstances(%+v) = %+v, %v; want ErrInvalidArgument", f, p, err)
		}
	}
	// Another tenant lists nothing of these.
	other := mustClient(st, "other", nil)
	if p, err := other.ListInstances(ctx, herald.InstanceFilter{}); err != nil || len(p.Instances) != 0 || p.Next != "" {
		t.Fatalf("another tenant's listing: %+v, %v", p, err)
	}
}
