package replay_test

import (
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/heraldwf/herald/heraldtype"
	"github.com/heraldwf/herald/history"
	"github.com/heraldwf/herald/internal/replay"
	"github.com/heraldwf/herald/storage"
)

// harness simulates the store around replay.Run: it keeps every
// execution's history, an inbox of messages, the fate ledger, scheduled
// timers and activities, and commits each turn's output the way a backend
// does. After every turn it checks the invariants of docs/engine.md and docs/positional.md (see
// check) and that replaying the committed history reproduces the turn.
type harness struct {
	t      testing.TB
	wf     replay.WorkflowFunc
	limits replay.Limits
	id     string
	now    time.Time

	execs   [][]history.Event // execs[i] is the history of execution i+1
	inbox   []storage.Message
	nextMsg int64
	fates   map[string]storage.FateUpdate
	raised  []raisedEvent // in raise order
	status  heraldtype.Status
	result  json.RawMessage
	failure *history.Failure
	timers  []task // scheduled and not fired or cancelled, any execution
	acts    []task // scheduled and not completed, any execution
	turns   int

	// notes is what the workflow observed during the Run in progress (the
	// workflow appends to it with note); execNotes keeps the notes of the
	// last live turn of each execution.
	notes     []string
	execNotes map[int][]string

	// corr simulates the correlated store, for workflows that use the
	// correlated lane (nil: they do not).
	corr *corrStore
	// consumedAt is, per event id, the execution of the turn that consumed
	// its message and the history length before that turn.
	consumedAt map[string][2]int
}

type raisedEvent struct {
	id, name string
	msg      int64
	lane     history.Lane
}

type task struct {
	exec, seq int
	name      string
	input     json.RawMessage
	fireAt    time.Time
	cancelled bool
}

var t0 = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

// newHarness creates an instance of wf with input (ExecutionStarted and a
// kick message, as InstanceCreate does). Events raised before the first
// turn reach the instance before its code runs.
func newHarness(t testing.TB, input string, wf replay.WorkflowFunc) *harness {
	h := &harness{t: t, wf: wf, id: "inst-1", now: t0, fates: map[string]storage.FateUpdate{},
		status: heraldtype.StatusPending, execNotes: map[int][]string{}, consumedAt: map[string][2]int{}}
	var in json.RawMessage
	if input != "" {
		in = json.RawMessage(input)
	}
	h.execs = [][]history.Event{{{Seq: 1, Time: t0, Kind: history.ExecutionStarted, Workflow: "wf", Input: in, Execution: 1}}}
	h.push(storage.Message{Kind: storage.MsgKick})
	return h
}

// note records an observation of the workflow code; replays must observe
// the same.
func (h *harness) note(format string, args ...any) {
	h.notes = append(h.notes, fmt.Sprintf(format, args...))
}

func (h *harness) exec() int                       { return len(h.execs) }
func (h *harness) cur() []history.Event            { return h.execs[len(h.execs)-1] }
func (h *harness) execution(e int) []history.Event { return h.execs[e-1] }

func (h *harness) push(m storage.Message) int64 {
	h.nextMsg++
	m.ID = h.nextMsg
	m.CreatedAt, m.VisibleAt = h.now, h.now
	h.inbox = append(h.inbox, m)
	return m.ID
}

// raise sends a positional event with a JSON payload (the event id as a
// JSON string when payload is empty).
func (h *harness) raise(name, id, payload string) {
	h.t.Helper()
	if h.status.Terminal() {
		h.t.Fatalf("raise %s to a %s instance", id, h.status)
	}
	if _, dup := h.fates[id]; dup {
		h.t.Fatalf("event id %s raised twice", id)
	}
	if payload == "" {
		payload = `"` + id + `"`
	}
	m := h.push(storage.Message{Kind: storage.MsgEvent, Lane: history.LanePositional, EventID: id, Name: name,
		Payload: json.RawMessage(payload)})
	h.fates[id] = storage.FateUpdate{EventID: id, Fate: history.FatePending}
	h.raised = append(h.raised, raisedEvent{id: id, name: name, msg: m, lane: history.LanePositional})
}

