-- Herald schema, version 1.
--
-- Every table carries tenant in its natural key and every query filters on
-- it. Times are integer unix nanoseconds (UTC, 0 = unset); JSON payloads are
-- TEXT. Tables whose rows need a stable insertion order have an
-- AUTOINCREMENT rowid (never reused, unchanged by VACUUM).

-- One row per workflow instance. lock_token/lease_until is the turn lease;
-- not_before delays the next claim (TurnAbandon with RetryAt). ready_at is
-- the earliest visible_at of the instance's inbox messages (NULL: empty
-- inbox), kept up to date by every write that changes the inbox, so that a
-- claim reads instances in ready order instead of scanning the inbox.
CREATE TABLE instances (
    rid         INTEGER PRIMARY KEY AUTOINCREMENT,
    tenant      TEXT    NOT NULL,
    id          TEXT    NOT NULL,
    workflow    TEXT    NOT NULL,
    status      TEXT    NOT NULL,
    execution   INTEGER NOT NULL,
    input       TEXT,
    output      TEXT,
    failure     TEXT,
    created_at  INTEGER NOT NULL,
    updated_at  INTEGER NOT NULL,
    lock_token  TEXT,
    lease_until INTEGER NOT NULL DEFAULT 0,
    not_before  INTEGER NOT NULL DEFAULT 0,
    ready_at    INTEGER,
    UNIQUE (tenant, id)
);
CREATE INDEX instances_created ON instances (tenant, created_at);
CREATE INDEX instances_ready ON instances (tenant, ready_at) WHERE lock_token IS NULL AND ready_at IS NOT NULL;
CREATE INDEX instances_leased ON instances (tenant, lease_until) WHERE lock_token IS NOT NULL;
CREATE INDEX instances_not_before ON instances (tenant, not_before) WHERE not_before > 0;

-- History: one row per event, the event as JSON.
CREATE TABLE history (
    tenant      TEXT    NOT NULL,
    instance_id TEXT    NOT NULL,
    execution   INTEGER NOT NULL,
    seq         INTEGER NOT NULL,
    kind        TEXT    NOT NULL,
    event       TEXT    NOT NULL,
    PRIMARY KEY (tenant, instance_id, execution, seq)
) WITHOUT ROWID;

-- The fate ledger: one row per external event id.
CREATE TABLE events (
    rid              INTEGER PRIMARY KEY AUTOINCREMENT,
    tenant           TEXT    NOT NULL,
    event_id         TEXT    NOT NULL,
    instance_id      TEXT    NOT NULL,
    lane             TEXT    NOT NULL,
    name             TEXT    NOT NULL,
    fate             TEXT    NOT NULL,
    reason           TEXT    NOT NULL DEFAULT '',
    execution        INTEGER NOT NULL DEFAULT 0,
    origin_execution INTEGER NOT NULL DEFAULT 0,
    wait_number      INTEGER NOT NULL DEFAULT 0,
    received_at      INTEGER NOT NULL,
    updated_at       INTEGER NOT NULL,
    UNIQUE (tenant, event_id)
);
CREATE INDEX events_instance ON events (tenant, instance_id);

-- Inbox: messages the next turn of an instance must process. id is the
-- storage.Message ID: increasing in insertion order, never reused.
CREATE TABLE inbox (
    id          INTEGER PRIMARY KEY AUTOINCREMENT,
    tenant      TEXT    NOT NULL,
    instance_id TEXT    NOT NULL,
    kind        TEXT    NOT NULL,
    execution   INTEGER NOT NULL DEFAULT 0,
    task_seq    INTEGER NOT NULL DEFAULT 0,
    lane        TEXT    NOT NULL DEFAULT '',
    event_id    TEXT    NOT NULL DEFAULT '',
    name        TEXT    NOT NULL DEFAULT '',
    payload     TEXT,
    latest      INTEGER NOT NULL DEFAULT 0,
    result      TEXT,
    failure     TEXT,
    visible_at  INTEGER NOT NULL,
    created_at  INTEGER NOT NULL
);
CREATE INDEX inbox_instance ON inbox (tenant, instance_id, visible_at);
CREATE INDEX inbox_visible ON inbox (tenant, visible_at);

-- Activity tasks.
CREATE TABLE activities (
    tenant           TEXT    NOT NULL,
    instance_id      TEXT    NOT NULL,
    execution        INTEGER NOT NULL,
    task_seq         INTEGER NOT NULL,
    name             TEXT    NOT NULL,
    input            TEXT,
    attempt          INTEGER NOT NULL,
    retry            TEXT,
    lock_token       TEXT,
    lease_until      INTEGER NOT NULL DEFAULT 0,
    cancel_requested INTEGER NOT NULL DEFAULT 0,
    visible_at       INTEGER NOT NULL,
    created_at       INTEGER NOT NULL,
    PRIMARY KEY (tenant, instance_id, execution, task_seq)
);
CREATE INDEX activities_ready ON activities (tenant, visible_at) WHERE lock_token IS NULL;
CREATE INDEX activities_leased ON activities (tenant, lease_until) WHERE lock_token IS NOT NULL;
