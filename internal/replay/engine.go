// Package replay is Herald's replay engine: given an execution's history and
// the new inbox messages, it re-runs the workflow code deterministically,
// checks it against history, applies the event-lane rules to new arrivals and
// returns the turn's outcome (new history events, outgoing work, fates,
// status). It does no I/O.
//
// The model: history is an ordered log of inputs (start, activity results,
// timer firings, arriving events) and decisions (what the code did in
// reaction). The code runs as a coroutine that only advances when the engine
// lets it; after each input the code runs until it blocks, and the decisions
// it makes must equal the decisions recorded after that input, in order.
// Because the code runs to quiescence between inputs, the order of
// decisions and inputs is fully determined, which is what makes the
// positional lane's "Nth event pairs with the Nth active wait" well defined.
//
// An event is consumed only by a receive whose result the workflow got: a
// receive that loses a Select after it received gives the event back, as a
// decision (its EventSubscribedCancelled names the event; see
// State.giveBack). A flood past a lane's limit adds one breadcrumb per
// burst to history, not one per event (history.Event.Count); the fate
// ledger still has every event.
package replay

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"runtime/debug"
	"slices"
	"time"

	"github.com/google/uuid"

	"github.com/heraldwf/herald/heraldtype"
	"github.com/heraldwf/herald/history"
	"github.com/heraldwf/herald/storage"
)

// WorkflowFunc is the engine's view of a workflow: JSON in, JSON out.
type WorkflowFunc func(s *State, input json.RawMessage) (json.RawMessage, error)

// Limits are the event-lane limits (docs/positional.md, docs/queue.md).
type Limits struct {
	// MaxUnconsumedEvents caps buffered positional events per instance
	// across names. Default 100.
	MaxUnconsumedEvents int
	// MaxCarryForwardExecutions: an event is carried across at most this
	// many continue-as-new boundaries. Default 5.
	MaxCarryForwardExecutions int
	// MaxQueuedEvents caps unconsumed queue-lane messages per instance
	// across queues. Default 20.
	MaxQueuedEvents int
}

func (l Limits) withDefaults() Limits {
	if l.MaxQueuedEvents <= 0 {
		l.MaxQueuedEvents = 20
	}
	if l.MaxUnconsumedEvents <= 0 {
		l.MaxUnconsumedEvents = 100
	}
	if l.MaxCarryForwardExecutions <= 0 {
		l.MaxCarryForwardExecutions = 5
	}
	return l
}

// Input is one turn's input.
type Input struct {
	InstanceID string
	Workflow   WorkflowFunc
	// History is the current execution's history; it starts with
	// ExecutionStarted.
	History  []history.Event
	Messages []storage.Message
	// Now is the turn's time: new history events are stamped with it.
	Now    time.Time
	Limits Limits
	// Query, when set, makes the run a read-only query (query.go): after
	// the replay the query is answered from the workflow's state; the
	// output is for the caller to discard.
	Query *Query
	// Go, when set, starts the goroutine the workflow's code runs on (the
	// coroutine; see startCode) instead of a go statement: the runtime's
	// pool of reused goroutines (internal/gopool), whose stacks are grown
	// already. It must run fn on a goroutine of its own, without waiting
	// for it, and recover nothing.
	Go func(fn func())
}

// Output is one turn's outcome.
type Output struct {
	NewEvents        []history.Event
	Consumed         []int64
	Activities       []storage.ActivityTask
	Timers           []storage.TimerSchedule
	CancelTimers     []int
	CancelActivities []int
	Fates            []storage.FateUpdate
	Status           heraldtype.Status
	Result           json.RawMessage
	Failure          *history.Failure
	ContinueAsNew    *storage.ContinueAsNewParams
	// Drops lists the drop breadcrumbs this turn wrote (in NewEvents or in
	// the next execution's start events), for logs and metrics. A
	// breadcrumb of a burst of limit drops stands for Count events
	// (history.Event.Count).
	Drops []history.Event
	// ContinuedDrops reports the limit drops of this turn that continue a
	// burst an earlier turn opened: they have fates but no breadcrumb. One
	// entry per burst, shaped like a breadcrumb (no Seq): Count events,
	// EventID the first and LastEventID the last of them.
	ContinuedDrops []history.Event
	// CorrelatedWaits are correlated-lane waits made this turn: the store
	// registers a marker for each (or delivers a correlated event that
	// already exists).
	CorrelatedWaits []CorrelatedWait
	// CancelCorrelatedWaits are the seqs of correlated waits withdrawn this
	// turn: their markers are removed.
	CancelCorrelatedWaits []int
	// ReturnedCorrelated are the correlated-lane events that waits gave back
	// this turn (a wait that had received one lost a Select). Their copies
	// are dropped here (withdrawn_wait); the store hands a delete-after-first
	// event on, as for a withdrawn wait, and leaves a fan-out one, which is
	// still stored (storage.TurnCommitParams.ReturnedCorrelated).
	ReturnedCorrelated []storage.ReturnedCorrelated
	// Publish are the events the turn published to the bus (ctx.Publish):
	// the store commits them with the turn.
	Publish []storage.BusPublishEvent
	// Attributes are the attribute upserts this turn decided
	// (attributes.go), in order: the store applies them to the instance.
	Attributes []storage.Attribute
	// StartChildren are the child workflows the turn started
	// (ctx.CallWorkflow); CancelChildren the ids of children it asked to
	// cancel (child.go).
	StartChildren  []storage.ChildStart
	CancelChildren []string
	// Sends are the events the turn sent to instances (ctx.RaiseEvent,
	// ctx.Enqueue; send.go): the store commits them with the turn.
	Sends []storage.TurnSend
}

// CorrelatedWait is a wait on (event definition, key).
type CorrelatedWait struct {
	TaskSeq int
	Def     string
	Key     string
}

