package replay_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/heraldwf/herald/heraldtype"
	"github.com/heraldwf/herald/history"
	"github.com/heraldwf/herald/internal/replay"
	"github.com/heraldwf/herald/storage"
)

// FuzzMixedLanes drives the queue lane (docs/queue.md) and the positional lane
// together through the simulated store of harness_test.go. The script
// format is FuzzPositionalLane's: bytes with the high bit clear are the
// workflow's program, bytes with the high bit set what happens outside;
// the low three bits pick the operation, the next two the name, the next
// two a variant. Names are shared by both lanes (the same name on both
// lanes must never interfere); the queue "L" is a latest-value queue (every
// message sent to it has storage.Message.Latest set).
//
// After every turn the harness checks its invariants (harness.check,
// harness.checkReplay: every event has the fate history gives it, none is
// delivered twice, per lane and name events are delivered in the order they
// were sent — for the queue lane that is FIFO across executions — and a
// replay of the committed history with no messages makes no new decision),
// and mixedRun.check re-derives every queue-lane decision with a naive model
// (mixedQueueModel): receives take the oldest message, a cancelled receive
// consumes nothing and was waiting, arrivals go to the oldest waiting
// receive or are buffered up to the limit in force, a latest-value arrival
// supersedes every buffered message of its queue, continue-as-new carries
// the buffered messages in order, oldest first, up to the limit and the age
// limit. The queue limit itself changes during a script (3 → 2 → 4 → 3 …),
// as when a runtime restarts with another MaxQueuedEvents, so that the
// carry-forward overflow is reached.
var mixedNames = []string{"a", "b", "c", "L"}

func mixedLatest(name string) bool { return name == "L" }

// Workflow operations. The variant (bits 5–6) refines some of them.
const (
	mqDequeue     = iota // Dequeue(name)
	mqSelectTimer        // Select(Dequeue(name), timer)
	mqTimeout            // Dequeue(name, timeout)
	mqTry                // TryDequeue(name); variants 2, 3: until empty
	mqPositional         // WaitEvent(name): plain, in Select with a timer, with a timeout, or Select(WaitEvent(name), Dequeue(name))
	mqWork               // a timer (variants 0, 1) or an activity (2, 3)
	mqContinue           // ContinueAsNew with the rest of the program; odd variants DropUnconsumed
	mqSelectOther        // Select(Dequeue(name), Dequeue(next name) | activity | Dequeue(name)), or All of two Dequeue(name)
)

// External operations.
const (
	mxEnqueue  = iota // enqueue a message to the queue name
	mxEnqueue2        //
	mxRaise           // raise a positional event name
	mxFire            // fire the oldest timer of the current execution
	mxFinish          // complete (or fail, variant 1, 3) the oldest activity of the current execution
	mxTurn            // run a turn
	mxTurn2           //
	mxOther           // variant 0: a stale message (or an enqueue); 1: change the queue limit; 2, 3: enqueue
)

// mixedQueueLimits is the cycle of MaxQueuedEvents values a script goes
// through.
var mixedQueueLimits = []int{3, 2, 4}

func mixedOpName(b byte) string {
	name := mixedNames[int(b>>3&3)]
	v := int(b >> 5 & 3)
	if b&0x80 == 0 {
		return fmt.Sprintf("%s/%d %s", [...]string{"dequeue", "dequeue-select-timer", "dequeue-timeout", "try", "positional",
			"work", "continue", "dequeue-select-other"}[b&7], v, name)
	}
	return fmt.Sprintf("%s/%d %s", [...]string{"enqueue", "enqueue", "raise", "fire", "finish", "turn", "turn", "other"}[b&7], v, name)
}

