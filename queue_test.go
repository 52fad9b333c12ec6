package herald_test

// End-to-end tests of the queue lane (docs/queue.md): the limit and its fate,
// carry-forward across continue-as-new (order, overflow, age), messages sent
// before the instance starts, TryDequeue, cancelled receives (select losers
// and timeouts) that consume nothing, event-id dedup, terminal instances, and
// the fate ledger across both lanes.

import (
	"errors"
	"fmt"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/heraldwf/herald"
	"github.com/heraldwf/herald/history"
)

// quCmd is a command for quScript, sent as a positional event "cmd".
type quCmd struct {
	// Op: "take" (Dequeue the first of Queues), "try" (TryDequeue it;
	// "-" is recorded when it is empty), "drain" (TryDequeue each of
	// Queues until it is empty), "continue", "continue-drop" (ContinueAsNew,
	// DropUnconsumedEvents), "end" (complete).
	Op     string
	Queues []string
}

// quScriptState is quScript's input and result: the payloads received, in
// order, across executions.
type quScriptState struct {
	Got []string
}

// quScript obeys commands sent on the positional lane, so a test can drive
// the queue lane step by step (the cmd events themselves show that the two
// lanes do not interfere).
func quScript(ctx *herald.Context, st quScriptState) (quScriptState, error) {
	for {
		var c quCmd
		if err := ctx.WaitEvent("cmd").Get(&c); err != nil {
			return st, err
		}
		switch c.Op {
		case "take":
			var s string
			if err := ctx.Dequeue(c.Queues[0]).Get(&s); err != nil {
				return st, err
			}
			st.Got = append(st.Got, s)
		case "try":
			var s string
			ok, err := ctx.TryDequeue(c.Queues[0], &s)
			if err != nil {
				return st, err
			}
			if !ok {
				s = "-"
			}
			st.Got = append(st.Got, s)
		case "drain":
			for _, q := range c.Queues {
				for {
					var s string
					ok, err := ctx.TryDequeue(q, &s)
					if err != nil {
						return st, err
					}
					if !ok {
						break
					}
					st.Got = append(st.Got, s)
				}
			}
		case "continue":
			return st, ctx.ContinueAsNew(st)
		case "continue-drop":
			return st, ctx.ContinueAsNew(st, herald.DropUnconsumedEvents())
		case "end":
			return st, nil
		default:
			return st, fmt.Errorf("unknown command %q", c.Op)
		}
	}
}

func registerScript(rt *herald.Runtime) { herald.RegisterWorkflow(rt, "script", quScript) }

// quSend sends a command to a quScript instance.
func quSend(b *bundle, id, op string, queues ...string) {
	b.t.Helper()
	b.raise(id, "cmd", quCmd{Op: op, Queues: queues}, "")
}

// quReady waits until execution exec of a quScript instance waits for its
// n-th command.
func quReady(b *bundle, id string, exec, n int) {
	b.t.Helper()
	b.waitExec(id, exec, history.EventSubscribed, history.LanePositional, "cmd", n)
}

// quWantGot checks the result of a quScript instance.
func quWantGot(b *bundle, id string, want ...string) {
	b.t.Helper()
	var st quScriptState
	b.result(id, &st)
	if !slices.Equal(st.Got, want) {
		b.t.Fatalf("received %q, want %q", st.Got, want)
	}
}

// quCheckCarried checks the events placed at the start of an execution: the
// given ids, in order, each on the queue lane with its origin, carried
// (EventRaised) or dropped for reason.
type quCarried struct {
	ID     string
	Origin int
	Reason history.DropReason // "" if carried
}

func quCheckStart(b *bundle, evs []history.Event, exec int, want ...quCarried) {
	b.t.Helper()
	if len(evs) < len(want)+1 || evs[0].Kind != history.ExecutionStarted || evs[0].Execution != exec {
		b.t.Fatalf("execution %d history:%s", exec, dumpHistory(evs))
	}
	for i, w := range want {
		ev := evs[i+1]
		kind := history.EventRaised
		if w.Reason != "" {
			kind = history.EventDropped
		}
		if ev.Kind != kind || ev.EventID != w.ID || ev.Lane != history.LaneQueue || !ev.AtStart ||
			ev.OriginExecution != w.Origin || ev.Reason != w.Reason || ev.TaskSeq != 0 {
			b.t.Fatalf("execution %d, start event %d: want %+v; history:%s", exec, i+1, w, dumpHistory(evs))
		}
	}
	if len(evs) > len(want)+1 && evs[len(want)+1].AtStart && evs[len(want)+1].OriginExecution < exec {
		b.t.Fatalf("execution %d starts with more carried events than %+v; history:%s", exec, want, dumpHistory(evs))
	}
}

// ---- the limit ----

