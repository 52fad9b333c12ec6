// Package timeline renders a workflow instance as text people read: every
// execution's history, one line per event with its time since the start,
// then the fate of every event sent to the instance. The herald command
// prints it; a web UI can render the same Instance.
//
// An Instance is plain data with its own JSON tags, so a recorded one (see
// testdata) renders the same whatever the engine's own types become.
package timeline

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/heraldwf/herald"
	"github.com/heraldwf/herald/history"
)

// Instance is what a timeline shows of one instance.
type Instance struct {
	ID       string `json:"id"`
	Workflow string `json:"workflow"`
	// Status is the instance's status (pending, running, completed, …).
	Status string `json:"status"`
	// Output is the result of a completed instance.
	Output json.RawMessage `json:"output,omitempty"`
	// Error is the failure of a failed or terminated instance.
	Error string `json:"error,omitempty"`
	// Executions holds the history of every execution, the first first.
	Executions [][]history.Event `json:"executions"`
	// Events are the instance's entries in the fate ledger, oldest first.
	Events []Event `json:"events,omitempty"`
}

// Event is the fate of one event sent to the instance.
type Event struct {
	ID   string       `json:"id"`
	Lane history.Lane `json:"lane"`
	Name string       `json:"name"`
	// Key is the correlation key of a correlated-lane event.
	Key    string             `json:"key,omitempty"`
	Fate   history.Fate       `json:"fate"`
	Reason history.DropReason `json:"reason,omitempty"`
	// Execution the event is buffered in or was delivered in.
	Execution       int `json:"execution,omitempty"`
	OriginExecution int `json:"origin_execution,omitempty"`
	WaitNumber      int `json:"wait_number,omitempty"`
}

// Source is what Load reads an instance from; *herald.Client is one.
type Source interface {
	Status(ctx context.Context, instanceID string) (*herald.InstanceInfo, error)
	History(ctx context.Context, instanceID string, execution int) ([]history.Event, error)
	Events(ctx context.Context, instanceID string, filter ...herald.EventFilter) ([]*herald.EventRecord, error)
}

// Load reads the instance id from src: its status, the history of every
// execution and its events. It returns the first error src returns
// (herald.ErrNotFound for an unknown id).
func Load(ctx context.Context, src Source, id string) (*Instance, error) {
	info, err := src.Status(ctx, id)
	if err != nil {
		return nil, err
	}
	in := &Instance{ID: id, Workflow: info.Workflow, Status: string(info.Status)}
	switch info.Status {
	case herald.StatusCompleted:
		in.Output = info.Output
	case herald.StatusFailed, herald.StatusTerminated, herald.StatusCanceled:
		if err := info.Err(); err != nil {
			in.Error = err.Error()
		}
	}
	for e := 1; e <= info.Execution; e++ {
		evs, err := src.History(ctx, id, e)
		if err != nil {
			return nil, err
		}
		in.Executions = append(in.Executions, evs)
	}
	recs, err := src.Events(ctx, id)
	if err != nil {
		return nil, err
	}
	for _, r := range recs {
		in.Events = append(in.Events, Event{ID: r.EventID, Lane: r.Lane, Name: r.Name, Key: r.Key,
			Fate: r.Fate, Reason: r.Reason, Execution: r.Execution, OriginExecution: r.OriginExecution,
			WaitNumber: r.WaitNumber})
	}
	return in, nil
}

// Print loads the instance id from src and writes its timeline to w.
func Print(ctx context.Context, w io.Writer, src Source, id string) error {
	in, err := Load(ctx, src, id)
	if err != nil {
		return err
	}
	return Write(w, in)
}

