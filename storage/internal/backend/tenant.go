package backend

import (
	"fmt"

	"github.com/heraldwf/herald/heraldtype"
	"github.com/heraldwf/herald/storage"
)

// ValidateTenantsReady checks TenantsReady's params and returns the kinds
// to look for (zero means storage.WorkAll).
func ValidateTenantsReady(p *storage.TenantsReadyParams) (storage.WorkKind, error) {
	kinds := p.Kinds
	if kinds == 0 {
		kinds = storage.WorkAll
	}
	if kinds&^storage.WorkAll != 0 {
		return 0, fmt.Errorf("unknown work kinds %#x: %w", uint8(p.Kinds), heraldtype.ErrInvalidArgument)
	}
	for _, t := range p.Tenants {
		if err := storage.ValidateTenantID(t); err != nil {
			return 0, err
		}
	}
	return kinds, nil
}

// ListCursor decodes InstanceList's cursor: the created_at (unix
// nanoseconds) and id of the last instance of the previous page. ok is
// false for the first page; a cursor EncodeListCursor did not make is
// refused with heraldtype.ErrInvalidArgument.
func ListCursor(after string) (createdAt int64, id string, ok bool, err error) {
	if after == "" {
		return 0, "", false, nil
	}
	createdAt, id, err = DecodeBookmark(after)
	if err == nil && id == "" {
		err = fmt.Errorf("malformed list cursor: %w", heraldtype.ErrInvalidArgument)
	}
	if err != nil {
		return 0, "", false, err
	}
	return createdAt, id, true, nil
}

// ListPage cuts the instances an InstanceList read (limit+1 at most, in page
// order) to a page of limit and returns the cursor of the next page: "" if
// this page is the last. The cursor is a bookmark (EncodeBookmark) of the
// page's last instance.
func ListPage(insts []*storage.Instance, limit int) ([]*storage.Instance, string) {
	if len(insts) <= limit {
		return insts, ""
	}
	insts = insts[:limit]
	last := insts[limit-1]
	return insts, EncodeBookmark(last.CreatedAt.UnixNano(), last.ID)
}
