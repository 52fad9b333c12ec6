package herald

import (
	"context"
	"encoding/json"
	"fmt"
	"github.com/heraldwf/herald/bus/pattern"
	"log/slog"
	"strings"
	"time"

	"github.com/heraldwf/herald/internal/replay"
)

// Context is a workflow's only window on the world. Workflow code must use
// it for time, randomness, I/O and waiting, and nothing else: the engine
// replays the code from history on every turn, and anything not taken from
// the Context would differ between replays.
type Context struct {
	s      *replay.State
	rt     *Runtime
	logger *slog.Logger
}

// Future is the result of an asynchronous operation (an activity, a timer, a
// wait). Get blocks the workflow until it resolves.
type Future struct{ f *replay.Future }

// Get waits for the future and decodes its value into out (which may be nil
// to discard it). It returns the operation's error: an *ActivityError,
// ErrEventTimeout, ErrCanceled.
func (f Future) Get(out any) error {
	v, err := f.f.Get()
	if err != nil {
		return err
	}
	if out == nil || len(v) == 0 {
		return nil
	}
	if err := json.Unmarshal(v, out); err != nil {
		return fmt.Errorf("herald: decode result into %T: %w", out, err)
	}
	return nil
}

// Ready reports whether the future has resolved (Get will not block).
func (f Future) Ready() bool { return f.f.Ready() }

// InstanceID returns the running instance's id.
func (c *Context) InstanceID() string { return c.s.InstanceID() }

// Execution returns the execution number (1, then +1 per ContinueAsNew).
func (c *Context) Execution() int { return c.s.Execution() }

// Now returns the workflow's deterministic current time.
func (c *Context) Now() time.Time { return c.s.Now() }

// NewUUID returns a UUID that is the same on every replay.
func (c *Context) NewUUID() string { return c.s.NewUUID() }

// IsReplaying reports whether the code is re-running over stored history.
func (c *Context) IsReplaying() bool { return c.s.IsReplaying() }

// Logger returns a logger that is silent while the workflow replays, so each
// line is written once.
func (c *Context) Logger() *slog.Logger {
	if c.logger == nil {
		c.logger = slog.New(&replayHandler{h: c.rt.logger.Handler(), s: c.s}).With(
			"instance", c.s.InstanceID(), "execution", c.s.Execution())
	}
	return c.logger
}

// CallActivity schedules the named activity with input (encoded as JSON).
// The activity runs at least once, retried by its policy; Get returns its
// result or an *ActivityError. An input that cannot be stored (see
// Config.MaxPayloadDepth) or a WithRetry policy with a negative field, a
// backoff coefficient below 1 or a MaxInterval shorter than its
// InitialInterval panics: the workflow fails (kind "panic") with the
// reasons.
func (c *Context) CallActivity(name string, input any, opts ...ActivityOption) Future {
	var o activityOptions
	for _, opt := range opts {
		opt(&o)
	}
	in, reasons := encodeJSON(nil, "input of activity "+name, input, c.rt.cfg.MaxPayloadDepth)
	reasons = retryReasons(reasons, "WithRetry", o.retry)
	if p := c.rt.retryPolicy(o.retry); len(reasons) == 0 && p.MaxInterval < p.InitialInterval {
		reasons = append(reasons, fmt.Sprintf("WithRetry.MaxInterval %v is shorter than its InitialInterval %v (zero fields take Config.DefaultRetry's)",
			p.MaxInterval, p.InitialInterval))
	}
	if len(reasons) > 0 {
		// Recorded in history, a too deep input would be a row no later
		// turn could read; a retry policy that makes no sense is a bug to
		// show, not to replace with defaults. Either way the same code
		// fails the same way on every replay.
		panic("herald: CallActivity: " + strings.Join(reasons, "; "))
	}
	return Future{c.s.CallActivity(name, in, o.retry)}
}

// Publish publishes an event of eventType with data to the tenant's event
// bus (docs/bus.md), committed with this turn: the event exists exactly
// when the turn that published it did (outbox), and a replay publishes
// nothing again. WithEventID names it; by default its id is derived from
// the instance, execution and the decision's place in history
// ("<instance>/<execution>/<seq>"). It returns the event id, or an
// *EventInvalidError (nothing published) for a malformed type or id or
// data that cannot be encoded, is too large or too deep. Publish from a
// workflow is not held back by ClientConfig.BusMaxBacklog. StartIfAbsent
// does not apply.
func (c *Context) Publish(eventType string, data any, opts ...RaiseOption) (string, error) {
	var o raiseOptions
	for _, opt := range opts {
		opt(&o)
	}
	var reasons []string
	if err := pattern.ValidateEventType(eventType); err != nil {
		reasons = append(reasons, "event type: "+err.Error())
	}
	raw, err := c.outbound(eventType, "data", "Publish", data, &o, reasons)
	if err != nil {
		return "", err
	}
	return c.s.Publish(eventType, o.eventID, raw), nil
}

// Timer returns a future that resolves d after Now. Timers are durable.
func (c *Context) Timer(d time.Duration) Future { return Future{c.s.NewTimer(d)} }