// Write writes in's timeline to w: a header with the outcome, each
// execution's history with times relative to the first event, and the fate
// of every event. It returns the first write error.
func Write(w io.Writer, in *Instance) error {
	ew := &errWriter{w: w}
	outcome := in.Status
	switch {
	case len(in.Output) > 0:
		outcome += " → " + string(in.Output)
	case in.Error != "":
		outcome += " → " + in.Error
	}
	fmt.Fprintf(ew, "\n━━ %s (%s) %s\n", in.ID, in.Workflow, outcome)
	var t0 time.Time
	for i, evs := range in.Executions {
		e := i + 1
		fmt.Fprintf(ew, "  execution %d\n", e)
		for _, ev := range evs {
			if t0.IsZero() {
				t0 = ev.Time
			}
			fmt.Fprintf(ew, "    %+8.3fs  #%-3d %-25s %s\n", ev.Time.Sub(t0).Seconds(), ev.Seq, ev.Kind, describe(ev, e))
		}
	}
	if len(in.Events) > 0 {
		fmt.Fprintf(ew, "  events\n")
		for _, r := range in.Events {
			fmt.Fprintf(ew, "    %-24s %-10s %-10s %s\n", r.ID, r.Lane, r.Name, fate(r))
		}
	}
	return ew.err
}

// errWriter keeps the first error of a run of writes, so Write checks once.
type errWriter struct {
	w   io.Writer
	err error
}

func (e *errWriter) Write(p []byte) (int, error) {
	if e.err != nil {
		return 0, e.err
	}
	n, err := e.w.Write(p)
	e.err = err
	return n, err
}

