-- Herald schema, version 11 (SQLite): searchable attributes of instances
-- (ctx.SetAttributes). The row keeps them as a JSON object (key → {"t":
-- type, "v": canonical value}) for InstanceGet and InstanceList to show;
-- instance_attributes has one row per key, indexed for InstanceList's
-- equality filter (storage/internal/backend/attributes.go).
ALTER TABLE instances ADD COLUMN attributes TEXT NOT NULL DEFAULT '{}';

CREATE TABLE instance_attributes (
    tenant      TEXT NOT NULL,
    instance_id TEXT NOT NULL,
    key         TEXT NOT NULL,
    type        TEXT NOT NULL,
    value       TEXT NOT NULL,
    created_at  INTEGER NOT NULL, -- the instance's, for listing in its order
    PRIMARY KEY (tenant, instance_id, key)
) WITHOUT ROWID;
-- A filter walks the first key's matches backward in the instances' list
-- order (created_at, id), from the page's cursor.
CREATE INDEX instance_attributes_match ON instance_attributes (tenant, key, value, type, created_at, instance_id);
