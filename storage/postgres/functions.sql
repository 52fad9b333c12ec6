-- The live bodies of Herald's PL/pgSQL functions (PostgreSQL).
--
-- This file, not the numbered migrations, is where each function's rule is
-- read and reviewed: migrate applies it, CREATE OR REPLACE, after the
-- numbered migrations on every Open, in the migration's transaction and
-- under its advisory lock (so concurrent Opens of one schema apply it one
-- after the other). The numbered migrations keep the schema: the tables,
-- indexes and columns, the CREATE of a function when it first appears and
-- the DROP of one that goes (a change of a function's arguments or result
-- also needs a DROP there, which CREATE OR REPLACE cannot do). A function
-- body written in a migration is only that migration's step: the body here
-- replaces it.
--
-- Where a function has a Go reference (package backend), the conformance
-- suite runs both (storage/postgres: the default mode and the Go reference
-- rules) and requires the same answers; {{readyAt "tenant" "id"}} is the
-- ready_at rule, spelled once in Go (backend.ReadyAtSQL).


-- herald_fence locks an instance row for a turn commit and checks that
-- p_token owns it, that it is not terminal and that it is on p_execution.
-- It raises SQLSTATE HL001 (lease lost) or HL002 (wrong execution), which
-- aborts the batch the commit runs in.
CREATE OR REPLACE FUNCTION herald_fence(p_tenant text, p_id text, p_token text, p_execution integer)
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

-- herald_end clears what an ended instance leaves behind, for tenant
-- p_tenant, instance p_id: its inbox, and its activity tasks and
-- correlation markers unless p_tasks, p_markers say it has none. With
-- p_check it first raises HL003 if the instance still has a pending or
-- buffered event (the caller has not dropped them). The caller holds the
-- instance row's lock and then updates the row (its ready_at becomes NULL).
CREATE OR REPLACE FUNCTION herald_end(p_tenant text, p_id text, p_tasks boolean, p_markers boolean, p_check boolean)
RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
    -- events_instance in rid order, so that even a plan made while the
    -- ledger is empty reads only the instance's events.
    IF p_check AND EXISTS (SELECT 1 FROM events e
               WHERE e.tenant = p_tenant AND e.instance_id = p_id AND e.fate IN ('pending', 'buffered')
               ORDER BY e.rid LIMIT 1) THEN
        RAISE EXCEPTION 'the instance has undelivered events to drop' USING ERRCODE = 'HL003';
    END IF;
    DELETE FROM inbox m WHERE m.tenant = p_tenant AND m.instance_id = p_id;
    IF p_tasks THEN
        DELETE FROM activities a WHERE a.tenant = p_tenant AND a.instance_id = p_id;
    END IF;
    IF p_markers THEN
        DELETE FROM correlated_waits w WHERE w.tenant = p_tenant AND w.instance_id = p_id;
    END IF;
END
$$;

-- herald_send writes one event a turn of p_sender sends to p_instance
-- (storage.TurnSend), in the turn's commit transaction, after its fence:
-- the ledger row first; an id already in the ledger is a duplicate (a
-- retried commit: nothing written) for the same instance, lane and name,
-- and raises SQLSTATE HL010 (ErrEventIDConflict) for another. Then, as
-- EventRaise: the receiver's row is locked (a missing one after the
-- advisory lock p_lock, which InstanceCreate of the id takes too); an
-- instance that has ended gets no message and the row says dropped
-- (instance_terminal); otherwise the inbox message is added (expiring at
-- p_expires only if the instance does not exist) and ready_at lowered.
CREATE OR REPLACE FUNCTION herald_send(p_tenant text, p_sender text, p_instance text, p_event_id text, p_lane text,
    p_name text, p_payload text, p_latest boolean, p_expires bigint, p_now bigint, p_trace text, p_lock bigint)
RETURNS void LANGUAGE plpgsql AS $$
DECLARE
    v_instance text;
    v_lane     text;
    v_name     text;
    v_status   text;