// Future is the engine's future: resolved by an input (or at once), or
// cancelled as a select loser.
type Future struct {
	s      *State
	name   string
	done   bool
	value  json.RawMessage
	err    error
	onDone []func()
	cancel func() // records the cancellation decision; nil for plain futures

	// A receive (WaitEvent, Dequeue, WaitCorrelated: lane, name and its
	// subscription seq) holds the event it took in got until the workflow
	// gets its result (observed); if it loses a Select before that, it
	// gives the event back (see Select). A timeout wrapper's inner is the
	// receive it wraps.
	lane     history.Lane
	seq      int
	inner    *Future
	got      *Buffered
	observed bool

	child string // a child workflow's instance id (child.go)
}

// Ready reports whether the future has resolved.
func (f *Future) Ready() bool { return f.done }

// Get blocks the workflow until the future resolves.
func (f *Future) Get() (json.RawMessage, error) {
	f.s.block(func() bool { return f.done })
	f.observed = true
	return f.value, f.err
}

// Cancel cancels an unresolved future (recording the cancellation in
// history); a resolved future is left as it is.
func (f *Future) Cancel() {
	if !f.done && f.cancel != nil {
		f.cancel()
	}
}

func (f *Future) resolve(v json.RawMessage, err error) {
	if f.done {
		return
	}
	f.done, f.value, f.err = true, v, err
	cbs := f.onDone
	f.onDone = nil
	for _, cb := range cbs {
		cb()
	}
}

// returnable reports whether f is a receive holding an event whose result
// the workflow has not got.
func (f *Future) returnable() bool {
	return f.lane != "" && f.done && f.err == nil && f.got != nil && !f.observed
}

// giveBack gives back the event a losing receive took (State.giveBack);
// the receive (and its timeout wrapper) then reports ErrCanceled.
func (f *Future) giveBack() {
	r := f
	if f.inner != nil {
		r = f.inner
	}
	if !f.s.giveBack(r.lane, r.name, r.seq, r.got) {
		return
	}
	r.got, r.value, r.err = nil, nil, ErrCanceled
	f.got, f.value, f.err = nil, nil, ErrCanceled
}

func (f *Future) then(cb func()) {
	if f.done {
		cb()
		return
	}
	f.onDone = append(f.onDone, cb)
}

// State is one turn's replay state; workflow code reaches it through
// herald.Context.
type State struct {
	in        *Input
	limits    Limits
	workflow  string
	input     json.RawMessage
	execution int
	now       time.Time
	replaying bool

	hist    []history.Event
	cursor  int
	nextSeq int
	out     *Output

	lane        *Positional
	queue       *Queue
	correlated  []CorrelatedWait // active correlated waits, oldest first
	waitNumbers map[int]int      // subscription seq → wait number
	receives    map[string]int
	bursts      map[string]burst // open bursts of limit drops, by lane and name
	futures     map[int]*Future
	uuids       int
	versions    map[string]int // ctx.Version's answers, by change id (version.go)
	random      *rand.Rand     // ctx.Random's source (version.go)

	// coroutine: the engine and the code take turns, each sending on its
	// channel, then waiting on the other's. The channels hold one value,
	// so that a send never waits for the other side to be scheduled: the
	// code's goroutine finishes (and goes back to Input.Go's pool) without
	// waiting for the engine's to run again.
	resume   chan bool // true: abort
	yield    chan struct{}
	started  bool
	exited   bool
	aborting bool
	finished bool // the workflow returned (completed, failed, continued)
	can      *ContinueAsNewError
	fatal    *NondeterminismError

	queries  map[string]QueryHandler      // query.go
	querying bool                         // a query handler runs
	attrs    map[string]storage.Attribute // attributes.go: the instance's, as replayed
	cancel   cancelState                  // cancel.go
}

// InstanceID returns the instance being run.
func (s *State) InstanceID() string { return s.in.InstanceID }

// Execution returns the execution number.
func (s *State) Execution() int { return s.execution }

// WorkflowName returns the workflow's registered name.
func (s *State) WorkflowName() string { return s.workflow }

// Now returns the deterministic current time: the time of the input being
// processed.
func (s *State) Now() time.Time { return s.now }

// IsReplaying reports whether the code is re-running over stored history;
// always while it runs to answer a query (Input.Query), so that it logs
// nothing.
func (s *State) IsReplaying() bool { return s.replaying || s.in.Query != nil }

var uuidNamespace = uuid.MustParse("5b0a3c9e-8f6d-4b1e-9a57-0c4f2d7e6a11")

// NewUUID returns a deterministic UUID: the same on every replay.
func (s *State) NewUUID() string {
	s.uuids++
	return uuid.NewSHA1(uuidNamespace, fmt.Appendf(nil, "%s/%d/%d", s.in.InstanceID, s.execution, s.uuids)).String()
}

// Run runs one turn. It never returns an error for workflow problems: a
// non-deterministic or panicking workflow is reported as a failed status in
// the output. An error means the input itself is malformed.
func Run(in *Input) (*Output, error) {
	if len(in.History) == 0 || in.History[0].Kind != history.ExecutionStarted {
		return nil, errors.New("replay: history must start with ExecutionStarted")
	}
	if in.Workflow == nil {
		return nil, errors.New("replay: no workflow function")
	}
	start := in.History[0]
	s := &State{
		in:          in,
		limits:      in.Limits.withDefaults(),
		workflow:    start.Workflow,
		input:       start.Input,
		execution:   start.Execution,
		now:         start.Time,
		hist:        in.History,
		cursor:      1,
		nextSeq:     in.History[len(in.History)-1].Seq + 1,
		out:         &Output{Status: heraldtype.StatusRunning},
		waitNumbers: map[int]int{},
		receives:    map[string]int{},
		bursts:      map[string]burst{},
		futures:     map[int]*Future{},
		versions:    map[string]int{},
		resume:      make(chan bool, 1),
		yield:       make(chan struct{}, 1),
	}
	if s.execution == 0 {
		s.execution = 1
	}
	s.lane = NewPositional(s.limits.MaxUnconsumedEvents)
	s.queue = NewQueue(s.limits.MaxQueuedEvents)
	defer s.stop()

	if err := s.protect(s.run); err != nil {
		return s.failed(err), nil
	}
	if in.Query != nil {
		s.answer(in.Query)
	}
	return s.out, nil
}

