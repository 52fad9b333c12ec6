package storage

import (
	"encoding/json"
	"time"
)

// ParentClosePolicy says what becomes of a child workflow that is still
// running when its parent ends (completed, failed, canceled or terminated;
// not when it continues as new).
type ParentClosePolicy string

// Parent-close policies.
const (
	// ParentCloseTerminate terminates the child (the default): a terminate
	// message (MsgTerminate) is added to its inbox in the parent's ending
	// transaction, and the child's next turn terminates it.
	ParentCloseTerminate ParentClosePolicy = "terminate"
	// ParentCloseAbandon leaves the child running.
	ParentCloseAbandon ParentClosePolicy = "abandon"
	// ParentCloseRequestCancel asks the child to cancel, as InstanceCancel
	// does.
	ParentCloseRequestCancel ParentClosePolicy = "request_cancel"
)

// ChildStart is a child workflow a turn starts
// (TurnCommitParams.StartChildren). In the turn's transaction the store
// creates the instance as InstanceCreate does, recording its parent (the
// committing instance, its execution and TaskSeq) and ClosePolicy, and
// marks the parent HasChildren. If ID is taken it creates nothing and adds
// a child_failed message (Failure kind child_id_exists) to the parent's
// inbox instead: a child never attaches to an instance that existed.
//
// The family rules: every end of an instance (a terminal turn commit with
// Family set, InstanceTerminate) does in its transaction, after the
// instance row has its final status:
//
//   - if it is a child whose parent is pending or running the execution
//     that started it, a child_completed (status completed, with the
//     output) or child_failed (any other end, with the failure) message is
//     added to the parent's inbox, visible at once;
//   - every child of it that is pending or running gets its close policy:
//     a terminate message (ParentCloseTerminate), a cancel request as
//     InstanceCancel makes (ParentCloseRequestCancel), or nothing
//     (ParentCloseAbandon).
//
// The messages' Name says why ("parent <id> ended <status>").
type ChildStart struct {
	ID          string
	Workflow    string
	Input       json.RawMessage
	TaskSeq     int // the parent's ChildWorkflowScheduled
	ClosePolicy ParentClosePolicy
}

// InstanceCancelParams asks an instance to cancel (InstanceCancel).
type InstanceCancelParams struct {
	Tenant string
	ID     string
	Reason string
	Now    time.Time
}
