-- Herald schema, version 1 (PostgreSQL).
--
-- Every table carries tenant in its natural key and every query filters on
-- it. Times are bigint unix nanoseconds (UTC, 0 = unset); JSON payloads are
-- text, kept byte for byte. Tables whose rows need a stable insertion order
-- have a rid (or id) identity column.
--
-- Indexes are few and never compete: a query of one instance's rows has one
-- index that fits it, so that a generic plan cached while the tables were
-- still empty (before the first ANALYZE) cannot settle on a tenant-wide
-- scan.

-- One row per workflow instance. lock_token/lease_until is the turn lease;
-- not_before delays the next claim (TurnAbandon with RetryAt). ready_at is
-- the earliest visible_at of the instance's inbox messages (NULL: empty
-- inbox), kept up to date by every write that changes the inbox, so that a
-- claim reads instances in ready order from instances_ready instead of
-- scanning the inbox.
CREATE TABLE instances (
    tenant      text    NOT NULL,
    id          text    NOT NULL,
    rid         bigint  GENERATED ALWAYS AS IDENTITY,
    workflow    text    NOT NULL,
    status      text    NOT NULL,
    execution   integer NOT NULL,
    input       text,
    output      text,
    failure     text,
    created_at  bigint  NOT NULL,
    updated_at  bigint  NOT NULL,
    lock_token  text,
    lease_until bigint  NOT NULL DEFAULT 0,
    not_before  bigint  NOT NULL DEFAULT 0,
    ready_at    bigint,
    PRIMARY KEY (tenant, id)
);
CREATE INDEX instances_created ON instances (tenant, created_at, rid);
CREATE INDEX instances_ready ON instances (tenant, ready_at, rid) WHERE lock_token IS NULL AND ready_at IS NOT NULL;
CREATE INDEX instances_leased ON instances (tenant, lease_until) WHERE lock_token IS NOT NULL;
CREATE INDEX instances_not_before ON instances (tenant, not_before) WHERE not_before > 0;

-- History: one row per event, the event as JSON.
CREATE TABLE history (
    tenant      text    NOT NULL,
    instance_id text    NOT NULL,
    execution   integer NOT NULL,
    seq         integer NOT NULL,
    kind        text    NOT NULL,
    event       text    NOT NULL,
    PRIMARY KEY (tenant, instance_id, execution, seq)
);

-- The fate ledger: one row per external event id.
CREATE TABLE events (
    tenant           text    NOT NULL,
    event_id         text    NOT NULL,
    rid              bigint  GENERATED ALWAYS AS IDENTITY,
    instance_id      text    NOT NULL,
    lane             text    NOT NULL,
    name             text    NOT NULL,
    fate             text    NOT NULL,
    reason           text    NOT NULL DEFAULT '',
    execution        integer NOT NULL DEFAULT 0,
    origin_execution integer NOT NULL DEFAULT 0,
    wait_number      integer NOT NULL DEFAULT 0,
    received_at      bigint  NOT NULL,
    updated_at       bigint  NOT NULL,
    PRIMARY KEY (tenant, event_id)
);
CREATE INDEX events_instance ON events (tenant, instance_id, rid);

-- Inbox: messages the next turn of an instance must process. id is the
-- storage.Message ID: increasing in insertion order, never reused.
-- expires_at: when an event message kept for an instance that does not
-- exist yet expires (0: never). It is only ever set while the instance does
-- not exist (creating the instance clears it), so inbox_expiring holds just
-- the events EventExpire may drop.
CREATE TABLE inbox (
    id          bigint  GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    tenant      text    NOT NULL,
    instance_id text    NOT NULL,
    kind        text    NOT NULL,
    execution   integer NOT NULL DEFAULT 0,
    task_seq    integer NOT NULL DEFAULT 0,
    lane        text    NOT NULL DEFAULT '',
    event_id    text    NOT NULL DEFAULT '',
    name        text    NOT NULL DEFAULT '',
    payload     text,
    latest      boolean NOT NULL DEFAULT false,
    result      text,
    failure     text,
    visible_at  bigint  NOT NULL,
    created_at  bigint  NOT NULL,
    expires_at  bigint  NOT NULL DEFAULT 0
);
CREATE INDEX inbox_instance ON inbox (tenant, instance_id, id) INCLUDE (visible_at);
CREATE INDEX inbox_expiring ON inbox (tenant, expires_at, id) WHERE expires_at > 0 AND kind = 'event';