// fire makes timer seq of execution exec fire (whether or not it is still
// scheduled: a stale firing is allowed).
func (h *harness) fire(exec, seq int) {
	h.timers = slices.DeleteFunc(h.timers, func(k task) bool { return k.exec == exec && k.seq == seq })
	h.push(storage.Message{Kind: storage.MsgTimerFired, Execution: exec, TaskSeq: seq})
}

// fireNext fires the oldest scheduled timer of the current execution.
func (h *harness) fireNext() int {
	h.t.Helper()
	for _, k := range h.timers {
		if k.exec == h.exec() {
			h.fire(k.exec, k.seq)
			return k.seq
		}
	}
	h.t.Fatalf("no timer scheduled in execution %d", h.exec())
	return 0
}

func (h *harness) completeActivity(exec, seq int, result string) {
	h.acts = slices.DeleteFunc(h.acts, func(k task) bool { return k.exec == exec && k.seq == seq })
	h.push(storage.Message{Kind: storage.MsgActivityCompleted, Execution: exec, TaskSeq: seq, Result: json.RawMessage(result)})
}

func (h *harness) failActivity(exec, seq int, msg string) {
	h.acts = slices.DeleteFunc(h.acts, func(k task) bool { return k.exec == exec && k.seq == seq })
	h.push(storage.Message{Kind: storage.MsgActivityFailed, Execution: exec, TaskSeq: seq,
		Failure: &history.Failure{Kind: replay.FailureActivity, Message: msg}})
}

func (h *harness) activity(exec, seq int) (task, bool) {
	for _, k := range h.acts {
		if k.exec == exec && k.seq == seq {
			return k, true
		}
	}
	return task{}, false
}

func (h *harness) run(hist []history.Event, msgs []storage.Message, now time.Time) *replay.Output {
	h.t.Helper()
	h.notes = nil
	out, err := replay.Run(&replay.Input{InstanceID: h.id, Workflow: h.wf, History: hist, Messages: msgs, Now: now, Limits: h.limits})
	if err != nil {
		h.t.Fatalf("turn %d: Run: %v", h.turns, err)
	}
	return out
}

// turn runs one turn over the whole inbox and commits its output.
func (h *harness) turn() *replay.Output {
	h.t.Helper()
	if h.status.Terminal() {
		h.t.Fatalf("turn on a %s instance", h.status)
	}
	h.turns++
	h.now = h.now.Add(time.Second)
	exec := h.exec()
	msgs := slices.Clone(h.inbox)
	out := h.run(slices.Clone(h.cur()), msgs, h.now)
	notes := h.notes
	h.commit(exec, out)
	if out.Failure == nil || out.Failure.Kind != replay.FailureNondeterminism {
		h.execNotes[exec] = notes
		h.checkReplay(exec, out, notes)
	}
	h.check()
	return out
}