// mixedWorkflow interprets its program. It notes what every receive
// observes: "<op> got <lane> <payload>" for a message or event received
// (lane q or p; the payload is the event id as a JSON string), the error of
// a cancelled or timed-out receive, "empty" for an empty TryDequeue.
func mixedWorkflow(h *harness) replay.WorkflowFunc {
	return func(s *replay.State, raw json.RawMessage) (json.RawMessage, error) {
		var in fuzzInput
		if err := json.Unmarshal(raw, &in); err != nil {
			return nil, err
		}
		got := func(op int, lane string, v json.RawMessage, err error) error {
			switch {
			case err == nil:
				h.note("%d got %s %s", op, lane, v)
			case errors.Is(err, replay.ErrEventTimeout), errors.Is(err, replay.ErrCanceled):
				h.note("%d %s %v", op, lane, err)
			default:
				return fmt.Errorf("op %d: unexpected error %w", op, err)
			}
			return nil
		}
		activity := func(op int, f *replay.Future) {
			v, err := f.Get()
			var ae *replay.ActivityError
			if errors.As(err, &ae) {
				h.note("%d activity failed: %s", op, ae.Message)
			} else {
				h.note("%d activity %s %v", op, v, err)
			}
		}
		for i, b := range in.Prog {
			op := in.Step + i
			n := int(b >> 3 & 3)
			name, other := mixedNames[n], mixedNames[(n+1)%len(mixedNames)]
			variant := int(b >> 5 & 3)
			var err error
			switch b & 7 {
			case mqDequeue:
				v, e := s.Dequeue(name, 0).Get()
				err = got(op, "q", v, e)
			case mqSelectTimer:
				// Variants 1–3 race receives that may all have received
				// already. The code reads only the winner (and receives
				// that are not in the race): a loser's message must not be
				// lost, so it is given back, and a later receive gets it.
				var fs []*replay.Future // read after the race, with their lanes
				var lanes []string
				race := func(sel []*replay.Future, selLanes ...string) {
					i := s.Select(sel...)
					h.note("%d winner %d", op, i)
					fs, lanes = append(fs, sel[i]), append(lanes, selLanes[i])
				}
				switch variant {
				case 0:
					d := s.Dequeue(name, 0)
					h.note("%d winner %d", op, s.Select(d, s.NewTimer(time.Minute)))
					fs, lanes = []*replay.Future{d}, []string{"q"}
				case 1:
					// Resolved by arrivals of earlier turns: a wait and a
					// receive made before a timer, raced after it.
					d, w := s.Dequeue(name, 0), s.WaitEvent(name, 0)
					if _, err = s.NewTimer(time.Minute).Get(); err == nil {
						race([]*replay.Future{w, d}, "p", "q")
					}
				case 2:
					// The timeout-wrapped receive loses to a timer that has
					// fired; a second receive of the queue is listening.
					d1, d2 := s.Dequeue(name, 2*time.Minute), s.Dequeue(name, 0)
					t := s.NewTimer(time.Minute)
					if _, err = t.Get(); err == nil {
						h.note("%d winner %d", op, s.Select(t, d1))
						fs, lanes = []*replay.Future{d2}, []string{"q"}
					}
				case 3:
					// Three receives raced at once (resolved by messages
					// already buffered), the first read before the race if
					// it can be: a loser whose result the code got keeps it.
					d1, d2, d3 := s.Dequeue(name, 0), s.Dequeue(other, 0), s.Dequeue(name, 0)
					read := d1.Ready()
					if read {
						v, e := d1.Get()
						err = got(op, "q", v, e)
					}
					if err == nil {
						race([]*replay.Future{d2, d1, d3}, "q", "q", "q")
						if fs[0] == d1 && read {
							fs = nil
						}
					}
				}
				for i, f := range fs {
					if err != nil {
						break
					}
					v, e := f.Get()
					err = got(op, lanes[i], v, e)
				}
			case mqTimeout:
				v, e := s.Dequeue(name, time.Minute).Get()
				err = got(op, "q", v, e)
			case mqTry:
				for {
					v, ok := s.TryDequeue(name)
					if !ok {
						h.note("%d empty %s", op, name)
						break
					}
					h.note("%d got q %s", op, v)
					if variant < 2 {
						break
					}
				}
			case mqPositional:
				switch variant {
				case 0:
					v, e := s.WaitEvent(name, 0).Get()
					err = got(op, "p", v, e)
				case 1:
					w := s.WaitEvent(name, 0)
					h.note("%d winner %d", op, s.Select(w, s.NewTimer(time.Minute)))
					v, e := w.Get()
					err = got(op, "p", v, e)
				case 2:
					v, e := s.WaitEvent(name, time.Minute).Get()
					err = got(op, "p", v, e)
				case 3:
					// The same name on both lanes, racing.
					w, d := s.WaitEvent(name, 0), s.Dequeue(name, 0)
					h.note("%d winner %d", op, s.Select(w, d))
					v, e := w.Get()
					if err = got(op, "p", v, e); err == nil {
						v, e = d.Get()
						err = got(op, "q", v, e)
					}
				}
			case mqWork:
				switch {
				case variant == 0:
					_, err = s.NewTimer(time.Minute).Get()
				case variant == 1:
					// A correlated wait races a receive after a timer: both
					// may have received, and the correlated loser gives its
					// event back (a delete-after-first one is handed on, to
					// the second wait on the key for names a and c).
					c1 := s.WaitCorrelated(name, "k", 0)
					var c2 *replay.Future
					if n%2 == 0 {
						c2 = s.WaitCorrelated(name, "k", 0)
					}
					d := s.Dequeue(name, 0)
					if _, err = s.NewTimer(time.Minute).Get(); err != nil {
						break
					}
					// Only the winner is read.
					win, lane := d, "q"
					if s.Select(d, c1) == 1 {
						win, lane = c1, "c"
					}
					h.note("%d winner %s", op, lane)
					v, e := win.Get()
					err = got(op, lane, v, e)
					if err == nil && c2 != nil {
						v, e = c2.Get()
						err = got(op, "c", v, e)
					}
				default:
					activity(op, s.CallActivity("work", jsonOf(op), heraldtype.RetryPolicy{}))
				}
			case mqContinue:
				input, _ := json.Marshal(fuzzInput{Prog: in.Prog[i+1:], Step: op + 1})
				return nil, &replay.ContinueAsNewError{Input: input, DropUnconsumed: variant&1 == 1}
			case mqSelectOther:
				d := s.Dequeue(name, 0)
				var f2 *replay.Future
				switch variant {
				case 0:
					f2 = s.Dequeue(other, 0)
				case 1:
					f2 = s.CallActivity("work", jsonOf(op), heraldtype.RetryPolicy{})
				default:
					f2 = s.Dequeue(name, 0)
				}
				if variant == 3 {
					_ = s.All(d, f2)
				} else {
					h.note("%d winner %d", op, s.Select(d, f2))
				}
				v, e := d.Get()
				if err = got(op, "q", v, e); err == nil {
					if variant == 1 {
						activity(op, f2)
					} else {
						v, e = f2.Get()
						err = got(op, "q", v, e)
					}
				}
			}
			if err != nil {
				return nil, err
			}
		}
		return jsonOf(fmt.Sprintf("done after %d ops", in.Step+len(in.Prog))), nil
	}
}

