package herald_test

// End-to-end tests of latest-value queues (docs/queue.md, "Latest-value
// queues"), from seed 001's Task 5 ("Event Buffering") on Herald's terms
// (docs/decisions.md): seed 001's one-event-per-name, last-write-wins
// buffer is a queue-lane `buffer: latest` event definition, here with a JSON Schema, so every scenario also
// runs through schema validation. The seed's TestWorkflow sleeps, then waits
// for "approval"; its sleep is a one-hour durable timer here, and the seed's
// advanceAlarm is clock.Virtual.Advance, so "the workflow is still sleeping when
// the event is sent" holds by construction, not by a race.

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/heraldwf/herald"
	"github.com/heraldwf/herald/clock"
	"github.com/heraldwf/herald/history"
)

// s1Schema is the "approval" payload schema of the seed's TestWorkflow.
const s1Schema = `{"type":"object","properties":{"approved":{"type":"boolean"}},"required":["approved"]}`

// s1Sleep is how long s1Workflow sleeps before it waits for "approval".
const s1Sleep = time.Hour

type s1Input struct{ Name string }

type s1Approval struct {
	Approved bool `json:"approved"`
}

type s1Result struct {
	Message  string
	Greeting string
}

// s1Workflow is the seed's TestWorkflow: sleep, then take the latest
// "approval" message from the queue lane.
func s1Workflow(ctx *herald.Context, in s1Input) (s1Result, error) {
	if err := ctx.Sleep(s1Sleep); err != nil {
		return s1Result{}, err
	}
	var a s1Approval
	if err := ctx.Dequeue("approval").Get(&a); err != nil {
		return s1Result{}, err
	}
	verdict := "was rejected"
	if a.Approved {
		verdict = "was approved"
	}
	return s1Result{Message: in.Name + " " + verdict, Greeting: "Hello, " + in.Name + "!"}, nil
}

// s1Echo is the seed's EchoWorkflow: it completes at once.
func s1Echo(_ *herald.Context, in string) (string, error) { return in, nil }

// s1Setup starts a runtime on the controllable clock with the seed's
// workflows and puts the "approval" definition (buffer: latest, schema).
func s1Setup(t *testing.T) (*bundle, *clock.Virtual) {
	t.Helper()
	clock := clock.NewVirtual(time.Now())
	b := setupEnv(t, &herald.Config{ClientConfig: herald.ClientConfig{Clock: clock}}, func(rt *herald.Runtime) {
		herald.RegisterWorkflow(rt, "test-workflow", s1Workflow)
		herald.RegisterWorkflow(rt, "echo", s1Echo)
	})
	def, err := b.client.PutEventDefinition(b.ctx, herald.EventDefinition{
		Name: "approval", Buffer: "latest", Schema: json.RawMessage(s1Schema),
	})
	if err != nil {
		t.Fatalf("put definition: %v", err)
	}
	if def.Buffer != "latest" || def.Name != "approval" {
		t.Fatalf("stored definition %+v", def)
	}
	return b, clock
}

// s1StartSleeping starts s1Workflow and waits until it sleeps: its timer is
// created and nothing waits for "approval" yet.
func s1StartSleeping(b *bundle, id, name string) {
	b.t.Helper()
	b.start("test-workflow", id, s1Input{Name: name})
	b.waitHistory(id, history.TimerCreated, "", 1)
	info, err := b.client.Status(b.ctx, id)
	if err != nil {
		b.t.Fatal(err)
	}
	evs := b.history(id, 0)
	if info.Status != herald.StatusRunning || countKind(evs, history.TimerFired, "") != 0 ||
		countKind(evs, history.EventSubscribed, "approval") != 0 {
		b.t.Fatalf("%s is not sleeping: status %s, history:%s", id, info.Status, dumpHistory(evs))
	}
}

// s1Wake fires the sleep timer of every s1Workflow (the seed's advanceAlarm).
func s1Wake(clock *clock.Virtual) { clock.Advance(s1Sleep + time.Minute) }

// s1WantNothingStored checks that eventID left no trace: no fate record, no
// event listed for the instance beyond wantEvents, and (when before is not
// nil) the instance's history unchanged.
func s1WantNothingStored(b *bundle, id, eventID string, wantEvents int, before []history.Event) {
	b.t.Helper()
	b.wantNoFate(eventID)
	recs := b.events(id)
	if len(recs) != wantEvents {
		b.t.Fatalf("%s has %d events, want %d", id, len(recs), wantEvents)
	}
	for _, r := range recs {
		if r.EventID == eventID {
			b.t.Fatalf("refused event listed: %+v", r)
		}
	}
	if before != nil {
		after := b.history(id, 0)
		if len(after) != len(before) {
			b.t.Fatalf("history changed by a refused event:%s\nwas:%s", dumpHistory(after), dumpHistory(before))
		}
	}
}