func (h *harness) commit(exec int, out *replay.Output) {
	h.t.Helper()
	hist := h.cur()
	for i, ev := range out.NewEvents {
		if want := len(hist) + 1 + i; ev.Seq != want {
			h.t.Fatalf("turn %d: new event %d (%s) has seq %d, want %d", h.turns, i, ev.Kind, ev.Seq, want)
		}
	}
	h.execs[exec-1] = append(hist, out.NewEvents...)
	before := len(hist)
	for _, id := range out.Consumed {
		i := slices.IndexFunc(h.inbox, func(m storage.Message) bool { return m.ID == id })
		if i < 0 {
			h.t.Fatalf("turn %d: consumed message %d is not in the inbox", h.turns, id)
		}
		if m := h.inbox[i]; m.EventID != "" {
			h.consumedAt[m.EventID] = [2]int{exec, before}
		}
		h.inbox = slices.Delete(h.inbox, i, i+1)
	}
	for _, a := range out.Activities {
		if a.Execution != exec || a.InstanceID != h.id {
			h.t.Fatalf("turn %d: activity %+v scheduled for execution %d of %s", h.turns, a, a.Execution, a.InstanceID)
		}
		h.acts = append(h.acts, task{exec: exec, seq: a.TaskSeq, name: a.Name, input: a.Input})
	}
	for _, k := range out.Timers {
		h.timers = append(h.timers, task{exec: exec, seq: k.TaskSeq, fireAt: k.FireAt})
	}
	for _, seq := range out.CancelTimers {
		h.timers = slices.DeleteFunc(h.timers, func(k task) bool { return k.exec == exec && k.seq == seq })
	}
	for _, seq := range out.CancelActivities {
		for i := range h.acts {
			if h.acts[i].exec == exec && h.acts[i].seq == seq {
				h.acts[i].cancelled = true
			}
		}
	}
	for _, f := range out.Fates {
		if _, ok := h.fates[f.EventID]; !ok {
			h.t.Fatalf("turn %d: fate for unknown event %q", h.turns, f.EventID)
		}
		h.fates[f.EventID] = f
	}
	h.corrCommit(exec, out)
	h.status, h.result, h.failure = out.Status, out.Result, out.Failure
	if can := out.ContinueAsNew; can != nil {
		if out.Status != heraldtype.StatusRunning {
			h.t.Fatalf("turn %d: continue-as-new with status %s", h.turns, out.Status)
		}
		if len(can.StartEvents) == 0 || can.StartEvents[0].Kind != history.ExecutionStarted || can.StartEvents[0].Execution != exec+1 {
			h.t.Fatalf("turn %d: continue-as-new start events %+v", h.turns, can.StartEvents)
		}
		h.execs = append(h.execs, slices.Clone(can.StartEvents))
		h.push(storage.Message{Kind: storage.MsgKick})
	}
	if h.status.Terminal() {
		// As the store does when an instance ends: every pending or buffered
		// event is dropped with a breadcrumb, the inbox is cleared.
		hist := h.cur()
		for _, r := range h.raised {
			f := h.fates[r.id]
			if f.Fate != history.FatePending && f.Fate != history.FateBuffered {
				continue
			}
			if f.Execution == 0 {
				f.Execution = exec
			}
			f.Fate, f.Reason = history.FateDropped, history.DropInstanceTerminal
			h.fates[r.id] = f
			hist = append(hist, history.Event{Seq: len(hist) + 1, Time: h.now, Kind: history.EventDropped,
				Lane: r.lane, EventID: r.id, Name: r.name, Reason: history.DropInstanceTerminal})
		}
		h.execs[exec-1] = hist
		h.inbox = nil
		h.timers, h.acts = nil, nil
	}
}

