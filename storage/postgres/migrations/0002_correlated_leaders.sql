-- Herald schema, version 2 (PostgreSQL): the correlated event lane (SPEC
-- §3.3) and leader election (SPEC §4).

-- The correlation key of a correlated-lane event, on its inbox message
-- (storage.Message.Key) and in the fate ledger (storage.EventRecord.Key).
-- Empty on the other lanes.
ALTER TABLE inbox ADD COLUMN key text NOT NULL DEFAULT '';
ALTER TABLE events ADD COLUMN key text NOT NULL DEFAULT '';

-- One row per correlated event: a payload put under (tenant, event
-- definition, key), not addressed to any instance. created_at is kept by
-- updates; expires_at is when CorrelatedExpire deletes it (0: never). Keys
-- compare bytewise (COLLATE "C"), so search order and bookmarks do not
-- depend on the database's locale.
CREATE TABLE correlated_events (
    tenant     text   NOT NULL,
    def        text   NOT NULL,
    key        text   COLLATE "C" NOT NULL,
    payload    text,
    created_at bigint NOT NULL,
    updated_at bigint NOT NULL,
    expires_at bigint NOT NULL DEFAULT 0,
    PRIMARY KEY (tenant, def, key)
);
-- CorrelatedSearch pages by (created_at, key) within a definition.
CREATE INDEX correlated_events_search ON correlated_events (tenant, def, created_at, key);
-- CorrelatedExpire reads the most overdue first.
CREATE INDEX correlated_events_expiring ON correlated_events (tenant, expires_at) WHERE expires_at > 0;

-- The produced list of a correlated event: one row per event it produced
-- (one per instance wait it reached). Deleted with the correlated event; the
-- ledger keeps each produced event's fate and key. rid keeps insertion
-- order.
CREATE TABLE correlated_produced (
    tenant      text    NOT NULL,
    def         text    NOT NULL,
    key         text    COLLATE "C" NOT NULL,
    rid         bigint  GENERATED ALWAYS AS IDENTITY,
    event_id    text    NOT NULL,
    instance_id text    NOT NULL,
    execution   integer NOT NULL,
    task_seq    integer NOT NULL,
    created_at  bigint  NOT NULL,
    PRIMARY KEY (tenant, def, key, rid)
);

-- Correlation markers: the correlated-lane waits of running instances that
-- no correlated event has reached yet. rid orders markers made at the same
-- time (the oldest marker gets a delete-after-first event).
CREATE TABLE correlated_waits (
    tenant             text    NOT NULL,
    instance_id        text    NOT NULL,
    execution          integer NOT NULL,
    task_seq           integer NOT NULL,
    rid                bigint  GENERATED ALWAYS AS IDENTITY,
    def                text    NOT NULL,
    key                text    COLLATE "C" NOT NULL,
    delete_after_first boolean NOT NULL DEFAULT false,
    created_at         bigint  NOT NULL,
    PRIMARY KEY (tenant, instance_id, execution, task_seq)
);
CREATE INDEX correlated_waits_key ON correlated_waits (tenant, def, key, created_at, rid);

-- Leader leases: at most one holder per (tenant, name) whose lease_until
-- (unix nanoseconds) has not passed.
CREATE TABLE leaders (
    tenant      text   NOT NULL,
    name        text   NOT NULL,
    holder      text   NOT NULL,
    lease_until bigint NOT NULL,
    PRIMARY KEY (tenant, name)
);