func TestLatestQueue_BufferedBeforeWaitAndDelivered(t *testing.T) {
	t.Parallel()
	b, clock := s1Setup(t)
	s1StartSleeping(b, "eb-buffer-deliver-1", "BufferTest")

	// Sent before the workflow reaches Dequeue: accepted, not refused.
	b.enqueue("eb-buffer-deliver-1", "approval", s1Approval{Approved: true}, "ev-1")
	rec := b.waitFate("ev-1", history.FateBuffered)
	if rec.Lane != history.LaneQueue || rec.Name != "approval" || rec.Execution != 1 || rec.WaitNumber != 0 {
		t.Fatalf("buffered record %+v", rec)
	}
	evs := b.history("eb-buffer-deliver-1", 0)
	if raised := withID(ofKind(evs, history.EventRaised, history.LaneQueue, ""), "ev-1"); len(raised) != 1 || raised[0].TaskSeq != 0 ||
		countKind(evs, history.TimerFired, "") != 0 {
		t.Fatalf("want ev-1 buffered while sleeping, history:%s", dumpHistory(evs))
	}

	s1Wake(clock)
	out := resultOf[s1Result](b, "eb-buffer-deliver-1")
	if want := (s1Result{Message: "BufferTest was approved", Greeting: "Hello, BufferTest!"}); out != want {
		t.Fatalf("result %+v, want %+v", out, want)
	}
	rec = b.fate("ev-1")
	if rec.Fate != history.FateDelivered || rec.WaitNumber != 1 || rec.Execution != 1 || rec.OriginExecution != 1 {
		t.Fatalf("fate %+v, want delivered to receive 1 of execution 1", rec)
	}
	// The Dequeue, made after the timer fired, took the buffered message at
	// once: its subscription names the event, and nothing else was raised.
	evs = b.history("eb-buffer-deliver-1", 0)
	subs := ofKind(evs, history.EventSubscribed, history.LaneQueue, "")
	raised := ofKind(evs, history.EventRaised, "", "")
	fired := ofKind(evs, history.TimerFired, "", "")
	if len(subs) != 1 || len(raised) != 1 || len(fired) != 1 || subs[0].EventID != "ev-1" || subs[0].WaitNumber != 1 ||
		raised[0].Seq > fired[0].Seq || subs[0].Seq < fired[0].Seq || countKind(evs, history.EventDropped, "") != 0 {
		t.Fatalf("history:%s", dumpHistory(evs))
	}
}

func TestLatestQueue_LastWriteWins(t *testing.T) {
	t.Parallel()
	b, clock := s1Setup(t)
	const id = "eb-last-write-wins-1"
	s1StartSleeping(b, id, "LastWrite")

	b.enqueue(id, "approval", s1Approval{Approved: false}, "ev-first")
	b.enqueue(id, "approval", s1Approval{Approved: true}, "ev-second")

	// The second supersedes the first while both wait for a Dequeue. The
	// instance takes messages in arrival order, so once the second is
	// buffered the first has had its fate.
	b.waitFate("ev-second", history.FateBuffered)
	first := b.fate("ev-first")
	if first.Fate != history.FateDropped || first.Reason != history.DropSuperseded || first.Lane != history.LaneQueue {
		t.Fatalf("first message %+v, want dropped/superseded on the queue lane", first)
	}
	evs := b.history(id, 0)
	drops := ofKind(evs, history.EventDropped, "", "")
	raisedFirst := withID(ofKind(evs, history.EventRaised, history.LaneQueue, ""), "ev-first")
	if len(drops) != 1 || len(raisedFirst) != 1 {
		t.Fatalf("want one breadcrumb for ev-first, history:%s", dumpHistory(evs))
	}
	if d := drops[0]; d.EventID != "ev-first" || d.Lane != history.LaneQueue || d.Name != "approval" ||
		d.Reason != history.DropSuperseded || d.Seq < raisedFirst[0].Seq {
		t.Fatalf("breadcrumb %+v, history:%s", d, dumpHistory(evs))
	}
	b.wantWarn("herald: event dropped", "event_id=ev-first", "reason=superseded", "lane=queue")

	s1Wake(clock)
	out := resultOf[s1Result](b, id)
	if want := (s1Result{Message: "LastWrite was approved", Greeting: "Hello, LastWrite!"}); out != want {
		t.Fatalf("result %+v, want %+v (the last write)", out, want)
	}
	if rec := b.fate("ev-second"); rec.Fate != history.FateDelivered || rec.WaitNumber != 1 {
		t.Fatalf("second message %+v, want delivered to receive 1", rec)
	}
	if rec := b.fate("ev-first"); rec.Fate != history.FateDropped || rec.Reason != history.DropSuperseded {
		t.Fatalf("first message after completion %+v, want still dropped/superseded", rec)
	}
	dropped, err := b.client.Events(b.ctx, id, herald.EventFilter{Lane: history.LaneQueue, Fate: history.FateDropped})
	if err != nil {
		t.Fatal(err)
	}
	if len(dropped) != 1 || dropped[0].EventID != "ev-first" {
		t.Fatalf("dropped events %+v, want ev-first only", dropped)
	}
	if n := b.obs.droppedBy(string(history.DropSuperseded)); n != 1 {
		t.Fatalf("superseded drops counted: %d, want 1", n)
	}
}

