-- Herald schema, version 5: the event bus (storage.BusStore).
--
-- Every query is by tenant, through an index whose leading column is
-- tenant. Partial indexes hold only the rows a query looks for (unrouted
-- events, executions in one status), so a claim, a probe or a count reads
-- the work it wants and not the tenant's history.

-- Published events. seq is the tenant's publish order (storage.BusEvent.Seq,
-- never reused); routed_at is 0 until BusRoute routes the event. data is the
-- JSON text as published.
CREATE TABLE bus_events (
    seq          INTEGER PRIMARY KEY AUTOINCREMENT,
    tenant       TEXT    NOT NULL,
    id           TEXT    NOT NULL,
    type         TEXT    NOT NULL,
    data         TEXT    NOT NULL,
    source       TEXT    NOT NULL DEFAULT '',
    published_at INTEGER NOT NULL,
    routed_at    INTEGER NOT NULL DEFAULT 0,
    UNIQUE (tenant, id)
);
-- BusRoute takes the oldest unrouted events; TenantsReady and BusBacklog
-- probe and count them.
CREATE INDEX bus_events_unrouted ON bus_events (tenant, seq) WHERE routed_at = 0;
-- BusPrune reads the oldest routed events.
CREATE INDEX bus_events_routed ON bus_events (tenant, routed_at) WHERE routed_at > 0;

-- Routes: one row per routing decision (an event, a subscription whose
-- pattern matched it). A matched route is also the execution of the event by
-- that subscription: id is the execution's id, and the row carries its
-- state. A filtered route has status 'filtered' and no execution.
--
-- due_at: when a queued or retrying execution becomes due; fq: its
-- fair-queueing number (see bus_fair_queue); lock_token/lease_until: the
-- lease of a running one.
CREATE TABLE bus_routes (
    id           INTEGER PRIMARY KEY AUTOINCREMENT,
    tenant       TEXT    NOT NULL,
    event_seq    INTEGER NOT NULL,
    event_id     TEXT    NOT NULL,
    subscription TEXT    NOT NULL,
    matched      INTEGER NOT NULL,
    filtered_by  TEXT    NOT NULL DEFAULT '',
    status       TEXT    NOT NULL,
    attempts     INTEGER NOT NULL DEFAULT 0,
    due_at       INTEGER NOT NULL DEFAULT 0,
    fq           INTEGER NOT NULL DEFAULT 0,
    lock_token   TEXT,
    lease_until  INTEGER NOT NULL DEFAULT 0,
    last_error   TEXT    NOT NULL DEFAULT '',
    result       TEXT,
    dead_letter  INTEGER NOT NULL DEFAULT 0,
    reprocessed  INTEGER NOT NULL DEFAULT 0,
    created_at   INTEGER NOT NULL,
    updated_at   INTEGER NOT NULL,
    UNIQUE (tenant, event_seq, subscription)
);
-- BusClaim: queued executions in fair-queueing order; retrying ones that are
-- due; running ones whose lease ran out. The same indexes serve
-- TenantsReady, NextWake and BusBacklog, and (bus_routes_*_fq) the lowest
-- fair-queueing number of the tenant's queued or retrying executions.
CREATE INDEX bus_routes_queued_fq ON bus_routes (tenant, fq, due_at, id) WHERE status = 'queued';
CREATE INDEX bus_routes_queued_due ON bus_routes (tenant, due_at) WHERE status = 'queued';
CREATE INDEX bus_routes_retrying_due ON bus_routes (tenant, due_at) WHERE status = 'retrying';
CREATE INDEX bus_routes_retrying_fq ON bus_routes (tenant, fq) WHERE status = 'retrying';
CREATE INDEX bus_routes_running ON bus_routes (tenant, lease_until) WHERE status = 'running';

-- The last fair-queueing number given to an execution of a subscription
-- (BusRoute, a retry, a reprocess). The row is deleted with the
-- subscription (BusSubscriptionDelete); an execution of a deleted
-- subscription that is numbered again (a retry, a reprocess) writes it
-- again, and a subscription created again starts from the tenant's current
-- number.
CREATE TABLE bus_fair_queue (
    tenant       TEXT    NOT NULL,
    subscription TEXT    NOT NULL,
    last         INTEGER NOT NULL,
    PRIMARY KEY (tenant, subscription)
) WITHOUT ROWID;

