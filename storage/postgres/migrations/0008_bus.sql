-- Herald schema, version 8 (PostgreSQL): the event bus (storage.BusStore,
-- docs/bus.md).
--
-- As everywhere, tenant leads every key and every query names it. Indexes
-- other than a table's primary key are partial, with a predicate only the
-- queries that want them state, so that a generic plan made while a table is
-- empty never settles on one of them for a lookup by key (see migration
-- 0003). Free text the engine gets from targets (errors, stacks, script
-- logs, filter explanations) is bytea: it is stored byte for byte, NUL bytes
-- and invalid UTF-8 included, as SQLite stores it.

-- Published events. seq is the publish order (an identity: increasing,
-- with gaps). routed_at is 0 until BusRoute has routed the event.
CREATE TABLE bus_events (
    tenant       text   NOT NULL,
    id           text   NOT NULL,
    seq          bigint GENERATED ALWAYS AS IDENTITY,
    type         text   NOT NULL,
    data         text,
    source       text   NOT NULL DEFAULT '',
    published_at bigint NOT NULL,
    routed_at    bigint NOT NULL DEFAULT 0,
    PRIMARY KEY (tenant, id)
);
-- BusRoute's queue (oldest first), TenantsReady's probe, BusBacklog.
CREATE INDEX bus_events_unrouted ON bus_events (tenant, seq) WHERE routed_at = 0;
-- BusPrune (oldest routed first).
CREATE INDEX bus_events_routed ON bus_events (tenant, routed_at, seq) WHERE routed_at > 0;

-- Routes: one row per (event, subscription) decision of BusRoute. A
-- matched route is the execution (id is its storage id); a route whose
-- filter said no has status 'filtered' and never runs. fq is the
-- fair-queueing number BusClaim orders by; due_at is when a queued or
-- retrying execution becomes due (0 otherwise); lock_token/lease_until is
-- a running execution's lease.
CREATE TABLE bus_routes (
    tenant       text    NOT NULL,
    id           bigint  GENERATED ALWAYS AS IDENTITY,
    event_id     text    NOT NULL,
    subscription text    NOT NULL,
    status       text    NOT NULL CHECK (status IN ('filtered', 'queued', 'running', 'retrying', 'succeeded', 'dead_lettered')),
    filtered_by  bytea,
    attempts     integer NOT NULL DEFAULT 0,
    fq           bigint  NOT NULL DEFAULT 0,
    due_at       bigint  NOT NULL DEFAULT 0,
    lock_token   text,
    lease_until  bigint  NOT NULL DEFAULT 0,
    last_error   bytea,
    result       text,
    dead_letter  bigint  NOT NULL DEFAULT 0,
    reprocessed  integer NOT NULL DEFAULT 0,
    created_at   bigint  NOT NULL,
    updated_at   bigint  NOT NULL,
    PRIMARY KEY (tenant, id)
);
-- At most one route per (event, subscription); an event's routes
-- (BusEventGet, BusPrune). Only those queries state id > 0.
CREATE UNIQUE INDEX bus_routes_event ON bus_routes (tenant, event_id, subscription) WHERE id > 0;
-- The dispatch queue in claim order, and its lowest fair-queueing number
-- (one probe).
CREATE INDEX bus_routes_queue ON bus_routes (tenant, fq, due_at, id) WHERE status IN ('queued', 'retrying');
-- Due times of the queue (TenantsReady, NextWake): only they state
-- due_at > 0.
CREATE INDEX bus_routes_due ON bus_routes (tenant, due_at) WHERE status IN ('queued', 'retrying') AND due_at > 0;
-- Leases of running executions (takeover, TenantsReady, NextWake).
CREATE INDEX bus_routes_running ON bus_routes (tenant, lease_until) WHERE status = 'running';