// checkReplay re-runs the committed history of execution exec with no
// messages: the code must make exactly the decisions already recorded and
// observe exactly what it observed on the live turn.
func (h *harness) checkReplay(exec int, live *replay.Output, liveNotes []string) {
	h.t.Helper()
	hist := h.execution(exec)
	out := h.run(slices.Clone(hist), nil, h.now.Add(time.Hour))
	where := fmt.Sprintf("turn %d: replay of execution %d (%d events)", h.turns, exec, len(hist))
	if len(out.NewEvents) != 0 {
		h.t.Fatalf("%s: new events %s\nhistory:\n%s", where, dumpEvents(out.NewEvents), dumpEvents(hist))
	}
	if out.Status != live.Status {
		h.t.Fatalf("%s: status %s (%v), live %s", where, out.Status, out.Failure, live.Status)
	}
	if len(out.Activities) != 0 || len(out.Timers) != 0 || len(out.CancelTimers) != 0 || len(out.CancelActivities) != 0 || len(out.Consumed) != 0 {
		h.t.Fatalf("%s: outgoing work %+v", where, out)
	}
	if (out.ContinueAsNew == nil) != (live.ContinueAsNew == nil) {
		h.t.Fatalf("%s: continue-as-new %v, live %v", where, out.ContinueAsNew != nil, live.ContinueAsNew != nil)
	}
	if out.ContinueAsNew != nil && !reflect.DeepEqual(out.ContinueAsNew.StartEvents, live.ContinueAsNew.StartEvents) {
		h.t.Fatalf("%s: start events\n%s\nlive\n%s", where, dumpEvents(out.ContinueAsNew.StartEvents), dumpEvents(live.ContinueAsNew.StartEvents))
	}
	if out.ContinueAsNew == nil && len(out.Fates) != 0 {
		h.t.Fatalf("%s: fates %+v", where, out.Fates)
	}
	if live.Status.Terminal() && !reflect.DeepEqual(out.Result, live.Result) {
		h.t.Fatalf("%s: result %s, live %s", where, out.Result, live.Result)
	}
	if !slices.Equal(h.notes, liveNotes) {
		h.t.Fatalf("%s: the code observed\n%s\nlive it observed\n%s", where, strings.Join(h.notes, "\n"), strings.Join(liveNotes, "\n"))
	}
}

// lifecycle is an event's state as derived from history alone.
type lifecycle struct {
	fate       history.Fate
	reason     history.DropReason
	exec       int // buffered in / delivered in / dropped in
	waitNumber int
	origin     int // the execution the event first reached
	deliveries int
	name       string
	lane       history.Lane
	at         [2]int // where it was delivered: execution, seq
	returned   bool   // a receive gave it back (it may be delivered after later events)
}

// derive replays every execution's history for the external events it
// mentions.
func (h *harness) derive() map[string]*lifecycle {
	h.t.Helper()
	got := map[string]*lifecycle{}
	for i, hist := range h.execs {
		e := i + 1
		for _, ev := range hist {
			if ev.EventID == "" {
				continue
			}
			for _, id := range h.burstIDs(ev) {
				l := got[id]
				if l == nil {
					l = &lifecycle{origin: e, name: ev.Name, lane: ev.Lane}
					got[id] = l
				}
				if ev.Name != l.name || ev.Lane != l.lane {
					h.t.Fatalf("event %s is %s %q at seq %d of execution %d, %s %q before", id, ev.Lane, ev.Name, ev.Seq, e, l.lane, l.name)
				}
				if ev.OriginExecution != 0 && ev.OriginExecution != l.origin {
					h.t.Fatalf("event %s: origin execution %d at seq %d of execution %d, first seen in %d", id, ev.OriginExecution, ev.Seq, e, l.origin)
				}
				switch {
				case ev.Kind == history.EventRaised && ev.TaskSeq == 0:
					l.fate, l.exec = history.FateBuffered, e
				case ev.Kind == history.EventRaised, ev.Kind == history.EventSubscribed:
					l.fate, l.exec, l.waitNumber, l.at = history.FateDelivered, e, ev.WaitNumber, [2]int{e, ev.Seq}
					l.deliveries++
				case ev.Kind == history.EventDropped:
					l.fate, l.reason, l.exec = history.FateDropped, ev.Reason, e
				case ev.Kind == history.EventSubscribedCancelled:
					// A give-back: the delivery to the losing receive is
					// undone, and the event is buffered again, delivered to
					// a listening wait, or dropped.
					if l.fate != history.FateDelivered || l.exec != e {
						h.t.Fatalf("event %s given back at seq %d of execution %d, but it was not delivered there (%+v)", id, ev.Seq, e, l)
					}
					l.deliveries--
					l.returned = true
					l.waitNumber, l.reason, l.exec = 0, "", e
					switch {
					case ev.Reason != "":
						l.fate, l.reason = history.FateDropped, ev.Reason
					case ev.WaitNumber != 0:
						l.fate, l.waitNumber, l.at = history.FateDelivered, ev.WaitNumber, [2]int{e, ev.Seq}
						l.deliveries++
					default:
						l.fate = history.FateBuffered
					}
				default:
					h.t.Fatalf("event id %s on a %s event", id, ev.Kind)
				}
			}
		}
	}
	return got
}

