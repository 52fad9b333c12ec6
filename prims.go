package herald

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strings"

	"github.com/heraldwf/herald/history"
)

// DefaultVersion is the version Context.Version returns, as its min, for
// histories recorded before a change when the change is written
// ctx.Version(id, herald.DefaultVersion, n).
const DefaultVersion = 0

// RaiseEvent sends an event on the positional lane to the instance
// instanceID of this workflow's tenant (there is no way to reach another
// tenant), as Client.RaiseEvent does, but as a decision of this workflow:
// it is recorded in history (EventSent) and written with this turn's
// commit (outbox) — the receiver's inbox message and ledger row exist
// exactly when the turn that sent them does, and a replay sends nothing
// again. WithEventID names the event; by default its id is derived from
// this instance, its execution and the decision's place in history
// ("<instance>/<execution>/<seq>"). The receiver's ledger record
// (Client.EventFate, Client.Events) names this instance as its Sender.
//
// An instance that does not exist yet keeps the event until it starts
// (or the event's retention ends: dropped, expired); one that has ended
// records the event as dropped (instance_terminal). Nothing is lost
// silently.
//
// It returns the event id, or an *EventInvalidError (nothing sent; the
// workflow may go on) for a malformed instance id, name or event id, or a
// payload that cannot be encoded, is over Config.MaxPayloadBytes or nests
// deeper than Config.MaxPayloadDepth. StartIfAbsent does not apply. A
// payload that the event's definition refuses (its schema, its own size
// cap) or that is over the tenant's MaxPayloadBytes override is found when
// the turn commits: the instance then fails, with a
// *WorkflowError of kind "send" (FailureSend), and nothing of that turn is
// written; so does an event id that was first used for another target.
func (c *Context) RaiseEvent(instanceID, name string, payload any, opts ...RaiseOption) (string, error) {
	return c.send(history.LanePositional, instanceID, name, payload, opts)
}

// Enqueue puts a message into the named queue of the instance instanceID
// (queue lane, docs/queue.md), committed with this turn. Everything else is
// RaiseEvent's.
func (c *Context) Enqueue(instanceID, queue string, payload any, opts ...RaiseOption) (string, error) {
	return c.send(history.LaneQueue, instanceID, queue, payload, opts)
}

func (c *Context) send(lane history.Lane, instanceID, name string, payload any, opts []RaiseOption) (string, error) {
	var o raiseOptions
	for _, opt := range opts {
		opt(&o)
	}
	var reasons []string
	reasons = textReasons(reasons, "instance id", instanceID, MaxIDBytes)
	reasons = textReasons(reasons, "event name", name, MaxNameBytes)
	raw, err := c.outbound(name, "payload", "a send from a workflow", payload, &o, reasons)
	if err != nil {
		return "", err
	}
	return c.s.Send(lane, instanceID, name, o.eventID, raw), nil
}

// outbound finishes the checks of an event a workflow sends out
// (ctx.Publish, ctx.RaiseEvent, ctx.Enqueue) after its own reasons: the
// event id, StartIfAbsent (which does not apply to op), and the encoding
// and caps of v (called what in the reasons). It returns v encoded, or an
// *EventInvalidError listing every reason.
func (c *Context) outbound(name, what, op string, v any, o *raiseOptions, reasons []string) (json.RawMessage, error) {
	if o.eventID != "" {
		reasons = textReasons(reasons, "event id", o.eventID, MaxIDBytes)
	}
	if o.start {
		reasons = append(reasons, "StartIfAbsent does not apply to "+op)
	}
	raw, reasons := encodeJSON(reasons, what, v, c.rt.cfg.MaxPayloadDepth)
	kind := EventMalformed
	if len(raw) > c.rt.cfg.MaxPayloadBytes {
		if len(reasons) == 0 {
			kind = EventTooLarge
		}
		reasons = append(reasons, fmt.Sprintf("%s is %d bytes, over the %d-byte cap", what, len(raw), c.rt.cfg.MaxPayloadBytes))
	}
	if len(reasons) > 0 {
		return nil, &EventInvalidError{Name: name, Kind: kind, Reasons: reasons}
	}
	return raw, nil
}

// Version says which version of the code to run for the change changeID,
// a number in [min, max] (docs/engine.md#versioning), so that new code
// runs alongside instances that started under the old:
//
//	if ctx.Version("send-receipt", herald.DefaultVersion, 1) == 1 {
//	    // the new code
//	} else {
//	    // the code as it was
//	}
//
// The first time an execution runs this call (not replaying), it records
// max in history (a VersionMarker) and returns it. A replay returns the
// recorded version; a replay of a history that has no marker here (it was
// made by the code before the change) returns min, without a
// non-determinism error, so min's branch must be the old code. Within an
// execution the answer for a changeID is fixed: later calls return it.
// A recorded version outside [min, max] (its branch was removed) fails
// the instance with a *NondeterminismError. An empty or malformed
// changeID, or min > max, panics (the workflow fails, kind "panic").
func (c *Context) Version(changeID string, min, max int) int {
	if reasons := textReasons(nil, "change id", changeID, MaxNameBytes); len(reasons) > 0 {
		panic("herald: Version: " + strings.Join(reasons, "; "))
	}
	return c.s.Version(changeID, min, max)
}

// SideEffect runs fn once, the first time the workflow gets here, and
// records its value in history (encoded as JSON; a SideEffect event);
// every replay decodes the recorded value into out without calling fn. Use
// it for small non-deterministic values (a generated id, a reading of the
// wall clock, a feature flag): anything with effects on the world belongs
// in an activity. A value that cannot be encoded, is over
// Config.MaxPayloadBytes or nests deeper than Config.MaxPayloadDepth
// panics (the workflow fails, kind "panic", and nothing is recorded); the
// error is out's decoding.
func (c *Context) SideEffect(fn func() any, out any) error {
	v := c.s.SideEffect("", func() json.RawMessage {
		raw, reasons := encodeJSON(nil, "value", fn(), c.rt.cfg.MaxPayloadDepth)
		if len(raw) > c.rt.cfg.MaxPayloadBytes {
			reasons = append(reasons, fmt.Sprintf("value is %d bytes, over the %d-byte cap", len(raw), c.rt.cfg.MaxPayloadBytes))
		}
		if len(reasons) > 0 {
			panic("herald: SideEffect: " + strings.Join(reasons, "; "))
		}
		return raw
	})
	if out == nil || len(v) == 0 {
		return nil
	}
	if err := json.Unmarshal(v, out); err != nil {
		return fmt.Errorf("herald: decode side effect into %T: %w", out, err)
	}
	return nil
}

// SideEffect is Context.SideEffect with the value's type: fn runs once and
// its value is recorded; a replay returns the recorded value.
func SideEffect[T any](ctx *Context, fn func() T) (T, error) {
	var out T
	err := ctx.SideEffect(func() any { return fn() }, &out)
	return out, err
}

// Random returns the execution's random numbers: a *rand.Rand seeded, the
// first time an execution asks, with 128 random bits recorded in history (a
// SideEffect event named "herald.random"), so every replay of the execution
// (ReplayHistory's too) draws the same numbers, provided the code draws in
// the same order. The same source serves the rest of the turn; do not
// share it with goroutines.
func (c *Context) Random() *rand.Rand { return c.s.Random() }