// mixedRun is one script's run: the harness plus what the queue checks need
// to know that history does not say.
type mixedRun struct {
	t      testing.TB
	h      *harness
	latest map[string]bool // event id → sent as a latest-value message
	// limitAt is the queue limit of the turn that wrote each history event
	// (execution, seq); labelled counts the events labelled per execution.
	limitAt  map[[2]int]int
	labelled map[int]int
	limit    int // index into mixedQueueLimits
	nextID   int
	trace    []string
}

func newMixedRun(t testing.TB, prog []byte) *mixedRun {
	input, _ := json.Marshal(fuzzInput{Prog: prog})
	h := newHarness(t, string(input), nil)
	h.wf = mixedWorkflow(h)
	h.limits = replay.Limits{MaxUnconsumedEvents: 3, MaxCarryForwardExecutions: 2, MaxQueuedEvents: mixedQueueLimits[0]}
	h.corr = newCorrStore()
	h.corr.deleteAfterFirst["a"], h.corr.deleteAfterFirst["b"] = true, true
	return &mixedRun{t: t, h: h, latest: map[string]bool{}, limitAt: map[[2]int]int{}, labelled: map[int]int{}}
}

// enqueue sends a message on the queue lane, its id as its payload.
func (r *mixedRun) enqueue(name string) {
	r.t.Helper()
	h := r.h
	r.nextID++
	id := fmt.Sprintf("q%s%d", name, r.nextID)
	if h.status.Terminal() {
		r.t.Fatalf("enqueue %s to a %s instance", id, h.status)
	}
	latest := mixedLatest(name)
	m := h.push(storage.Message{Kind: storage.MsgEvent, Lane: history.LaneQueue, EventID: id, Name: name,
		Payload: jsonOf(id), Latest: latest})
	h.fates[id] = storage.FateUpdate{EventID: id, Fate: history.FatePending}
	h.raised = append(h.raised, raisedEvent{id: id, name: name, msg: m, lane: history.LaneQueue})
	r.latest[id] = latest
}

// put puts a correlated event of the definition name under key k, its id
// as its payload.
func (r *mixedRun) put(name string) {
	r.nextID++
	r.h.corrPut(name, "k", fmt.Sprintf("P%s%d", name, r.nextID))
}

// raise sends a positional event.
func (r *mixedRun) raise(name string) {
	r.nextID++
	r.h.raise(name, fmt.Sprintf("p%s%d", name, r.nextID), "")
}

// turn runs a turn (harness.turn checks its invariants), labels the events
// it wrote with the queue limit in force, and checks the queue lane.
func (r *mixedRun) turn() {
	r.t.Helper()
	h := r.h
	if h.status.Terminal() {
		return
	}
	h.turn()
	for e := 1; e <= h.exec(); e++ {
		hist := h.execution(e)
		for seq := r.labelled[e] + 1; seq <= len(hist); seq++ {
			r.limitAt[[2]int{e, seq}] = h.limits.MaxQueuedEvents
		}
		r.labelled[e] = len(hist)
	}
	r.check()
}

// mixedQueueModel is a naive statement of the queue lane's rules for one
// execution: one list of buffered messages in arrival order, the waiting
// receives per queue, the receive numbers per queue, and what a give-back
// needs: every arrival's place in the arrival order, the messages received
// and the buffered ones that were given back.
type mixedQueueModel struct {
	buffered []history.Event
	waits    map[string][]int
	ordinal  map[string]int
	numbers  map[int]int              // receive seq → receive number
	order    map[string]int           // event id → its place in the arrival order
	newest   map[string]int           // queue → the place of its newest arrival
	taken    map[string]history.Event // received messages, by id
	returned map[string]bool          // buffered messages a receive gave back
}

func newMixedQueueModel() *mixedQueueModel {
	return &mixedQueueModel{waits: map[string][]int{}, ordinal: map[string]int{}, numbers: map[int]int{},
		order: map[string]int{}, newest: map[string]int{}, taken: map[string]history.Event{}, returned: map[string]bool{}}
}

// arrived gives an arrival its place in the arrival order.
func (m *mixedQueueModel) arrived(id string) { m.order[id] = len(m.order) + 1 }

// kept notes an arrival delivered or buffered: the newest of its queue.
func (m *mixedQueueModel) kept(name, id string) { m.newest[name] = m.order[id] }

func (m *mixedQueueModel) take(name string) *history.Event {
	for i, b := range m.buffered {
		if b.Name == name {
			m.buffered = slices.Delete(m.buffered, i, i+1)
			delete(m.returned, b.EventID)
			m.taken[b.EventID] = b
			return &b
		}
	}
	return nil
}