// burstIDs returns the ids of the events a history event stands for: the
// one it names, or for a breadcrumb of a burst of limit drops
// (history.Event.Count), the Count events of its lane and name sent one
// after the other from the first, the last of which must be LastEventID.
func (h *harness) burstIDs(ev history.Event) []string {
	h.t.Helper()
	if ev.Count == 0 && ev.LastEventID == "" {
		return []string{ev.EventID}
	}
	if ev.Kind != history.EventDropped || ev.Reason != history.DropLimit || ev.Count < 2 {
		h.t.Fatalf("seq %d: %s %s with count %d, last %q", ev.Seq, ev.Kind, ev.Reason, ev.Count, ev.LastEventID)
	}
	var ids []string
	for _, r := range h.raised {
		if r.lane != ev.Lane || r.name != ev.Name || (len(ids) == 0 && r.id != ev.EventID) {
			continue
		}
		if ids = append(ids, r.id); len(ids) == ev.Count {
			break
		}
	}
	if len(ids) != ev.Count || ids[len(ids)-1] != ev.LastEventID {
		h.t.Fatalf("seq %d: a burst of %d from %s to %s, but the events sent from %s are %v", ev.Seq, ev.Count, ev.EventID,
			ev.LastEventID, ev.EventID, ids)
	}
	return ids
}

