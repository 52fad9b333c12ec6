-- Herald schema, version 5 (PostgreSQL): herald_commit, the common turn
-- commit as one statement.
--
-- A turn commit was a pipeline of five statements or more (fence, history,
-- consumed messages, fates, end of instance, instance row); each costs the
-- server a protocol round of its own (bind, portal, snapshot, execute) and
-- the client a statement to encode and a result to read. A turn that only
-- appends history, consumes messages, updates fates and sets its status
-- (a turn that schedules no activity or timer, cancels none, does not
-- continue as new and makes or withdraws no correlated wait: most turns)
-- now calls herald_commit, which does the same in one statement; the
-- others keep the pipeline (TurnCommit's queueCommit).
--
-- For tenant p_tenant, instance p_id, lock token p_token, execution
-- p_execution: herald_fence; the events (p_seqs, p_kinds, p_events)
-- appended to the execution's history; unless the status ends the
-- instance, the messages p_consumed deleted; the fates (p_fate_ids[i] gets
-- p_fates[i], p_reasons[i], p_fate_execs[i], p_origins[i], p_waits[i], in
-- order, for the instance's ledger rows); if the status ends the instance,
-- herald_end (p_tasks, p_markers as there) with its breadcrumbs returned in
-- crumb_*; then the instance row: status, output, failure, updated_at, the
-- lease released and ready_at recomputed (NULL once ended). p_now is unix
-- nanoseconds, p_time the same as RFC 3339 text.
CREATE FUNCTION herald_commit(p_tenant text, p_id text, p_token text, p_execution integer,
    p_seqs integer[], p_kinds text[], p_events text[],
    p_consumed bigint[],
    p_fate_ids text[], p_fates text[], p_reasons text[], p_fate_execs integer[], p_origins integer[], p_waits integer[],
    p_status text, p_output text, p_failure text, p_now bigint, p_time text,
    p_tasks boolean, p_markers boolean,
    OUT ready_at bigint, OUT crumb_seqs integer[], OUT crumb_ids text[], OUT crumb_lanes text[], OUT crumb_names text[])
LANGUAGE plpgsql AS $$
#variable_conflict use_column
DECLARE
    v_end boolean := p_status NOT IN ('pending', 'running');
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
        SELECT array_agg(c.seq ORDER BY c.seq), array_agg(c.event_id ORDER BY c.seq),
               array_agg(c.lane ORDER BY c.seq), array_agg(c.name ORDER BY c.seq)
        INTO crumb_seqs, crumb_ids, crumb_lanes, crumb_names
        FROM herald_end(p_tenant, p_id, p_execution, p_now, p_time, p_tasks, p_markers) c;
    END IF;
    UPDATE instances i SET status = p_status, output = p_output, failure = p_failure, updated_at = p_now,
        lock_token = NULL, lease_until = 0, not_before = 0,
        ready_at = CASE WHEN v_end THEN NULL
            ELSE (SELECT MIN(m.visible_at) FROM inbox m WHERE m.tenant = p_tenant AND m.instance_id = p_id) END
    WHERE i.tenant = p_tenant AND i.id = p_id
    RETURNING i.ready_at INTO ready_at;
END
$$;

-- herald_end (migration 0004) looks for an event to drop through
-- events_instance in the order of its rid, so that even a plan made while
-- the ledger is empty (when the primary key, whose leading column is also
-- tenant, looks as cheap) reads only the instance's events.
CREATE OR REPLACE FUNCTION herald_end(p_tenant text, p_id text, p_execution integer, p_now bigint, p_time text,
    p_tasks boolean, p_markers boolean)
RETURNS TABLE (seq integer, event_id text, lane text, name text)
LANGUAGE plpgsql AS $$
#variable_conflict use_column
BEGIN
    IF EXISTS (SELECT 1 FROM events e
               WHERE e.tenant = p_tenant AND e.instance_id = p_id AND e.fate IN ('pending', 'buffered')
               ORDER BY e.rid LIMIT 1) THEN
        RETURN QUERY
        WITH dropped AS (
            UPDATE events e SET fate = 'dropped', reason = 'instance_terminal',
                execution = CASE WHEN e.execution = 0 THEN p_execution ELSE e.execution END, updated_at = p_now
            WHERE e.tenant = p_tenant AND e.instance_id = p_id AND e.fate IN ('pending', 'buffered')
            RETURNING e.rid, e.event_id, e.lane, e.name
        ), crumbs AS (
            SELECT d.event_id, d.lane, d.name,
                ((SELECT COALESCE(MAX(h.seq), 0) FROM history h
                  WHERE h.tenant = p_tenant AND h.instance_id = p_id AND h.execution = p_execution)
                    + row_number() OVER (ORDER BY d.rid))::integer AS seq
            FROM dropped d
        ), appended AS (
            INSERT INTO history (tenant, instance_id, execution, seq, kind, event)
            SELECT p_tenant, p_id, p_execution, c.seq, 'EventDropped', json_strip_nulls(json_build_object(
                'seq', c.seq, 'time', p_time, 'kind', 'EventDropped', 'lane', NULLIF(c.lane, ''),
                'event_id', c.event_id, 'name', NULLIF(c.name, ''), 'reason', 'instance_terminal'))::text
            FROM crumbs c
        )
        SELECT c.seq, c.event_id, c.lane, c.name FROM crumbs c ORDER BY c.seq;
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
