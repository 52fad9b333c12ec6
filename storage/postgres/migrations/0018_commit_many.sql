-- Herald schema, version 18 (PostgreSQL): the simple commits of a batch in
-- one call.
--
-- The commits of concurrent turns share a transaction (commitBatch), and
-- each simple one was a herald_commit call: about ten statements, each
-- with its executor's start and end, its relation locks and, for the
-- function, its arguments and PL/pgSQL's own work, for every turn. Most
-- of that does not grow with the rows a statement touches, so
-- herald_commit_many does the simple commits of a whole batch with one
-- statement per step, over arrays that list each commit's rows:
--
--   p_* one element per commit (tenant, id, token, execution, status,
--       output, failure, tasks, markers, now), in (tenant, id) order;
--   h_* one per new history event, c_* one per consumed message and f_*
--       one per fate update (at most one per event id and commit), each
--       with the 1-based index of its commit in p_*.
--
-- Each commit does exactly what herald_commit does. The fence locks the
-- instances in (tenant, id) order, as every transaction that locks several
-- does, and fails the call (HL001/HL002) if any commit no longer owns its
-- instance; an ending commit whose instance has events to drop fails it
-- with HL003. commitBatch then runs each commit on its own, so that one
-- commit's outcome never depends on the others'.
--
-- It returns one row per commit: the commit's index and the instance's
-- ready_at after it (NULL for a commit that ends its instance).
CREATE FUNCTION herald_commit_many(
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
        ready_at = CASE WHEN p.status IN ('pending', 'running') THEN
            (SELECT MIN(m.visible_at) FROM inbox m WHERE m.tenant = p.tenant AND m.instance_id = p.id) END,
        history_seq = COALESCE(last.seq, i.history_seq)
    FROM unnest(p_tenants, p_ids, p_statuses, p_outputs, p_failures, p_nows) WITH ORDINALITY AS p(tenant, id, status, output, failure, now, n)
    LEFT JOIN last ON last.n = p.n
    WHERE i.tenant = p.tenant AND i.id = p.id
    RETURNING p.n::integer, CASE WHEN p.status IN ('pending', 'running') THEN i.ready_at END;
END
$$;
