package sqlite

import (
	"database/sql"
	"fmt"
	"strings"

	"github.com/heraldwf/herald/storage"
	"github.com/heraldwf/herald/storage/internal/backend"
)

// applyAttributes applies a turn's attribute upserts to the instance's row
// (a JSON merge patch) and to instance_attributes. ups are validated.
func applyAttributes(w *wtx, tenant, id string, ups []storage.Attribute) error {
	if len(ups) == 0 {
		return nil
	}
	set, removed := backend.AttributePatch(ups)
	if _, err := w.exec(`UPDATE instances SET attributes = json_patch(attributes, ?) WHERE tenant = ? AND id = ?`,
		backend.AttributeDoc(set, removed, true), tenant, id); err != nil {
		return fmt.Errorf("set attributes: %w", err)
	}
	for _, k := range removed {
		if _, err := w.exec(`DELETE FROM instance_attributes WHERE tenant = ? AND instance_id = ? AND key = ?`, tenant, id, k); err != nil {
			return fmt.Errorf("remove attribute %s: %w", k, err)
		}
	}
	for _, a := range set {
		if _, err := w.exec(`INSERT INTO instance_attributes (tenant, instance_id, key, type, value, created_at)
			VALUES (?1, ?2, ?3, ?4, ?5, (SELECT created_at FROM instances WHERE tenant = ?1 AND id = ?2))
			ON CONFLICT (tenant, instance_id, key) DO UPDATE SET type = excluded.type, value = excluded.value`,
			tenant, id, a.Key, string(a.Type), a.Value); err != nil {
			return fmt.Errorf("set attribute %s: %w", a.Key, err)
		}
	}
	return nil
}

// attributeQuery is InstanceList's query when it filters on attributes:
// the page's instances are found by walking the first attribute's matches
// in instance_attributes_match backward in list order (created_at, id)
// from the cursor, each checked against the other attributes (a primary
// key probe each) and the instance's other filters, so a page costs what
// it skips, never the tenant's size; then their rows are read.
func attributeQuery(p *storage.InstanceListParams, createdAt int64, afterID string, paged bool, limit int) (string, []any) {
	first := p.Attributes[0]
	where := []string{"a0.tenant = ?", "a0.key = ?", "a0.value = ?", "a0.type = ?"}
	args := []any{p.Tenant, first.Key, first.Value, string(first.Type)}
	for _, a := range p.Attributes[1:] {
		// A primary key probe (a scalar subquery: the match index cannot
		// serve it).
		where = append(where, `(SELECT an.value, an.type FROM instance_attributes an
			WHERE an.tenant = a0.tenant AND an.instance_id = a0.instance_id AND an.key = ?) = (?, ?)`)
		args = append(args, a.Key, a.Value, string(a.Type))
	}
	if p.Workflow != "" {
		where = append(where, "i.workflow = ?")
		args = append(args, p.Workflow)
	}
	if p.Status != "" {
		where = append(where, "i.status = ?")
		args = append(args, string(p.Status))
	}
	if !p.CreatedAfter.IsZero() {
		where = append(where, "a0.created_at >= ?")
		args = append(args, p.CreatedAfter.UnixNano())
	}
	if !p.CreatedBefore.IsZero() {
		where = append(where, "a0.created_at < ?")
		args = append(args, p.CreatedBefore.UnixNano())
	}
	if paged {
		where = append(where, "(a0.created_at, a0.instance_id) < (?, ?)")
		args = append(args, createdAt, afterID)
	}
	args = append(args, limit+1, p.Tenant)
	// CROSS JOIN keeps the page's ids the outer loop: each row is then a
	// primary key probe (an IN list would have the tenant's index walked).
	return `SELECT ` + shownCols + ` FROM (
			SELECT a0.instance_id AS page_id FROM instance_attributes a0 INDEXED BY instance_attributes_match
			JOIN instances i ON i.tenant = a0.tenant AND i.id = a0.instance_id
			WHERE ` + strings.Join(where, " AND ") + `
			ORDER BY a0.created_at DESC, a0.instance_id DESC LIMIT +?) AS page
		CROSS JOIN instances ON instances.tenant = ? AND instances.id = page.page_id
		ORDER BY created_at DESC, id DESC`, args
}

// shownCols are the columns InstanceGet and InstanceList read
// (scanShown).
var shownCols = shownInstanceCols + `, attributes`

// scanShown scans shownCols.
func scanShown(sc scanner) (*instanceRow, error) {
	var doc sql.NullString
	r, err := scanInstance(extraScanner{sc, []any{&doc}})
	if err != nil {
		return nil, err
	}
	if r.Attributes, err = backend.DecodeAttributes(doc.String); err != nil {
		return nil, err
	}
	return r, nil
}

// extraScanner scans extra destinations after the caller's.
type extraScanner struct {
	sc    scanner
	extra []any
}

func (e extraScanner) Scan(dest ...any) error { return e.sc.Scan(append(dest, e.extra...)...) }
