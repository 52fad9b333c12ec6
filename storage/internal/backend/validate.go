package backend

import (
	"fmt"

	"github.com/heraldwf/herald/heraldtype"
	"github.com/heraldwf/herald/history"
	"github.com/heraldwf/herald/storage"
)

// The checks below are the Store methods' (each backend calls them before
// it writes): every failure wraps heraldtype.ErrInvalidArgument, except where
// noted.

// ValidateCreate checks InstanceCreate's params (also those of an
// EventRaise's StartIfAbsent).
func ValidateCreate(p *storage.InstanceCreateParams) error {
	if p.ID == "" {
		return Invalid("empty instance id")
	}
	if p.Workflow == "" {
		return Invalid("empty workflow name")
	}
	return nil
}

// ValidateRaise checks the ids of EventRaise's params and its definition
// version (not negative when checked).
func ValidateRaise(p *storage.EventRaiseParams) error {
	if p.InstanceID == "" {
		return Invalid("empty instance id")
	}
	if p.EventID == "" {
		return Invalid("empty event id")
	}
	if p.CheckDefinition && p.DefinitionVersion < 0 {
		return Invalid("negative definition version %d", p.DefinitionVersion)
	}
	return nil
}

// StartIfAbsent returns the InstanceCreate params of an EventRaise's
// StartIfAbsent (nil if it is not set): the tenant and id are those of p,
// and a zero Now is p.Now. It checks them as ValidateCreate does.
func StartIfAbsent(p *storage.EventRaiseParams) (*storage.InstanceCreateParams, error) {
	if p.StartIfAbsent == nil {
		return nil, nil
	}
	c := *p.StartIfAbsent
	c.Tenant, c.ID = p.Tenant, p.InstanceID
	if c.Now.IsZero() {
		c.Now = p.Now
	}
	if err := ValidateCreate(&c); err != nil {
		return nil, err
	}
	return &c, nil
}

// ValidateDefinition checks the fields of an event definition the stores
// keep and returns the buffer policy to store (an empty one is
// heraldtype.BufferFIFO). The schema is not looked at: the engine compiles it
// before calling.
func ValidateDefinition(d *heraldtype.EventDefinition) (string, error) {
	if d.Name == "" {
		return "", Invalid("empty event name")
	}
	buffer := d.Buffer
	switch buffer {
	case "":
		buffer = heraldtype.BufferFIFO
	case heraldtype.BufferFIFO, heraldtype.BufferLatest:
	default:
		return "", Invalid("unknown buffer policy %q (want %q or %q)", d.Buffer, heraldtype.BufferFIFO, heraldtype.BufferLatest)
	}
	if d.Retention < 0 {
		return "", Invalid("negative retention %v", d.Retention)
	}
	if d.MaxPayloadBytes < 0 {
		return "", Invalid("negative payload cap %d", d.MaxPayloadBytes)
	}
	if c := d.Correlation; c != nil && c.TTL < 0 {
		return "", Invalid("negative correlation TTL %v", c.TTL)
	}
	return buffer, nil
}

// ValidateCorrelated checks the name of a correlated event.
func ValidateCorrelated(def, key string) error {
	if def == "" {
		return Invalid("empty event definition")
	}
	if key == "" {
		return Invalid("empty correlation key")
	}
	return nil
}

// ValidateCorrelatedSearch checks CorrelatedSearch's params (not nil): the
// definition is named. A bookmark is checked as it is decoded
// (DecodeBookmark).
func ValidateCorrelatedSearch(p *storage.CorrelatedSearchParams) error {
	if p.Def == "" {
		return Invalid("empty event definition")
	}
	return nil
}

// ValidateTraceParent checks a trace context to store
// (storage.TraceParentProblem); the error wraps ErrInvalidArgument.
func ValidateTraceParent(s string) error {
	if p := storage.TraceParentProblem(s); p != "" {
		return fmt.Errorf("trace context %s: %w", p, heraldtype.ErrInvalidArgument)
	}
	return nil
}

// ValidateLeader checks LeaderElect's params (needLease) and LeaderResign's.
func ValidateLeader(p *storage.LeaderElectParams, needLease bool) error {
	if p.Name == "" {
		return Invalid("empty leadership name")
	}
	if p.Holder == "" {
		return Invalid("empty holder")
	}
	if needLease && p.Lease <= 0 {
		return Invalid("lease %v must be positive", p.Lease)
	}
	return nil
}

// CommitStatus checks TurnCommit's params and returns the status the
// commit leaves the instance in (an empty Status is heraldtype.StatusRunning).
// A missing lock token wraps heraldtype.ErrLeaseLost.
func CommitStatus(p *storage.TurnCommitParams) (heraldtype.Status, error) {
	status := p.Status
	if status == "" {
		status = heraldtype.StatusRunning
	}
	switch status {
	case heraldtype.StatusRunning, heraldtype.StatusCompleted, heraldtype.StatusFailed, heraldtype.StatusTerminated,
		heraldtype.StatusCanceled:
	default:
		return "", Invalid("invalid status %q", p.Status)
	}
	if p.ContinueAsNew != nil && status != heraldtype.StatusRunning {
		return "", Invalid("continue-as-new with status %q", status)
	}
	if p.LockToken == "" {
		return "", fmt.Errorf("empty lock token: %w", heraldtype.ErrLeaseLost)
	}
	return status, nil
}

// TerminateEnd is how InstanceTerminate ends an instance: terminated with
// the reason, or, with p.Failure set, failed with that failure (the history
// event appended says which).
func TerminateEnd(p *storage.InstanceTerminateParams) (heraldtype.Status, history.Kind, *history.Failure) {
	if p.Failure != nil {
		return heraldtype.StatusFailed, history.ExecutionFailed, p.Failure
	}
	return heraldtype.StatusTerminated, history.ExecutionTerminated, &history.Failure{Kind: "terminated", Message: p.Reason}
}