// giveBack puts back a message a receive took, as if it had never been
// taken, and returns the receive number it went to (0: none) or the reason
// it was dropped: superseded on a latest-value queue that received (and
// kept) a newer message since; else to the oldest waiting receive of its queue; else
// buffered at its place in the arrival order, whatever the limit.
func (m *mixedQueueModel) giveBack(b history.Event, latest bool) (number int, reason history.DropReason) {
	delete(m.taken, b.EventID)
	if latest && m.newest[b.Name] > m.order[b.EventID] {
		return 0, history.DropSuperseded
	}
	if w := m.waits[b.Name]; len(w) > 0 {
		m.waits[b.Name] = w[1:]
		m.taken[b.EventID] = b
		return m.numbers[w[0]], ""
	}
	i := 0
	for i < len(m.buffered) && m.order[m.buffered[i].EventID] < m.order[b.EventID] {
		i++
	}
	m.buffered = slices.Insert(m.buffered, i, b)
	m.returned[b.EventID] = true
	return 0, ""
}

func (m *mixedQueueModel) count(name string) int {
	n := 0
	for _, b := range m.buffered {
		if b.Name == name {
			n++
		}
	}
	return n
}

// check re-derives every queue-lane decision of every execution with
// mixedQueueModel and compares it with what history recorded; then it
// checks the ledger's buffered messages against the limits.
func (r *mixedRun) check() {
	r.t.Helper()
	h := r.h
	maxCarry := h.limits.MaxCarryForwardExecutions
	var carried []history.Event // the messages the previous execution left buffered, in order
	carriedReturned := 0        // how many of them a receive gave back
	for i, hist := range h.execs {
		e := i + 1
		m := newMixedQueueModel()
		fail := func(ev history.Event, format string, args ...any) {
			r.t.Helper()
			r.t.Fatalf("execution %d, seq %d (%s %s %s %s): %s\n%s", e, ev.Seq, ev.Kind, ev.Lane, ev.Name, ev.EventID,
				fmt.Sprintf(format, args...), dumpEvents(hist))
		}
		limitOf := func(ev history.Event) int {
			r.t.Helper()
			l, ok := r.limitAt[[2]int{e, ev.Seq}]
			if !ok {
				fail(ev, "no queue limit recorded for this event")
			}
			return l
		}
		next, kept, notCarried, startCarried, startNotCarried := 0, 0, 0, 0, 0
		var superseded []string // superseded drops waiting for the arrival that caused them
		for _, ev := range hist {
			if ev.AtStart && ev.OriginExecution < e && ev.Reason != history.DropInstanceTerminal {
				// Both lanes: a continue-as-new drops all or nothing as not_carried_forward.
				startCarried++
				if ev.Reason == history.DropNotCarriedForward {
					startNotCarried++
				}
			}
			isArrival := ev.Lane == history.LaneQueue && (ev.Kind == history.EventRaised || ev.Kind == history.EventDropped)
			if len(superseded) > 0 && !isArrival {
				fail(ev, "superseded drops %v are not followed by the arrival that superseded them", superseded)
			}
			if ev.Lane != history.LaneQueue {
				continue
			}
			switch ev.Kind {
			case history.EventSubscribed:
				m.ordinal[ev.Name]++
				n := m.ordinal[ev.Name]
				m.numbers[ev.Seq] = n
				got := m.take(ev.Name)
				switch {
				case got == nil && ev.EventID != "":
					fail(ev, "took %s, the model's queue is empty", ev.EventID)
				case got != nil && (got.EventID != ev.EventID || ev.WaitNumber != n):
					fail(ev, "took %s as receive %d, the model takes %s as receive %d", ev.EventID, ev.WaitNumber, got.EventID, n)
				case got == nil && !ev.NoWait:
					m.waits[ev.Name] = append(m.waits[ev.Name], ev.Seq)
				}
			case history.EventSubscribedCancelled:
				if ev.EventID != "" {
					// A give-back: the receive had taken the message.
					b, ok := m.taken[ev.EventID]
					if !ok || b.Name != ev.Name {
						fail(ev, "gives back a message the model did not see received by a receive of %s", ev.Name)
					}
					if slices.Contains(m.waits[ev.Name], ev.TaskSeq) {
						fail(ev, "gives back a message, but receive %d is still waiting", ev.TaskSeq)
					}
					n, reason := m.giveBack(b, r.latest[ev.EventID])
					if ev.WaitNumber != n || ev.Reason != reason {
						fail(ev, "given back to receive %d (reason %q), the model: receive %d (reason %q)", ev.WaitNumber, ev.Reason, n, reason)
					}
					break
				}
				// Nothing is consumed: the receive was waiting, and the
				// buffered messages stay as they are.
				w := m.waits[ev.Name]
				j := slices.Index(w, ev.TaskSeq)
				if j < 0 {
					fail(ev, "cancels receive %d, which is not waiting (waiting: %v)", ev.TaskSeq, w)
				}
				m.waits[ev.Name] = slices.Delete(w, j, j+1)
			case history.EventRaised, history.EventDropped:
				switch {
				case ev.Reason == history.DropInstanceTerminal:
					continue // the store's breadcrumb when the instance ended
				case ev.Reason == history.DropSuperseded:
					if !r.latest[ev.EventID] || !mixedLatest(ev.Name) {
						fail(ev, "superseded a message of a queue that is not latest-value")
					}
					j := slices.IndexFunc(m.buffered, func(b history.Event) bool { return b.EventID == ev.EventID })
					if j < 0 {
						fail(ev, "supersedes a message that is not buffered")
					}
					m.buffered = slices.Delete(m.buffered, j, j+1)
					delete(m.returned, ev.EventID)
					superseded = append(superseded, ev.EventID)
					continue
				case ev.AtStart && ev.OriginExecution < e:
					// Carried by continue-as-new, in order, oldest first.
					if next >= len(carried) || carried[next].EventID != ev.EventID {
						fail(ev, "carried out of order: want %v[%d]", ids(carried), next)
					}
					next++
					m.arrived(ev.EventID)
					var want history.DropReason
					switch {
					case ev.Reason == history.DropNotCarriedForward:
						notCarried++
						continue
					case e-ev.OriginExecution > maxCarry, kept >= limitOf(ev)+carriedReturned:
						// Messages given back do not count against the limit.
						want = history.DropCarryForwardLimit
					default:
						kept++
					}
					if ev.Reason != want || (want == "") != (ev.Kind == history.EventRaised) || ev.TaskSeq != 0 {
						fail(ev, "carried as %s/%s, the model says %q (age %d, %d kept, limit %d)", ev.Kind, ev.Reason, want,
							e-ev.OriginExecution, kept, limitOf(ev))
					}
					if want == "" {
						m.buffered = append(m.buffered, ev)
						m.kept(ev.Name, ev.EventID)
					}
					continue
				}
				// A breadcrumb of a burst of limit drops stands for several
				// arrivals, one after the other.
				for _, id := range r.h.burstIDs(ev) {
					ev := ev
					ev.EventID = id
					if ev.OriginExecution != e {
						fail(ev, "arrival with origin execution %d", ev.OriginExecution)
					}
					latest := r.latest[ev.EventID]
					if latest != mixedLatest(ev.Name) {
						fail(ev, "the harness sent latest=%v", latest)
					}
					m.arrived(ev.EventID)
					var wantKind history.Kind
					var wantTask int
					var wantReason history.DropReason
					if w := m.waits[ev.Name]; len(w) > 0 {
						wantKind, wantTask = history.EventRaised, w[0]
						m.waits[ev.Name] = w[1:]
						m.taken[ev.EventID] = ev
						if len(superseded) > 0 {
							fail(ev, "delivered to a waiting receive, yet superseded %v", superseded)
						}
					} else {
						if !latest && len(superseded) > 0 {
							fail(ev, "a message that is not latest-value superseded %v", superseded)
						}
						if latest && m.count(ev.Name) > 0 {
							fail(ev, "a latest-value message left older ones of its queue buffered: %v", ids(m.buffered))
						}
						if len(m.buffered) >= limitOf(ev) {
							wantKind, wantReason = history.EventDropped, history.DropLimit
						} else {
							wantKind = history.EventRaised
							m.buffered = append(m.buffered, ev)
						}
					}
					superseded = nil
					if wantKind == history.EventRaised {
						m.kept(ev.Name, ev.EventID)
					}
					if ev.Kind != wantKind || ev.TaskSeq != wantTask || ev.Reason != wantReason ||
						(wantTask != 0 && ev.WaitNumber != m.numbers[wantTask]) {
						fail(ev, "recorded %s task %d wait %d reason %q; the model: %s task %d wait %d reason %q (buffered %v, limit %d)",
							ev.Kind, ev.TaskSeq, ev.WaitNumber, ev.Reason, wantKind, wantTask, m.numbers[wantTask], wantReason,
							ids(m.buffered), limitOf(ev))
					}
				}
			}
			for _, name := range mixedNames {
				if mixedLatest(name) && m.count(name) > 1 {
					fail(ev, "latest-value queue %s holds %d messages", name, m.count(name))
				}
			}
		}
		if len(superseded) > 0 {
			r.t.Fatalf("execution %d ends with superseded drops %v and no arrival\n%s", e, superseded, dumpEvents(hist))
		}
		if e > 1 && next != len(carried) {
			r.t.Fatalf("execution %d starts with %d of the %d messages execution %d left buffered (%v)\n%s",
				e, next, len(carried), e-1, ids(carried), dumpEvents(hist))
		}
		if notCarried != 0 && notCarried != len(carried) {
			r.t.Fatalf("execution %d: %d of %d carried messages dropped as not_carried_forward\n%s", e, notCarried, len(carried), dumpEvents(hist))
		}
		if startNotCarried != 0 && startNotCarried != startCarried {
			r.t.Fatalf("execution %d: %d of %d carried events (both lanes) dropped as not_carried_forward\n%s",
				e, startNotCarried, startCarried, dumpEvents(hist))
		}
		carried = slices.Clone(m.buffered)
		carriedReturned = len(m.returned)
	}

	// The ledger: buffered messages never exceed the largest limit in force
	// during the current execution, and a latest-value queue holds at most
	// one.
	limit := 0
	for seq := 1; seq <= len(h.cur()); seq++ {
		limit = max(limit, r.limitAt[[2]int{h.exec(), seq}])
	}
	buffered, perName := 0, map[string]int{}
	life := h.derive()
	for _, ev := range h.raised {
		if ev.lane == history.LaneQueue && h.fates[ev.id].Fate == history.FateBuffered {
			if l := life[ev.id]; l == nil || !l.returned {
				buffered++ // a message given back may take the lane over the limit
			}
			perName[ev.name]++
		}
	}
	if buffered > limit {
		r.t.Fatalf("%d queue messages buffered, limit %d", buffered, limit)
	}
	for name, n := range perName {
		if mixedLatest(name) && n > 1 {
			r.t.Fatalf("latest-value queue %s: %d messages buffered in the ledger", name, n)
		}
	}
}