-- Attempt records, one per ended attempt (BusFinish). logs is a JSON array
-- of strings (NULL: none).
CREATE TABLE bus_attempts (
    id           INTEGER PRIMARY KEY AUTOINCREMENT,
    tenant       TEXT    NOT NULL,
    execution    INTEGER NOT NULL,
    event_id     TEXT    NOT NULL,
    subscription TEXT    NOT NULL,
    number       INTEGER NOT NULL,
    succeeded    INTEGER NOT NULL,
    started_at   INTEGER NOT NULL,
    duration     INTEGER NOT NULL,
    result       TEXT,
    error_kind   TEXT    NOT NULL DEFAULT '',
    error        TEXT    NOT NULL DEFAULT '',
    stack        TEXT    NOT NULL DEFAULT '',
    logs         TEXT
);
-- BusAttemptList pages oldest first by execution, event or subscription.
CREATE INDEX bus_attempts_execution ON bus_attempts (tenant, execution, id);
CREATE INDEX bus_attempts_event ON bus_attempts (tenant, event_id, id);
CREATE INDEX bus_attempts_subscription ON bus_attempts (tenant, subscription, id);

-- Dead letters. execution is the id of the execution (bus_routes.id), which
-- BusPrune may delete; the letter keeps the event's type and data. target
-- is the JSON of heraldtype.Target.
CREATE TABLE bus_dead_letters (
    id             INTEGER PRIMARY KEY AUTOINCREMENT,
    tenant         TEXT    NOT NULL,
    execution      INTEGER NOT NULL,
    event_id       TEXT    NOT NULL,
    subscription   TEXT    NOT NULL,
    target         TEXT    NOT NULL,
    event_type     TEXT    NOT NULL,
    event_data     TEXT    NOT NULL,
    error_kind     TEXT    NOT NULL,
    error          TEXT    NOT NULL,
    stack          TEXT    NOT NULL DEFAULT '',
    attempts       INTEGER NOT NULL,
    failed_at      INTEGER NOT NULL,
    created_at     INTEGER NOT NULL,
    reprocessed_at INTEGER NOT NULL DEFAULT 0
);
-- BusDeadLetterList pages newest first, by tenant or by subscription or
-- event type within it.
CREATE INDEX bus_dead_letters_tenant ON bus_dead_letters (tenant, id);
CREATE INDEX bus_dead_letters_subscription ON bus_dead_letters (tenant, subscription, id);
CREATE INDEX bus_dead_letters_type ON bus_dead_letters (tenant, event_type, id);

-- Subscriptions. filter is the rule tree's JSON text as given (NULL: none);
-- target the JSON of heraldtype.Target; max_retries NULL is "the default";
-- timeout in nanoseconds.
CREATE TABLE bus_subscriptions (
    tenant      TEXT    NOT NULL,
    id          TEXT    NOT NULL,
    pattern     TEXT    NOT NULL,
    filter      TEXT,
    target      TEXT    NOT NULL,
    enabled     INTEGER NOT NULL,
    max_retries INTEGER,
    timeout     INTEGER NOT NULL,
    version     INTEGER NOT NULL,
    created_at  INTEGER NOT NULL,
    updated_at  INTEGER NOT NULL,
    PRIMARY KEY (tenant, id)
) WITHOUT ROWID;

-- Per tenant: the subscription generation, incremented by every put and
-- delete of a subscription; the highest fair-queueing number given (-1:
-- none yet), the tenant's current number when nothing is queued.
CREATE TABLE bus_tenants (
    tenant         TEXT    NOT NULL PRIMARY KEY,
    sub_generation INTEGER NOT NULL DEFAULT 0,
    fq_top         INTEGER NOT NULL DEFAULT -1
) WITHOUT ROWID;

-- Scripts: one row per saved version (created_at: when it was saved), and a
-- head per script id: its latest version, the creation time of its first
-- version, and whether it was deleted. A deleted script's versions are
-- deleted and its head kept, so that a script saved again under the id goes
-- on from the last version: (id, version) never names two sources.
CREATE TABLE bus_scripts (
    rid        INTEGER PRIMARY KEY,
    tenant     TEXT    NOT NULL,
    id         TEXT    NOT NULL,
    version    INTEGER NOT NULL,
    source     TEXT    NOT NULL,
    created_at INTEGER NOT NULL,
    UNIQUE (tenant, id, version)
);
CREATE TABLE bus_script_heads (
    tenant     TEXT    NOT NULL,
    id         TEXT    NOT NULL,
    version    INTEGER NOT NULL,
    created_at INTEGER NOT NULL,
    deleted    INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (tenant, id)
) WITHOUT ROWID;
