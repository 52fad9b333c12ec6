package main

import (
	"context"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/heraldwf/herald"
	"github.com/heraldwf/herald/history"
)

// printTimeline writes an instance's histories (every execution) as a
// readable timeline, followed by the fate of every event sent to it.
func printTimeline(ctx context.Context, w io.Writer, c *herald.Client, id string) error {
	info, err := c.Status(ctx, id)
	if err != nil {
		return err
	}
	outcome := string(info.Status)
	switch info.Status {
	case herald.StatusCompleted:
		outcome += " → " + string(info.Output)
	case herald.StatusFailed, herald.StatusTerminated:
		outcome += " → " + info.Err().Error()
	}
	fmt.Fprintf(w, "\n━━ %s (%s) %s\n", id, info.Workflow, outcome)
	var t0 time.Time
	for e := 1; e <= info.Execution; e++ {
		evs, err := c.History(ctx, id, e)
		if err != nil {
			return err
		}
		fmt.Fprintf(w, "  execution %d\n", e)
		for _, ev := range evs {
			if t0.IsZero() {
				t0 = ev.Time
			}
			fmt.Fprintf(w, "    %+8.3fs  #%-3d %-25s %s\n", ev.Time.Sub(t0).Seconds(), ev.Seq, ev.Kind, describe(ev, e))
		}
	}
	recs, err := c.Events(ctx, id)
	if err != nil {
		return err
	}
	if len(recs) > 0 {
		fmt.Fprintf(w, "  events\n")
		for _, r := range recs {
			fmt.Fprintf(w, "    %-24s %-10s %-10s %s\n", r.EventID, r.Lane, r.Name, fate(r))
		}
	}
	return nil
}

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
	}
	return strings.Join(parts, " ")
}

func fate(r *herald.EventRecord) string {
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
