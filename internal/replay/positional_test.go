package replay_test

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/heraldwf/herald/history"
	"github.com/heraldwf/herald/internal/replay"
)

// laneOp is one step of a Positional table test: an operation on the lane
// and the result it must have, or a check of the lane's state.
type laneOp struct {
	op   string // wait, cancel, arrive, apply, giveBack, count, unconsumed, active, withdrawn
	name string
	seq  int
	id   string

	number int            // wait: expected wait number
	got    string         // wait: expected buffered event received at once ("" = none)
	ok     bool           // cancel, apply: expected result
	out    replay.Outcome // arrive, giveBack: expected outcome; apply: the recorded outcome
	n      int            // count, active, withdrawn
	ids    []string       // unconsumed
}

func (o laneOp) String() string {
	switch o.op {
	case "wait":
		return fmt.Sprintf("Wait(%q, seq %d)", o.name, o.seq)
	case "cancel":
		return fmt.Sprintf("Cancel(%q, seq %d)", o.name, o.seq)
	case "arrive", "apply", "giveBack":
		return fmt.Sprintf("%s(%q, %s)", o.op, o.name, o.id)
	}
	return o.op + " " + o.name
}

func wait(name string, seq, number int) laneOp {
	return laneOp{op: "wait", name: name, seq: seq, number: number}
}

func waitGets(name string, seq, number int, id string) laneOp {
	return laneOp{op: "wait", name: name, seq: seq, number: number, got: id}
}

func cancel(name string, seq int, ok bool) laneOp {
	return laneOp{op: "cancel", name: name, seq: seq, ok: ok}
}

func arrive(name, id string, out replay.Outcome) laneOp {
	return laneOp{op: "arrive", name: name, id: id, out: out}
}

func apply(name, id string, recorded replay.Outcome, ok bool) laneOp {
	return laneOp{op: "apply", name: name, id: id, out: recorded, ok: ok}
}

// giveBack gives back the event id, which a wait took earlier (at once or on
// its arrival).
func giveBack(name, id string, out replay.Outcome) laneOp {
	return laneOp{op: "giveBack", name: name, id: id, out: out}
}

func count(n int) laneOp                  { return laneOp{op: "count", n: n} }
func unconsumed(ids ...string) laneOp     { return laneOp{op: "unconsumed", ids: ids} }
func active(name string, n int) laneOp    { return laneOp{op: "active", name: name, n: n} }
func withdrawn(name string, n int) laneOp { return laneOp{op: "withdrawn", name: name, n: n} }

var buffered = replay.Outcome{}

func deliveredTo(seq int) replay.Outcome { return replay.Outcome{Delivered: true, WaitSeq: seq} }

func dropped(r history.DropReason) replay.Outcome { return replay.Outcome{Dropped: true, Reason: r} }

func laneEvent(name, id string) *replay.Buffered {
	return &replay.Buffered{Event: history.Event{Kind: history.EventRaised, Lane: history.LanePositional,
		Name: name, EventID: id, Payload: []byte(`"` + id + `"`)}}
}

// sameOutcome compares what Arrive decides.
func sameOutcome(a, b replay.Outcome) bool {
	return a.Delivered == b.Delivered && a.WaitSeq == b.WaitSeq && a.Dropped == b.Dropped && a.Reason == b.Reason
}

func unconsumedIDs(p *replay.Positional) []string {
	ids := []string{}
	for _, b := range p.Unconsumed() {
		ids = append(ids, b.Event.EventID)
	}
	return ids
}