func ids(evs []history.Event) []string {
	out := make([]string, len(evs))
	for i, ev := range evs {
		out[i] = ev.EventID
	}
	return out
}

// openReceives lists the lane and name of the receives of hist that are
// still waiting, oldest first.
func openReceives(hist []history.Event) [][2]string {
	open := map[int][2]string{}
	var order []int
	for _, ev := range hist {
		switch {
		case ev.Kind == history.EventSubscribed && ev.EventID == "" && !ev.NoWait:
			open[ev.Seq] = [2]string{string(ev.Lane), ev.Name}
			order = append(order, ev.Seq)
		case ev.Kind == history.EventSubscribedCancelled, ev.Kind == history.EventRaised && ev.TaskSeq > 0:
			delete(open, ev.TaskSeq)
		}
	}
	var out [][2]string
	for _, seq := range order {
		if w, ok := open[seq]; ok {
			out = append(out, w)
		}
	}
	return out
}

// runMixedScript runs one script and checks the invariants after every turn
// and at the end.
func runMixedScript(t testing.TB, script []byte) *mixedRun {
	var prog, ext []byte
	for _, b := range script {
		if b&0x80 == 0 {
			prog = append(prog, b)
		} else {
			ext = append(ext, b)
		}
	}
	if len(prog) > 64 {
		prog = prog[:64]
	}
	if len(ext) > 128 {
		ext = ext[:128]
	}
	r := newMixedRun(t, prog)
	h := r.h
	defer func() {
		if t.Failed() {
			names := make([]string, len(prog))
			for i, b := range prog {
				names[i] = mixedOpName(b)
			}
			t.Logf("script %x\nprogram: %v\nexternal: %v", script, names, r.trace)
			for e := 1; e <= h.exec(); e++ {
				t.Logf("execution %d:\n%s", e, dumpEvents(h.execution(e)))
			}
		}
	}()
	for _, b := range ext {
		if h.status.Terminal() {
			break
		}
		r.trace = append(r.trace, mixedOpName(b))
		name := mixedNames[int(b>>3&3)]
		variant := int(b >> 5 & 3)
		switch b & 7 {
		case mxEnqueue:
			r.enqueue(name)
		case mxEnqueue2:
			if variant == 3 {
				r.put(name)
			} else {
				r.enqueue(name)
			}
		case mxRaise:
			r.raise(name)
		case mxFire:
			for _, k := range h.timers {
				if k.exec == h.exec() {
					h.fire(k.exec, k.seq)
					break
				}
			}
		case mxFinish:
			for _, k := range h.acts {
				if k.exec == h.exec() && !k.cancelled {
					if variant&1 == 0 {
						h.completeActivity(k.exec, k.seq, string(jsonOf(fmt.Sprint("r", k.seq))))
					} else {
						h.failActivity(k.exec, k.seq, fmt.Sprint("f", k.seq))
					}
					break
				}
			}
		case mxTurn, mxTurn2:
			r.turn()
		case mxOther:
			switch variant {
			case 0:
				if !r.stale() {
					r.enqueue(name)
				}
			case 1:
				r.limit = (r.limit + 1) % len(mixedQueueLimits)
				h.limits.MaxQueuedEvents = mixedQueueLimits[r.limit]
			default:
				r.enqueue(name)
			}
		}
	}
	r.turn()
	// Drain: answer whatever the workflow still waits for, a bounded number
	// of times, so that programs run to their end.
	for range 40 {
		if h.status.Terminal() {
			break
		}
		progress := false
		for _, k := range h.timers {
			if k.exec == h.exec() {
				h.fire(k.exec, k.seq)
				progress = true
			}
		}
		for _, k := range h.acts {
			if k.exec == h.exec() && !k.cancelled {
				h.completeActivity(k.exec, k.seq, `"drained"`)
				progress = true
			}
		}
		for _, w := range openReceives(h.cur()) {
			switch history.Lane(w[0]) {
			case history.LaneQueue:
				r.enqueue(w[1])
			case history.LaneCorrelated:
				r.put(w[1])
			default:
				r.raise(w[1])
			}
			progress = true
		}
		if !progress && len(h.inbox) == 0 {
			break
		}
		r.turn()
	}
	r.checkEnd()
	return r
}