// The seed's last-write-wins also holds for messages sent before the
// instance exists: they are kept for it, and the newest one wins at start.
func TestLatestQueue_LastWriteWinsBeforeStart(t *testing.T) {
	t.Parallel()
	b, clock := s1Setup(t)
	const id = "eb-before-start-1"
	b.enqueue(id, "approval", s1Approval{Approved: true}, "ev-a")
	b.enqueue(id, "approval", s1Approval{Approved: false}, "ev-b")
	for _, ev := range []string{"ev-a", "ev-b"} {
		if rec := b.fate(ev); rec.Fate != history.FatePending {
			t.Fatalf("%s before start: %+v, want pending", ev, rec)
		}
	}
	s1StartSleeping(b, id, "Early")
	b.waitFate("ev-b", history.FateBuffered)
	if rec := b.fate("ev-a"); rec.Fate != history.FateDropped || rec.Reason != history.DropSuperseded {
		t.Fatalf("ev-a %+v, want dropped/superseded", rec)
	}
	s1Wake(clock)
	if out := resultOf[s1Result](b, id); out.Message != "Early was rejected" {
		t.Fatalf("result %+v, want the last message (rejected)", out)
	}
	if rec := b.fate("ev-b"); rec.Fate != history.FateDelivered {
		t.Fatalf("ev-b %+v, want delivered", rec)
	}
}

func TestLatestQueue_RejectedForCompletedInstance(t *testing.T) {
	t.Parallel()
	b, _ := s1Setup(t)
	const id = "eb-completed-reject-1"
	b.start("echo", id, "done")
	if info := b.waitDone(id); info.Status != herald.StatusCompleted {
		t.Fatalf("status %s, want completed", info.Status)
	}
	before := b.history(id, 0)

	_, err := b.client.Enqueue(b.ctx, id, "approval", s1Approval{Approved: true}, herald.WithEventID("ev-late"))
	if !errors.Is(err, herald.ErrInstanceNotRunning) || errors.Is(err, herald.ErrEventInvalid) {
		t.Fatalf("enqueue to a completed instance: %v, want ErrInstanceNotRunning", err)
	}
	s1WantNothingStored(b, id, "ev-late", 0, before)
	// The positional lane refuses it too.
	_, err = b.client.RaiseEvent(b.ctx, id, "approval", s1Approval{Approved: true}, herald.WithEventID("ev-late-2"))
	if !errors.Is(err, herald.ErrInstanceNotRunning) {
		t.Fatalf("raise to a completed instance: %v, want ErrInstanceNotRunning", err)
	}
	s1WantNothingStored(b, id, "ev-late-2", 0, before)
	if info, err := b.client.Status(b.ctx, id); err != nil || info.Status != herald.StatusCompleted {
		t.Fatalf("status after refused events: %+v, %v", info, err)
	}
}

func TestLatestQueue_RejectedForTerminatedInstance(t *testing.T) {
	t.Parallel()
	b, _ := s1Setup(t)
	const id = "eb-terminated-reject-1"
	s1StartSleeping(b, id, "Terminated")
	// A message buffered before the end is dropped with the instance.
	b.enqueue(id, "approval", s1Approval{Approved: true}, "ev-early")
	b.waitFate("ev-early", history.FateBuffered)

	if err := b.client.Terminate(b.ctx, id, "test"); err != nil {
		t.Fatal(err)
	}
	info, err := b.client.Status(b.ctx, id)
	if err != nil || info.Status != herald.StatusTerminated {
		t.Fatalf("status %+v, %v; want terminated", info, err)
	}
	if rec := b.fate("ev-early"); rec.Fate != history.FateDropped || rec.Reason != history.DropInstanceTerminal {
		t.Fatalf("buffered message at termination %+v, want dropped/instance_terminal", rec)
	}
	before := b.history(id, 0)

	_, err = b.client.Enqueue(b.ctx, id, "approval", s1Approval{Approved: true}, herald.WithEventID("ev-late"))
	if !errors.Is(err, herald.ErrInstanceNotRunning) {
		t.Fatalf("enqueue to a terminated instance: %v, want ErrInstanceNotRunning", err)
	}
	s1WantNothingStored(b, id, "ev-late", 1, before)
	_, err = b.client.RaiseEvent(b.ctx, id, "approval", s1Approval{Approved: true}, herald.WithEventID("ev-late-2"))
	if !errors.Is(err, herald.ErrInstanceNotRunning) {
		t.Fatalf("raise to a terminated instance: %v, want ErrInstanceNotRunning", err)
	}
	s1WantNothingStored(b, id, "ev-late-2", 1, before)
}

