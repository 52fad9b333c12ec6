package backend

import (
	"encoding/json"
	"fmt"

	"github.com/heraldwf/herald/heraldtype"
	"github.com/heraldwf/herald/storage"
)

// TenantRow is a row of tenants: id, limits, created_at, updated_at.
type TenantRow struct {
	t                    heraldtype.Tenant
	limits               []byte
	createdAt, updatedAt int64
}

// Dest returns the scan destinations of the row's columns.
func (r *TenantRow) Dest() []any {
	return []any{&r.t.ID, &r.limits, &r.createdAt, &r.updatedAt}
}

// Tenant decodes the scanned row; limits that do not decode are ErrCorrupt.
func (r *TenantRow) Tenant() (*heraldtype.Tenant, error) {
	t := r.t
	if len(r.limits) > 0 {
		if err := json.Unmarshal(r.limits, &t.Limits); err != nil {
			return nil, fmt.Errorf("tenant %q: decode limits: %w: %w", t.ID, heraldtype.ErrCorrupt, err)
		}
	}
	t.CreatedAt, t.UpdatedAt = FromNanos(r.createdAt), FromNanos(r.updatedAt)
	return &t, nil
}

// TenantPutArgs checks a TenantPut's params (ErrInvalidArgument) and
// returns the limits in their stored form: JSON text, or nil (NULL) for no
// overrides.
func TenantPutArgs(p *storage.TenantPutParams) (*string, error) {
	if err := storage.ValidateTenantID(p.Tenant); err != nil {
		return nil, err
	}
	if err := p.Limits.Validate(); err != nil {
		return nil, err
	}
	if p.Limits == (heraldtype.TenantLimits{}) {
		return nil, nil
	}
	b, err := json.Marshal(p.Limits)
	if err != nil {
		return nil, fmt.Errorf("encode limits: %w", err)
	}
	s := string(b)
	return &s, nil
}
