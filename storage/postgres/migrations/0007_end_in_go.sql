-- Herald schema, version 6 (PostgreSQL): the instance-end drops leave
-- PL/pgSQL.
--
-- herald_end dropped an ending instance's undelivered events and wrote their
-- EventDropped breadcrumbs, building the history JSON by hand: a second copy
-- of a rule the SQLite backend writes in Go, and a second encoder of
-- history events. The rule now lives once, in Go (backend.EndInstance), and
-- the breadcrumbs are encoded by the code that encodes every history event.
-- The functions below only clear what an ended instance leaves behind, and
-- refuse (SQLSTATE HL003) to end an instance that still has an event to
-- drop: the commit then runs again in a transaction that drops them from
-- Go. The common end (nothing to drop) stays one statement.
DROP FUNCTION herald_commit(text, text, text, integer, integer[], text[], text[], bigint[],
    text[], text[], text[], integer[], integer[], integer[], text, text, text, bigint, text, boolean, boolean);
DROP FUNCTION herald_end(text, text, integer, bigint, text, boolean, boolean);

-- herald_end clears what an ended instance leaves behind, for tenant
-- p_tenant, instance p_id: its inbox, and its activity tasks and
-- correlation markers unless p_tasks, p_markers say it has none. With
-- p_check it first raises HL003 if the instance still has a pending or
-- buffered event (the caller has not dropped them). The caller holds the
-- instance row's lock and then updates the row (its ready_at becomes NULL).
CREATE FUNCTION herald_end(p_tenant text, p_id text, p_tasks boolean, p_markers boolean, p_check boolean)
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

-- herald_commit is migration 0005's, except that an ending commit calls
-- herald_end with p_check (an instance with events to drop raises HL003)
-- and so returns no breadcrumbs: only the instance's ready_at.
CREATE FUNCTION herald_commit(p_tenant text, p_id text, p_token text, p_execution integer,
    p_seqs integer[], p_kinds text[], p_events text[],
    p_consumed bigint[],
    p_fate_ids text[], p_fates text[], p_reasons text[], p_fate_execs integer[], p_origins integer[], p_waits integer[],
    p_status text, p_output text, p_failure text, p_now bigint,
    p_tasks boolean, p_markers boolean)
RETURNS bigint
LANGUAGE plpgsql AS $$
#variable_conflict use_column
DECLARE
    v_end boolean := p_status NOT IN ('pending', 'running');
    v_ready bigint;
BEGIN
    PERFORM herald_fence(p_tenant, p_id, p_token, p_execution);
    IF cardinality(p_seqs) > 0 THEN
        INSERT INTO history (tenant, instance_id, execution, seq, kind, event)
        SELECT p_tenant, p_id, p_execution, t.seq, t.kind, t.event
        FROM unnest(p_seqs, p_kinds, p_events) AS t(seq, kind, event);
    END IF;
    IF cardinality(p_consumed) > 0 AND NOT v_end THEN
        DELETE FROM inbox m WHERE m.tenant = p_tenant AND m.instance_id = p_id AND m.id = ANY(p_consumed);
    END IF;
    FOR i IN 1 .. coalesce(cardinality(p_fate_ids), 0) LOOP
        UPDATE events e SET fate = p_fates[i], reason = p_reasons[i], execution = p_fate_execs[i],
            origin_execution = p_origins[i], wait_number = p_waits[i], updated_at = p_now
        WHERE e.tenant = p_tenant AND e.event_id = p_fate_ids[i] AND e.instance_id = p_id;
    END LOOP;
    IF v_end THEN
        PERFORM herald_end(p_tenant, p_id, p_tasks, p_markers, true);
    END IF;
    UPDATE instances i SET status = p_status, output = p_output, failure = p_failure, updated_at = p_now,
        lock_token = NULL, lease_until = 0, not_before = 0,
        ready_at = CASE WHEN v_end THEN NULL
            ELSE (SELECT MIN(m.visible_at) FROM inbox m WHERE m.tenant = p_tenant AND m.instance_id = p_id) END
    WHERE i.tenant = p_tenant AND i.id = p_id
    RETURNING i.ready_at INTO v_ready;
    RETURN v_ready;
END
$$;