// stale delivers a result the instance no longer wants (an activity of an
// older execution or a cancelled one, a timer of an older execution). It
// reports false if there is none.
func (r *mixedRun) stale() bool {
	h := r.h
	for _, k := range h.acts {
		if k.exec < h.exec() || k.cancelled {
			h.completeActivity(k.exec, k.seq, `"stale"`)
			return true
		}
	}
	for _, k := range h.timers {
		if k.exec < h.exec() {
			h.fire(k.exec, k.seq)
			return true
		}
	}
	return false
}

// checkEnd checks what holds at the end: the code received exactly the
// events history delivers, each once, in the execution and on the lane
// history says; nothing is pending without its message, nothing pending or
// buffered on an ended instance; the workflow did not fail.
func (r *mixedRun) checkEnd() {
	t, h := r.t, r.h
	t.Helper()
	h.check()
	r.check()
	life := h.derive()
	received := map[string]int{}
	receivedPuts := map[string]int{} // correlated lane: the payload is the put's id
	for e := 1; e <= h.exec(); e++ {
		for _, n := range h.execNotes[e] {
			_, rest, ok := strings.Cut(n, " got ")
			if !ok {
				continue
			}
			lane, v, _ := strings.Cut(rest, " ")
			var id string
			if err := json.Unmarshal([]byte(v), &id); err != nil {
				t.Fatalf("note %q: %v", n, err)
			}
			if lane == "c" {
				receivedPuts[id]++
				continue
			}
			received[id]++
			want := history.LanePositional
			if lane == "q" {
				want = history.LaneQueue
			}
			if l := life[id]; l == nil || l.fate != history.FateDelivered || l.exec != e || l.lane != want {
				t.Fatalf("the code of execution %d received %s on the %s lane, whose history is %+v", e, id, want, l)
			}
		}
	}
	h.corrCheckEnd(receivedPuts)
	for id, l := range life {
		if l.fate == history.FateDelivered && l.lane != history.LaneCorrelated && received[id] != 1 {
			t.Fatalf("event %s delivered (execution %d, receive %d) but the code received it %d times", id, l.exec, l.waitNumber, received[id])
		}
	}
	for _, ev := range h.raised {
		f := h.fates[ev.id]
		if f.Fate == history.FatePending && !slices.ContainsFunc(h.inbox, func(m storage.Message) bool { return m.ID == ev.msg }) {
			t.Fatalf("event %s is pending but its message is gone", ev.id)
		}
		if h.status.Terminal() && (f.Fate == history.FatePending || f.Fate == history.FateBuffered) {
			t.Fatalf("event %s is %s on a %s instance", ev.id, f.Fate, h.status)
		}
	}
	if h.status == heraldtype.StatusFailed {
		t.Fatalf("workflow failed: %v", h.failure)
	}
}

