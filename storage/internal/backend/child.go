package backend

import (
	"fmt"
	"time"

	"github.com/heraldwf/herald/heraldtype"
	"github.com/heraldwf/herald/history"
	"github.com/heraldwf/herald/storage"
)

// The family rules' values (storage.ChildStart), written once for both
// backends.

// ClosePolicy is the stored form of a child's parent-close policy: an
// empty or unknown one is terminate, the default.
func ClosePolicy(p storage.ParentClosePolicy) storage.ParentClosePolicy {
	switch p {
	case storage.ParentCloseAbandon, storage.ParentCloseRequestCancel:
		return p
	}
	return storage.ParentCloseTerminate
}

// ChildIDTaken is the failure a parent receives for a child whose id was
// taken.
func ChildIDTaken(id string) *history.Failure {
	return &history.Failure{Kind: heraldtype.FailureChildIDExists,
		Message: fmt.Sprintf("instance %q exists already: the child was not started", id)}
}

// ParentEndedReason is the reason given to the children of parent, which
// ended with status.
func ParentEndedReason(parent string, status heraldtype.Status) string {
	return fmt.Sprintf("parent %s ended %s", parent, status)
}

// ChildEndMessage is the message child's end adds to its parent's inbox:
// child_completed with the output, or child_failed with the failure (one is
// made up if the end recorded none).
func ChildEndMessage(child string, execution, seq int, status heraldtype.Status, output []byte, failure *history.Failure, now time.Time) *storage.Message {
	m := &storage.Message{Kind: storage.MsgChildCompleted, Execution: execution, TaskSeq: seq, Name: child,
		VisibleAt: now}
	if status == heraldtype.StatusCompleted {
		m.Result = RawOf(output)
		return m
	}
	m.Kind = storage.MsgChildFailed
	m.Failure = failure
	if m.Failure == nil {
		m.Failure = &history.Failure{Kind: string(status), Message: "the child workflow ended " + string(status)}
	}
	return m
}

// ParentCanceledReason is the reason given to a child whose parent asked
// it to cancel (its future lost a Select).
func ParentCanceledReason(parent string) string {
	return fmt.Sprintf("parent %s canceled it", parent)
}
