package herald

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/heraldwf/herald/bus/jstarget"
	"github.com/heraldwf/herald/bus/pattern"
)

// A dry run of a bus script (docs/bus.md): the source runs against a sample
// event in the sandbox the bus uses — a child process with the address-space
// cap Bus.ScriptMemory, the timeout, the call-stack cap — and its result,
// log lines and error come back; nothing is stored, no subscription or
// execution is involved.

const (
	// MaxScriptTestTimeout caps a dry run's timeout.
	MaxScriptTestTimeout = time.Minute
	// MaxConcurrentScriptTests is how many dry runs a process runs at once;
	// more wait for a slot (or for their context to end).
	MaxConcurrentScriptTests = 2
	// DefaultScriptTestEventID is a dry run's event id when the sample
	// event has none.
	DefaultScriptTestEventID = "dry-run"
)

// scriptTestSlots bounds the dry runs of the process: each runs in a child
// process of its own, so an unbounded number of them would be an unbounded
// number of processes.
var scriptTestSlots = make(chan struct{}, MaxConcurrentScriptTests)

// ScriptTest is a dry run's input.
type ScriptTest struct {
	// Name names the script in stack traces (default "dry-run"); a
	// stored script's id when testing one.
	Name string
	// Source is the script's body, as PutScript takes it.
	Source string
	// Event is the sample event the script sees as ctx.event. Type is
	// required (an event type: order.paid); ID defaults to
	// DefaultScriptTestEventID, Timestamp to now, Data to null.
	Event BusEvent
	// Timeout bounds the run (zero: Bus.Timeout, at most
	// MaxScriptTestTimeout).
	Timeout time.Duration
}

// ScriptTestResult is the outcome of a dry run. A script that threw, timed
// out or passed its memory or stack cap is a result with Succeeded false
// and ErrorKind set (as an attempt of the bus would record it), not an
// error of TestScript.
type ScriptTestResult struct {
	Succeeded bool `json:"succeeded"`
	// Result is the returned value as JSON (null when the script returned
	// nothing).
	Result json.RawMessage `json:"result,omitempty"`
	// Logs are the lines the script logged (also before it failed).
	Logs      []string  `json:"logs,omitempty"`
	ErrorKind ErrorKind `json:"error_kind,omitempty"`
	Error     string    `json:"error,omitempty"`
	Stack     string    `json:"stack,omitempty"`
	// Duration is how long the run took, start of the child included.
	Duration Duration `json:"duration"`
}