// wv is a workflow op with a variant.
func wv(op, name, variant int) byte { return w(op, name) | byte(variant)<<5 }

// xv is an external op with a variant.
func xv(op, name, variant int) byte { return x(op, name) | byte(variant)<<5 }

const nL = 3 // the index of the latest-value queue in mixedNames

var mixedSeeds = [][]byte{
	// from seed 002's test plan, tests 5, 6: basic delivery, message before the Dequeue
	{w(mqDequeue, 0), w(mqWork, 0), w(mqDequeue, 0), x(mxTurn, 0), x(mxEnqueue, 0), x(mxTurn, 0), x(mxEnqueue, 0), x(mxTurn, 0),
		x(mxFire, 0), x(mxTurn, 0)},
	// from seed 002's test plan, test 7: select(Dequeue a, timer), the timer wins, a arrives while busy, the next Dequeue a gets it
	{w(mqSelectTimer, 0), w(mqWork, 0), w(mqDequeue, 0), x(mxTurn, 0), x(mxFire, 0), x(mxTurn, 0), x(mxEnqueue, 0), x(mxTurn, 0),
		x(mxFire, 0), x(mxTurn, 0)},
	// from seed 002's test plan, test 8: FIFO, two outstanding receives, the limit
	{x(mxEnqueue, 0), x(mxEnqueue, 0), x(mxEnqueue, 1), x(mxEnqueue, 0), x(mxTurn, 0), w(mqDequeue, 0), w(mqDequeue, 0),
		wv(mqSelectOther, 1, 3), x(mxEnqueue, 1), x(mxEnqueue, 1), x(mxTurn, 0), wv(mqTry, 0, 2)},
	// from seed 002's test plan, test 9: carried across continue-as-new, then the limit lowered and the overflow dropped
	// (limits 3 → 2 → 4: four buffered; → 3: one dropped at the boundary)
	{w(mqWork, 0), w(mqContinue, 0), w(mqWork, 0), w(mqContinue, 0), wv(mqTry, 0, 2), wv(mqTry, 1, 2),
		xv(mxOther, 0, 1), xv(mxOther, 0, 1), x(mxTurn, 0), x(mxEnqueue, 0), x(mxEnqueue, 1), x(mxEnqueue, 0), x(mxEnqueue, 0),
		x(mxTurn, 0), xv(mxOther, 0, 1), x(mxFire, 0), x(mxTurn, 0), x(mxTurn, 0), x(mxEnqueue, 2), x(mxFire, 0), x(mxTurn, 0)},
	// from seed 002's test plan, test 10: the same name on both lanes
	{wv(mqPositional, 0, 3), wv(mqPositional, 0, 1), w(mqDequeue, 0), wv(mqPositional, 0, 0),
		x(mxTurn, 0), x(mxRaise, 0), x(mxEnqueue, 0), x(mxTurn, 0), x(mxFire, 0), x(mxEnqueue, 0), x(mxTurn, 0), x(mxRaise, 0), x(mxTurn, 0)},
	// latest-value queue: superseded before start, while buffered, carried and superseded after continue-as-new
	{x(mxEnqueue, nL), x(mxEnqueue, nL), w(mqWork, 0), wv(mqTry, nL, 0), w(mqWork, 0), w(mqContinue, nL), w(mqDequeue, nL),
		x(mxTurn, 0), x(mxEnqueue, nL), x(mxEnqueue, nL), x(mxTurn, 0), x(mxFire, 0), x(mxEnqueue, nL), x(mxTurn, 0),
		x(mxFire, 0), x(mxEnqueue, nL), x(mxTurn, 0), x(mxEnqueue, nL), x(mxTurn, 0)},
	// timeouts and select losers racing arrivals in one turn, drop on continue
	{w(mqTimeout, 0), wv(mqSelectOther, 0, 0), wv(mqSelectOther, 1, 1), wv(mqContinue, 0, 1), w(mqTimeout, 0),
		x(mxTurn, 0), x(mxEnqueue, 0), x(mxFire, 0), x(mxTurn, 0), x(mxFire, 0), x(mxEnqueue, 1), x(mxEnqueue, 0), x(mxTurn, 0),
		x(mxEnqueue, 2), x(mxFinish, 0), x(mxEnqueue, 1), x(mxTurn, 0), xv(mxOther, 0, 0), x(mxTurn, 0)},
}