func TestLatestQueue_SchemaValidatedWhenBuffering(t *testing.T) {
	t.Parallel()
	b, clock := s1Setup(t)
	const id = "eb-validation-1"
	s1StartSleeping(b, id, "Validate")
	before := b.history(id, 0)

	cases := []struct {
		eventID string
		payload any
		reason  func(string) bool
	}{
		{"ev-bad-type", map[string]any{"approved": "not-a-boolean"}, func(r string) bool {
			return strings.HasPrefix(r, "/approved: ") && strings.Contains(r, "string") && strings.Contains(r, "boolean")
		}},
		{"ev-missing", map[string]any{"ok": true}, func(r string) bool {
			return strings.HasPrefix(r, "/: ") && strings.Contains(r, "approved")
		}},
		{"ev-not-object", "yes", func(r string) bool {
			return strings.HasPrefix(r, "/: ") && strings.Contains(r, "object")
		}},
	}
	for _, c := range cases {
		_, err := b.client.Enqueue(b.ctx, id, "approval", c.payload, herald.WithEventID(c.eventID))
		if !errors.Is(err, herald.ErrEventInvalid) {
			t.Fatalf("%s: %v, want ErrEventInvalid", c.eventID, err)
		}
		var inv *herald.EventInvalidError
		if !errors.As(err, &inv) || inv.Name != "approval" || len(inv.Reasons) == 0 {
			t.Fatalf("%s: %#v, want an *EventInvalidError for approval with reasons", c.eventID, err)
		}
		found := false
		for _, r := range inv.Reasons {
			found = found || c.reason(r)
		}
		if !found {
			t.Fatalf("%s: reasons %q do not say what is wrong", c.eventID, inv.Reasons)
		}
		s1WantNothingStored(b, id, c.eventID, 0, before)
	}

	// A valid one is accepted afterwards, and the refused ids are free.
	b.enqueue(id, "approval", s1Approval{Approved: true}, "ev-bad-type")
	b.waitFate("ev-bad-type", history.FateBuffered)
	s1Wake(clock)
	if out := resultOf[s1Result](b, id); out.Message != "Validate was approved" {
		t.Fatalf("result %+v", out)
	}
	if rec := b.fate("ev-bad-type"); rec.Fate != history.FateDelivered {
		t.Fatalf("fate %+v, want delivered", rec)
	}
	recs, err := b.client.Events(b.ctx, id)
	if err != nil || len(recs) != 1 {
		t.Fatalf("events %+v, %v; want the valid one only", recs, err)
	}
}

func TestLatestQueue_DirectDeliveryWhileWaiting(t *testing.T) {
	t.Parallel()
	b, clock := s1Setup(t)
	const id = "eb-direct-delivery-1"
	s1StartSleeping(b, id, "Direct")
	s1Wake(clock)
	b.waitHistory(id, history.EventSubscribed, "approval", 1)
	if info, err := b.client.Status(b.ctx, id); err != nil || info.Status != herald.StatusRunning {
		t.Fatalf("status %+v, %v; want running (waiting)", info, err)
	}

	b.enqueue(id, "approval", s1Approval{Approved: true}, "ev-direct")
	out := resultOf[s1Result](b, id)
	if want := (s1Result{Message: "Direct was approved", Greeting: "Hello, Direct!"}); out != want {
		t.Fatalf("result %+v, want %+v", out, want)
	}
	if rec := b.fate("ev-direct"); rec.Fate != history.FateDelivered || rec.WaitNumber != 1 || rec.Execution != 1 {
		t.Fatalf("fate %+v, want delivered to receive 1", rec)
	}
	// Delivered to the waiting receive, not buffered first.
	evs := b.history(id, 0)
	subs := ofKind(evs, history.EventSubscribed, history.LaneQueue, "")
	raised := withID(ofKind(evs, history.EventRaised, history.LaneQueue, ""), "ev-direct")
	if len(subs) != 1 || len(raised) != 1 || subs[0].EventID != "" || raised[0].TaskSeq != subs[0].Seq ||
		raised[0].WaitNumber != 1 || raised[0].Seq < subs[0].Seq {
		t.Fatalf("history:%s", dumpHistory(evs))
	}
}
