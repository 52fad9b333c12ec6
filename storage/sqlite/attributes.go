package sqlite

import (
	"database/sql"
	"fmt"

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
		if _, err := w.exec(`INSERT INTO instance_attributes (tenant, instance_id, key, type, value) VALUES (?, ?, ?, ?, ?)
			ON CONFLICT (tenant, instance_id, key) DO UPDATE SET type = excluded.type, value = excluded.value`,
			tenant, id, a.Key, string(a.Type), a.Value); err != nil {
			return fmt.Errorf("set attribute %s: %w", a.Key, err)
		}
	}
	return nil
}

// attributeWhere is InstanceList's attribute filter: one indexed probe of
// instance_attributes per attribute.
func attributeWhere(where []string, args []any, tenant string, as []storage.Attribute) ([]string, []any) {
	for _, a := range as {
		where = append(where, `id IN (SELECT instance_id FROM instance_attributes
			WHERE tenant = ? AND key = ? AND value = ? AND type = ?)`)
		args = append(args, tenant, a.Key, a.Value, string(a.Type))
	}
	return where, args
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
