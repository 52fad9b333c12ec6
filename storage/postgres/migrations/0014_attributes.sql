-- Herald schema, version 14 (PostgreSQL): searchable attributes of
-- instances (ctx.SetAttributes). The row keeps them as a JSON object (key
-- → {"t": type, "v": canonical value}) for InstanceGet and InstanceList to
-- show; instance_attributes has one row per key, indexed for
-- InstanceList's equality filter (storage/internal/backend/attributes.go).
-- A constant default: adding the column rewrites no rows.
ALTER TABLE instances ADD COLUMN attributes jsonb NOT NULL DEFAULT '{}';

CREATE TABLE instance_attributes (
    tenant      text NOT NULL,
    instance_id text NOT NULL,
    key         text NOT NULL,
    type        text NOT NULL,
    value       text NOT NULL,
    created_at  bigint NOT NULL, -- the instance's, for listing in its order
    PRIMARY KEY (tenant, instance_id, key)
);
-- A filter walks the first key's matches backward in the instances' list
-- order (created_at, id COLLATE "C"), from the page's cursor.
CREATE INDEX instance_attributes_match ON instance_attributes (tenant, key, value, type, created_at, instance_id COLLATE "C");