// describe says what a history event means, in words; execution is the
// one it belongs to.
func describe(ev history.Event, execution int) string {
	var parts []string
	switch ev.Kind {
	case history.ExecutionStarted, history.ExecutionContinuedAsNew:
		if ev.Workflow != "" {
			parts = append(parts, ev.Workflow)
		}
		parts = append(parts, "input="+string(ev.Input))
	case history.ActivityScheduled:
		parts = append(parts, ev.Name, "input="+string(ev.Input))
	case history.ActivityCompleted:
		parts = append(parts, fmt.Sprintf("%s (of #%d) → %s", ev.Name, ev.TaskSeq, ev.Result))
	case history.ActivityFailed:
		parts = append(parts, fmt.Sprintf("%s (of #%d) ✗ %s", ev.Name, ev.TaskSeq, ev.Failure.Message))
	case history.TimerCreated:
		parts = append(parts, "fires at +"+ev.FireAt.Sub(ev.Time).String())
	case history.TimerFired, history.TimerCancelled, history.ActivityCancelRequested:
		parts = append(parts, fmt.Sprintf("(of #%d)", ev.TaskSeq))
	case history.EventPublished:
		parts = append(parts, fmt.Sprintf("%s %s data=%s", ev.Name, ev.EventID, ev.Payload))
	case history.AttributesUpserted:
		parts = append(parts, describeAttributes(ev))
	case history.EventSent:
		parts = append(parts, fmt.Sprintf("%s %q to %s %s payload=%s", ev.Lane, ev.Name, ev.Target, ev.EventID, ev.Payload))
	case history.VersionMarker, history.SideEffectRecorded:
		parts = append(parts, fmt.Sprintf("%s → %s", ev.Name, ev.Result))
	case history.EventSubscribed:
		s := fmt.Sprintf("wait for %q", ev.Name)
		switch {
		case ev.NoWait:
			s = fmt.Sprintf("try to receive from queue %q", ev.Name)
		case ev.Lane == history.LaneQueue:
			s = fmt.Sprintf("receive from queue %q", ev.Name)
		case ev.Lane == history.LaneCorrelated:
			s = fmt.Sprintf("wait for correlated %q key %q", ev.Name, ev.Key)
		}
		switch {
		case ev.EventID != "":
			s += fmt.Sprintf(" → took %s at once (#%d)", ev.EventID, ev.WaitNumber)
		case ev.NoWait:
			s += " → empty"
		}
		parts = append(parts, s)
	case history.EventSubscribedCancelled:
		s := fmt.Sprintf("wait for %q (#%d) withdrawn", ev.Name, ev.TaskSeq)
		if ev.Lane == history.LaneQueue {
			s = fmt.Sprintf("receive from queue %q (#%d) cancelled, nothing consumed", ev.Name, ev.TaskSeq)
		}
		switch {
		case ev.EventID == "":
		case ev.Reason != "":
			s += fmt.Sprintf(", gave back %s ✗ dropped: %s", ev.EventID, ev.Reason)
		case ev.WaitNumber != 0:
			s += fmt.Sprintf(", gave back %s → delivered to #%d", ev.EventID, ev.WaitNumber)
		default:
			s += fmt.Sprintf(", gave back %s → buffered", ev.EventID)
		}
		parts = append(parts, s)
	case history.EventRaised:
		s := fmt.Sprintf("%q id=%s payload=%s", ev.Name, ev.EventID, ev.Payload)
		switch ev.Lane {
		case history.LaneQueue:
			s = "[queue] " + s
		case history.LaneCorrelated:
			s = fmt.Sprintf("[correlated key %q] %s", ev.Key, s)
		}
		switch {
		case ev.TaskSeq > 0:
			s += fmt.Sprintf(" → delivered to #%d (of #%d)", ev.WaitNumber, ev.TaskSeq)
		case ev.AtStart && ev.OriginExecution > 0 && ev.OriginExecution != execution:
			s += fmt.Sprintf(" → carried over, buffered (arrived in execution %d)", ev.OriginExecution)
		case ev.AtStart:
			s += " → buffered (arrived before the code started)"
		default:
			s += " → buffered"
		}
		parts = append(parts, s)
	case history.EventDropped:
		s := fmt.Sprintf("%q id=%s ✗ dropped: %s", ev.Name, ev.EventID, ev.Reason)
		if ev.Count > 1 {
			s = fmt.Sprintf("%q ids %s…%s ✗ %d dropped: %s", ev.Name, ev.EventID,
				ev.LastEventID, ev.Count, ev.Reason)
		}
		if ev.Lane == history.LaneQueue {
			s = "[queue] " + s
		}
		parts = append(parts, s)
	case history.ExecutionCompleted:
		parts = append(parts, "result="+string(ev.Result))
	case history.ExecutionFailed, history.ExecutionTerminated:
		if ev.Failure != nil {
			parts = append(parts, ev.Failure.Message)
		}
	case history.ChildWorkflowScheduled:
		parts = append(parts, fmt.Sprintf("%s child=%s input=%s", ev.Name, ev.ChildID, ev.Input))
	case history.ChildWorkflowCompleted:
		parts = append(parts, fmt.Sprintf("%s %s (of #%d) → %s", ev.Name, ev.ChildID, ev.TaskSeq, ev.Result))
	case history.ChildWorkflowFailed:
		parts = append(parts, fmt.Sprintf("%s %s (of #%d) ✗ %s", ev.Name, ev.ChildID, ev.TaskSeq, ev.Failure.Error()))
	case history.ChildWorkflowCancelRequested:
		parts = append(parts, fmt.Sprintf("%s %s (of #%d)", ev.Name, ev.ChildID, ev.TaskSeq))
	case history.ExecutionCancelRequested, history.ExecutionCanceled:
		if ev.Failure != nil {
			parts = append(parts, fmt.Sprintf("reason=%q", ev.Failure.Message))
		}
		if ev.Result != nil {
			parts = append(parts, "result="+string(ev.Result))
		}
	}
	return strings.Join(parts, " ")
}

// fate says where an event stands, in words.
func fate(r Event) string {
	switch r.Fate {
	case history.FateDelivered:
		what := "wait"
		switch r.Lane {
		case history.LaneQueue:
			what = "receive"
		case history.LaneCorrelated:
			what = fmt.Sprintf("correlated wait (key %q)", r.Key)
		}
		s := fmt.Sprintf("delivered to %s #%d of execution %d", what, r.WaitNumber, r.Execution)
		if r.OriginExecution != 0 && r.OriginExecution != r.Execution {
			s += fmt.Sprintf(" (arrived in execution %d)", r.OriginExecution)
		}
		return s
	case history.FateDropped:
		return "dropped: " + string(r.Reason)
	case history.FateBuffered:
		return fmt.Sprintf("buffered in execution %d", r.Execution)
	default:
		return string(r.Fate)
	}
}

// Describe says what the history event ev of execution means, in the words
// of a timeline's line (the herald CLI's history table uses it).
func Describe(ev history.Event, execution int) string { return describe(ev, execution) }

// Fate says where the event r stands, in the words of a timeline's events
// section.
func Fate(r Event) string { return fate(r) }
