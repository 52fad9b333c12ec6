package herald_test

import (
	"testing"

	"github.com/google/uuid"
)

// The ids Herald generates for instances, events and published events are
// UUIDs of version 7: time-ordered, so each one sorts after the ids made
// before it and the stores' indexes of them grow at their end.
func TestGeneratedIDsAreTimeOrdered(t *testing.T) {
	b := setup(t, nil, nil)
	var ids []string
	for range 3 {
		id, err := b.client.StartWorkflow(b.ctx, "never-registered", nil)
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, id)
		r, err := b.client.RaiseEvent(b.ctx, id, "go", nil)
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, r.EventID)
		q, err := b.client.Enqueue(b.ctx, id, "jobs", nil)
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, q.EventID)
		p, err := b.client.Publish(b.ctx, "orders.created", nil)
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, p.EventID)
	}
	for i, id := range ids {
		u, err := uuid.Parse(id)
		if err != nil {
			t.Fatalf("id %d %q: %v", i, id, err)
		}
		if u.Version() != 7 {
			t.Fatalf("id %d %q is a UUID of version %d, want 7", i, id, u.Version())
		}
		if i > 0 && id <= ids[i-1] {
			t.Fatalf("id %d %q does not sort after the one made before it, %q", i, id, ids[i-1])
		}
	}
}