func runLaneOps(t *testing.T, p *replay.Positional, ops []laneOp) {
	t.Helper()
	events := map[string]*replay.Buffered{} // every event that arrived, by id
	for i, o := range ops {
		switch o.op {
		case "wait":
			n, got := p.Wait(o.name, o.seq)
			gotID := ""
			if got != nil {
				gotID = got.Event.EventID
				if got.Event.Name != o.name {
					t.Fatalf("op %d %v: received an event of name %q", i, o, got.Event.Name)
				}
			}
			if n != o.number || gotID != o.got {
				t.Fatalf("op %d %v: got wait number %d, event %q; want %d, %q", i, o, n, gotID, o.number, o.got)
			}
		case "cancel":
			if ok := p.Cancel(o.name, o.seq); ok != o.ok {
				t.Fatalf("op %d %v: got %v, want %v", i, o, ok, o.ok)
			}
		case "arrive":
			events[o.id] = laneEvent(o.name, o.id)
			if got := p.Arrive(events[o.id]); !sameOutcome(got, o.out) {
				t.Fatalf("op %d %v: got outcome %+v, want %+v", i, o, got, o.out)
			}
		case "apply":
			events[o.id] = laneEvent(o.name, o.id)
			if ok := p.Apply(events[o.id], o.out); ok != o.ok {
				t.Fatalf("op %d %v with %+v: got %v, want %v", i, o, o.out, ok, o.ok)
			}
		case "giveBack":
			if got := p.GiveBack(events[o.id]); !sameOutcome(got, o.out) {
				t.Fatalf("op %d %v: got outcome %+v, want %+v", i, o, got, o.out)
			}
		case "count":
			if got := p.Count(); got != o.n {
				t.Fatalf("op %d: Count() = %d, want %d", i, got, o.n)
			}
			if got := len(p.Unconsumed()); got != o.n {
				t.Fatalf("op %d: len(Unconsumed()) = %d, want Count %d", i, got, o.n)
			}
		case "unconsumed":
			if got := unconsumedIDs(p); !slices.Equal(got, o.ids) {
				t.Fatalf("op %d: Unconsumed() = %v, want %v", i, got, o.ids)
			}
		case "active":
			if got := p.Active(o.name); got != o.n {
				t.Fatalf("op %d: Active(%q) = %d, want %d", i, o.name, got, o.n)
			}
		case "withdrawn":
			if got := p.Withdrawn(o.name); got != o.n {
				t.Fatalf("op %d: Withdrawn(%q) = %d, want %d", i, o.name, got, o.n)
			}
		default:
			t.Fatalf("op %d: unknown op %q", i, o.op)
		}
	}
}

