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
		b.exec("set attribute rows", `INSERT INTO instance_attributes (tenant, instance_id, key, type, value, created_at)
			SELECT $1, $2, t.key, t.type, t.value, (SELECT created_at FROM instances WHERE tenant = $1 AND id = $2)
			FROM unnest($3::text[], $4::text[], $5::text[]) AS t(key, type, value)
			ON CONFLICT (tenant, instance_id, key) DO UPDATE SET type = excluded.type, value = excluded.value`,
			tenant, id, setKeys, types, values)
	}
}

// attributeQuery is InstanceList's query when it filters on attributes:
// the page's instances are found by walking the first attribute's matches
// in instance_attributes_match backward in list order (created_at, id
// COLLATE "C") from the cursor, each checked against the other attributes
// (a primary key probe each) and the instance's other filters, so a page
// costs what it skips, never the tenant's size; then their rows are read.
// arg adds an argument and returns its placeholder.
func attributeQuery(p *storage.InstanceListParams, arg func(any) string, createdAt int64, afterID string, paged bool, limit int) string {
	first := p.Attributes[0]
	t := arg(p.Tenant)
	where := []string{"a0.tenant = " + t, "a0.key = " + arg(first.Key), "a0.value = " + arg(first.Value), "a0.type = " + arg(string(first.Type))}
	for _, a := range p.Attributes[1:] {
		// One row of the match index, named by all its columns, in a
		// scalar subquery (EXISTS would be flattened into a semi-join
		// that walks the key's matches): an index-only probe per row
		// whichever index a generic plan picks.
		where = append(where, strings.Join([]string{`(SELECT true FROM instance_attributes an
			WHERE an.tenant = a0.tenant AND an.key = `, arg(a.Key), ` AND an.value = `, arg(a.Value),
			` AND an.type = `, arg(string(a.Type)), ` AND an.created_at = a0.created_at
			AND an.instance_id COLLATE "C" = a0.instance_id COLLATE "C")`}, ""))
	}
	if p.Workflow != "" {
		where = append(where, "i.workflow = "+arg(p.Workflow))
	}
	if p.Status != "" {
		where = append(where, "i.status = "+arg(string(p.Status)))
	}
	if !p.CreatedAfter.IsZero() {
		where = append(where, "a0.created_at >= "+arg(p.CreatedAfter.UnixNano()))
	}
	if !p.CreatedBefore.IsZero() {
		where = append(where, "a0.created_at < "+arg(p.CreatedBefore.UnixNano()))
	}
	if paged {
		where = append(where, `(a0.created_at, a0.instance_id COLLATE "C") < (`+arg(createdAt)+`, `+arg(afterID)+`)`)
	}
	return `SELECT ` + shownCols + ` FROM instances WHERE tenant = ` + t + ` AND id IN (
			SELECT a0.instance_id FROM instance_attributes a0
			JOIN instances i ON i.tenant = a0.tenant AND i.id = a0.instance_id
			WHERE ` + strings.Join(where, " AND ") + `
			ORDER BY a0.created_at DESC, a0.instance_id COLLATE "C" DESC LIMIT ` + arg(limit+1) + `)
		ORDER BY created_at DESC, id COLLATE "C" DESC`
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