// protect runs fn, turning a non-determinism panic raised on the engine's
// side (a decision recorded by a callback) into an error.
func (s *State) protect(fn func()) (nd *NondeterminismError) {
	defer func() {
		if r := recover(); r != nil {
			n, ok := r.(nondeterminism)
			if !ok {
				panic(r)
			}
			nd = n.err
		}
	}()
	fn()
	if s.fatal != nil {
		return s.fatal
	}
	return nil
}

func (s *State) run() {
	// Events placed at the start of the execution, before the code first ran.
	// The code starts at the time of the last of them, on the first run and
	// on every replay alike.
	for s.cursor < len(s.hist) && s.hist[s.cursor].AtStart {
		s.now = s.hist[s.cursor].Time
		s.applyStored(s.hist[s.cursor])
		s.cursor++
	}
	codeRan := s.cursor < len(s.hist)
	consumed := map[int64]bool{}
	if !codeRan {
		// First turn of this execution: every event already waiting arrived
		// before the code ran, so it is buffered before the code starts.
		s.replaying = false
		startTime := s.now
		s.now = s.in.Now
		for _, m := range s.in.Messages {
			if m.Kind == storage.MsgEvent {
				s.arrive(m, true)
				s.out.Consumed = append(s.out.Consumed, m.ID)
				consumed[m.ID] = true
			}
		}
		if len(s.out.NewEvents) == 0 {
			s.now = startTime
		}
	} else {
		s.replaying = true
	}
	s.startCode()
	if s.fatal != nil {
		return
	}

	// Phase 1: replay stored inputs.
	for s.cursor < len(s.hist) {
		ev := s.hist[s.cursor]
		if ev.Kind == history.VersionMarker {
			// A marker of a change the code no longer asks about.
			s.cursor++
			continue
		}
		if ev.Kind.IsDecision() {
			s.fatal = s.nondeterminism(ev, "nothing (the workflow is waiting or has returned)")
			return
		}
		s.now = ev.Time
		s.cursor++
		s.applyStored(ev)
		s.step()
		if s.fatal != nil {
			return
		}
	}

	// Phase 2: new messages, in the order they happened: a timer happens
	// when it fires, not when it was set, so messages are applied by the
	// time they became visible (insertion order among equals). An event put
	// before a timeout fired is seen before the timeout. Kicks carry
	// nothing but the request for a turn, so they are consumed even if the
	// code finishes first.
	s.replaying = false
	s.now = s.in.Now
	msgs := slices.Clone(s.in.Messages)
	slices.SortStableFunc(msgs, func(a, b storage.Message) int { return a.VisibleAt.Compare(b.VisibleAt) })
	// A correlated event the store delivered to a wait that is active now
	// was delivered against that wait (the store saw its marker), so it is
	// honoured before anything else of this turn can end the wait: with
	// delete-after-first there is no other copy of the event.
	slices.SortStableFunc(msgs, func(a, b storage.Message) int {
		return cmpBool(s.activeCorrelated(b), s.activeCorrelated(a))
	})
	for _, m := range msgs {
		if m.Kind == storage.MsgKick && !consumed[m.ID] {
			s.out.Consumed = append(s.out.Consumed, m.ID)
			consumed[m.ID] = true
		}
	}
	for _, m := range msgs {
		if s.finished {
			break
		}
		if consumed[m.ID] {
			continue
		}
		s.out.Consumed = append(s.out.Consumed, m.ID)
		s.applyNew(m)
		s.step()
		if s.fatal != nil {
			return
		}
	}
}

// applyStored applies a stored input event to the engine state.
func (s *State) applyStored(ev history.Event) {
	s.track(ev)
	switch ev.Kind {
	case history.ActivityCompleted, history.ActivityFailed, history.TimerFired:
		f := s.futures[ev.TaskSeq]
		if f == nil || f.done {
			panic(nondeterminism{s.nondeterminism(ev, "no pending activity or timer with that seq")})
		}
		s.resolveTask(f, ev)
	case history.EventRaised:
		b := &Buffered{Event: ev}
		o := Outcome{Delivered: ev.TaskSeq > 0, WaitSeq: ev.TaskSeq}
		if !s.applyLane(b, o) {
			panic(nondeterminism{s.nondeterminism(ev, "no matching wait state for this event")})
		}
		if o.Delivered {
			s.deliverTo(ev.TaskSeq, b)
		}
	case history.EventDropped:
		if !s.applyLane(&Buffered{Event: ev}, Outcome{Dropped: true, Reason: ev.Reason}) {
			panic(nondeterminism{s.nondeterminism(ev, "no lane state for this drop")})
		}
	case history.ExecutionTerminated:
		s.finished = true
	case history.AttributesUpserted:
		s.applyAttributes(ev) // carried at the start of the execution
	case history.ChildWorkflowCompleted, history.ChildWorkflowFailed:
		s.applyStoredChild(ev)
	case history.ExecutionCancelRequested:
		s.cancelRequested(ev)
	}
}

func (s *State) applyLane(b *Buffered, o Outcome) bool {
	switch b.Event.Lane {
	case history.LaneQueue:
		return s.queue.Apply(b, o)
	case history.LaneCorrelated:
		if o.Delivered {
			return s.takeCorrelated(o.WaitSeq)
		}
		return o.Dropped
	}
	return s.lane.Apply(b, o)
}

func (s *State) resolveTask(f *Future, ev history.Event) {
	switch ev.Kind {
	case history.ActivityFailed:
		msg := ""
		if ev.Failure != nil {
			msg = ev.Failure.Message
		}
		f.resolve(nil, &ActivityError{Name: f.name, Message: msg})
	default:
		f.resolve(ev.Result, nil)
	}
}