// check asserts the lane invariants over the whole instance:
//   - every history is numbered 1..n;
//   - no event is delivered twice, across executions;
//   - the fate ledger says what history says: an event whose message is
//     still in the inbox is pending; every other raised event has the fate
//     its last history record gives it (buffered in the current execution,
//     delivered to wait N of execution E, dropped with the same reason);
//   - a buffered event is never left behind by continue-as-new;
//   - buffered positional events never exceed the limit (the queue lane's
//     limit is checked by fuzz_queue_test.go, which varies it);
//   - per lane and name, events are delivered in the order they were raised.
func (h *harness) check() {
	h.t.Helper()
	for i, hist := range h.execs {
		for j, ev := range hist {
			if ev.Seq != j+1 {
				h.t.Fatalf("execution %d: event %d has seq %d", i+1, j, ev.Seq)
			}
		}
	}
	life := h.derive()
	inInbox := map[int64]bool{}
	for _, m := range h.inbox {
		inInbox[m.ID] = true
	}
	bufferedNow := 0
	lastDelivered := map[string]*lifecycle{} // lane/name → the last delivered, in raise order
	prev := map[string]string{}              // lane/name → the id of the previous event raised
	for _, r := range h.raised {
		f, l := h.fates[r.id], life[r.id]
		key := string(r.lane) + "/" + r.name
		before := prev[key]
		prev[key] = r.id
		if inInbox[r.msg] {
			if f.Fate != history.FatePending || l != nil {
				h.t.Fatalf("event %s is still in the inbox but has fate %+v and history %+v", r.id, f, l)
			}
			continue
		}
		if h.corr != nil && h.corr.handedOn[r.id] {
			// The store dropped this delivery to a withdrawn wait to hand
			// its event on; the instance never saw it.
			if f.Fate != history.FateDropped || f.Reason != history.DropWithdrawnWait || l != nil {
				h.t.Fatalf("event %s was handed on by the store but has fate %+v and history %+v", r.id, f, l)
			}
			continue
		}
		if l == nil {
			// A limit drop continuing a burst an earlier turn opened has no
			// breadcrumb of its own (history.Event.Count): before its turn,
			// the last history event of its lane (but other names' limit
			// breadcrumbs) was a limit breadcrumb of its name, and the
			// event sent just before it on that lane and name was dropped
			// over the limit too.
			at, ok := h.consumedAt[r.id]
			if !ok || f.Fate != history.FateDropped || f.Reason != history.DropLimit || f.Execution != at[0] {
				h.t.Fatalf("event %s was consumed but history never mentions it (fate %+v)", r.id, f)
			}
			var last *history.Event // the last event of the lane but other names' limit breadcrumbs
			for i, ev := range h.execution(at[0])[:at[1]] {
				if ev.Lane == r.lane && (ev.Name == r.name || ev.Kind != history.EventDropped || ev.Reason != history.DropLimit) {
					last = &h.execution(at[0])[i]
				}
			}
			if last == nil || last.Kind != history.EventDropped || last.Reason != history.DropLimit || last.Name != r.name {
				h.t.Fatalf("event %s dropped over the limit without a breadcrumb, but no burst of %s was open (last: %+v)", r.id, key, last)
			}
			if bf := h.fates[before]; before == "" || bf.Fate != history.FateDropped || bf.Reason != history.DropLimit {
				h.t.Fatalf("event %s continues a burst of limit drops, but the event before it (%q) is %+v", r.id, before, bf)
			}
			continue
		}
		if l.lane != r.lane {
			h.t.Fatalf("event %s sent on the %s lane reached history on the %s lane", r.id, r.lane, l.lane)
		}
		if l.deliveries > 1 {
			h.t.Fatalf("event %s delivered %d times", r.id, l.deliveries)
		}
		if f.Fate != l.fate || f.Reason != l.reason {
			h.t.Fatalf("event %s: ledger %s/%s, history %s/%s", r.id, f.Fate, f.Reason, l.fate, l.reason)
		}
		switch l.fate {
		case history.FateBuffered:
			if l.exec != h.exec() {
				h.t.Fatalf("event %s left buffered in execution %d by continue-as-new (now %d)", r.id, l.exec, h.exec())
			}
			if f.Execution != l.exec || f.OriginExecution != l.origin {
				h.t.Fatalf("event %s: ledger %+v, history: buffered in %d, origin %d", r.id, f, l.exec, l.origin)
			}
			if r.lane == history.LanePositional && !l.returned {
				bufferedNow++ // a returned event may take the lane over the limit
			}
		case history.FateDelivered:
			if f.Execution != l.exec || f.WaitNumber != l.waitNumber || f.WaitNumber < 1 || f.OriginExecution != l.origin {
				h.t.Fatalf("event %s: ledger %+v, history: delivered to wait %d of execution %d, origin %d", r.id, f, l.waitNumber, l.exec, l.origin)
			}
			if l.returned || r.lane == history.LaneCorrelated {
				break // given back after later events were delivered; the correlated lane has no order
			}
			if prev := lastDelivered[key]; prev != nil && (prev.at[0] > l.at[0] || prev.at[0] == l.at[0] && prev.at[1] > l.at[1]) {
				h.t.Fatalf("event %s delivered at %v, before an event of the same lane and name raised earlier (at %v)", r.id, l.at, prev.at)
			}
			lastDelivered[key] = l
		case history.FateDropped:
			if l.reason == "" {
				h.t.Fatalf("event %s dropped without a reason", r.id)
			}
			if f.Execution != l.exec {
				h.t.Fatalf("event %s: ledger %+v, history: dropped in execution %d", r.id, f, l.exec)
			}
		}
	}
	if limit := h.maxUnconsumed(); bufferedNow > limit {
		h.t.Fatalf("%d events buffered, limit %d", bufferedNow, limit)
	}
	h.checkRules()
}