// TestScript runs t.Source against t.Event for tenant (ctx.tenant.id) in a
// fresh sandboxed child process — the same sandbox, memory cap and error
// kinds as the bus's script targets — and returns the outcome. It stores
// nothing and reads nothing of the tenant but its limits (the sample
// event's data must fit MaxPayloadBytes and MaxPayloadDepth).
//
// Errors: *InvalidArgumentError (ErrInvalidArgument) for a bad tenant,
// name, event type or id, data that is not JSON or too large or deep, a
// source over MaxScriptBytes or not UTF-8, a timeout outside
// 0..MaxScriptTestTimeout; *ScriptSyntaxError for a source that does not
// parse; ctx's error if it ends first (waiting for a slot, or running).
// The program must call ServeScriptChild first thing in main, as for the
// bus's script targets.
func (r *Runtime) TestScript(ctx context.Context, tenant string, t ScriptTest) (*ScriptTestResult, error) {
	ps := tenantReasons(nil, tenant)
	if t.Name == "" {
		t.Name = DefaultScriptTestEventID
	}
	ps = textReasons(ps, "name", t.Name, MaxIDBytes)
	if len(t.Source) > MaxScriptBytes {
		ps = append(ps, fmt.Sprintf("source is %d bytes, over the %d-byte cap", len(t.Source), MaxScriptBytes))
	} else if !cleanText(t.Source) {
		ps = append(ps, "source is not valid UTF-8 or contains a NUL byte")
	}
	if err := pattern.ValidateEventType(t.Event.Type); err != nil {
		ps = append(ps, "event type: "+err.Error())
	}
	if t.Event.ID == "" {
		t.Event.ID = DefaultScriptTestEventID
	}
	ps = textReasons(ps, "event id", t.Event.ID, MaxIDBytes)
	if t.Event.Source != "" {
		ps = textReasons(ps, "event source", t.Event.Source, MaxNameBytes)
	}
	if t.Timeout < 0 || t.Timeout > MaxScriptTestTimeout {
		ps = append(ps, fmt.Sprintf("timeout %v is outside 0..%v", t.Timeout, MaxScriptTestTimeout))
	}
	if len(ps) == 0 {
		lim := r.door.limitsFor(ctx, tenant)
		if len(t.Event.Data) == 0 {
			t.Event.Data = json.RawMessage("null")
		}
		ps = jsonReasons(ps, "event data", t.Event.Data, lim.maxPayloadDepth)
		if len(t.Event.Data) > lim.maxPayloadBytes {
			ps = append(ps, fmt.Sprintf("event data is %d bytes, over the %d-byte cap", len(t.Event.Data), lim.maxPayloadBytes))
		}
	}
	if len(ps) > 0 {
		return nil, &InvalidArgumentError{Op: "TestScript", Reasons: ps}
	}
	compiled, err := jstarget.Compile(t.Name, t.Source)
	if err != nil {
		var se *jstarget.SyntaxError
		if errors.As(err, &se) {
			return nil, &ScriptSyntaxError{ScriptID: t.Name, Err: se}
		}
		return nil, &InvalidArgumentError{Op: "TestScript", Reasons: []string{err.Error()}}
	}
	timeout := t.Timeout
	if timeout == 0 {
		timeout = min(r.cfg.Bus.Timeout, MaxScriptTestTimeout)
	}
	if t.Event.Timestamp.IsZero() {
		t.Event.Timestamp = r.cfg.Clock.Now()
	}

	if err := ctx.Err(); err != nil {
		return nil, err
	}
	select {
	case scriptTestSlots <- struct{}{}:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	defer func() { <-scriptTestSlots }()
	// A runner of one child, for this run alone: whatever the script does
	// to its process, it is the last thing that process does.
	runner, err := jstarget.NewRunner(jstarget.Config{Children: 1, MemoryLimit: r.cfg.Bus.ScriptMemory, Timeout: timeout})
	if err != nil {
		return nil, fmt.Errorf("test script: start the script sandbox: %w", err)
	}
	defer runner.Close()
	began := time.Now()
	res, err := runner.Run(ctx, compiled, jstarget.Input{TenantID: tenant, Timeout: timeout,
		Event: jstarget.Event{ID: t.Event.ID, Type: t.Event.Type, Data: t.Event.Data, Timestamp: t.Event.Timestamp.UTC()}})
	out := &ScriptTestResult{Duration: Duration(time.Since(began))}
	if err != nil {
		var je *jstarget.Error
		if !errors.As(err, &je) {
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
			return nil, fmt.Errorf("test script: %w", err)
		}
		out.ErrorKind = scriptErrorKind(je.Kind)
		out.Error, out.Stack, out.Logs = capText(je.Message, MaxBusErrorBytes), capText(je.Stack, MaxBusErrorBytes), je.Logs
		return out, nil
	}
	out.Logs = res.Logs
	if len(res.Value) > MaxBusResultBytes {
		out.ErrorKind = ErrorResource
		out.Error = fmt.Sprintf("the result is %d bytes, over the %d-byte cap", len(res.Value), MaxBusResultBytes)
		return out, nil
	}
	out.Succeeded, out.Result = true, res.Value
	return out, nil
}

// scriptErrorKind maps a sandbox error kind onto the bus's error kinds, as
// a script target's attempt records them.
func scriptErrorKind(kind string) ErrorKind {
	switch kind {
	case jstarget.KindTimeout:
		return ErrorTimeout
	case jstarget.KindResource:
		return ErrorResource
	case jstarget.KindPermanent:
		return ErrorPermanent
	case jstarget.KindSyntax:
		return ErrorValidation
	}
	return ErrorRuntime
}

// ValidateScript checks source as PutScript would, storing nothing: nil if
// it parses; a *ScriptSyntaxError (line and column) if it does not; an
// *InvalidArgumentError for a source over MaxScriptBytes, not UTF-8 or
// holding a NUL byte.
func ValidateScript(source string) error {
	if len(source) > MaxScriptBytes {
		return &InvalidArgumentError{Op: "ValidateScript", Reasons: []string{
			fmt.Sprintf("source is %d bytes, over the %d-byte cap", len(source), MaxScriptBytes)}}
	}
	if !cleanText(source) {
		return &InvalidArgumentError{Op: "ValidateScript", Reasons: []string{"source is not valid UTF-8 or contains a NUL byte"}}
	}
	if _, err := jstarget.Compile("validate", source); err != nil {
		var se *jstarget.SyntaxError
		if errors.As(err, &se) {
			return &ScriptSyntaxError{ScriptID: "validate", Err: se}
		}
		return &InvalidArgumentError{Op: "ValidateScript", Reasons: []string{err.Error()}}
	}
	return nil
}