func TestQueue_LimitDropsNewMessage(t *testing.T) {
	t.Parallel()
	type out struct{ A, B []string }
	b := setupEnv(t, nil, func(rt *herald.Runtime) {
		herald.RegisterWorkflow(rt, "w", func(ctx *herald.Context, _ struct{}) (out, error) {
			var o out
			var p string
			if err := ctx.WaitEvent("go").Get(nil); err != nil {
				return o, err
			}
			for _, q := range []string{"A", "B"} {
				for {
					var s string
					ok, err := ctx.TryDequeue(q, &s)
					if err != nil || !ok {
						break
					}
					if q == "A" {
						o.A = append(o.A, s)
					} else {
						o.B = append(o.B, s)
					}
				}
			}
			// The positional event was kept: the lanes have separate limits.
			err := ctx.WaitEvent("P").Get(&p)
			return o, err
		})
	})
	b.start("w", "i", nil)
	b.waitExec("i", 1, history.EventSubscribed, history.LanePositional, "go", 1)
	// The default limit, 20, counts messages across queues.
	var wantA, wantB []string
	for n := 1; n <= 20; n++ {
		id := fmt.Sprintf("q%02d", n)
		q := "A"
		if n%2 == 0 {
			q = "B"
			wantB = append(wantB, id)
		} else {
			wantA = append(wantA, id)
		}
		b.enqueue("i", q, id, id)
	}
	for n := 1; n <= 20; n++ {
		b.waitFate(fmt.Sprintf("q%02d", n), history.FateBuffered)
	}
	b.enqueue("i", "A", "q21", "q21")
	b.waitFate("q21", history.FateDropped)
	b.checkFate("q21", wantFate{Lane: history.LaneQueue, Name: "A", Fate: history.FateDropped, Reason: history.DropLimit, Execution: 1, Origin: 1})
	evs := b.history("i", 0)
	crumb := b.one(evs, "q21")
	if crumb.Kind != history.EventDropped || crumb.Lane != history.LaneQueue || crumb.Reason != history.DropLimit ||
		crumb.Name != "A" || crumb.OriginExecution != 1 || string(crumb.Payload) != `"q21"` {
		t.Fatalf("breadcrumb %+v; history:%s", crumb, dumpHistory(evs))
	}
	if n := len(ofKind(evs, history.EventRaised, history.LaneQueue, "")); n != 20 {
		t.Fatalf("%d messages buffered, want 20; history:%s", n, dumpHistory(evs))
	}
	b.wantWarn("herald: event dropped", "event_id=q21", "lane=queue", "reason=limit")
	if n := b.obs.droppedBy(string(history.DropLimit)); n != 1 {
		t.Errorf("limit drops counted %d, want 1", n)
	}

	// A full queue lane does not limit the positional lane.
	b.raise("i", "P", "p", "ev-p")
	b.waitFate("ev-p", history.FateBuffered)
	b.raise("i", "go", nil, "ev-go")
	var o out
	b.result("i", &o)
	if !slices.Equal(o.A, wantA) || !slices.Equal(o.B, wantB) {
		t.Fatalf("received A %q B %q, want A %q B %q", o.A, o.B, wantA, wantB)
	}
	b.checkFate("q21", wantFate{Lane: history.LaneQueue, Name: "A", Fate: history.FateDropped, Reason: history.DropLimit, Execution: 1, Origin: 1})
	b.checkFate("q20", wantFate{Lane: history.LaneQueue, Name: "B", Fate: history.FateDelivered, Execution: 1, Origin: 1, WaitNumber: 10})
	b.replayAll("i")
}

func TestQueue_ConsumingFreesRoom(t *testing.T) {
	t.Parallel()
	b := setupEnv(t, &herald.Config{MaxQueuedEvents: 3}, registerScript)
	b.start("script", "i", nil)
	quReady(b, "i", 1, 1)
	for _, id := range []string{"m1", "m2", "m3"} {
		b.enqueue("i", "Q", id, id)
		b.waitFate(id, history.FateBuffered)
	}
	b.enqueue("i", "Q", "m4", "m4")
	b.waitFate("m4", history.FateDropped)
	b.checkFate("m4", wantFate{Lane: history.LaneQueue, Name: "Q", Fate: history.FateDropped, Reason: history.DropLimit, Execution: 1, Origin: 1})

	quSend(b, "i", "take", "Q")
	b.waitFate("m1", history.FateDelivered)
	quReady(b, "i", 1, 2)
	// One consumed, one free slot.
	b.enqueue("i", "Q", "m5", "m5")
	b.waitFate("m5", history.FateBuffered)
	b.enqueue("i", "Q", "m6", "m6")
	b.waitFate("m6", history.FateDropped)
	b.checkFate("m6", wantFate{Lane: history.LaneQueue, Name: "Q", Fate: history.FateDropped, Reason: history.DropLimit, Execution: 1, Origin: 1})
	b.wantWarn("event_id=m6", "lane=queue", "reason=limit")

	quSend(b, "i", "drain", "Q")
	quSend(b, "i", "end")
	quWantGot(b, "i", "m1", "m2", "m3", "m5")
	evs := b.history("i", 0)
	if d := ofKind(evs, history.EventDropped, history.LaneQueue, "Q"); len(d) != 2 || d[0].EventID != "m4" || d[1].EventID != "m6" {
		t.Fatalf("drops %+v; history:%s", d, dumpHistory(evs))
	}
	b.replayAll("i")
}

// ---- continue-as-new ----

