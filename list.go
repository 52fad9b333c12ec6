package herald

import (
	"context"
	"fmt"
	"time"

	"github.com/heraldwf/herald/storage"
)

// MaxListLimit is the largest page ListInstances returns.
const MaxListLimit = 1000

// InstanceFilter narrows Client.ListInstances. Zero fields do not filter.
type InstanceFilter struct {
	// Workflow keeps the instances of that workflow.
	Workflow string
	// Status keeps the instances in that status.
	Status Status
	// CreatedAfter and CreatedBefore keep the instances created in
	// [CreatedAfter, CreatedBefore); a zero time is unbounded.
	CreatedAfter  time.Time
	CreatedBefore time.Time
	// Attributes keeps the instances that have every one of these
	// searchable attributes (ctx.SetAttributes) with an equal value of
	// the same type: a string, a bool, an integer or a time.Time (equal to
	// the nanosecond). At most MaxAttributes keys.
	Attributes map[string]any
	// Limit is the page size: default 100, at most MaxListLimit.
	Limit int
	// Cursor continues a listing: the Next of the previous page ("" = the
	// first page). Keep the other fields as they were for that page.
	Cursor string
}

// InstancePage is one page of ListInstances.
type InstancePage struct {
	// Instances, newest first (by creation time, then id).
	Instances []*InstanceInfo
	// Next is the cursor of the next page, "" when this is the last.
	Next string
}

// ListInstances lists the tenant's instances, newest first, a page at a
// time: pass the page's Next as the next call's Cursor. Paging is stable
// while instances are created: a page continues after the last instance of
// the previous one, so none is listed twice or skipped.
//
// Errors: an *InvalidArgumentError (ErrInvalidArgument) for a negative or
// too large Limit, an unknown Status, a malformed workflow name, a time
// range that ends before it starts, or an attribute filter with a
// malformed key or a value of another type; ErrInvalidArgument for a cursor no
// listing returned.
func (c *Client) ListInstances(ctx context.Context, f InstanceFilter) (*InstancePage, error) {
	var reasons []string
	if f.Workflow != "" {
		reasons = textReasons(reasons, "workflow name", f.Workflow, MaxNameBytes)
	}
	switch f.Status {
	case "", StatusPending, StatusRunning, StatusCompleted, StatusFailed, StatusTerminated, StatusCanceled:
	default:
		reasons = append(reasons, fmt.Sprintf("status %.64q is not an instance status", f.Status))
	}
	if f.Limit < 0 || f.Limit > MaxListLimit {
		reasons = append(reasons, fmt.Sprintf("limit %d is outside 0..%d", f.Limit, MaxListLimit))
	}
	if !f.CreatedAfter.IsZero() && !f.CreatedBefore.IsZero() && !f.CreatedAfter.Before(f.CreatedBefore) {
		reasons = append(reasons, "CreatedAfter is not before CreatedBefore")
	}
	attrs, reasons := filterAttributes(reasons, f.Attributes)
	if !cleanText(f.Cursor) {
		reasons = append(reasons, "cursor is not valid UTF-8 or contains a NUL byte")
	}
	if len(reasons) > 0 {
		return nil, &InvalidArgumentError{Op: "ListInstances", Reasons: reasons}
	}
	type page struct {
		ins  []*storage.Instance
		next string
	}
	p, err := idempotent(ctx, func() (page, error) {
		ins, next, err := c.store.InstanceList(ctx, &storage.InstanceListParams{Tenant: c.tenant,
			Workflow: f.Workflow, Status: f.Status, CreatedAfter: f.CreatedAfter, CreatedBefore: f.CreatedBefore,
			Limit: f.Limit, After: f.Cursor, Attributes: attrs})
		return page{ins, next}, err
	})
	if err != nil {
		return nil, fmt.Errorf("list instances: %w", err)
	}
	out := &InstancePage{Instances: make([]*InstanceInfo, len(p.ins)), Next: p.next}
	for i, in := range p.ins {
		out.Instances[i] = infoOf(in)
	}
	return out, nil
}