-- Attempt records, one per ended attempt. logs is the script's lines, each
-- an unsigned varint length and its bytes.
CREATE TABLE bus_attempts (
    tenant       text    NOT NULL,
    id           bigint  GENERATED ALWAYS AS IDENTITY,
    execution    bigint  NOT NULL,
    event_id     text    NOT NULL,
    subscription text    NOT NULL,
    number       integer NOT NULL,
    succeeded    boolean NOT NULL,
    started_at   bigint  NOT NULL,
    duration_ns  bigint  NOT NULL,
    result       text,
    error_kind   text    NOT NULL DEFAULT '',
    error        bytea,
    stack        bytea,
    logs         bytea,
    PRIMARY KEY (tenant, id)
);
-- Each secondary index has a predicate of its own (always true) that only
-- the queries wanting it state, so that none competes with another.
CREATE INDEX bus_attempts_execution ON bus_attempts (tenant, execution, id) WHERE execution > 0;
CREATE INDEX bus_attempts_event ON bus_attempts (tenant, event_id, id) WHERE event_id <> '';
CREATE INDEX bus_attempts_subscription ON bus_attempts (tenant, subscription, id) WHERE subscription <> '';

-- Dead letters. target is the JSON of heraldtype.Target.
CREATE TABLE bus_dead_letters (
    tenant         text    NOT NULL,
    id             bigint  GENERATED ALWAYS AS IDENTITY,
    execution      bigint  NOT NULL,
    event_id       text    NOT NULL,
    subscription   text    NOT NULL,
    target         text    NOT NULL,
    event_type     text    NOT NULL,
    event_data     text,
    error_kind     text    NOT NULL,
    error          bytea,
    stack          bytea,
    attempts       integer NOT NULL,
    failed_at      bigint  NOT NULL,
    created_at     bigint  NOT NULL,
    reprocessed_at bigint  NOT NULL DEFAULT 0,
    PRIMARY KEY (tenant, id)
);
-- Pages of one subscription's letters: only those queries state id > 0.
CREATE INDEX bus_dead_letters_subscription ON bus_dead_letters (tenant, subscription, id) WHERE id > 0;

-- Subscriptions. ids sort bytewise (COLLATE "C"), so that the primary key
-- serves BusSubscriptionList's order. filter is the rule tree's JSON,
-- target the JSON of heraldtype.Target; max_retries NULL is the default.
CREATE TABLE bus_subscriptions (
    tenant      text    NOT NULL,
    id          text    COLLATE "C" NOT NULL,
    pattern     text    NOT NULL,
    filter      text,
    target      text    NOT NULL,
    enabled     boolean NOT NULL,
    max_retries integer,
    timeout_ns  bigint  NOT NULL DEFAULT 0,
    version     integer NOT NULL,
    created_at  bigint  NOT NULL,
    updated_at  bigint  NOT NULL,
    PRIMARY KEY (tenant, id)
);

-- Per tenant: the subscription generation (changed by every put and
-- delete of a subscription).
CREATE TABLE bus_tenants (
    tenant         text   PRIMARY KEY,
    sub_generation bigint NOT NULL
);

-- Per (tenant, subscription): the last fair-queueing number given to one of
-- its executions (-1 until the first). The highest of a tenant's is the
-- highest number it ever gave: one probe of bus_fq_last (only that probe
-- states last >= 0).
CREATE TABLE bus_fq (
    tenant       text   NOT NULL,
    subscription text   NOT NULL,
    last         bigint NOT NULL,
    PRIMARY KEY (tenant, subscription)
);
CREATE INDEX bus_fq_last ON bus_fq (tenant, last) WHERE last >= 0;

-- Scripts: every version kept; latest marks the newest version of an id.
-- first_created is the first version's time (Script.CreatedAt), created_at
-- this version's (Script.UpdatedAt). A deleted script leaves its latest
-- row as a tombstone (deleted, source emptied), so that saving the id again
-- continues its versions: an id and a version never name two sources.
CREATE TABLE bus_scripts (
    tenant        text    NOT NULL,
    id            text    COLLATE "C" NOT NULL,
    version       integer NOT NULL,
    source        text    NOT NULL,
    created_at    bigint  NOT NULL,
    first_created bigint  NOT NULL,
    latest        boolean NOT NULL,
    deleted       boolean NOT NULL DEFAULT false,
    PRIMARY KEY (tenant, id, version)
);
CREATE UNIQUE INDEX bus_scripts_latest ON bus_scripts (tenant, id) WHERE latest;