func TestQueue_CarryForwardKeepsOrderAcrossExecutions(t *testing.T) {
	t.Parallel()
	b := setupEnv(t, &herald.Config{MaxQueuedEvents: 3}, registerScript)
	b.start("script", "i", nil)
	quReady(b, "i", 1, 1)
	for _, m := range [][2]string{{"A", "A1"}, {"B", "B1"}, {"A", "A2"}} {
		b.enqueue("i", m[0], m[1], m[1])
		b.waitFate(m[1], history.FateBuffered)
	}
	quSend(b, "i", "continue")
	quReady(b, "i", 2, 1)
	// Carried in arrival order across queues, keeping their origin.
	quCheckStart(b, b.history("i", 2), 2, quCarried{"A1", 1, ""}, quCarried{"B1", 1, ""}, quCarried{"A2", 1, ""})
	b.checkFate("B1", wantFate{Lane: history.LaneQueue, Name: "B", Fate: history.FateBuffered, Execution: 2, Origin: 1})

	quSend(b, "i", "take", "A")
	b.waitFate("A1", history.FateDelivered)
	b.checkFate("A1", wantFate{Lane: history.LaneQueue, Name: "A", Fate: history.FateDelivered, Execution: 2, Origin: 1, WaitNumber: 1})
	quReady(b, "i", 2, 2)
	b.enqueue("i", "B", "B2", "B2")
	b.waitFate("B2", history.FateBuffered)
	quSend(b, "i", "continue")
	quReady(b, "i", 3, 1)
	// The carried ones before the newer one.
	quCheckStart(b, b.history("i", 3), 3, quCarried{"B1", 1, ""}, quCarried{"A2", 1, ""}, quCarried{"B2", 2, ""})

	// Carried messages count toward the limit of the new execution.
	b.enqueue("i", "A", "A3", "A3")
	b.waitFate("A3", history.FateDropped)
	b.checkFate("A3", wantFate{Lane: history.LaneQueue, Name: "A", Fate: history.FateDropped, Reason: history.DropLimit, Execution: 3, Origin: 3})

	quSend(b, "i", "drain", "A", "B")
	quSend(b, "i", "end")
	quWantGot(b, "i", "A1", "A2", "B1", "B2")
	b.checkFate("A2", wantFate{Lane: history.LaneQueue, Name: "A", Fate: history.FateDelivered, Execution: 3, Origin: 1, WaitNumber: 1})
	b.checkFate("B1", wantFate{Lane: history.LaneQueue, Name: "B", Fate: history.FateDelivered, Execution: 3, Origin: 1, WaitNumber: 1})
	b.checkFate("B2", wantFate{Lane: history.LaneQueue, Name: "B", Fate: history.FateDelivered, Execution: 3, Origin: 2, WaitNumber: 2})
	if ex1 := b.history("i", 1); len(ofKind(ex1, history.EventDropped, "", "")) != 0 {
		t.Fatalf("execution 1 dropped something:%s", dumpHistory(ex1))
	}
	b.replayAll("i")
}

// The carry-forward overflow can only happen when the limit was lowered
// while messages were buffered: a runtime with MaxQueuedEvents 5 buffers
// five, a runtime with 3 continues the instance as new.
func TestQueue_CarryForwardOverflowDropsNewest(t *testing.T) {
	t.Parallel()
	st := testStore(t)
	b1 := setupOn(t, st, &herald.Config{MaxQueuedEvents: 5}, registerScript)
	b1.start("script", "i", nil)
	quReady(b1, "i", 1, 1)
	ids := []string{"m1", "m2", "m3", "m4", "m5"}
	for _, id := range ids {
		b1.enqueue("i", "Q", id, id)
	}
	for _, id := range ids {
		b1.waitFate(id, history.FateBuffered)
	}
	if err := b1.rt.Stop(b1.ctx); err != nil {
		t.Fatal(err)
	}

	b := setupOn(t, st, &herald.Config{MaxQueuedEvents: 3}, registerScript)
	quSend(b, "i", "continue")
	quReady(b, "i", 2, 1)
	// The oldest are kept; the overflow is dropped and reported.
	quCheckStart(b, b.history("i", 2), 2, quCarried{"m1", 1, ""}, quCarried{"m2", 1, ""}, quCarried{"m3", 1, ""},
		quCarried{"m4", 1, history.DropCarryForwardLimit}, quCarried{"m5", 1, history.DropCarryForwardLimit})
	for _, id := range []string{"m4", "m5"} {
		b.checkFate(id, wantFate{Lane: history.LaneQueue, Name: "Q", Fate: history.FateDropped, Reason: history.DropCarryForwardLimit, Execution: 2, Origin: 1})
		b.wantWarn("event_id="+id, "lane=queue", "reason=carry_forward_limit")
	}
	quSend(b, "i", "drain", "Q")
	quSend(b, "i", "end")
	quWantGot(b, "i", "m1", "m2", "m3")
	b.replayAll("i")
}