func TestPositional(t *testing.T) {
	t.Parallel()
	withdrawnWait := dropped(history.DropWithdrawnWait)
	limit := dropped(history.DropLimit)
	tests := []struct {
		name  string
		limit int
		ops   []laneOp
	}{
		// Rule 1: raise after wait.
		{"rule1/the active wait receives the event", 100, []laneOp{
			wait("x", 2, 1), active("x", 1),
			arrive("x", "e1", deliveredTo(2)),
			active("x", 0), count(0), unconsumed(),
		}},
		{"rule1/oldest active wait receives first", 100, []laneOp{
			wait("x", 2, 1), wait("x", 3, 2), wait("x", 4, 3),
			arrive("x", "e1", deliveredTo(2)),
			arrive("x", "e2", deliveredTo(3)),
			arrive("x", "e3", deliveredTo(4)),
			arrive("x", "e4", buffered),
			active("x", 0), unconsumed("e4"),
		}},
		{"rule1/wait numbers count per name", 100, []laneOp{
			wait("x", 2, 1), wait("y", 3, 1), wait("x", 4, 2), wait("y", 5, 2), wait("x", 6, 3),
			arrive("y", "y1", deliveredTo(3)),
			arrive("x", "x1", deliveredTo(2)),
			arrive("y", "y2", deliveredTo(5)),
		}},
		{"rule1/wait numbers keep counting after deliveries", 100, []laneOp{
			wait("x", 2, 1), arrive("x", "e1", deliveredTo(2)),
			wait("x", 4, 2), arrive("x", "e2", deliveredTo(4)),
			arrive("x", "e3", buffered),
			waitGets("x", 6, 3, "e3"),
		}},
		{"rule1/an event of another name does not match", 100, []laneOp{
			wait("x", 2, 1),
			arrive("y", "y1", buffered),
			arrive("X", "X1", buffered), // names are case-sensitive
			active("x", 1), unconsumed("y1", "X1"),
		}},

		// Rule 2: raise before wait.
		{"rule2/buffered, then the next wait receives it at once", 100, []laneOp{
			arrive("x", "e1", buffered), count(1), active("x", 0),
			waitGets("x", 2, 1, "e1"),
			count(0), active("x", 0), unconsumed(),
		}},
		{"rule2/FIFO per name", 100, []laneOp{
			arrive("x", "e1", buffered), arrive("x", "e2", buffered), arrive("x", "e3", buffered),
			waitGets("x", 2, 1, "e1"),
			waitGets("x", 3, 2, "e2"),
			waitGets("x", 4, 3, "e3"),
			wait("x", 5, 4), active("x", 1),
			arrive("x", "e4", deliveredTo(5)),
		}},
		{"rule2/names are independent", 100, []laneOp{
			arrive("x", "x1", buffered), arrive("y", "y1", buffered), arrive("x", "x2", buffered), arrive("y", "y2", buffered),
			waitGets("y", 2, 1, "y1"),
			waitGets("x", 3, 1, "x1"),
			waitGets("y", 4, 2, "y2"),
			wait("y", 5, 3),
			unconsumed("x2"), active("y", 1), active("x", 0),
		}},
		{"rule2/a wait that received a buffered event is not active", 100, []laneOp{
			arrive("x", "e1", buffered),
			waitGets("x", 2, 1, "e1"),
			wait("x", 3, 2),
			arrive("x", "e2", deliveredTo(3)),
		}},

		// Rule 3: withdrawn wait.
		{"rule3/cancel, then the late answer is dropped", 100, []laneOp{
			wait("x", 2, 1),
			cancel("x", 2, true), active("x", 0), withdrawn("x", 1),
			arrive("x", "late", withdrawnWait),
			withdrawn("x", 0), count(0),
			arrive("x", "next", buffered),
			unconsumed("next"),
		}},
		{"rule3/each withdrawn wait drops exactly one arrival", 100, []laneOp{
			wait("x", 2, 1), wait("x", 3, 2),
			cancel("x", 3, true), cancel("x", 2, true), withdrawn("x", 2),
			arrive("x", "e1", withdrawnWait),
			arrive("x", "e2", withdrawnWait),
			arrive("x", "e3", buffered),
			arrive("x", "e4", buffered),
			withdrawn("x", 0), unconsumed("e3", "e4"),
		}},
		{"rule3/a new wait clears withdrawn questions", 100, []laneOp{
			wait("x", 2, 1), wait("x", 3, 2), cancel("x", 2, true), cancel("x", 3, true), withdrawn("x", 2),
			wait("x", 5, 3), withdrawn("x", 0),
			arrive("x", "fresh", deliveredTo(5)),
			arrive("x", "after", buffered),
		}},
		{"rule3/a new wait of another name does not clear", 100, []laneOp{
			wait("x", 2, 1), cancel("x", 2, true),
			wait("y", 4, 1), withdrawn("x", 1),
			arrive("x", "late", withdrawnWait),
		}},
		{"rule3/withdrawn questions are per name", 100, []laneOp{
			wait("x", 2, 1), cancel("x", 2, true),
			arrive("y", "y1", buffered),
			arrive("x", "x1", withdrawnWait),
			arrive("y", "y2", buffered),
			unconsumed("y1", "y2"),
		}},
		{"rule3/cancel of an already-matched wait returns false and withdraws nothing", 100, []laneOp{
			wait("x", 2, 1),
			arrive("x", "e1", deliveredTo(2)),
			cancel("x", 2, false), withdrawn("x", 0),
			arrive("x", "e2", buffered),
		}},
		{"rule3/cancel of a wait that received a buffered event returns false", 100, []laneOp{
			arrive("x", "e1", buffered),
			waitGets("x", 2, 1, "e1"),
			cancel("x", 2, false), withdrawn("x", 0),
			arrive("x", "e2", buffered),
		}},
		{"rule3/cancel twice: the second returns false", 100, []laneOp{
			wait("x", 2, 1),
			cancel("x", 2, true), cancel("x", 2, false),
			withdrawn("x", 1),
		}},
		{"rule3/cancel of an unknown seq or the wrong name returns false", 100, []laneOp{
			wait("x", 2, 1),
			cancel("x", 3, false), cancel("y", 2, false),
			active("x", 1), withdrawn("x", 0), withdrawn("y", 0),
			arrive("x", "e1", deliveredTo(2)),
		}},
		{"rule3/older of two active waits cancelled: the arrival goes to the younger", 100, []laneOp{
			wait("x", 2, 1), wait("x", 3, 2),
			cancel("x", 2, true), active("x", 1),
			arrive("x", "e1", deliveredTo(3)),
			// The question of wait 1 is still open: no wait of x was made
			// after it was withdrawn, and none is active now.
			withdrawn("x", 1),
			arrive("x", "e2", withdrawnWait),
			arrive("x", "e3", buffered),
		}},
		{"rule3/younger of two active waits cancelled: the older still receives", 100, []laneOp{
			wait("x", 2, 1), wait("x", 3, 2),
			cancel("x", 3, true),
			arrive("x", "e1", deliveredTo(2)),
			arrive("x", "e2", withdrawnWait),
		}},
		{"rule3/the withdrawn drop comes before the limit", 1, []laneOp{
			arrive("y", "y1", buffered), count(1),
			wait("x", 2, 1), cancel("x", 2, true),
			arrive("x", "late", withdrawnWait),
			arrive("x", "over", limit),
		}},

		// Rule 4: limit.
		{"rule4/the limit counts across names", 2, []laneOp{
			arrive("x", "x1", buffered), arrive("y", "y1", buffered), count(2),
			arrive("x", "x2", limit), arrive("y", "y2", limit), arrive("z", "z1", limit),
			count(2), unconsumed("x1", "y1"),
		}},
		{"rule4/consuming frees room", 2, []laneOp{
			arrive("x", "x1", buffered), arrive("x", "x2", buffered), arrive("x", "x3", limit),
			waitGets("x", 2, 1, "x1"), count(1),
			arrive("y", "y1", buffered), arrive("x", "x4", limit),
			waitGets("x", 3, 2, "x2"),
			arrive("x", "x5", buffered),
			unconsumed("y1", "x5"),
		}},
		{"rule4/a dropped event is never received", 1, []laneOp{
			arrive("x", "x1", buffered), arrive("x", "x2", limit),
			waitGets("x", 2, 1, "x1"),
			wait("x", 3, 2),
			arrive("x", "x3", deliveredTo(3)),
		}},
		{"rule4/deliveries to active waits ignore the limit", 1, []laneOp{
			arrive("y", "y1", buffered),
			wait("x", 2, 1), wait("x", 3, 2),
			arrive("x", "x1", deliveredTo(2)),
			arrive("x", "x2", deliveredTo(3)),
			arrive("x", "x3", limit),
			count(1),
		}},
		{"rule4/limit 0 is unlimited", 0, []laneOp{
			arrive("x", "1", buffered), arrive("x", "2", buffered), arrive("x", "3", buffered), arrive("x", "4", buffered),
			count(4),
		}},

		// Unconsumed.
		{"unconsumed/empty", 100, []laneOp{unconsumed(), count(0)}},
		{"unconsumed/arrival order across names", 100, []laneOp{
			arrive("x", "x1", buffered), arrive("y", "y1", buffered), arrive("z", "z1", buffered),
			arrive("x", "x2", buffered), arrive("y", "y2", buffered),
			waitGets("y", 2, 1, "y1"),
			unconsumed("x1", "z1", "x2", "y2"),
			arrive("z", "z2", buffered),
			waitGets("x", 3, 1, "x1"),
			unconsumed("z1", "x2", "y2", "z2"), count(4),
		}},

		// Apply: recorded outcomes.
		{"apply/deliveries to the oldest active waits", 100, []laneOp{
			wait("x", 2, 1), wait("x", 3, 2),
			apply("x", "e1", deliveredTo(2), true),
			apply("x", "e2", deliveredTo(3), true),
			active("x", 0),
			apply("x", "e3", deliveredTo(3), false),
		}},
		{"apply/delivery with no active wait is impossible", 100, []laneOp{
			apply("x", "e1", deliveredTo(2), false),
			count(0),
		}},
		{"apply/delivery to a younger wait is impossible", 100, []laneOp{
			wait("x", 2, 1), wait("x", 3, 2),
			apply("x", "e1", deliveredTo(3), false),
			active("x", 2),
			apply("x", "e1", deliveredTo(2), true),
		}},
		{"apply/delivery to a wait of another name is impossible", 100, []laneOp{
			wait("y", 2, 1),
			apply("x", "e1", deliveredTo(2), false),
			active("y", 1),
		}},
		{"apply/withdrawn drop without a withdrawn question is impossible", 100, []laneOp{
			apply("x", "e1", withdrawnWait, false),
			wait("x", 2, 1), apply("x", "e1", withdrawnWait, false),
		}},
		{"apply/withdrawn drop while a wait is active is impossible", 100, []laneOp{
			wait("x", 2, 1), wait("x", 3, 2), cancel("x", 2, true),
			apply("x", "e1", withdrawnWait, false),
			withdrawn("x", 1), active("x", 1),
		}},
		{"apply/withdrawn drop answers the question", 100, []laneOp{
			wait("x", 2, 1), cancel("x", 2, true),
			apply("x", "late", withdrawnWait, true),
			withdrawn("x", 0),
			arrive("x", "next", buffered),
		}},
		{"apply/buffering while a withdrawn question is open is impossible", 100, []laneOp{
			wait("x", 2, 1), cancel("x", 2, true),
			apply("x", "e1", buffered, false),
			count(0), withdrawn("x", 1),
			apply("y", "y1", buffered, true), // another name
		}},
		{"apply/buffering while a wait is active is impossible", 100, []laneOp{
			wait("x", 2, 1),
			apply("x", "e1", buffered, false),
			count(0), active("x", 1),
		}},
		{"apply/buffering is kept past a smaller limit", 1, []laneOp{
			apply("x", "e1", buffered, true),
			apply("x", "e2", buffered, true),
			apply("y", "y1", buffered, true),
			count(3), unconsumed("e1", "e2", "y1"),
			waitGets("x", 2, 1, "e1"),
		}},
		{"apply/a limit drop is kept under a larger limit", 100, []laneOp{
			apply("x", "e1", limit, true),
			count(0),
			wait("x", 2, 1), active("x", 1),
		}},
		{"apply/other drop reasons change nothing", 100, []laneOp{
			apply("x", "e1", dropped(history.DropCarryForwardLimit), true),
			apply("x", "e2", dropped(history.DropNotCarriedForward), true),
			apply("x", "e3", dropped(history.DropInstanceTerminal), true),
			count(0), withdrawn("x", 0),
		}},

		// Give-back: a wait that took an event loses a Select before the
		// workflow got it; the event goes back as if never taken.
		{"giveBack/delivered on arrival, back before later arrivals", 100, []laneOp{
			wait("x", 2, 1), arrive("x", "e1", deliveredTo(2)),
			arrive("x", "e2", buffered), arrive("x", "e3", buffered),
			giveBack("x", "e1", buffered),
			unconsumed("e1", "e2", "e3"), count(3),
			waitGets("x", 3, 2, "e1"),
		}},
		{"giveBack/taken at once, back before later arrivals", 100, []laneOp{
			arrive("x", "e1", buffered), arrive("x", "e2", buffered),
			waitGets("x", 2, 1, "e1"),
			arrive("x", "e3", buffered),
			giveBack("x", "e1", buffered),
			unconsumed("e1", "e2", "e3"),
		}},
		{"giveBack/keeps its place across names", 100, []laneOp{
			arrive("x", "x1", buffered), arrive("y", "y1", buffered),
			waitGets("x", 2, 1, "x1"),
			arrive("y", "y2", buffered),
			giveBack("x", "x1", buffered),
			unconsumed("x1", "y1", "y2"),
		}},
		{"giveBack/the oldest listening wait receives it", 100, []laneOp{
			wait("x", 2, 1), wait("x", 3, 2), wait("x", 4, 3),
			arrive("x", "e1", deliveredTo(2)),
			giveBack("x", "e1", deliveredTo(3)),
			active("x", 1), count(0),
			arrive("x", "e2", deliveredTo(4)),
		}},
		{"giveBack/opens no withdrawn question", 100, []laneOp{
			wait("x", 2, 1), arrive("x", "e1", deliveredTo(2)),
			giveBack("x", "e1", buffered),
			withdrawn("x", 0),
			arrive("x", "e2", buffered),
			unconsumed("e1", "e2"),
		}},
		{"giveBack/answers no withdrawn question", 100, []laneOp{
			wait("x", 2, 1), wait("x", 3, 2),
			arrive("x", "e1", deliveredTo(2)),
			cancel("x", 3, true), withdrawn("x", 1),
			giveBack("x", "e1", buffered),
			withdrawn("x", 1), unconsumed("e1"),
			arrive("x", "late", withdrawnWait),
			waitGets("x", 4, 3, "e1"), withdrawn("x", 0),
		}},
		{"giveBack/never dropped for the limit; arrivals are", 2, []laneOp{
			wait("x", 2, 1), arrive("x", "e1", deliveredTo(2)),
			arrive("y", "y1", buffered), arrive("y", "y2", buffered),
			giveBack("x", "e1", buffered),
			count(3), unconsumed("e1", "y1", "y2"),
			arrive("y", "y3", limit),
			waitGets("y", 3, 1, "y1"), waitGets("y", 4, 2, "y2"),
			arrive("y", "y4", buffered), count(2),
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			p := replay.NewPositional(tt.limit)
			if p.MaxUnconsumed != tt.limit {
				t.Fatalf("MaxUnconsumed = %d, want %d", p.MaxUnconsumed, tt.limit)
			}
			runLaneOps(t, p, tt.ops)
		})
	}
}