// mixedFoundSeeds were found by search (see reaches): a receive gives its
// message back, buffered again, to a listening receive, superseded on a
// latest-value queue; a correlated copy is given back and its
// delete-after-first event handed on; bursts of limit drops on both lanes
// and their continuations in later turns.
var mixedFoundSeeds = [][]byte{
	{0x80, 0xe0, 0x67, 0x62, 0xf9, 0x6, 0x64, 0xe2},
	{0xdc, 0x81, 0x49, 0x45, 0x8f, 0x2d, 0xd, 0x8, 0x96},
	{0x59, 0x2a, 0xef, 0x21, 0x73, 0x6d, 0x33, 0x3a, 0xf8, 0xf2, 0xa9, 0x64, 0x1b, 0x19, 0x64, 0x5e, 0x0, 0x66, 0x10, 0xf6,
		0x98, 0xd1, 0xde},
	{0x2d, 0x8e, 0x34, 0x27, 0xa9, 0x8f, 0x68, 0xa0},
	{0xac, 0x99, 0x2d, 0xb1, 0xdb, 0xb9, 0xa3, 0xc9, 0x4d, 0xfa, 0x77, 0xd7, 0x6f, 0xd7, 0x5d, 0x2d},
	{0x55, 0xb9, 0x87, 0x37, 0x2d, 0xb7, 0xf0, 0xa1, 0x42, 0xa8, 0x89},
	{0xdf, 0xd, 0xb0, 0x97, 0xb, 0x22, 0xc7, 0x77, 0x9a, 0x79, 0xa8, 0x20, 0xad, 0xa2, 0xe0, 0x2e, 0xc8, 0xf4, 0x27},
	{0x6, 0x8a, 0x72, 0xe2, 0x19, 0x6d, 0x3c, 0x17, 0xdb, 0xda, 0x4c, 0x48, 0x4f, 0x7d, 0x8c, 0x9a, 0xda, 0x9d, 0x68, 0xa3,
		0xac, 0x29},
	{0x4d, 0x8d, 0x82, 0xa1, 0x8, 0x62, 0xed, 0x82, 0x5b, 0x9b, 0x69, 0x10, 0xaa, 0x32, 0x6b, 0xa6, 0xbc, 0xfa, 0x6c, 0xbe,
		0xd4, 0x9a, 0xac, 0x5a, 0xdf, 0x10, 0x1f, 0xec},
}

func FuzzMixedLanes(f *testing.F) {
	for _, s := range mixedFoundSeeds {
		f.Add(s)
	}
	for _, s := range mixedSeeds {
		f.Add(s)
	}
	for _, s := range fuzzSeeds {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, script []byte) {
		runMixedScript(t, script)
	})
}

// TestMixedLanesSeeds checks that the seeds reach what they are meant to.
func TestMixedLanesSeeds(t *testing.T) {
	t.Parallel()
	reached := map[string]bool{}
	for i, s := range mixedSeeds {
		t.Run(fmt.Sprint(i), func(t *testing.T) {
			r := runMixedScript(t, s)
			for e := 1; e <= r.h.exec(); e++ {
				for _, ev := range r.h.execution(e) {
					if ev.Lane == history.LaneQueue {
						reached[string(ev.Kind)+"/"+string(ev.Reason)] = true
					}
				}
			}
			if r.h.status != heraldtype.StatusCompleted {
				t.Fatalf("status %s", r.h.status)
			}
		})
	}
	for _, k := range []string{
		"EventRaised/", "EventSubscribed/", "EventSubscribedCancelled/",
		"EventDropped/limit", "EventDropped/superseded", "EventDropped/carry_forward_limit", "EventDropped/not_carried_forward",
	} {
		if !reached[k] {
			t.Errorf("no seed reaches %s", k)
		}
	}
	found := map[string]bool{}
	for _, s := range mixedFoundSeeds {
		for k := range reaches(runMixedScript(t, s).h) {
			found[k] = true
		}
	}
	for _, k := range []string{"queue//false", "queue//true", "queue/superseded/false", "correlated/withdrawn_wait/false",
		"handed on", "burst/queue", "burst/positional", "continued/queue", "continued/positional"} {
		if !found[k] {
			t.Errorf("no seed reaches %s", k)
		}
	}
}

// TestMixedLanesRandomScripts runs the fuzz target over a fixed set of
// pseudo-random scripts, so plain `go test` covers more than the seeds.
func TestMixedLanesRandomScripts(t *testing.T) {
	t.Parallel()
	n := 400
	if testing.Short() {
		n = 60
	}
	for seed := range uint64(n) {
		rng := rand.New(rand.NewPCG(seed, 3))
		script := make([]byte, 8+rng.IntN(72))
		for i := range script {
			script[i] = byte(rng.UintN(256))
		}
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			runMixedScript(t, script)
		})
	}
}