func TestQueue_CarryForwardAgeLimit(t *testing.T) {
	t.Parallel()
	b := setupEnv(t, &herald.Config{MaxCarryForwardExecutions: 2}, registerScript)
	b.start("script", "i", nil)
	quReady(b, "i", 1, 1)
	b.enqueue("i", "Q", "old", "old")
	b.waitFate("old", history.FateBuffered)
	quSend(b, "i", "continue")
	quReady(b, "i", 2, 1)
	b.enqueue("i", "Q", "young", "young")
	b.waitFate("young", history.FateBuffered)
	quSend(b, "i", "continue")
	quReady(b, "i", 3, 1)
	// Two boundaries: still carried.
	quCheckStart(b, b.history("i", 3), 3, quCarried{"old", 1, ""}, quCarried{"young", 2, ""})
	b.checkFate("old", wantFate{Lane: history.LaneQueue, Name: "Q", Fate: history.FateBuffered, Execution: 3, Origin: 1})
	quSend(b, "i", "continue")
	quReady(b, "i", 4, 1)
	// A third boundary is one too many for "old", not for "young".
	quCheckStart(b, b.history("i", 4), 4, quCarried{"old", 1, history.DropCarryForwardLimit}, quCarried{"young", 2, ""})
	b.checkFate("old", wantFate{Lane: history.LaneQueue, Name: "Q", Fate: history.FateDropped, Reason: history.DropCarryForwardLimit, Execution: 4, Origin: 1})
	b.wantWarn("event_id=old", "lane=queue", "reason=carry_forward_limit", "origin_execution=1")
	quSend(b, "i", "drain", "Q")
	quSend(b, "i", "end")
	quWantGot(b, "i", "young")
	b.checkFate("young", wantFate{Lane: history.LaneQueue, Name: "Q", Fate: history.FateDelivered, Execution: 4, Origin: 2, WaitNumber: 1})
	b.replayAll("i")
}

func TestQueue_ContinueAsNewDropUnconsumed(t *testing.T) {
	t.Parallel()
	b := setupEnv(t, nil, registerScript)
	b.start("script", "i", nil)
	quReady(b, "i", 1, 1)
	b.enqueue("i", "Q", "m1", "m1")
	b.raise("i", "Q", "p1", "p1") // the same name on the positional lane
	b.waitFate("m1", history.FateBuffered)
	b.waitFate("p1", history.FateBuffered)
	quSend(b, "i", "continue-drop")
	quReady(b, "i", 2, 1)
	ex2 := b.history("i", 2)
	for _, c := range []struct {
		id   string
		lane history.Lane
	}{{"m1", history.LaneQueue}, {"p1", history.LanePositional}} {
		ev := b.one(ex2, c.id)
		if ev.Kind != history.EventDropped || ev.Lane != c.lane || ev.Reason != history.DropNotCarriedForward || !ev.AtStart || ev.OriginExecution != 1 {
			t.Fatalf("%s: %+v; history:%s", c.id, ev, dumpHistory(ex2))
		}
		b.checkFate(c.id, wantFate{Lane: c.lane, Name: "Q", Fate: history.FateDropped, Reason: history.DropNotCarriedForward, Execution: 2, Origin: 1})
	}
	b.wantWarn("event_id=m1", "lane=queue", "reason=not_carried_forward")
	b.enqueue("i", "Q", "m2", "m2")
	quSend(b, "i", "take", "Q")
	quSend(b, "i", "end")
	quWantGot(b, "i", "m2")
	b.replayAll("i")
}

// ---- before start, TryDequeue ----

func TestQueue_MessagesBeforeStart(t *testing.T) {
	t.Parallel()
	type out struct {
		AtOnce bool
		Got    []string
	}
	b := setupEnv(t, &herald.Config{MaxQueuedEvents: 3}, func(rt *herald.Runtime) {
		herald.RegisterWorkflow(rt, "w", func(ctx *herald.Context, _ struct{}) (out, error) {
			f := ctx.Dequeue("A")
			o := out{AtOnce: f.Ready()}
			var s string
			if err := f.Get(&s); err != nil {
				return o, err
			}
			o.Got = append(o.Got, s)
			for _, q := range []string{"A", "B"} {
				for {
					ok, err := ctx.TryDequeue(q, &s)
					if err != nil || !ok {
						break
					}
					o.Got = append(o.Got, s)
				}
			}
			return o, nil
		})
	})
	for _, m := range [][2]string{{"A", "a1"}, {"B", "b1"}, {"A", "a2"}, {"A", "a3"}} {
		b.enqueue("later", m[0], m[1], m[1])
		b.checkFate(m[1], wantFate{Lane: history.LaneQueue, Name: m[0], Fate: history.FatePending})
	}
	if _, err := b.client.Status(b.ctx, "later"); !errors.Is(err, herald.ErrNotFound) {
		t.Fatalf("status of an instance not started: %v", err)
	}
	b.start("w", "later", nil)
	var o out
	b.result("later", &o)
	if !o.AtOnce || !slices.Equal(o.Got, []string{"a1", "a2", "b1"}) {
		t.Fatalf("result %+v, want a1 at once, then a2, b1", o)
	}
	evs := b.history("later", 0)
	// Kept messages arrive at the start of execution 1, before the code
	// runs, in the order sent; the fourth is over the limit.
	for i, id := range []string{"a1", "b1", "a2", "a3"} {
		ev := evs[i+1]
		kind := history.EventRaised
		if id == "a3" {
			kind = history.EventDropped
		}
		if ev.Kind != kind || ev.EventID != id || ev.Lane != history.LaneQueue || !ev.AtStart || ev.OriginExecution != 1 || ev.TaskSeq != 0 {
			t.Fatalf("start event %d: want %s %s; history:%s", i+1, kind, id, dumpHistory(evs))
		}
	}
	b.checkFate("a1", wantFate{Lane: history.LaneQueue, Name: "A", Fate: history.FateDelivered, Execution: 1, Origin: 1, WaitNumber: 1})
	b.checkFate("b1", wantFate{Lane: history.LaneQueue, Name: "B", Fate: history.FateDelivered, Execution: 1, Origin: 1, WaitNumber: 1})
	b.checkFate("a3", wantFate{Lane: history.LaneQueue, Name: "A", Fate: history.FateDropped, Reason: history.DropLimit, Execution: 1, Origin: 1})
	b.wantWarn("event_id=a3", "lane=queue", "reason=limit")
	b.replayAll("later")
}