-- Activity tasks.
CREATE TABLE activities (
    tenant           text    NOT NULL,
    instance_id      text    NOT NULL,
    execution        integer NOT NULL,
    task_seq         integer NOT NULL,
    rid              bigint  GENERATED ALWAYS AS IDENTITY,
    name             text    NOT NULL,
    input            text,
    attempt          integer NOT NULL,
    retry            text,
    lock_token       text,
    lease_until      bigint  NOT NULL DEFAULT 0,
    cancel_requested boolean NOT NULL DEFAULT false,
    visible_at       bigint  NOT NULL,
    created_at       bigint  NOT NULL,
    PRIMARY KEY (tenant, instance_id, execution, task_seq)
);
CREATE INDEX activities_ready ON activities (tenant, visible_at, rid) WHERE lock_token IS NULL;
CREATE INDEX activities_leased ON activities (tenant, lease_until) WHERE lock_token IS NOT NULL;

-- One row per (tenant, event name) declared with EventDefinitionPut.
-- schema is the payload's JSON Schema (NULL: any JSON); buffer is 'fifo' or
-- 'latest'; retention_ns and max_payload_bytes are 0 for the runtime
-- defaults; correlation is the JSON of storage.CorrelationConfig (NULL:
-- correlated puts refused). version counts puts, starting at 1. A deleted
-- definition stays as a tombstone (deleted) so that a put of the same name
-- later continues its version: a (tenant, name, version) never names two
-- different definitions, and caches keyed on it stay correct.
CREATE TABLE event_definitions (
    tenant            text    NOT NULL,
    name              text    NOT NULL,
    schema            text,
    buffer            text    NOT NULL,
    retention_ns      bigint  NOT NULL DEFAULT 0,
    max_payload_bytes bigint  NOT NULL DEFAULT 0,
    correlation       text,
    version           bigint  NOT NULL,
    created_at        bigint  NOT NULL,
    updated_at        bigint  NOT NULL,
    deleted           boolean NOT NULL DEFAULT false,
    PRIMARY KEY (tenant, name)
);

-- herald_fence locks an instance row for a turn commit and checks that
-- p_token owns it, that it is not terminal and that it is on p_execution.
-- It raises SQLSTATE HL001 (lease lost) or HL002 (wrong execution), which
-- aborts the batch the commit runs in.
CREATE FUNCTION herald_fence(p_tenant text, p_id text, p_token text, p_execution integer)
RETURNS integer LANGUAGE plpgsql AS $$
DECLARE
    v_token     text;
    v_status    text;
    v_execution integer;
BEGIN
    SELECT lock_token, status, execution INTO v_token, v_status, v_execution
    FROM instances WHERE tenant = p_tenant AND id = p_id
    FOR NO KEY UPDATE;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'instance does not exist' USING ERRCODE = 'HL001';
    END IF;
    IF v_token IS DISTINCT FROM p_token THEN
        RAISE EXCEPTION 'lock token does not own the instance' USING ERRCODE = 'HL001';
    END IF;
    IF v_status NOT IN ('pending', 'running') THEN
        RAISE EXCEPTION 'instance is %', v_status USING ERRCODE = 'HL001';
    END IF;
    IF v_execution <> p_execution THEN
        RAISE EXCEPTION 'turn ran on execution % but the instance is on execution %', p_execution, v_execution
            USING ERRCODE = 'HL002';
    END IF;
    RETURN v_execution;
END
$$;