BEGIN
    INSERT INTO events (tenant, event_id, instance_id, lane, name, fate, received_at, updated_at, sender)
    VALUES (p_tenant, p_event_id, p_instance, p_lane, p_name, 'pending', p_now, p_now, p_sender)
    ON CONFLICT (tenant, event_id) DO NOTHING;
    IF NOT FOUND THEN
        SELECT instance_id, lane, name INTO v_instance, v_lane, v_name
        FROM events WHERE tenant = p_tenant AND event_id = p_event_id;
        IF v_instance IS DISTINCT FROM p_instance OR v_lane IS DISTINCT FROM p_lane OR v_name IS DISTINCT FROM p_name THEN
            RAISE EXCEPTION 'event id % was first raised for instance %, lane %, name %', p_event_id, v_instance, v_lane, v_name
                USING ERRCODE = 'HL010';
        END IF;
        RETURN;
    END IF;
    SELECT status INTO v_status FROM instances WHERE tenant = p_tenant AND id = p_instance FOR NO KEY UPDATE;
    IF NOT FOUND THEN
        PERFORM pg_advisory_xact_lock(p_lock);
        SELECT status INTO v_status FROM instances WHERE tenant = p_tenant AND id = p_instance FOR NO KEY UPDATE;
    END IF;
    IF v_status IS NOT NULL AND v_status NOT IN ('pending', 'running') THEN
        UPDATE events SET fate = 'dropped', reason = 'instance_terminal'
        WHERE tenant = p_tenant AND event_id = p_event_id;
        RETURN;
    END IF;
    INSERT INTO inbox (tenant, instance_id, kind, lane, event_id, name, payload, latest, visible_at, created_at, expires_at, trace)
    VALUES (p_tenant, p_instance, 'event', p_lane, p_event_id, p_name, p_payload, p_latest, p_now, p_now,
        CASE WHEN v_status IS NULL THEN p_expires ELSE 0 END, p_trace);
    IF v_status IS NOT NULL THEN
        UPDATE instances SET ready_at = LEAST(COALESCE(ready_at, p_now), p_now)
        WHERE tenant = p_tenant AND id = p_instance;
    END IF;
END
$$;

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
CREATE OR REPLACE FUNCTION herald_bus_numbers(p_tenant text, p_subs text[])
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

-- herald_commit_many does simple turn commits (simpleCommit in turn.go:
-- history, consumed messages, fates, status; a lone commit is a call of
-- one) with one statement per step, over arrays that list each commit's
-- rows:
--
--   p_* one element per commit (tenant, id, token, execution, status,
--       output, failure, tasks, markers, now), in (tenant, id) order;
--   h_* one per new history event, c_* one per consumed message and f_*
--       one per fate update (at most one per event id and commit: the
--       caller applies "the last update wins", backend.LastFates), each
--       with the 1-based index of its commit in p_*.
--
-- The fence locks the instances in (tenant, id) order, as every
-- transaction that locks several does, and fails the call (HL001/HL002)
-- if any commit no longer owns its instance; an ending commit whose
-- instance has events to drop fails it with HL003. commitBatch then runs
-- each commit on its own, so that one commit's outcome never depends on
-- the others'. Per commit it writes what the general path (queueCommit)
-- writes for the same fields; the conformance suite runs both.
--
-- It returns one row per commit: the commit's index and the instance's
-- ready_at after it (NULL for a commit that ends its instance).
CREATE OR REPLACE FUNCTION herald_commit_many(
    p_tenants text[], p_ids text[], p_tokens text[], p_executions integer[],
    p_statuses text[], p_outputs text[], p_failures text[], p_tasks boolean[], p_markers boolean[],
    p_nows bigint[],
    h_idx integer[], h_seqs integer[], h_kinds text[], h_events text[],
    c_idx integer[], c_ids bigint[],
    f_idx integer[], f_ids text[], f_fates text[], f_reasons text[], f_execs integer[], f_origins integer[], f_waits integer[])