// Enqueue with StartIfAbsent starts the instance atomically with the
// message, which the first turn finds in the mailbox.
func TestQueue_EnqueueStartIfAbsent(t *testing.T) {
	t.Parallel()
	b := setupEnv(t, nil, registerScript)
	r, err := b.client.Enqueue(b.ctx, "sw", "Q", "m1", herald.WithEventID("m1"),
		herald.StartIfAbsent("script", quScriptState{Got: []string{"input"}}))
	if err != nil || !r.Started || r.Duplicate {
		t.Fatalf("receipt %+v, %v; want Started", r, err)
	}
	quReady(b, "sw", 1, 1)
	evs := b.history("sw", 0)
	if len(evs) < 2 || evs[1].Kind != history.EventRaised || evs[1].EventID != "m1" || evs[1].Lane != history.LaneQueue || !evs[1].AtStart {
		t.Fatalf("the message should be at the start of execution 1; history:%s", dumpHistory(evs))
	}
	// The instance exists now: a plain enqueue.
	r, err = b.client.Enqueue(b.ctx, "sw", "Q", "m2", herald.WithEventID("m2"), herald.StartIfAbsent("script", nil))
	if err != nil || r.Started || r.Duplicate {
		t.Fatalf("receipt %+v, %v; want a plain enqueue", r, err)
	}
	b.waitFate("m2", history.FateBuffered)
	quSend(b, "sw", "drain", "Q")
	quSend(b, "sw", "end")
	quWantGot(b, "sw", "input", "m1", "m2")
}

func TestQueue_TryDequeue(t *testing.T) {
	t.Parallel()
	type out struct {
		FirstEmpty bool
		Got        []string
	}
	b := setupEnv(t, nil, func(rt *herald.Runtime) {
		herald.RegisterWorkflow(rt, "w", func(ctx *herald.Context, _ struct{}) (out, error) {
			var o out
			var s string
			ok, err := ctx.TryDequeue("Q", &s)
			if err != nil {
				return o, err
			}
			o.FirstEmpty = !ok && s == ""
			// TryDequeue did not wait: the code goes on in the same turn.
			if err := ctx.WaitEvent("go").Get(nil); err != nil {
				return o, err
			}
			for {
				ok, err := ctx.TryDequeue("Q", &s)
				if err != nil {
					return o, err
				}
				if !ok {
					break
				}
				o.Got = append(o.Got, s)
			}
			return o, nil
		})
	})
	b.start("w", "i", nil)
	b.waitExec("i", 1, history.EventSubscribed, history.LanePositional, "go", 1)
	evs := b.history("i", 0)
	try := ofKind(evs, history.EventSubscribed, history.LaneQueue, "Q")
	if len(try) != 1 || !try[0].NoWait || try[0].EventID != "" || try[0].Seq != 2 {
		t.Fatalf("the first TryDequeue: history:%s", dumpHistory(evs))
	}
	want := []string{"m1", "m2", "m3", "m4", "m5"}
	for _, id := range want {
		b.enqueue("i", "Q", id, id)
	}
	// The empty TryDequeue left no receive behind: the messages wait.
	for _, id := range want {
		b.waitFate(id, history.FateBuffered)
	}
	b.raise("i", "go", nil, "ev-go")
	var o out
	b.result("i", &o)
	if !o.FirstEmpty || !slices.Equal(o.Got, want) {
		t.Fatalf("result %+v, want empty first, then %q", o, want)
	}
	evs = b.history("i", 0)
	try = ofKind(evs, history.EventSubscribed, history.LaneQueue, "Q")
	if len(try) != 7 {
		t.Fatalf("%d TryDequeues, want 7; history:%s", len(try), dumpHistory(evs))
	}
	// Receives are numbered per queue, the empty ones too.
	for i, ev := range try {
		wantID := ""
		if i >= 1 && i <= 5 {
			wantID = want[i-1]
		}
		if !ev.NoWait || ev.EventID != wantID || (wantID != "" && ev.WaitNumber != i+1) {
			t.Fatalf("TryDequeue %d: %+v, want %q; history:%s", i+1, ev, wantID, dumpHistory(evs))
		}
		if wantID != "" {
			b.checkFate(wantID, wantFate{Lane: history.LaneQueue, Name: "Q", Fate: history.FateDelivered, Execution: 1, Origin: 1, WaitNumber: i + 1})
		}
	}
	if n := len(ofKind(evs, history.EventSubscribedCancelled, "", "")); n != 0 {
		t.Fatalf("a TryDequeue left a cancellation; history:%s", dumpHistory(evs))
	}
	b.replayAll("i")
}