// Sleep blocks the workflow for d (a durable timer).
func (c *Context) Sleep(d time.Duration) error { return c.Timer(d).Get(nil) }

// WaitEvent waits for the next event called name on the positional lane
// (docs/positional.md): an event raised before the wait is buffered and received at
// once; events and waits of one name pair up in order. WithTimeout makes the
// wait fail with ErrEventTimeout.
func (c *Context) WaitEvent(name string, opts ...WaitOption) Future {
	var o waitOptions
	for _, opt := range opts {
		opt(&o)
	}
	return Future{c.s.WaitEvent(name, o.timeout)}
}

// Dequeue receives the oldest message of the named queue on the queue lane
// (docs/queue.md), waiting for one if the queue is empty. Messages are kept until
// a receive takes them: a Dequeue that loses a Select or times out
// (WithTimeout → ErrEventTimeout) consumes nothing, and unconsumed messages
// are carried across ContinueAsNew.
func (c *Context) Dequeue(queue string, opts ...WaitOption) Future {
	var o waitOptions
	for _, opt := range opts {
		opt(&o)
	}
	return Future{c.s.Dequeue(queue, o.timeout)}
}

// WaitCorrelated waits for a correlated event of the event definition def
// under a business key (docs/correlated.md): a correlated event put with
// Client.PutCorrelatedEvent(def, key, payload) — before this wait or after
// it — completes it. One put reaches every instance waiting on that key
// (fan-out), unless the definition says DeleteAfterFirstCorrelation. With
// WithTimeout the wait fails with ErrEventTimeout; a wait that times out or
// loses a Select removes its marker, so a later put does not reach it.
func (c *Context) WaitCorrelated(def, key string, opts ...WaitOption) Future {
	var o waitOptions
	for _, opt := range opts {
		opt(&o)
	}
	return Future{c.s.WaitCorrelated(def, key, o.timeout)}
}

// TryDequeue takes the oldest message of the queue into out without
// waiting. It reports false (and leaves out alone) if the queue is empty.
func (c *Context) TryDequeue(queue string, out any) (bool, error) {
	v, ok := c.s.TryDequeue(queue)
	if !ok {
		return false, nil
	}
	if out != nil && len(v) > 0 {
		if err := json.Unmarshal(v, out); err != nil {
			return true, fmt.Errorf("herald: decode message into %T: %w", out, err)
		}
	}
	return true, nil
}

// Select blocks until one of the futures resolves and returns its index
// (the lowest among those resolved). Every other future that has not
// resolved is cancelled: a timer is dropped, an activity is asked to
// cancel, a wait is withdrawn (its late answer will be dropped,
// docs/positional.md, rule 3). A receive (WaitEvent, Dequeue, WaitCorrelated) that lost but had
// already received an event whose result the workflow has not read with Get
// gives the event back, at its place in the order, so the next receive
// gets it; its Get then returns ErrCanceled. An event is consumed only by a
// receive whose result the workflow got.
func (c *Context) Select(fs ...Future) int {
	inner := make([]*replay.Future, len(fs))
	for i, f := range fs {
		inner[i] = f.f
	}
	return c.s.Select(inner...)
}

// All blocks until every future resolves and returns the first error, by
// position.
func (c *Context) All(fs ...Future) error {
	inner := make([]*replay.Future, len(fs))
	for i, f := range fs {
		inner[i] = f.f
	}
	return c.s.All(inner...)
}

// ContinueAsNew returns the error a workflow returns to end this execution
// and start the next with input and a fresh history. Buffered events are
// carried over (unless DropUnconsumedEvents):
//
//	return nil, ctx.ContinueAsNew(next)
func (c *Context) ContinueAsNew(input any, opts ...ContinueAsNewOption) error {
	var o continueOptions
	for _, opt := range opts {
		opt(&o)
	}
	in, reasons := encodeJSON(nil, "input", input, c.rt.cfg.MaxPayloadDepth)
	if len(reasons) > 0 {
		return &InvalidArgumentError{Op: "ContinueAsNew", Reasons: reasons}
	}
	return &replay.ContinueAsNewError{Input: in, DropUnconsumed: o.dropUnconsumed}
}

// replayHandler drops log records while the workflow replays.
type replayHandler struct {
	h slog.Handler
	s *replay.State
}

func (r *replayHandler) Enabled(ctx context.Context, l slog.Level) bool {
	return !r.s.IsReplaying() && r.h.Enabled(ctx, l)
}
func (r *replayHandler) Handle(ctx context.Context, rec slog.Record) error {
	if r.s.IsReplaying() {
		return nil
	}
	return r.h.Handle(ctx, rec)
}
func (r *replayHandler) WithAttrs(as []slog.Attr) slog.Handler {
	return &replayHandler{h: r.h.WithAttrs(as), s: r.s}
}
func (r *replayHandler) WithGroup(name string) slog.Handler {
	return &replayHandler{h: r.h.WithGroup(name), s: r.s}
}
