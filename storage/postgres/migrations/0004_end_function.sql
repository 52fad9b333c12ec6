-- Herald schema, version 4 (PostgreSQL): herald_end, what every terminal
-- transition does after the final history event, as a function that skips
-- what there is nothing to do for.
--
-- It was one statement of six parts (drop the pending and buffered events
-- with breadcrumbs, delete the inbox, the activity tasks and the
-- correlation markers), all of which PostgreSQL plans, opens and closes on
-- every completion although most of them find nothing: it cost a commit as
-- much as the rest of it. Here the ledger part runs only if the instance
-- has an event to drop, and the deletes of tasks and markers only if the
-- caller cannot tell there are none (a turn's claim notes it).
--
-- For tenant p_tenant, instance p_id, execution p_execution, at p_now (unix
-- nanoseconds; p_time the same as RFC 3339 text): every event still pending
-- or buffered for the instance is dropped (instance_terminal) with an
-- EventDropped breadcrumb appended to the execution's history in ledger
-- order, and the inbox, activity tasks and correlation markers are deleted
-- (p_tasks, p_markers false: the caller knows the instance has no activity
-- task, no marker; the deletes are skipped). It returns the breadcrumbs in
-- seq order. The caller holds the instance row's lock and then updates the
-- row (its ready_at becomes NULL).
CREATE FUNCTION herald_end(p_tenant text, p_id text, p_execution integer, p_now bigint, p_time text,
    p_tasks boolean, p_markers boolean)
RETURNS TABLE (seq integer, event_id text, lane text, name text)
LANGUAGE plpgsql AS $$
#variable_conflict use_column
BEGIN
    IF EXISTS (SELECT 1 FROM events e
               WHERE e.tenant = p_tenant AND e.instance_id = p_id AND e.fate IN ('pending', 'buffered')) THEN
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