// TestPositionalReplayFollowsRecordedOutcomes checks rule 4 against a
// changed configuration: a lane replaying recorded outcomes under another
// limit ends in the same state as the lane that decided them.
func TestPositionalReplayFollowsRecordedOutcomes(t *testing.T) {
	t.Parallel()
	live := replay.NewPositional(2)
	ops := []laneOp{
		arrive("x", "x1", buffered), arrive("y", "y1", buffered),
		arrive("x", "x2", dropped(history.DropLimit)),
		waitGets("x", 2, 1, "x1"),
		arrive("x", "x3", buffered),
		wait("z", 3, 1), cancel("z", 3, true),
		arrive("z", "z1", dropped(history.DropWithdrawnWait)),
		waitGets("x", 5, 2, "x3"), wait("x", 6, 3),
		arrive("y", "y2", buffered), arrive("y", "y3", dropped(history.DropLimit)),
		unconsumed("y1", "y2"),
	}
	runLaneOps(t, live, ops)
	for _, limit := range []int{1, 2, 100} {
		t.Run(fmt.Sprint("limit ", limit), func(t *testing.T) {
			t.Parallel()
			p := replay.NewPositional(limit)
			var replayed []laneOp
			for _, o := range ops {
				if o.op == "arrive" {
					o = apply(o.name, o.id, o.out, true)
				}
				replayed = append(replayed, o)
			}
			runLaneOps(t, p, replayed)
			if !slices.Equal(unconsumedIDs(p), unconsumedIDs(live)) || p.Count() != live.Count() {
				t.Fatalf("replayed unconsumed %v, live %v", unconsumedIDs(p), unconsumedIDs(live))
			}
		})
	}
}

