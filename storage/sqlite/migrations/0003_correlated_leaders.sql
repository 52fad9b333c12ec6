-- Herald schema, version 3: the correlated event lane (SPEC §3.3) and
-- leader election (SPEC §4).

-- The correlation key of a correlated-lane event, on its inbox message
-- (storage.Message.Key) and in the fate ledger (storage.EventRecord.Key).
-- Empty on the other lanes.
ALTER TABLE inbox ADD COLUMN key TEXT NOT NULL DEFAULT '';
ALTER TABLE events ADD COLUMN key TEXT NOT NULL DEFAULT '';

-- One row per correlated event: a payload put under (tenant, event
-- definition, key), not addressed to any instance. created_at is kept by
-- updates; expires_at is when CorrelatedExpire deletes it (0: never).
CREATE TABLE correlated_events (
    tenant     TEXT    NOT NULL,
    def        TEXT    NOT NULL,
    key        TEXT    NOT NULL,
    payload    TEXT,
    created_at INTEGER NOT NULL,
    updated_at INTEGER NOT NULL,
    expires_at INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (tenant, def, key)
) WITHOUT ROWID;
-- CorrelatedSearch pages by (created_at, key) within a definition.
CREATE INDEX correlated_events_search ON correlated_events (tenant, def, created_at, key);
-- CorrelatedExpire reads the most overdue first.
CREATE INDEX correlated_events_expiring ON correlated_events (tenant, expires_at) WHERE expires_at > 0;

-- The produced list of a correlated event: one row per event it produced
-- (one per instance wait it reached). Deleted with the correlated event; the
-- ledger keeps each produced event's fate and key. rid keeps insertion
-- order.
CREATE TABLE correlated_produced (
    rid         INTEGER PRIMARY KEY AUTOINCREMENT,
    tenant      TEXT    NOT NULL,
    def         TEXT    NOT NULL,
    key         TEXT    NOT NULL,
    event_id    TEXT    NOT NULL,
    instance_id TEXT    NOT NULL,
    execution   INTEGER NOT NULL,
    task_seq    INTEGER NOT NULL,
    created_at  INTEGER NOT NULL
);
CREATE INDEX correlated_produced_event ON correlated_produced (tenant, def, key);

-- Correlation markers: the correlated-lane waits of running instances that
-- no correlated event has reached yet. rid orders markers made at the same
-- time (the oldest marker gets a delete-after-first event).
CREATE TABLE correlated_waits (
    rid                INTEGER PRIMARY KEY AUTOINCREMENT,
    tenant             TEXT    NOT NULL,
    instance_id        TEXT    NOT NULL,
    execution          INTEGER NOT NULL,
    task_seq           INTEGER NOT NULL,
    def                TEXT    NOT NULL,
    key                TEXT    NOT NULL,
    delete_after_first INTEGER NOT NULL DEFAULT 0,
    created_at         INTEGER NOT NULL,
    UNIQUE (tenant, instance_id, execution, task_seq)
);
CREATE INDEX correlated_waits_key ON correlated_waits (tenant, def, key, created_at);

-- Leader leases: at most one holder per (tenant, name) whose lease_until
-- (unix nanoseconds) has not passed.
CREATE TABLE leaders (
    tenant      TEXT    NOT NULL,
    name        TEXT    NOT NULL,
    holder      TEXT    NOT NULL,
    lease_until INTEGER NOT NULL,
    PRIMARY KEY (tenant, name)
) WITHOUT ROWID;
