package herald

import (
	"context"
	"fmt"
	"strings"

	"github.com/heraldwf/herald/internal/replay"
	"github.com/heraldwf/herald/storage"
)

// ParentClosePolicy says what becomes of a child workflow still running
// when its parent ends (completes, fails, is canceled or terminated). It
// is not applied when the parent continues as new: the children of the
// ended execution keep running, and their results are no longer delivered
// (the futures belonged to that execution).
type ParentClosePolicy int

const (
	// ParentCloseTerminate terminates the child (the default). The
	// terminate request is written to the child's inbox in the parent's
	// ending transaction; the child's next turn terminates it.
	ParentCloseTerminate ParentClosePolicy = iota
	// ParentCloseAbandon leaves the child running on its own.
	ParentCloseAbandon
	// ParentCloseRequestCancel asks the child to cancel, as
	// Client.CancelWorkflow does: it sees ctx.Done and may clean up.
	ParentCloseRequestCancel
)

func (p ParentClosePolicy) stored() (storage.ParentClosePolicy, bool) {
	switch p {
	case ParentCloseTerminate:
		return storage.ParentCloseTerminate, true
	case ParentCloseAbandon:
		return storage.ParentCloseAbandon, true
	case ParentCloseRequestCancel:
		return storage.ParentCloseRequestCancel, true
	}
	return "", false
}

// ChildOption configures CallWorkflow.
type ChildOption func(*childOptions)

type childOptions struct {
	id     string
	policy ParentClosePolicy
}

// WithChildID sets the child's instance id. Default: derived from the
// parent's instance id, execution and the call's place in history
// ("<parent>/<execution>/<seq>"), the same on every replay.
func WithChildID(id string) ChildOption {
	return func(o *childOptions) { o.id = id }
}

// WithParentClosePolicy sets what becomes of the child if it is still
// running when the parent ends (default ParentCloseTerminate).
func WithParentClosePolicy(p ParentClosePolicy) ChildOption {
	return func(o *childOptions) { o.policy = p }
}

// CallWorkflow starts the registered workflow name as a child of this
// instance, with input (encoded as JSON), and returns a future of its
// result. The child instance is created in the same transaction as the
// turn that calls CallWorkflow, and its end (in the child's own ending
// transaction) is delivered to this instance's inbox: Get then gives its
// result, or a *ChildWorkflowError if it failed, was terminated or
// canceled (errors.As; Unwrap gives the child's own error). A child that
// continues as new is one child: the future resolves with its last
// execution's result.
//
// If the id (WithChildID, or the derived one) is taken by an instance that
// exists already, no child is started and Get returns a
// *ChildWorkflowError matching ErrInstanceExists: a parent never attaches
// to an instance it did not start. A future that loses a Select asks its
// child to cancel (as CancelWorkflow does) and no longer waits for it.
// The child shows its parent in Status and ListInstances (ParentID).
//
// A malformed workflow name or id, an input that cannot be encoded or
// nests deeper than Config.MaxPayloadDepth, or an unknown close policy
// starts nothing: Get returns an *InvalidArgumentError at once.
func (c *Context) CallWorkflow(name string, input any, opts ...ChildOption) Future {
	var o childOptions
	for _, opt := range opts {
		opt(&o)
	}
	reasons := textReasons(nil, "workflow name", name, MaxNameBytes)
	if o.id != "" {
		reasons = textReasons(reasons, "child instance id", o.id, MaxIDBytes)
	}
	policy, ok := o.policy.stored()
	if !ok {
		reasons = append(reasons, fmt.Sprintf("parent-close policy %d is not one of the ParentClose constants", o.policy))
	}
	in, reasons := encodeJSON(reasons, "input", input, c.rt.cfg.MaxPayloadDepth)
	if len(reasons) > 0 {
		// The same code makes the same mistake on every replay: no
		// decision is recorded, the future fails at once.
		return Future{c.s.Failed(&InvalidArgumentError{Op: "CallWorkflow", Reasons: reasons})}
	}
	return Future{c.s.CallWorkflow(name, o.id, in, policy)}
}

// Done returns a future that resolves once cancellation of this instance
// is requested (Client.CancelWorkflow, or a parent's close policy or
// Select). Use it in Select to stop waiting; the workflow may then run
// cleanup (activities, timers) and return: the instance ends canceled.
// Asking for it records nothing.
func (c *Context) Done() Future { return Future{c.s.Done()} }

// Err returns a *CanceledError (errors.Is(err, ErrCanceled)) once
// cancellation was requested, else nil.
func (c *Context) Err() error { return c.s.Err() }

// CancelWorkflow asks a running or pending instance to stop: the request
// is written to its inbox, and the workflow sees it through ctx.Done and
// ctx.Err. It may clean up (run activities, wait for timers) and returns;
// whatever it returns, the instance then ends canceled (a *CanceledError
// from InstanceInfo.Err and Result) unless it continues as new, which
// carries the request into the next execution. Unlike Terminate no code is
// cut short: a workflow that never looks at ctx.Done runs to its end (and
// still ends canceled).
//
// A second request is a no-op (nil). Errors: ErrNotFound,
// ErrInstanceNotRunning (the instance has ended), ErrInvalidArgument (a
// reason that is not valid UTF-8, has a NUL byte or is over MaxKeyBytes).
func (c *Client) CancelWorkflow(ctx context.Context, instanceID, reason string) error {
	if !textOK(instanceID, MaxIDBytes) {
		return notFound("cancel", instanceID)
	}
	if !cleanText(reason) || len(reason) > MaxKeyBytes {
		return &InvalidArgumentError{Op: "CancelWorkflow", Reasons: []string{
			fmt.Sprintf("reason must be valid UTF-8 without NUL bytes, at most %d bytes", MaxKeyBytes)}}
	}
	// A second request is a no-op: a call whose connection was lost is
	// retried like a read.
	now := c.cfg.Clock.Now()
	_, err := idempotent(ctx, func() (bool, error) {
		return c.store.InstanceCancel(ctx, &storage.InstanceCancelParams{Tenant: c.tenant, ID: instanceID,
			Reason: reason, Now: now})
	})
	if err != nil {
		return fmt.Errorf("cancel %s: %w", instanceID, err)
	}
	return nil
}

// terminateRequested terminates the instance of a claimed turn whose inbox
// holds a terminate request (its parent ended with ParentCloseTerminate)
// instead of running the turn, and reports whether it did.
func (r *Runtime) terminateRequested(ctx context.Context, t *storage.Turn) bool {
	var reasons []string
	for _, m := range t.Messages {
		if m.Kind == storage.MsgTerminate {
			reasons = append(reasons, m.Name)
		}
	}
	if len(reasons) == 0 {
		return false
	}
	r.endFromTurn(ctx, t, "terminate child", strings.Join(reasons, "; "), nil)
	return true
}

// childCommit sets the child-workflow fields of a turn's commit.
func childCommit(p *storage.TurnCommitParams, t *storage.Turn, out *replay.Output) {
	p.StartChildren, p.CancelChildren = out.StartChildren, out.CancelChildren
	p.Family = out.Status.Terminal() && (t.Instance.ParentID != "" || t.Instance.HasChildren || len(out.StartChildren) > 0)
}
