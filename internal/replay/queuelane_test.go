package replay_test

import (
	"slices"
	"testing"

	"github.com/heraldwf/herald/history"
	"github.com/heraldwf/herald/internal/replay"
)

func queueMsg(name, id string, latest bool) *replay.Buffered {
	return &replay.Buffered{Event: history.Event{Kind: history.EventRaised, Lane: history.LaneQueue, Name: name,
		EventID: id, Payload: jsonOf(id), Latest: latest}}
}

func queueIDs(q *replay.Queue) []string {
	ids := []string{}
	for _, b := range q.Unconsumed() {
		ids = append(ids, b.Event.EventID)
	}
	return ids
}

// TestQueueGiveBack: a message a receive took and gave back (it lost a
// Select) goes back as if it had never been taken.
func TestQueueGiveBack(t *testing.T) {
	t.Parallel()
	type step func(t *testing.T, q *replay.Queue, msgs map[string]*replay.Buffered)
	arrive := func(name, id string, latest bool, want replay.Outcome) step {
		return func(t *testing.T, q *replay.Queue, msgs map[string]*replay.Buffered) {
			t.Helper()
			msgs[id] = queueMsg(name, id, latest)
			if o, _ := q.Arrive(msgs[id], latest); !sameOutcome(o, want) {
				t.Fatalf("Arrive(%s) = %+v, want %+v", id, o, want)
			}
		}
	}
	wait := func(name string, seq int, want string) step {
		return func(t *testing.T, q *replay.Queue, _ map[string]*replay.Buffered) {
			t.Helper()
			got := ""
			if b := q.Wait(name, seq); b != nil {
				got = b.Event.EventID
			}
			if got != want {
				t.Fatalf("Wait(%s, %d) took %q, want %q", name, seq, got, want)
			}
		}
	}
	back := func(id string, want replay.Outcome) step {
		return func(t *testing.T, q *replay.Queue, msgs map[string]*replay.Buffered) {
			t.Helper()
			if o := q.GiveBack(msgs[id]); !sameOutcome(o, want) {
				t.Fatalf("GiveBack(%s) = %+v, want %+v", id, o, want)
			}
		}
	}
	state := func(returned int, ids ...string) step {
		return func(t *testing.T, q *replay.Queue, _ map[string]*replay.Buffered) {
			t.Helper()
			if got := queueIDs(q); !slices.Equal(got, ids) || q.Count() != len(ids) || q.Returned() != returned {
				t.Fatalf("unconsumed %v (count %d, returned %d), want %v (returned %d)", got, q.Count(), q.Returned(), ids, returned)
			}
		}
	}
	tests := []struct {
		name  string
		max   int
		steps []step
	}{
		{"taken at once, back before later messages", 20, []step{
			arrive("q", "m1", false, buffered), arrive("q", "m2", false, buffered),
			wait("q", 2, "m1"), arrive("q", "m3", false, buffered),
			back("m1", buffered), state(1, "m1", "m2", "m3"),
			wait("q", 3, "m1"), state(0, "m2", "m3"),
		}},
		{"delivered on arrival, back to the waiting receive", 20, []step{
			wait("q", 2, ""), wait("q", 3, ""),
			arrive("q", "m1", false, deliveredTo(2)),
			back("m1", deliveredTo(3)), state(0),
			arrive("q", "m2", false, buffered),
		}},
		{"over the limit, never dropped; arrivals are", 2, []step{
			wait("q", 2, ""), arrive("q", "m1", false, deliveredTo(2)),
			arrive("r", "r1", false, buffered), arrive("r", "r2", false, buffered),
			back("m1", buffered), state(1, "m1", "r1", "r2"),
			arrive("r", "r3", false, dropped(history.DropLimit)),
		}},
		{"latest-value: superseded by a newer message kept since", 20, []step{
			arrive("L", "l1", true, buffered), wait("L", 2, "l1"),
			arrive("L", "l2", true, buffered),
			back("l1", dropped(history.DropSuperseded)), state(0, "l2"),
		}},
		{"latest-value: a newer message dropped for the limit does not supersede", 1, []step{
			arrive("L", "l1", true, buffered), wait("L", 2, "l1"),
			arrive("r", "r1", false, buffered),
			arrive("L", "l2", true, dropped(history.DropLimit)),
			back("l1", buffered), state(1, "l1", "r1"),
		}},
		{"latest-value: nothing newer, kept", 20, []step{
			arrive("L", "l1", true, buffered), wait("L", 2, "l1"),
			back("l1", buffered), state(1, "l1"),
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			q := replay.NewQueue(tt.max)
			msgs := map[string]*replay.Buffered{}
			for _, s := range tt.steps {
				s(t, q, msgs)
			}
		})
	}
}
