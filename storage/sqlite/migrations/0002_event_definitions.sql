-- Herald schema, version 2: event definitions and the retention of events
-- kept for instances that have not started.

-- One row per (tenant, event name) declared with EventDefinitionPut.
-- schema is the payload's JSON Schema (NULL: any JSON); buffer is 'fifo' or
-- 'latest'; retention_ns and max_payload_bytes are 0 for the runtime
-- defaults; correlation is the JSON of storage.CorrelationConfig (NULL:
-- correlated puts refused). version counts puts, starting at 1. A deleted
-- definition stays as a tombstone (deleted = 1) so that a put of the same
-- name later continues its version: a (tenant, name, version) never names
-- two different definitions, and caches keyed on it stay correct.
CREATE TABLE event_definitions (
    tenant            TEXT    NOT NULL,
    name              TEXT    NOT NULL,
    schema            TEXT,
    buffer            TEXT    NOT NULL,
    retention_ns      INTEGER NOT NULL DEFAULT 0,
    max_payload_bytes INTEGER NOT NULL DEFAULT 0,
    correlation       TEXT,
    version           INTEGER NOT NULL,
    created_at        INTEGER NOT NULL,
    updated_at        INTEGER NOT NULL,
    deleted           INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (tenant, name)
) WITHOUT ROWID;

-- expires_at: when an event message kept for an instance that does not
-- exist yet expires (0: never). It is only ever set while the instance does
-- not exist (creating the instance clears it), so the partial index below
-- holds just the events EventExpire may drop.
ALTER TABLE inbox ADD COLUMN expires_at INTEGER NOT NULL DEFAULT 0;
CREATE INDEX inbox_expiring ON inbox (tenant, expires_at) WHERE expires_at > 0 AND kind = 'event';