// checkRules re-derives every recorded lane decision with the naive model
// of rules 1–4 (laneModel), in history order, and checks rule 5 at every
// continue-as-new: the events the model still holds are exactly the ones
// placed at the start of the next execution, in order, carried or dropped
// for their age (or all dropped, for DropUnconsumed).
func (h *harness) checkRules() {
	h.t.Helper()
	maxCarry := h.limits.MaxCarryForwardExecutions
	if maxCarry <= 0 {
		maxCarry = 5
	}
	var carried []string // what the previous execution left buffered, in order
	for i, hist := range h.execs {
		e := i + 1
		m := newLaneModel(h.maxUnconsumed())
		numbers := map[int]int{} // subscription seq → wait number
		next := 0                // index into carried
		notCarried := 0
		fail := func(ev history.Event, format string, args ...any) {
			h.t.Helper()
			h.t.Fatalf("execution %d, seq %d (%s %s): %s\n%s", e, ev.Seq, ev.Kind, ev.EventID, fmt.Sprintf(format, args...), dumpEvents(hist))
		}
		for _, ev := range hist {
			if ev.Lane == history.LaneQueue || ev.Lane == history.LaneCorrelated {
				continue
			}
			switch ev.Kind {
			case history.EventSubscribed:
				n, got := m.wait(ev.Name, ev.Seq)
				numbers[ev.Seq] = n
				gotID := ""
				if got != nil {
					gotID = got.Event.EventID
				}
				if gotID != ev.EventID || (gotID != "" && ev.WaitNumber != n) {
					fail(ev, "the model's wait %d received %q at once", n, gotID)
				}
			case history.EventSubscribedCancelled:
				if ev.EventID == "" {
					if !m.cancel(ev.Name, ev.TaskSeq) {
						fail(ev, "withdraws a wait that is not active")
					}
					break
				}
				// A give-back: the receive took the event earlier (the
				// model saw it arrive) and is not waiting.
				if slices.Contains(m.waits[ev.Name], ev.TaskSeq) {
					fail(ev, "gives back an event, but the wait is still waiting")
				}
				if _, seen := m.order[ev.EventID]; !seen {
					fail(ev, "gives back an event the model never saw arrive")
				}
				got := m.giveBack(laneEvent(ev.Name, ev.EventID))
				switch {
				case ev.Reason != "":
					fail(ev, "a positional give-back dropped (%s)", ev.Reason)
				case got.Delivered != (ev.WaitNumber != 0) || got.Delivered && numbers[got.WaitSeq] != ev.WaitNumber:
					fail(ev, "given back to wait number %d, the model decides %+v (wait number %d)", ev.WaitNumber, got, numbers[got.WaitSeq])
				}
			case history.EventRaised, history.EventDropped:
				if ev.Reason == history.DropInstanceTerminal {
					continue // the store's breadcrumb when the instance ended
				}
				if ev.AtStart && ev.OriginExecution < e {
					if next >= len(carried) || carried[next] != ev.EventID {
						fail(ev, "carried event out of order: want %v[%d]", carried, next)
					}
					next++
					age := e - ev.OriginExecution
					switch ev.Reason {
					case history.DropNotCarriedForward:
						notCarried++
						continue
					case history.DropCarryForwardLimit:
						if age <= maxCarry {
							fail(ev, "dropped for its age %d, limit %d", age, maxCarry)
						}
						continue
					case "":
						if age > maxCarry {
							fail(ev, "carried at age %d, limit %d", age, maxCarry)
						}
						if ev.Kind != history.EventRaised || ev.TaskSeq != 0 {
							fail(ev, "carried as %s to task %d", ev.Kind, ev.TaskSeq)
						}
						// Carried whatever the limit: events given back
						// may have taken the lane over it.
						m.carry(laneEvent(ev.Name, ev.EventID))
						continue
					default:
						fail(ev, "carried event dropped for %s", ev.Reason)
					}
				}
				want := buffered
				switch {
				case ev.Kind == history.EventDropped:
					want = dropped(ev.Reason)
				case ev.TaskSeq > 0:
					want = deliveredTo(ev.TaskSeq)
					if ev.WaitNumber != numbers[ev.TaskSeq] {
						fail(ev, "wait number %d, the model's %d", ev.WaitNumber, numbers[ev.TaskSeq])
					}
				}
				for _, id := range h.burstIDs(ev) {
					if got := m.arrive(laneEvent(ev.Name, id)); !sameOutcome(got, want) {
						fail(ev, "recorded %+v for %s, the model decides %+v", want, id, got)
					}
				}
			}
		}
		if e > 1 && next != len(carried) {
			h.t.Fatalf("execution %d starts with %d of the %d events execution %d left buffered (%v)\n%s", e, next, len(carried), e-1, carried, dumpEvents(hist))
		}
		if notCarried != 0 && notCarried != len(carried) {
			h.t.Fatalf("execution %d: %d of %d carried events dropped as not_carried_forward", e, notCarried, len(carried))
		}
		carried = carried[:0]
		for _, b := range m.buffered {
			carried = append(carried, b.Event.EventID)
		}
	}
}