// applyNew turns a new inbox message into history.
func (s *State) applyNew(m storage.Message) {
	switch m.Kind {
	case storage.MsgActivityCompleted, storage.MsgActivityFailed, storage.MsgTimerFired:
		if m.Execution != s.execution {
			return // a result for an earlier execution
		}
		f := s.futures[m.TaskSeq]
		if f == nil || f.done {
			return // cancelled activity or timer: the result is not wanted
		}
		ev := history.Event{Kind: history.TimerFired, TaskSeq: m.TaskSeq}
		switch m.Kind {
		case storage.MsgActivityCompleted:
			ev.Kind, ev.Name, ev.Result = history.ActivityCompleted, f.name, m.Result
		case storage.MsgActivityFailed:
			ev.Kind, ev.Name, ev.Failure = history.ActivityFailed, f.name, m.Failure
		}
		s.record(ev)
		s.resolveTask(f, ev)
	case storage.MsgEvent:
		s.arrive(m, false)
	case storage.MsgChildCompleted, storage.MsgChildFailed:
		s.applyNewChild(m)
	case storage.MsgCancel:
		s.applyNewCancel(m)
	}
}

// arrive applies the lane rules to a new event and records the outcome in
// history and in the fate ledger.
func (s *State) arrive(m storage.Message, atStart bool) {
	lane := m.Lane
	if lane == "" {
		lane = history.LanePositional
	}
	ev := history.Event{
		Kind: history.EventRaised, Lane: lane, EventID: m.EventID, Name: m.Name,
		Payload: m.Payload, OriginExecution: s.execution, AtStart: atStart, ReceivedAt: m.CreatedAt,
		Latest: lane == history.LaneQueue && m.Latest,
	}
	b := &Buffered{Event: ev}
	var o Outcome
	if lane == history.LaneCorrelated {
		ev.Key = m.Key
		o = s.arriveCorrelated(m)
	} else if lane == history.LaneQueue {
		var superseded []*Buffered
		o, superseded = s.queue.Arrive(b, m.Latest)
		for _, old := range superseded {
			s.drop(old.Event, history.DropSuperseded, atStart)
		}
	} else {
		o = s.lane.Arrive(b)
	}
	fate := storage.FateUpdate{EventID: m.EventID, Execution: s.execution, OriginExecution: s.execution}
	switch {
	case o.Delivered:
		ev.TaskSeq = o.WaitSeq
		ev.WaitNumber = s.waitNumbers[o.WaitSeq]
		fate.Fate, fate.WaitNumber = history.FateDelivered, ev.WaitNumber
	case o.Dropped:
		ev.Kind, ev.Reason = history.EventDropped, o.Reason
		fate.Fate, fate.Reason = history.FateDropped, o.Reason
	default:
		fate.Fate = history.FateBuffered
	}
	s.out.Fates = append(s.out.Fates, fate)
	if o.Dropped && o.Reason == history.DropLimit && s.continueBurst(ev) {
		return
	}
	ev = s.record(ev)
	b.Event = ev
	if o.Dropped {
		s.out.Drops = append(s.out.Drops, ev)
		if o.Reason == history.DropLimit {
			s.bursts[burstKey(ev)] = burst{lane: ev.Lane, event: len(s.out.NewEvents) - 1, drop: len(s.out.Drops) - 1}
		}
	}
	if o.Delivered {
		s.deliverTo(o.WaitSeq, b)
	}
}

// burst is an open burst of limit drops of one lane and name: the indexes of
// its breadcrumb in Output.NewEvents and Output.Drops, or with event -1 (an
// earlier turn wrote it) of this turn's report of it in
// Output.ContinuedDrops (-1: none yet).
type burst struct {
	lane        history.Lane
	event, drop int
}

func burstKey(ev history.Event) string { return string(ev.Lane) + "/" + ev.Name }

// track follows the open bursts of limit drops through every history event,
// stored or new: a limit breadcrumb opens its lane and name's burst; any
// other event of a lane (an arrival kept or dropped for another reason, a
// wait, a withdrawal) closes the lane's bursts, since the lane may have
// room again.
func (s *State) track(ev history.Event) {
	switch {
	case ev.Lane == "":
	case ev.Kind == history.EventDropped && ev.Reason == history.DropLimit:
		s.bursts[burstKey(ev)] = burst{lane: ev.Lane, event: -1, drop: -1}
	default:
		for k, bu := range s.bursts {
			if bu.lane == ev.Lane {
				delete(s.bursts, k)
			}
		}
	}
}

// continueBurst takes a limit drop into the open burst of its lane and
// name, if there is one, so that a flood adds one breadcrumb per burst to
// history, not one per event (history.Event.Count). A burst whose
// breadcrumb this turn wrote counts the drop in it (Count, LastEventID); a
// burst an earlier turn opened gets no new breadcrumb, and the turn reports
// its drops in one entry of Output.ContinuedDrops. Every event still gets
// its own fate.
func (s *State) continueBurst(ev history.Event) bool {
	k := burstKey(ev)
	bu, ok := s.bursts[k]
	switch {
	case !ok:
		return false
	case bu.event >= 0:
		crumb := &s.out.NewEvents[bu.event]
		if crumb.AtStart != ev.AtStart {
			return false
		}
		crumb.Count = max(crumb.Count, 1) + 1
		crumb.LastEventID = ev.EventID
		s.out.Drops[bu.drop].Count, s.out.Drops[bu.drop].LastEventID = crumb.Count, crumb.LastEventID
	case bu.drop >= 0:
		d := &s.out.ContinuedDrops[bu.drop]
		d.Count = max(d.Count, 1) + 1
		d.LastEventID = ev.EventID
	default:
		ev.Time = s.now // not in history: no Seq
		s.out.ContinuedDrops = append(s.out.ContinuedDrops, ev)
		bu.drop = len(s.out.ContinuedDrops) - 1
		s.bursts[k] = bu
	}
	return true
}

// deliverTo resolves the receive with subscription seq with the event b.
func (s *State) deliverTo(seq int, b *Buffered) {
	f := s.futures[seq]
	f.got = b
	f.resolve(b.Event.Payload, nil)
}

// arriveCorrelated delivers a correlated event to the wait it was produced
// for, or, if that wait is gone, to the oldest active wait on the same
// (definition, key). Correlated events are never buffered in an instance
// (they wait in the correlated store); one that finds no wait is dropped.
func (s *State) arriveCorrelated(m storage.Message) Outcome {
	target := -1
	for i, w := range s.correlated {
		if w.TaskSeq == m.TaskSeq {
			target = i
			break
		}
	}
	if target < 0 {
		for i, w := range s.correlated {
			if w.Def == m.Name && w.Key == m.Key {
				target = i
				break
			}
		}
	}
	if target < 0 {
		return Outcome{Dropped: true, Reason: history.DropWithdrawnWait}
	}
	seq := s.correlated[target].TaskSeq
	s.takeCorrelated(seq)
	return Outcome{Delivered: true, WaitSeq: seq}
}