// laneModel is an independent, deliberately naive statement of rules 1–4
// and of the give-back: one global list of buffered events in arrival
// order.
type laneModel struct {
	limit     int
	waits     map[string][]int
	buffered  []*replay.Buffered
	withdrawn map[string]int
	ordinal   map[string]int
	order     map[string]int // event id → its place in the arrival order
}

func newLaneModel(limit int) *laneModel {
	return &laneModel{limit: limit, waits: map[string][]int{}, withdrawn: map[string]int{}, ordinal: map[string]int{},
		order: map[string]int{}}
}

// giveBack puts back an event a wait took: to the oldest wait of its name,
// or into the buffered list at its place in the arrival order, whatever the
// limit and the withdrawn questions.
func (m *laneModel) giveBack(b *replay.Buffered) replay.Outcome {
	name := b.Event.Name
	if len(m.waits[name]) > 0 {
		seq := m.waits[name][0]
		m.waits[name] = m.waits[name][1:]
		return deliveredTo(seq)
	}
	i := 0
	for i < len(m.buffered) && m.order[m.buffered[i].Event.EventID] < m.order[b.Event.EventID] {
		i++
	}
	m.buffered = slices.Insert(m.buffered, i, b)
	return buffered
}

func (m *laneModel) wait(name string, seq int) (int, *replay.Buffered) {
	m.ordinal[name]++
	m.withdrawn[name] = 0
	for i, b := range m.buffered {
		if b.Event.Name == name {
			m.buffered = slices.Delete(m.buffered, i, i+1)
			return m.ordinal[name], b
		}
	}
	m.waits[name] = append(m.waits[name], seq)
	return m.ordinal[name], nil
}