func (h *harness) maxUnconsumed() int {
	if h.limits.MaxUnconsumedEvents > 0 {
		return h.limits.MaxUnconsumedEvents
	}
	return 100
}

// find returns the events of the current execution of kind k.
func (h *harness) find(k history.Kind) []history.Event {
	return kindOf(h.cur(), k)
}

func kindOf(hist []history.Event, k history.Kind) []history.Event {
	var out []history.Event
	for _, ev := range hist {
		if ev.Kind == k {
			out = append(out, ev)
		}
	}
	return out
}

func dumpEvents(evs []history.Event) string {
	var b strings.Builder
	for _, ev := range evs {
		fmt.Fprintf(&b, "  %3d %-24s", ev.Seq, ev.Kind)
		if ev.Name != "" {
			fmt.Fprintf(&b, " name=%s", ev.Name)
		}
		if ev.EventID != "" {
			fmt.Fprintf(&b, " id=%s", ev.EventID)
		}
		if ev.TaskSeq != 0 {
			fmt.Fprintf(&b, " task=%d", ev.TaskSeq)
		}
		if ev.WaitNumber != 0 {
			fmt.Fprintf(&b, " wait#%d", ev.WaitNumber)
		}
		if ev.Reason != "" {
			fmt.Fprintf(&b, " reason=%s", ev.Reason)
		}
		if ev.Count != 0 {
			fmt.Fprintf(&b, " count=%d last=%s", ev.Count, ev.LastEventID)
		}
		if ev.AtStart {
			fmt.Fprintf(&b, " at_start origin=%d", ev.OriginExecution)
		}
		b.WriteString("\n")
	}
	return b.String()
}

// reaches lists what a run reached that the fuzz seeds must cover: give-backs
// by lane, outcome ("lane/reason/to-a-wait"), bursts of limit drops (with a
// breadcrumb, "burst/lane", or continued without one, "continued/lane"),
// and delete-after-first correlated events handed on ("handed on").
func reaches(h *harness) map[string]bool {
	r := map[string]bool{}
	for e := 1; e <= h.exec(); e++ {
		for _, ev := range h.execution(e) {
			if ev.Kind == history.EventSubscribedCancelled && ev.EventID != "" {
				r[fmt.Sprintf("%s/%s/%v", ev.Lane, ev.Reason, ev.WaitNumber != 0)] = true
			}
			if ev.Count > 0 {
				r["burst/"+string(ev.Lane)] = true
			}
		}
	}
	if h.corr != nil {
		copies := map[string]int{}
		for _, p := range h.corr.putOf {
			copies[p]++
		}
		for p, n := range copies {
			if n > 1 && h.corr.deleteAfterFirst[p[1:2]] {
				r["handed on"] = true
			}
		}
	}
	life := h.derive()
	for _, ev := range h.raised {
		if life[ev.id] == nil && h.fates[ev.id].Reason == history.DropLimit {
			r["continued/"+string(ev.lane)] = true
		}
	}
	return r
}