// activeCorrelated reports whether m is a correlated event for a wait that
// is active.
func (s *State) activeCorrelated(m storage.Message) bool {
	if m.Kind != storage.MsgEvent || m.Lane != history.LaneCorrelated || m.Execution != s.execution {
		return false
	}
	for _, w := range s.correlated {
		if w.TaskSeq == m.TaskSeq {
			return true
		}
	}
	return false
}

func cmpBool(a, b bool) int {
	switch {
	case a == b:
		return 0
	case a:
		return 1
	default:
		return -1
	}
}

// takeCorrelated removes an active correlated wait; false if it is not
// active.
func (s *State) takeCorrelated(seq int) bool {
	for i, w := range s.correlated {
		if w.TaskSeq == seq {
			s.correlated = append(s.correlated[:i:i], s.correlated[i+1:]...)
			return true
		}
	}
	return false
}

// drop records the drop of an event that was buffered (a superseded
// latest-value message): a breadcrumb and its fate.
func (s *State) drop(buffered history.Event, reason history.DropReason, atStart bool) {
	ev := history.Event{Kind: history.EventDropped, Lane: buffered.Lane, EventID: buffered.EventID, Name: buffered.Name,
		Payload: buffered.Payload, OriginExecution: buffered.OriginExecution, Reason: reason, ReceivedAt: buffered.ReceivedAt,
		AtStart: atStart}
	ev = s.record(ev)
	s.out.Drops = append(s.out.Drops, ev)
	s.out.Fates = append(s.out.Fates, storage.FateUpdate{EventID: ev.EventID, Fate: history.FateDropped, Reason: reason,
		Execution: s.execution, OriginExecution: ev.OriginExecution})
}

// record appends a new input event to the turn's history delta.
func (s *State) record(ev history.Event) history.Event {
	s.track(ev)
	ev.Seq = s.nextSeq
	s.nextSeq++
	ev.Time = s.now
	s.out.NewEvents = append(s.out.NewEvents, ev)
	return ev
}

// decide records a decision made by the code. While history still has
// events, the decision must equal the next one recorded; otherwise it is new
// and appended. It returns the decision's seq and whether it is new.
func (s *State) decide(ev history.Event) (int, bool) {
	if s.querying {
		panic(queryMisuse)
	}
	if s.aborting {
		panic(abort{})
	}
	s.skipMarkers(ev)
	if s.cursor < len(s.hist) {
		h := s.hist[s.cursor]
		if !sameDecision(h, ev) {
			panic(nondeterminism{s.nondeterminism(h, describe(ev))})
		}
		s.cursor++
		s.track(h)
		return h.Seq, false
	}
	if s.replaying {
		// A turn commits every decision its code made until it blocked, so a
		// decision past the end of a stored history is one the original code
		// did not make.
		panic(nondeterminism{&NondeterminismError{InstanceID: s.in.InstanceID, Execution: s.execution, Seq: s.nextSeq,
			Expected: "end of history (the code was waiting here)", Actual: describe(ev)}})
	}
	return s.record(ev).Seq, true
}

func sameDecision(h, ev history.Event) bool {
	return h.Kind == ev.Kind && h.Name == ev.Name && h.TaskSeq == ev.TaskSeq &&
		h.Lane == ev.Lane && h.NoWait == ev.NoWait && h.Key == ev.Key && h.Target == ev.Target && h.ChildID == ev.ChildID &&
		(h.Kind != history.EventSubscribedCancelled || // a give-back and its outcome
			h.EventID == ev.EventID && h.WaitNumber == ev.WaitNumber && h.Reason == ev.Reason)
}

func describe(ev history.Event) string {
	s := string(ev.Kind)
	if ev.Lane == history.LaneQueue || ev.Lane == history.LaneCorrelated {
		s += " [" + string(ev.Lane) + "]"
	}
	if ev.Key != "" {
		s += fmt.Sprintf(" key %q", ev.Key)
	}
	if ev.ChildID != "" {
		s += fmt.Sprintf(" child %q", ev.ChildID)
	}
	if ev.Target != "" {
		s += fmt.Sprintf(" to %q", ev.Target)
	}
	if ev.NoWait {
		s += " (no wait)"
	}
	if ev.Name != "" {
		s += fmt.Sprintf(" %q", ev.Name)
	}
	if ev.TaskSeq != 0 {
		s += fmt.Sprintf(" (of seq %d)", ev.TaskSeq)
	}
	if ev.Kind == history.EventSubscribedCancelled && ev.EventID != "" {
		s += fmt.Sprintf(" giving back %s", ev.EventID)
		switch {
		case ev.Reason != "":
			s += " (dropped: " + string(ev.Reason) + ")"
		case ev.WaitNumber != 0:
			s += fmt.Sprintf(" (to wait %d)", ev.WaitNumber)
		}
	}
	return s
}

func (s *State) nondeterminism(h history.Event, actual string) *NondeterminismError {
	return &NondeterminismError{
		InstanceID: s.in.InstanceID, Execution: s.execution, Seq: h.Seq,
		Expected: describe(h), Actual: actual,
	}
}

func (s *State) failed(nd *NondeterminismError) *Output {
	ev := history.Event{Seq: s.in.History[len(s.in.History)-1].Seq + 1, Time: s.in.Now,
		Kind: history.ExecutionFailed, Failure: nd.Failure()}
	ids := make([]int64, 0, len(s.in.Messages))
	for _, m := range s.in.Messages {
		ids = append(ids, m.ID)
	}
	return &Output{NewEvents: []history.Event{ev}, Consumed: ids, Status: heraldtype.StatusFailed, Failure: ev.Failure}
}

// ---- coroutine ----