// ---- cancelled receives consume nothing ----

func TestQueue_SelectLoserDoesNotConsume(t *testing.T) {
	t.Parallel()
	type out struct {
		Winner          int
		First, Then     string
		LoserCancelled  bool
		ThenReadyAtOnce bool
	}
	b := setupEnv(t, nil, func(rt *herald.Runtime) {
		herald.RegisterWorkflow(rt, "w", func(ctx *herald.Context, _ struct{}) (out, error) {
			var o out
			a, bq := ctx.Dequeue("A"), ctx.Dequeue("B")
			o.Winner = ctx.Select(a, bq)
			o.LoserCancelled = errors.Is(a.Get(nil), herald.ErrCanceled)
			if err := bq.Get(&o.First); err != nil {
				return o, err
			}
			if err := ctx.WaitEvent("go").Get(nil); err != nil {
				return o, err
			}
			f := ctx.Dequeue("A")
			o.ThenReadyAtOnce = f.Ready()
			err := f.Get(&o.Then)
			return o, err
		})
	})
	b.start("w", "i", nil)
	b.waitExec("i", 1, history.EventSubscribed, history.LaneQueue, "B", 1)
	b.enqueue("i", "B", "b1", "b1")
	b.waitExec("i", 1, history.EventSubscribedCancelled, history.LaneQueue, "A", 1)
	b.waitExec("i", 1, history.EventSubscribed, history.LanePositional, "go", 1)
	b.enqueue("i", "A", "a1", "a1")
	b.waitFate("a1", history.FateBuffered)
	b.raise("i", "go", nil, "ev-go")
	var o out
	b.result("i", &o)
	if o != (out{Winner: 1, First: "b1", Then: "a1", LoserCancelled: true, ThenReadyAtOnce: true}) {
		t.Fatalf("result %+v", o)
	}
	evs := b.history("i", 0)
	subsA := ofKind(evs, history.EventSubscribed, history.LaneQueue, "A")
	cancels := ofKind(evs, history.EventSubscribedCancelled, "", "")
	if len(subsA) != 2 || len(cancels) != 1 || cancels[0].TaskSeq != subsA[0].Seq || cancels[0].Lane != history.LaneQueue ||
		subsA[1].EventID != "a1" || len(ofKind(evs, history.EventDropped, "", "")) != 0 {
		t.Fatalf("history:%s", dumpHistory(evs))
	}
	b.checkFate("a1", wantFate{Lane: history.LaneQueue, Name: "A", Fate: history.FateDelivered, Execution: 1, Origin: 1, WaitNumber: 2})
	b.checkFate("b1", wantFate{Lane: history.LaneQueue, Name: "B", Fate: history.FateDelivered, Execution: 1, Origin: 1, WaitNumber: 1})
	b.replayAll("i")
}

// A loop racing Dequeue against a timer — the pattern docs/positional.md
// sends to the queue lane — receives every message exactly once, in order, however
// many receives the timer cancels.
func TestQueue_TimerLoopNeverLosesMessages(t *testing.T) {
	t.Parallel()
	const n = 4
	type out struct {
		Got   []string
		Ticks int
	}
	b := setupEnv(t, nil, func(rt *herald.Runtime) {
		herald.RegisterWorkflow(rt, "w", func(ctx *herald.Context, _ struct{}) (out, error) {
			var o out
			for len(o.Got) < n {
				d := ctx.Dequeue("Q")
				if ctx.Select(d, ctx.Timer(20*time.Millisecond)) == 1 {
					o.Ticks++
					continue
				}
				var s string
				if err := d.Get(&s); err != nil {
					return o, err
				}
				o.Got = append(o.Got, s)
			}
			return o, nil
		})
	})
	b.start("w", "i", nil)
	var want []string
	for i := 1; i <= n; i++ {
		// At least two more receives cancelled before each message.
		b.waitExec("i", 1, history.EventSubscribedCancelled, history.LaneQueue, "Q", 2*i)
		id := fmt.Sprintf("m%d", i)
		want = append(want, id)
		b.enqueue("i", "Q", id, id)
	}
	var o out
	b.result("i", &o)
	if !slices.Equal(o.Got, want) || o.Ticks < 2*n {
		t.Fatalf("result %+v, want %q after at least %d ticks", o, want, 2*n)
	}
	evs := b.history("i", 0)
	if d := ofKind(evs, history.EventDropped, "", ""); len(d) != 0 {
		t.Fatalf("drops %+v; history:%s", d, dumpHistory(evs))
	}
	last := 0
	for _, id := range want {
		rec := b.fate(id)
		if rec.Fate != history.FateDelivered || rec.WaitNumber <= last {
			t.Fatalf("fate of %s: %+v (previous wait number %d)", id, rec, last)
		}
		last = rec.WaitNumber
	}
	b.replayAll("i")
}