RETURNS TABLE (idx integer, ready bigint)
LANGUAGE plpgsql
-- Every statement joins the arrays' few rows to the tables by key, and
-- has one sensible plan: nested loops over index scans. Left to the
-- planner, a plan made while a table was small hashed the whole table
-- (sequential scans of the ledger took a tenth of the server's CPU in a
-- 10,000-instance round trip), and PL/pgSQL planned each statement anew on
-- every call, its estimate of the generic plan being worse than that of
-- the custom ones (a third of the function's time in a paced run). So the
-- function plans only that, once per session.
SET enable_seqscan = off SET enable_bitmapscan = off SET enable_hashjoin = off SET enable_mergejoin = off
SET plan_cache_mode = force_generic_plan
AS $$
#variable_conflict use_column
DECLARE
    v_n integer := cardinality(p_ids);
    v_locked integer;
    v_first integer;
    v_bad record;
BEGIN
    -- The fence, in (tenant, id) order (the arrays' order), and the first
    -- commit whose instance it finds no longer theirs (the lock returns
    -- each row as the commits it waited for left it).
    SELECT count(*), min(l.n) FILTER (WHERE l.bad) INTO v_locked, v_first FROM (
        SELECT p.n, i.lock_token IS DISTINCT FROM p.token OR i.status NOT IN ('pending', 'running')
            OR i.execution <> p.execution AS bad
        FROM instances i
        JOIN unnest(p_tenants, p_ids, p_tokens, p_executions) WITH ORDINALITY AS p(tenant, id, token, execution, n)
            ON i.tenant = p.tenant AND i.id = p.id
        ORDER BY p.n
        FOR NO KEY UPDATE OF i) l;
    IF v_locked <> v_n THEN
        RAISE EXCEPTION 'instance does not exist' USING ERRCODE = 'HL001';
    END IF;
    IF v_first IS NOT NULL THEN
        SELECT i.lock_token IS DISTINCT FROM p_tokens[v_first] AS lost, i.status, i.execution INTO v_bad
        FROM instances i WHERE i.tenant = p_tenants[v_first] AND i.id = p_ids[v_first];
        IF v_bad.lost THEN
            RAISE EXCEPTION 'lock token does not own the instance' USING ERRCODE = 'HL001';
        ELSIF v_bad.status NOT IN ('pending', 'running') THEN
            RAISE EXCEPTION 'instance is %', v_bad.status USING ERRCODE = 'HL001';
        END IF;
        RAISE EXCEPTION 'turn ran on execution % but the instance is on execution %', p_executions[v_first], v_bad.execution
            USING ERRCODE = 'HL002';
    END IF;

    IF cardinality(h_idx) > 0 THEN
        INSERT INTO history (tenant, instance_id, execution, seq, kind, event)
        SELECT p_tenants[t.n], p_ids[t.n], p_executions[t.n], t.seq, t.kind, t.event
        FROM unnest(h_idx, h_seqs, h_kinds, h_events) AS t(n, seq, kind, event);
    END IF;
    IF cardinality(c_idx) > 0 THEN
        DELETE FROM inbox m
        USING unnest(c_idx, c_ids) AS t(n, id)
        WHERE p_statuses[t.n] IN ('pending', 'running')
          AND m.tenant = p_tenants[t.n] AND m.instance_id = p_ids[t.n] AND m.id = t.id;
    END IF;
    IF cardinality(f_idx) > 0 THEN
        UPDATE events e SET fate = t.fate, reason = t.reason, execution = t.exec,
            origin_execution = t.origin, wait_number = t.wait, updated_at = p_nows[t.n]
        FROM unnest(f_idx, f_ids, f_fates, f_reasons, f_execs, f_origins, f_waits) AS t(n, id, fate, reason, exec, origin, wait)
        WHERE e.tenant = p_tenants[t.n] AND e.event_id = t.id AND e.instance_id = p_ids[t.n];
    END IF;

    -- The ending commits: herald_end with p_check (events_instance in rid
    -- order, so that even a plan made while the ledger is empty reads only
    -- each instance's events).
    IF NOT p_statuses <@ ARRAY['pending', 'running'] THEN
        IF EXISTS (SELECT 1 FROM unnest(p_tenants, p_ids, p_statuses) AS p(tenant, id, status)
                   WHERE p.status NOT IN ('pending', 'running')
                     AND EXISTS (SELECT 1 FROM events e
                                 WHERE e.tenant = p.tenant AND e.instance_id = p.id AND e.fate IN ('pending', 'buffered')
                                 ORDER BY e.rid LIMIT 1)) THEN
            RAISE EXCEPTION 'the instance has undelivered events to drop' USING ERRCODE = 'HL003';
        END IF;
        DELETE FROM inbox m
        USING unnest(p_tenants, p_ids, p_statuses) AS p(tenant, id, status)
        WHERE p.status NOT IN ('pending', 'running') AND m.tenant = p.tenant AND m.instance_id = p.id;
        IF true = ANY(p_tasks) THEN
            DELETE FROM activities a
            USING unnest(p_tenants, p_ids, p_statuses, p_tasks) AS p(tenant, id, status, tasks)
            WHERE p.tasks AND p.status NOT IN ('pending', 'running') AND a.tenant = p.tenant AND a.instance_id = p.id;
        END IF;
        IF true = ANY(p_markers) THEN
            DELETE FROM correlated_waits w
            USING unnest(p_tenants, p_ids, p_statuses, p_markers) AS p(tenant, id, status, markers)
            WHERE p.markers AND p.status NOT IN ('pending', 'running') AND w.tenant = p.tenant AND w.instance_id = p.id;
        END IF;
    END IF;

    RETURN QUERY
    WITH last AS (
        SELECT t.n, max(t.seq) AS seq FROM unnest(h_idx, h_seqs) AS t(n, seq) GROUP BY t.n
    )
    UPDATE instances i SET status = p.status, output = p.output, failure = p.failure, updated_at = p.now,
        lock_token = NULL, lease_until = 0, not_before = 0,
        ready_at = CASE WHEN p.status IN ('pending', 'running') THEN {{readyAt "p.tenant" "p.id"}} END,
        history_seq = COALESCE(last.seq, i.history_seq)
    FROM unnest(p_tenants, p_ids, p_statuses, p_outputs, p_failures, p_nows) WITH ORDINALITY AS p(tenant, id, status, output, failure, now, n)
    LEFT JOIN last ON last.n = p.n
    WHERE i.tenant = p.tenant AND i.id = p.id
    RETURNING p.n::integer, CASE WHEN p.status IN ('pending', 'running') THEN i.ready_at END;
END
$$;
