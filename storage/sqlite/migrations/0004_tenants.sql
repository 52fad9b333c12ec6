-- Herald schema, version 4: the tenant registry (one runtime serves many
-- tenants), instance list paging, and why an instance is not running.

-- One row per registered tenant. limits is the JSON of storage.TenantLimits
-- (NULL: no overrides, the engine defaults apply).
CREATE TABLE tenants (
    id         TEXT    NOT NULL PRIMARY KEY,
    limits     TEXT,
    created_at INTEGER NOT NULL,
    updated_at INTEGER NOT NULL
) WITHOUT ROWID;

-- Every tenant the database already holds data of is registered.
INSERT INTO tenants (id, created_at, updated_at)
SELECT t.tenant, n.now, n.now
FROM (SELECT tenant FROM instances UNION SELECT tenant FROM inbox UNION SELECT tenant FROM events
      UNION SELECT tenant FROM correlated_events UNION SELECT tenant FROM event_definitions) t,
     (SELECT CAST(strftime('%s', 'now') AS INTEGER) * 1000000000 AS now) n;

-- blocked: why the instance is not running although it has work (set by
-- TurnAbandon, cleared by TurnCommit), and on a task why it did not run
-- (set by ActivityRetry). '' is nothing.
ALTER TABLE instances ADD COLUMN blocked TEXT NOT NULL DEFAULT '';
ALTER TABLE activities ADD COLUMN blocked TEXT NOT NULL DEFAULT '';

-- InstanceList pages newest first by (created_at, id): one range scan of
-- this index per page.
DROP INDEX instances_created;
CREATE INDEX instances_created ON instances (tenant, created_at, id);