// startCode starts the workflow's code on a goroutine of its own, which
// runs only while the engine waits for it (step): the code blocks on
// channels between its decisions. The goroutine is the caller's
// (Input.Go) to reuse once the code has returned or stop has unwound it.
func (s *State) startCode() {
	s.started = true
	if s.in.Go != nil {
		s.in.Go(s.body)
	} else {
		go s.body()
	}
	s.step()
}

// step lets the code run until it blocks or returns.
func (s *State) step() {
	if !s.started || s.exited {
		return
	}
	s.resume <- false
	<-s.yield
}

// stop unwinds a code still blocked at the end of the turn.
func (s *State) stop() {
	if s.started && !s.exited {
		s.resume <- true
		<-s.yield
	}
}

// block parks the code until cond holds.
func (s *State) block(cond func() bool) {
	for !cond() {
		if s.querying {
			panic(queryMisuse)
		}
		if s.aborting {
			panic(abort{})
		}
		s.yield <- struct{}{}
		if <-s.resume {
			s.aborting = true
			panic(abort{})
		}
	}
}

func (s *State) body() {
	defer func() {
		s.exited = true
		s.yield <- struct{}{}
	}()
	if <-s.resume {
		return
	}
	res, err, stopped := s.call()
	if stopped {
		return
	}
	func() {
		defer func() {
			if r := recover(); r != nil {
				if n, ok := r.(nondeterminism); ok {
					s.fatal = n.err
					return
				}
				if _, ok := r.(abort); ok {
					return
				}
				panic(r)
			}
		}()
		s.complete(res, err)
	}()
}

// call runs the workflow function, converting panics.
func (s *State) call() (res json.RawMessage, err error, stopped bool) {
	defer func() {
		if r := recover(); r != nil {
			switch v := r.(type) {
			case nondeterminism:
				s.fatal = v.err
				stopped = true
			case abort:
				stopped = true
			default:
				res, err = nil, &PanicError{Value: fmt.Sprint(r), Stack: string(debug.Stack())}
			}
		}
	}()
	res, err = s.in.Workflow(s, s.input)
	return res, err, false
}

func (s *State) complete(res json.RawMessage, err error) {
	var can *ContinueAsNewError
	switch {
	case s.completeCanceled(res, err):
	case errors.As(err, &can):
		s.decide(history.Event{Kind: history.ExecutionContinuedAsNew, Input: can.Input})
		s.can = can
		s.continueAsNew()
	case err != nil:
		f := ToFailure(err)
		s.decide(history.Event{Kind: history.ExecutionFailed, Failure: f})
		s.out.Status, s.out.Failure = heraldtype.StatusFailed, f
	default:
		if res == nil {
			res = json.RawMessage("null")
		}
		s.decide(history.Event{Kind: history.ExecutionCompleted, Result: res})
		s.out.Status, s.out.Result = heraldtype.StatusCompleted, res
	}
	s.finished = true
}

// ToFailure converts a workflow's error into its stored form.
func ToFailure(err error) *history.Failure {
	var nd *NondeterminismError
	var pe *PanicError
	var ae *ActivityError
	switch {
	case errors.As(err, &nd):
		return nd.Failure()
	case errors.As(err, &pe):
		return &history.Failure{Kind: FailurePanic, Message: pe.Error() + "\n" + pe.Stack}
	case errors.As(err, &ae):
		return &history.Failure{Kind: FailureActivity, Message: err.Error()}
	default:
		return &history.Failure{Kind: FailureApplication, Message: err.Error()}
	}
}

// continueAsNew builds the next execution's start: ExecutionStarted, then
// every unconsumed event of both lanes carried (docs/positional.md, rule 5; docs/queue.md) or
// dropped with its reason. Carried events keep their lane, order and origin
// execution and are placed before anything newer.
func (s *State) continueAsNew() {
	next := s.execution + 1
	now := s.now
	start := []history.Event{{Seq: 1, Time: now, Kind: history.ExecutionStarted, Workflow: s.workflow,
		Input: s.can.Input, Execution: next}}
	start = s.carryCancel(start, now)
	start = s.carryAttributes(start, now)
	// Rule 5 limits carried positional events by age only. Queue messages
	// are carried up to the queue limit, oldest first; a message a receive
	// gave back does not count (it may have taken the lane over the limit).
	lane := NewPositional(0)
	queue := NewQueue(s.limits.MaxQueuedEvents + s.queue.Returned())
	carry := func(b *Buffered) {
		ev := b.Event
		ev.Seq, ev.Time, ev.AtStart, ev.TaskSeq, ev.WaitNumber = len(start)+1, now, true, 0, 0
		if ev.OriginExecution == 0 {
			ev.OriginExecution = s.execution
		}
		fate := storage.FateUpdate{EventID: ev.EventID, Execution: next, OriginExecution: ev.OriginExecution}
		var reason history.DropReason
		switch {
		case s.can.DropUnconsumed:
			reason = history.DropNotCarriedForward
		case next-ev.OriginExecution > s.limits.MaxCarryForwardExecutions:
			reason = history.DropCarryForwardLimit
		case ev.Lane == history.LaneQueue:
			if o, _ := queue.Arrive(&Buffered{Event: ev}, false); o.Dropped {
				reason = history.DropCarryForwardLimit // the oldest are kept; the overflow is dropped
			}
		default:
			if o := lane.Arrive(&Buffered{Event: ev}); o.Dropped {
				reason = history.DropCarryForwardLimit
			}
		}
		if reason != "" {
			ev.Kind, ev.Reason = history.EventDropped, reason
			fate.Fate, fate.Reason = history.FateDropped, reason
			s.out.Drops = append(s.out.Drops, ev)
		} else {
			fate.Fate = history.FateBuffered
		}
		start = append(start, ev)
		s.out.Fates = append(s.out.Fates, fate)
	}
	for _, b := range s.lane.Unconsumed() {
		carry(b)
	}
	for _, b := range s.queue.Unconsumed() {
		carry(b)
	}
	s.out.ContinueAsNew = &storage.ContinueAsNewParams{Input: s.can.Input, StartEvents: start}
	s.out.Status = heraldtype.StatusRunning
}

// ---- workflow-facing operations ----