func TestQueue_DequeueTimeoutThenMessageReceived(t *testing.T) {
	t.Parallel()
	type out struct {
		TimedOut bool
		Got      []string
	}
	b := setupEnv(t, nil, func(rt *herald.Runtime) {
		herald.RegisterWorkflow(rt, "w", func(ctx *herald.Context, _ struct{}) (out, error) {
			var o out
			var s string
			o.TimedOut = errors.Is(ctx.Dequeue("Q", herald.WithTimeout(50*time.Millisecond)).Get(&s), herald.ErrEventTimeout)
			if err := ctx.WaitEvent("go").Get(nil); err != nil {
				return o, err
			}
			for range 2 {
				if err := ctx.Dequeue("Q", herald.WithTimeout(time.Hour)).Get(&s); err != nil {
					return o, err
				}
				o.Got = append(o.Got, s)
			}
			return o, nil
		})
	})
	b.start("w", "i", nil)
	b.waitExec("i", 1, history.EventSubscribed, history.LanePositional, "go", 1)
	b.enqueue("i", "Q", "m1", "m1")
	b.waitFate("m1", history.FateBuffered)
	b.raise("i", "go", nil, "ev-go")
	b.waitExec("i", 1, history.EventSubscribed, history.LaneQueue, "Q", 3)
	b.enqueue("i", "Q", "m2", "m2")
	var o out
	b.result("i", &o)
	if !o.TimedOut || !slices.Equal(o.Got, []string{"m1", "m2"}) {
		t.Fatalf("result %+v, want a timeout, then m1, m2", o)
	}
	evs := b.history("i", 0)
	subs := ofKind(evs, history.EventSubscribed, history.LaneQueue, "Q")
	cancels := ofKind(evs, history.EventSubscribedCancelled, "", "")
	timers := ofKind(evs, history.TimerCreated, "", "")
	fired := ofKind(evs, history.TimerFired, "", "")
	timerCancels := ofKind(evs, history.TimerCancelled, "", "")
	m2 := b.one(evs, "m2")
	// Receive 1 timed out and was withdrawn; receive 2 took m1 at once (no
	// timer); receive 3 got m2 and cancelled its timer.
	if len(subs) != 3 || len(cancels) != 1 || len(timers) != 2 || len(fired) != 1 || len(timerCancels) != 1 ||
		cancels[0].TaskSeq != subs[0].Seq || cancels[0].Lane != history.LaneQueue || fired[0].TaskSeq != timers[0].Seq ||
		subs[1].EventID != "m1" || subs[1].WaitNumber != 2 || timers[1].Seq != subs[2].Seq+1 ||
		m2.Kind != history.EventRaised || m2.TaskSeq != subs[2].Seq || m2.WaitNumber != 3 || timerCancels[0].TaskSeq != timers[1].Seq ||
		len(ofKind(evs, history.EventDropped, "", "")) != 0 {
		t.Fatalf("history:%s", dumpHistory(evs))
	}
	b.checkFate("m1", wantFate{Lane: history.LaneQueue, Name: "Q", Fate: history.FateDelivered, Execution: 1, Origin: 1, WaitNumber: 2})
	b.checkFate("m2", wantFate{Lane: history.LaneQueue, Name: "Q", Fate: history.FateDelivered, Execution: 1, Origin: 1, WaitNumber: 3})
	b.replayAll("i")
}

// ---- the client side ----

func TestQueue_DedupWithEventID(t *testing.T) {
	t.Parallel()
	b := setupEnv(t, nil, registerScript)
	b.start("script", "i", nil)
	b.start("script", "other", nil)
	quReady(b, "i", 1, 1)
	first := b.enqueue("i", "Q", "one", "e1")
	again, err := b.client.Enqueue(b.ctx, "i", "Q", "another payload", herald.WithEventID("e1"))
	if err != nil || !again.Duplicate || again.EventID != "e1" || !again.ReceivedAt.Equal(first.ReceivedAt) {
		t.Fatalf("second enqueue of e1: %+v, %v; first %+v", again, err, first)
	}
	// The id is taken for this instance, lane and queue.
	for name, send := range map[string]func() error{
		"positional lane": func() error {
			_, err := b.client.RaiseEvent(b.ctx, "i", "Q", "x", herald.WithEventID("e1"))
			return err
		},
		"other queue": func() error { _, err := b.client.Enqueue(b.ctx, "i", "R", "x", herald.WithEventID("e1")); return err },
		"other instance": func() error {
			_, err := b.client.Enqueue(b.ctx, "other", "Q", "x", herald.WithEventID("e1"))
			return err
		},
	} {
		if err := send(); !errors.Is(err, herald.ErrEventIDConflict) {
			t.Errorf("e1 on the %s: %v, want ErrEventIDConflict", name, err)
		}
	}
	b.waitFate("e1", history.FateBuffered)
	quSend(b, "i", "take", "Q")
	b.waitFate("e1", history.FateDelivered)
	quReady(b, "i", 1, 2)
	// After delivery too: a duplicate changes nothing.
	again, err = b.client.Enqueue(b.ctx, "i", "Q", "one", herald.WithEventID("e1"))
	if err != nil || !again.Duplicate {
		t.Fatalf("enqueue of e1 after delivery: %+v, %v", again, err)
	}
	quSend(b, "i", "try", "Q")
	quSend(b, "i", "end")
	quWantGot(b, "i", "one", "-")
	b.checkFate("e1", wantFate{Lane: history.LaneQueue, Name: "Q", Fate: history.FateDelivered, Execution: 1, Origin: 1, WaitNumber: 1})
	recs, err := b.client.Events(b.ctx, "i")
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, r := range recs {
		if r.EventID == "e1" {
			n++
		}
	}
	if n != 1 {
		t.Fatalf("e1 listed %d times", n)
	}
	if evs := b.history("i", 0); len(ofKind(evs, history.EventRaised, "", "Q")) != 1 {
		t.Fatalf("e1 reached the instance more than once:%s", dumpHistory(evs))
	}
}