func (m *laneModel) cancel(name string, seq int) bool {
	i := slices.Index(m.waits[name], seq)
	if i < 0 {
		return false
	}
	m.waits[name] = slices.Delete(m.waits[name], i, i+1)
	m.withdrawn[name]++
	return true
}

// carry buffers an event carried by continue-as-new (rule 5: only its age
// limits it).
func (m *laneModel) carry(b *replay.Buffered) {
	m.order[b.Event.EventID] = len(m.order) + 1
	m.buffered = append(m.buffered, b)
}

func (m *laneModel) arrive(b *replay.Buffered) replay.Outcome {
	name := b.Event.Name
	m.order[b.Event.EventID] = len(m.order) + 1
	switch {
	case len(m.waits[name]) > 0:
		seq := m.waits[name][0]
		m.waits[name] = m.waits[name][1:]
		return deliveredTo(seq)
	case m.withdrawn[name] > 0:
		m.withdrawn[name]--
		return dropped(history.DropWithdrawnWait)
	case m.limit > 0 && len(m.buffered) >= m.limit:
		return dropped(history.DropLimit)
	}
	m.buffered = append(m.buffered, b)
	return buffered
}

// TestPositionalRandomSequences drives three lanes with the same random
// operations: the lane under test deciding with Arrive, a naive model of the
// rules, and a second lane replaying the first one's recorded outcomes with
// Apply under another limit. All three must agree after every operation.
// Waits that took an event may give it back (GiveBack, as a Select loser
// does): the live and the replaying lane both decide the give-back (it is
// the code's decision, not an input).
func TestPositionalRandomSequences(t *testing.T) {
	t.Parallel()
	names := []string{"a", "b", "c"}
	for seed := range uint64(300) {
		rng := rand.New(rand.NewPCG(seed, 7))
		limit := 1 + rng.IntN(4)
		live, model, replayed := replay.NewPositional(limit), newLaneModel(limit), replay.NewPositional(limit+3)
		var issued []struct {
			name string
			seq  int
		}
		// held: per lane, the event each wait took, by wait seq.
		held := [3]map[int]*replay.Buffered{{}, {}, {}}
		var heldSeqs []int
		take := func(seq int, bs ...*replay.Buffered) {
			if bs[0] == nil {
				return
			}
			for i, b := range bs {
				held[i][seq] = b
			}
			heldSeqs = append(heldSeqs, seq)
		}
		givenBack := 0
		nextSeq, nextID := 2, 1
		var trace []string
		fail := func(format string, args ...any) {
			t.Helper()
			t.Fatalf("seed %d (limit %d) after %v: %s", seed, limit, trace, fmt.Sprintf(format, args...))
		}
		for range 60 {
			name := names[rng.IntN(len(names))]
			switch r := rng.IntN(12); {
			case r < 3: // wait
				seq := nextSeq
				nextSeq++
				trace = append(trace, fmt.Sprintf("wait %s/%d", name, seq))
				n1, g1 := live.Wait(name, seq)
				n2, g2 := model.wait(name, seq)
				n3, g3 := replayed.Wait(name, seq)
				if n1 != n2 || n1 != n3 || (g1 == nil) != (g2 == nil) || (g1 == nil) != (g3 == nil) ||
					(g1 != nil && (g1.Event.EventID != g2.Event.EventID || g1.Event.EventID != g3.Event.EventID)) {
					fail("wait: live %d %v, model %d %v, replayed %d %v", n1, g1, n2, g2, n3, g3)
				}
				take(seq, g1, g2, g3)
				issued = append(issued, struct {
					name string
					seq  int
				}{name, seq})
			case r < 5 && len(issued) > 0: // cancel a wait issued earlier (maybe already matched)
				w := issued[rng.IntN(len(issued))]
				trace = append(trace, fmt.Sprintf("cancel %s/%d", w.name, w.seq))
				c1, c2, c3 := live.Cancel(w.name, w.seq), model.cancel(w.name, w.seq), replayed.Cancel(w.name, w.seq)
				if c1 != c2 || c1 != c3 {
					fail("cancel: live %v, model %v, replayed %v", c1, c2, c3)
				}
			case r < 7 && len(heldSeqs) > 0: // a wait that took an event gives it back
				i := rng.IntN(len(heldSeqs))
				seq := heldSeqs[i]
				heldSeqs = slices.Delete(heldSeqs, i, i+1)
				bs := [3]*replay.Buffered{held[0][seq], held[1][seq], held[2][seq]}
				for j := range held {
					delete(held[j], seq)
				}
				trace = append(trace, fmt.Sprintf("give back %s from %d", bs[0].Event.EventID, seq))
				o1, o2, o3 := live.GiveBack(bs[0]), model.giveBack(bs[1]), replayed.GiveBack(bs[2])
				if !sameOutcome(o1, o2) || !sameOutcome(o1, o3) {
					fail("give back: live %+v, model %+v, replayed %+v", o1, o2, o3)
				}
				if o1.Delivered {
					take(o1.WaitSeq, bs[0], bs[1], bs[2])
				} else {
					givenBack++
				}
			default: // arrive
				id := fmt.Sprintf("e%d", nextID)
				nextID++
				trace = append(trace, fmt.Sprintf("arrive %s/%s", name, id))
				b1, b2, b3 := laneEvent(name, id), laneEvent(name, id), laneEvent(name, id)
				o1 := live.Arrive(b1)
				o2 := model.arrive(b2)
				if !sameOutcome(o1, o2) {
					fail("arrive: live %+v, model %+v", o1, o2)
				}
				if !replayed.Apply(b3, o1) {
					fail("apply of the live outcome %+v returned false", o1)
				}
				if o1.Delivered {
					take(o1.WaitSeq, b1, b2, b3)
				}
			}
			want := []string{}
			for _, b := range model.buffered {
				want = append(want, b.Event.EventID)
			}
			if got := unconsumedIDs(live); !slices.Equal(got, want) || live.Count() != len(want) {
				fail("live unconsumed %v (count %d), model %v", got, live.Count(), want)
			}
			if got := unconsumedIDs(replayed); !slices.Equal(got, want) || replayed.Count() != len(want) {
				fail("replayed unconsumed %v (count %d), model %v", got, replayed.Count(), want)
			}
			if live.Count() > limit+givenBack {
				fail("count %d over the limit and the events given back", live.Count())
			}
			for _, n := range names {
				if live.Active(n) != len(model.waits[n]) || replayed.Active(n) != len(model.waits[n]) {
					fail("active %s: live %d, replayed %d, model %d", n, live.Active(n), replayed.Active(n), len(model.waits[n]))
				}
				if live.Withdrawn(n) != model.withdrawn[n] || replayed.Withdrawn(n) != model.withdrawn[n] {
					fail("withdrawn %s: live %d, replayed %d, model %d", n, live.Withdrawn(n), replayed.Withdrawn(n), model.withdrawn[n])
				}
			}
		}
	}
}