// newFuture makes a future; one with a decision seq is registered so inputs
// naming that seq resolve it.
func (s *State) newFuture(seq int, name string) *Future {
	f := &Future{s: s, name: name}
	if seq > 0 {
		s.futures[seq] = f
	}
	return f
}

// CallActivity schedules an activity.
func (s *State) CallActivity(name string, input json.RawMessage, retry heraldtype.RetryPolicy) *Future {
	seq, isNew := s.decide(history.Event{Kind: history.ActivityScheduled, Name: name, Input: input})
	if isNew {
		s.out.Activities = append(s.out.Activities, storage.ActivityTask{
			InstanceID: s.in.InstanceID, Execution: s.execution, TaskSeq: seq, Name: name, Input: input, Attempt: 1, Retry: retry,
		})
	}
	f := s.newFuture(seq, name)
	f.cancel = func() {
		if _, isNew := s.decide(history.Event{Kind: history.ActivityCancelRequested, Name: name, TaskSeq: seq}); isNew {
			s.out.CancelActivities = append(s.out.CancelActivities, seq)
		}
		f.resolve(nil, ErrCanceled)
	}
	return f
}

// Publish publishes an event to the bus as a decision: it is committed
// with the turn (outbox) and recorded in history as EventPublished. An
// empty id is derived from the instance, execution and the decision's
// seq, so a replay publishes under the same id and the bus's dedup makes a
// commit that is retried publish once. It returns the event id.
func (s *State) Publish(eventType, id string, data json.RawMessage) string {
	if id == "" {
		// The seq the decision gets if it is new; on replay the recorded
		// one is read back below.
		id = fmt.Sprintf("%s/%d/%d", s.in.InstanceID, s.execution, s.nextSeq)
	}
	ev := history.Event{Kind: history.EventPublished, Name: eventType, EventID: id, Payload: data}
	if s.cursor < len(s.hist) {
		h := s.hist[s.cursor]
		if h.Kind == history.EventPublished && h.Name == eventType {
			ev.EventID = h.EventID
		}
	}
	if _, isNew := s.decide(ev); isNew {
		s.out.Publish = append(s.out.Publish, storage.BusPublishEvent{ID: ev.EventID, Type: eventType, Data: data,
			Source: "workflow:" + s.in.InstanceID})
	}
	return ev.EventID
}

// NewTimer creates a durable timer firing d after Now.
func (s *State) NewTimer(d time.Duration) *Future {
	if d < 0 {
		d = 0
	}
	fireAt := s.now.Add(d)
	seq, isNew := s.decide(history.Event{Kind: history.TimerCreated, FireAt: fireAt})
	if isNew {
		s.out.Timers = append(s.out.Timers, storage.TimerSchedule{TaskSeq: seq, FireAt: fireAt})
	}
	f := s.newFuture(seq, "")
	f.cancel = func() {
		if _, isNew := s.decide(history.Event{Kind: history.TimerCancelled, TaskSeq: seq}); isNew {
			s.out.CancelTimers = append(s.out.CancelTimers, seq)
		}
		f.resolve(nil, ErrCanceled)
	}
	return f
}

// WaitEvent waits for the next positional event of name. With timeout > 0
// the wait fails with ErrEventTimeout when the timeout elapses first, and is
// withdrawn like a select loser.
func (s *State) WaitEvent(name string, timeout time.Duration) *Future {
	return s.wait(history.LanePositional, name, timeout)
}

// Dequeue receives the oldest message of a queue, waiting for one if the
// queue is empty. A cancelled Dequeue (select loser, timeout) consumes
// nothing.
func (s *State) Dequeue(name string, timeout time.Duration) *Future {
	return s.wait(history.LaneQueue, name, timeout)
}

// TryDequeue takes the oldest message of a queue without waiting; ok is
// false if the queue is empty.
func (s *State) TryDequeue(name string) (payload []byte, ok bool) {
	_, isNew := s.decide(history.Event{Kind: history.EventSubscribed, Lane: history.LaneQueue, Name: name, NoWait: true})
	n := s.receiveNumber(history.LaneQueue, name)
	got := s.queue.Take(name)
	if got == nil {
		return nil, false
	}
	if isNew {
		s.delivered(got, n)
	}
	return got.Event.Payload, true
}

// delivered records, on the decision just appended, that it took a buffered
// event at once, and updates the event's fate.
func (s *State) delivered(got *Buffered, waitNumber int) {
	last := &s.out.NewEvents[len(s.out.NewEvents)-1]
	last.EventID, last.WaitNumber = got.Event.EventID, waitNumber
	origin := got.Event.OriginExecution
	if origin == 0 {
		origin = s.execution
	}
	s.out.Fates = append(s.out.Fates, storage.FateUpdate{EventID: got.Event.EventID, Fate: history.FateDelivered,
		Execution: s.execution, OriginExecution: origin, WaitNumber: waitNumber})
}

// receiveNumber numbers the queue lane's receives per queue (1, 2, …), as
// the positional lane numbers its waits.
func (s *State) receiveNumber(lane history.Lane, name string) int {
	k := string(lane) + "/" + name
	s.receives[k]++
	return s.receives[k]
}

func (s *State) wait(lane history.Lane, name string, timeout time.Duration) *Future {
	return s.waitKey(lane, name, "", timeout)
}

// WaitCorrelated waits for a correlated event of definition def under key
// (docs/correlated.md). The store registers the wait and delivers a correlated event
// put under that key, now or later. With timeout > 0 the wait fails with
// ErrEventTimeout; a timed-out or cancelled wait removes its marker.
func (s *State) WaitCorrelated(def, key string, timeout time.Duration) *Future {
	return s.waitKey(history.LaneCorrelated, def, key, timeout)
}