-- herald_bus_numbers gives the next fair-queueing number to one new (or
-- retried, or reprocessed) execution of each subscription of p_subs, in
-- order, and returns them: each is max(the subscription's last number + 1,
-- the tenant's current number), as if the executions were queued one by
-- one. The current number is the lowest number of the tenant's queued or
-- retrying executions or, if it has none, the highest number it ever gave
-- (0 before the first); a subscription's first number is 0 at the least.
-- It locks the subscriptions' bus_fq rows (in subscription order, so that
-- concurrent calls do not deadlock) until the transaction ends.
--
-- Queued one by one, a number never lowers the minimum once the queue has
-- one (every number is at least the current number), so the current
-- number the first one saw holds for all when the queue had some; with an
-- empty queue the first number becomes the minimum, and holds for the
-- rest. Hence one pass: each subscription's first number is max(last + 1,
-- that minimum), its next ones follow.
--
-- Every row is read by its key (one statement per subscription) or by one
-- probe of a partial index, so that the plans this function keeps never
-- scan a tenant's rows.
CREATE FUNCTION herald_bus_numbers(p_tenant text, p_subs text[])
RETURNS bigint[]
LANGUAGE plpgsql AS $$
DECLARE
    v_subs  text[];
    v_lasts bigint[] := '{}';
    v_last  bigint;
    v_min   bigint;
    v_out   bigint[];
    v_maxes bigint[];
    v_sub   text;
BEGIN
    IF COALESCE(cardinality(p_subs), 0) = 0 THEN
        RETURN '{}';
    END IF;
    SELECT array_agg(d.s ORDER BY d.s) INTO v_subs FROM (SELECT DISTINCT u.s FROM unnest(p_subs) AS u(s)) d;
    FOREACH v_sub IN ARRAY v_subs LOOP
        SELECT last INTO v_last FROM bus_fq WHERE tenant = p_tenant AND subscription = v_sub FOR UPDATE;
        IF NOT FOUND THEN
            INSERT INTO bus_fq (tenant, subscription, last) VALUES (p_tenant, v_sub, -1)
            ON CONFLICT (tenant, subscription) DO NOTHING;
            SELECT last INTO v_last FROM bus_fq WHERE tenant = p_tenant AND subscription = v_sub FOR UPDATE;
        END IF;
        v_lasts := v_lasts || v_last;
    END LOOP;
    SELECT fq INTO v_min FROM bus_routes
    WHERE tenant = p_tenant AND status IN ('queued', 'retrying')
    ORDER BY fq LIMIT 1;
    IF v_min IS NULL THEN
        SELECT last INTO v_min FROM bus_fq WHERE tenant = p_tenant AND last >= 0 ORDER BY last DESC LIMIT 1;
        v_min := GREATEST(v_lasts[array_position(v_subs, p_subs[1])] + 1, COALESCE(v_min, 0));
    END IF;
    WITH l AS (
        SELECT * FROM unnest(v_subs, v_lasts) AS l(s, last)
    ), n AS (
        SELECT u.ord, u.s, GREATEST(l.last + 1, v_min) + row_number() OVER (PARTITION BY u.s ORDER BY u.ord) - 1 AS n
        FROM unnest(p_subs) WITH ORDINALITY AS u(s, ord)
        JOIN l ON l.s = u.s
    )
    SELECT array_agg(n.n ORDER BY n.ord),
           (SELECT array_agg(m.n ORDER BY m.s) FROM (SELECT n2.s, max(n2.n) AS n FROM n n2 GROUP BY n2.s) m)
    INTO v_out, v_maxes FROM n;
    FOR i IN 1 .. cardinality(v_subs) LOOP
        UPDATE bus_fq SET last = v_maxes[i] WHERE tenant = p_tenant AND subscription = v_subs[i];
    END LOOP;
    RETURN v_out;
END
$$;
