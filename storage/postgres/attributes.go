package postgres

import (
	"strings"

	"github.com/heraldwf/herald/storage"
	"github.com/heraldwf/herald/storage/internal/backend"
)

// queueAttributes queues a turn's attribute upserts (validated) after the
// commit's fence: the row's JSON object, then instance_attributes.
func (b *batch) queueAttributes(tenant, id string, ups []storage.Attribute) {
	if len(ups) == 0 {
		return
	}
	set, removed := backend.AttributePatch(ups)
	keys := make([]string, 0, len(set)+len(removed))
	types, values := make([]string, len(set)), make([]string, len(set))
	for i, a := range set {
		keys = append(keys, a.Key)
		types[i], values[i] = string(a.Type), a.Value
	}
	setKeys := keys[:len(set):len(set)]
	keys = append(keys, removed...)
	b.exec("set attributes", `UPDATE instances SET attributes = (attributes - $3::text[]) || $4::jsonb
		WHERE tenant = $1 AND id = $2`, tenant, id, keys, backend.AttributeDoc(set, nil, false))
	if len(removed) > 0 {
		b.exec("remove attributes", `DELETE FROM instance_attributes WHERE tenant = $1 AND instance_id = $2 AND key = ANY($3::text[])`,
			tenant, id, removed)
	}
	if len(set) > 0 {
		b.exec("set attribute rows", `INSERT INTO instance_attributes (tenant, instance_id, key, type, value)
			SELECT $1, $2, t.key, t.type, t.value FROM unnest($3::text[], $4::text[], $5::text[]) AS t(key, type, value)
			ON CONFLICT (tenant, instance_id, key) DO UPDATE SET type = excluded.type, value = excluded.value`,
			tenant, id, setKeys, types, values)
	}
}

// attributeWhere is InstanceList's attribute filter: one indexed probe of
// instance_attributes per attribute (arg adds an argument, returns its
// placeholder).
func attributeWhere(where []string, arg func(any) string, tenant string, as []storage.Attribute) []string {
	if len(as) == 0 {
		return where
	}
	t := arg(tenant)
	for _, a := range as {
		where = append(where, strings.Join([]string{`id IN (SELECT instance_id FROM instance_attributes WHERE tenant = `, t,
			` AND key = `, arg(a.Key), ` AND value = `, arg(a.Value), ` AND type = `, arg(string(a.Type)), `)`}, ""))
	}
	return where
}

// shownCols are the columns InstanceGet and InstanceList read: then
// scanShown.
var shownCols = shownInstanceCols + `, attributes::text`

// scanShown scans shownCols.
func scanShown(row interface{ Scan(...any) error }) (*instanceRow, error) {
	var doc string
	r, err := scanInstance(row, &doc)
	if err != nil {
		return r, err
	}
	if r.Attributes, err = backend.DecodeAttributes(doc); err != nil {
		return r, err
	}
	return r, nil
}