func (s *State) waitKey(lane history.Lane, name, key string, timeout time.Duration) *Future {
	seq, isNew := s.decide(history.Event{Kind: history.EventSubscribed, Lane: lane, Name: name, Key: key})
	f := s.newFuture(seq, name)
	f.lane, f.seq = lane, seq
	var n int
	var got *Buffered
	switch lane {
	case history.LaneQueue:
		n = s.receiveNumber(lane, name)
		got = s.queue.Wait(name, seq)
	case history.LaneCorrelated:
		n = s.receiveNumber(lane, name)
		w := CorrelatedWait{TaskSeq: seq, Def: name, Key: key}
		s.correlated = append(s.correlated, w)
		if isNew {
			s.out.CorrelatedWaits = append(s.out.CorrelatedWaits, w)
		}
	default:
		n, got = s.lane.Wait(name, seq)
	}
	s.waitNumbers[seq] = n
	if got != nil {
		if isNew {
			s.delivered(got, n)
		}
		f.got = got
		f.resolve(got.Event.Payload, nil)
		return f
	}
	withdraw := func(err error) {
		_, isNew := s.decide(history.Event{Kind: history.EventSubscribedCancelled, Lane: lane, Name: name, TaskSeq: seq})
		switch lane {
		case history.LaneQueue:
			s.queue.Cancel(name, seq)
		case history.LaneCorrelated:
			s.takeCorrelated(seq)
			if isNew {
				s.out.CancelCorrelatedWaits = append(s.out.CancelCorrelatedWaits, seq)
			}
		default:
			s.lane.Cancel(name, seq)
		}
		f.resolve(nil, err)
	}
	f.cancel = func() { withdraw(ErrCanceled) }
	if timeout <= 0 {
		return f
	}
	t := s.NewTimer(timeout)
	c := s.newFuture(0, name)
	c.lane, c.inner = lane, f
	t.then(func() {
		if t.err == nil && !f.done { // the timer fired first
			withdraw(ErrEventTimeout)
		}
	})
	f.then(func() {
		if !t.done {
			t.cancel()
		}
		c.got = f.got
		c.resolve(f.value, f.err)
	})
	c.cancel = func() {
		if !f.done {
			withdraw(ErrCanceled)
		}
	}
	return c
}

// giveBack returns the event b that the receive with subscription seq took,
// when the receive lost a Select before the workflow got its result: the
// workflow must consume an event only through a receive whose result it
// got. The lane puts the event back at its place in the order (to a wait
// of its name that is listening, or buffered; Positional.GiveBack,
// Queue.GiveBack); a correlated-lane copy is dropped and its event handed
// back to the store (Output.ReturnedCorrelated). The give-back is recorded
// on the receive's EventSubscribedCancelled (EventID, and WaitNumber or
// Reason for its outcome) and in the fate ledger.
//
// A history written before give-backs existed has no such cancellation: the
// losing receive kept its event. Replaying one, giveBack finds no
// cancellation of seq where the code is, does nothing and reports false, so
// that the old history replays as it was made.
func (s *State) giveBack(lane history.Lane, name string, seq int, b *Buffered) bool {
	if s.replaying {
		if s.cursor >= len(s.hist) {
			return false
		}
		if h := s.hist[s.cursor]; h.Kind != history.EventSubscribedCancelled || h.TaskSeq != seq {
			return false
		}
	}
	var o Outcome
	switch lane {
	case history.LaneQueue:
		o = s.queue.GiveBack(b)
	case history.LaneCorrelated:
		// Never buffered in an instance: the correlated store keeps the
		// event (fan-out) or gets it back to hand on (delete-after-first).
		o = Outcome{Dropped: true, Reason: history.DropWithdrawnWait}
	default:
		o = s.lane.GiveBack(b)
	}
	ev := history.Event{Kind: history.EventSubscribedCancelled, Lane: lane, Name: name, TaskSeq: seq,
		EventID: b.Event.EventID, Reason: o.Reason}
	if o.Delivered {
		ev.WaitNumber = s.waitNumbers[o.WaitSeq]
	}
	if _, isNew := s.decide(ev); isNew {
		origin := b.Event.OriginExecution
		if origin == 0 {
			origin = s.execution
		}
		fate := storage.FateUpdate{EventID: ev.EventID, Execution: s.execution, OriginExecution: origin}
		switch {
		case o.Delivered:
			fate.Fate, fate.WaitNumber = history.FateDelivered, ev.WaitNumber
		case o.Dropped:
			fate.Fate, fate.Reason = history.FateDropped, o.Reason
			s.out.Drops = append(s.out.Drops, s.out.NewEvents[len(s.out.NewEvents)-1])
		default:
			fate.Fate = history.FateBuffered
		}
		s.out.Fates = append(s.out.Fates, fate)
		if lane == history.LaneCorrelated {
			s.out.ReturnedCorrelated = append(s.out.ReturnedCorrelated, storage.ReturnedCorrelated{
				EventID: ev.EventID, Def: name, Key: b.Event.Key, Payload: b.Event.Payload})
		}
	}
	if o.Delivered {
		s.deliverTo(o.WaitSeq, b)
	}
	return true
}

// Select blocks until one of fs resolves and returns its index (the lowest
// index among those resolved). Every other future is cancelled: one that
// has not resolved is withdrawn (a timer is dropped, an activity is asked
// to cancel, a wait is withdrawn), then every receive that has resolved
// with an event whose result the workflow has not got (with Get) gives the
// event back, oldest first within each lane and name (arrival numbers are
// kept per lane; the order across lanes does not matter, as no wait
// listens on two), so that a wait still listening receives the oldest
// (giveBack). A loser that gave its event back then returns
// ErrCanceled from Get.
func (s *State) Select(fs ...*Future) int {
	if len(fs) == 0 {
		return -1
	}
	s.block(func() bool {
		for _, f := range fs {
			if f.done {
				return true
			}
		}
		return false
	})
	winner := -1
	for i, f := range fs {
		if f.done {
			winner = i
			break
		}
	}
	var back []*Future
	for _, f := range fs {
		switch {
		case f == fs[winner] || slices.Contains(back, f):
		case !f.done:
			f.Cancel()
		case f.returnable():
			back = append(back, f)
		}
	}
	slices.SortStableFunc(back, func(a, b *Future) int { return cmp.Compare(a.got.order, b.got.order) })
	for _, f := range back {
		f.giveBack()
	}
	return winner
}

// All blocks until every future resolves and returns the first error by
// index.
func (s *State) All(fs ...*Future) error {
	var first error
	for _, f := range fs {
		if _, err := f.Get(); err != nil && first == nil {
			first = err
		}
	}
	return first
}
