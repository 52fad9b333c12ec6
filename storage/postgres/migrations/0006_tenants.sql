-- Herald schema, version 6 (PostgreSQL): the tenant registry (one runtime
-- serves many tenants), instance list paging, and why an instance is not
-- running.

-- One row per registered tenant. limits is the JSON of storage.TenantLimits
-- (NULL: no overrides, the engine defaults apply). id has the collation of
-- every tenant column, so that TenantsReady's probes (tenant = tenants.id)
-- can use the claim indexes; lists are sorted bytewise (COLLATE "C") as in
-- SQLite.
CREATE TABLE tenants (
    id         text   PRIMARY KEY,
    limits     text,
    created_at bigint NOT NULL,
    updated_at bigint NOT NULL
);

-- Every tenant the schema already holds data of is registered.
INSERT INTO tenants (id, created_at, updated_at)
SELECT t.tenant, n.now, n.now
FROM (SELECT tenant FROM instances UNION SELECT tenant FROM inbox UNION SELECT tenant FROM events
      UNION SELECT tenant FROM correlated_events UNION SELECT tenant FROM event_definitions) t,
     (SELECT (extract(epoch FROM clock_timestamp()) * 1000000000)::bigint AS now) n;

-- blocked: why the instance is not running although it has work (set by
-- TurnAbandon, cleared by TurnCommit), and on a task why it did not run
-- (set by ActivityRetry). '' is nothing. A constant default adds the column
-- without rewriting the table.
ALTER TABLE instances ADD COLUMN blocked text NOT NULL DEFAULT '';
ALTER TABLE activities ADD COLUMN blocked text NOT NULL DEFAULT '';

-- InstanceList pages newest first by (created_at, id): one range scan of
-- this index per page. Partial for the reason given in migration 0003: only
-- InstanceList states rid > 0, so no lookup by (tenant, id) ever picks it.
DROP INDEX instances_created;
CREATE INDEX instances_created ON instances (tenant, created_at, id COLLATE "C") WHERE rid > 0;