func TestQueue_EnqueueToEndedInstance(t *testing.T) {
	t.Parallel()
	b := setupEnv(t, nil, registerScript)
	b.start("script", "done", nil)
	quSend(b, "done", "end")
	quWantGot(b, "done")
	b.start("script", "killed", nil)
	quReady(b, "killed", 1, 1)
	if err := b.client.Terminate(b.ctx, "killed", "stop"); err != nil {
		t.Fatal(err)
	}
	b.waitDone("killed")
	for _, id := range []string{"done", "killed"} {
		before := b.history(id, 0)
		recsBefore, err := b.client.Events(b.ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		eventID := "late-" + id
		if _, err := b.client.Enqueue(b.ctx, id, "Q", "late", herald.WithEventID(eventID)); !errors.Is(err, herald.ErrInstanceNotRunning) {
			t.Fatalf("enqueue to %s: %v, want ErrInstanceNotRunning", id, err)
		}
		if _, err := b.client.EventFate(b.ctx, eventID); !errors.Is(err, herald.ErrNotFound) {
			t.Fatalf("fate of the refused message: %v, want ErrNotFound", err)
		}
		recs, err := b.client.Events(b.ctx, id)
		if err != nil || len(recs) != len(recsBefore) {
			t.Fatalf("events of %s: %d, %v; %d before", id, len(recs), err, len(recsBefore))
		}
		if after := b.history(id, 0); !reflect.DeepEqual(after, before) {
			t.Fatalf("history of %s changed:%s", id, dumpHistory(after))
		}
		// A refused id is not taken: nothing was stored.
		if _, err := b.client.Enqueue(b.ctx, "fresh", "Q", "x", herald.WithEventID(eventID)); err != nil {
			t.Fatalf("reuse of the refused id %s: %v", eventID, err)
		}
	}
}

func TestQueue_EventsListsBothLanes(t *testing.T) {
	t.Parallel()
	b := setupEnv(t, nil, registerScript)
	b.start("script", "i", nil)
	quReady(b, "i", 1, 1)
	b.enqueue("i", "Q", "q1", "q1")
	b.raise("i", "Q", "p1", "p1")
	b.enqueue("i", "R", "q2", "q2")
	b.waitFate("q2", history.FateBuffered)
	quSend(b, "i", "take", "Q")
	b.waitFate("q1", history.FateDelivered)
	quSend(b, "i", "end")
	quWantGot(b, "i", "q1")

	recs, err := b.client.Events(b.ctx, "i")
	if err != nil {
		t.Fatal(err)
	}
	type rec struct {
		ID     string
		Lane   history.Lane
		Name   string
		Fate   history.Fate
		Reason history.DropReason
	}
	var got []rec
	cmds := 0
	for _, r := range recs {
		if r.InstanceID != "i" {
			t.Fatalf("record of another instance: %+v", r)
		}
		if r.Name == "cmd" {
			cmds++
			if r.Lane != history.LanePositional || r.Fate != history.FateDelivered {
				t.Fatalf("command %+v", r)
			}
			continue
		}
		got = append(got, rec{r.EventID, r.Lane, r.Name, r.Fate, r.Reason})
	}
	// Oldest first; the instance ended with p1 and q2 still buffered.
	want := []rec{
		{"q1", history.LaneQueue, "Q", history.FateDelivered, ""},
		{"p1", history.LanePositional, "Q", history.FateDropped, history.DropInstanceTerminal},
		{"q2", history.LaneQueue, "R", history.FateDropped, history.DropInstanceTerminal},
	}
	if !reflect.DeepEqual(got, want) || cmds != 2 {
		t.Fatalf("events %+v (%d commands), want %+v", got, cmds, want)
	}
	queued, err := b.client.Events(b.ctx, "i", herald.EventFilter{Lane: history.LaneQueue})
	if err != nil {
		t.Fatal(err)
	}
	if len(queued) != 2 || queued[0].EventID != "q1" || queued[1].EventID != "q2" {
		t.Fatalf("queue-lane events %+v, want q1, q2", queued)
	}
	evs := b.history("i", 0)
	for _, w := range want[1:] {
		ev := withID(evs, w.ID)
		if last := ev[len(ev)-1]; last.Kind != history.EventDropped || last.Lane != w.Lane || last.Reason != history.DropInstanceTerminal {
			t.Fatalf("breadcrumb of %s: %+v; history:%s", w.ID, last, dumpHistory(evs))
		}
	}
}
