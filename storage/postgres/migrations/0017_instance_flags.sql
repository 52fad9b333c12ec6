-- Herald schema, version 17 (PostgreSQL): what a hand-off needs to know of
-- an instance, on its row.
--
-- A raise that hands its instance off (raiseClaimSQL) read, after leasing
-- it, the instance's history, its messages and whether it had correlation
-- markers or activity tasks: three more statements in its transaction, 85
-- to 100 us of the server's time per round trip. The row now says what
-- those statements found most of the time, and the raise's own statement
-- returns it:
--
-- history_seq is the Seq of the last event of the current execution's
-- history (NULL: not known, and a hand-off reads the history). Every write
-- that appends to the history of an instance that is not ended sets it in
-- the same transaction: InstanceCreate and a child's start (1), a turn
-- commit (its last new event, or the start events of the execution a
-- continue-as-new begins). A hand-off whose history cache holds the
-- execution up to that Seq reads no history.
--
-- has_tasks and has_markers say whether the instance may have activity
-- tasks and correlation markers: only the lease holder's commits make
-- them, and each sets its flag in the update of the instance row it makes
-- anyway; a flag is never cleared while the instance runs, so it can only
-- say "maybe" too often (as SQLite's, migration 13 there). A claim and a
-- hand-off read them with the row instead of probing both tables.
ALTER TABLE instances
    ADD COLUMN history_seq integer,
    ADD COLUMN has_tasks boolean NOT NULL DEFAULT false,
    ADD COLUMN has_markers boolean NOT NULL DEFAULT false;
UPDATE instances i SET
    history_seq = (SELECT max(h.seq) FROM history h
                   WHERE h.tenant = i.tenant AND h.instance_id = i.id AND h.execution = i.execution),
    has_tasks = EXISTS (SELECT 1 FROM activities a WHERE a.tenant = i.tenant AND a.instance_id = i.id),
    has_markers = EXISTS (SELECT 1 FROM correlated_waits w WHERE w.tenant = i.tenant AND w.instance_id = i.id)
WHERE i.status IN ('pending', 'running');

-- herald_commit is migration 0016's, and keeps history_seq.
CREATE OR REPLACE FUNCTION herald_commit(p_tenant text, p_id text, p_token text, p_execution integer,
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
    v_token text;
    v_status text;
    v_execution integer;
    v_ready bigint;
    v_last integer := (SELECT max(x) FROM unnest(p_seqs) AS x);
BEGIN
    -- herald_fence
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
    IF NOT v_end THEN
        UPDATE instances i SET status = p_status, output = p_output, failure = p_failure, updated_at = p_now,
            lock_token = NULL, lease_until = 0, not_before = 0,
            ready_at = (SELECT MIN(m.visible_at) FROM inbox m WHERE m.tenant = p_tenant AND m.instance_id = p_id),
            history_seq = COALESCE(v_last, i.history_seq)
        WHERE i.tenant = p_tenant AND i.id = p_id
        RETURNING i.ready_at INTO v_ready;
        RETURN v_ready;
    END IF;

    -- herald_end with p_check: events_instance in rid order, so that even
    -- a plan made while the ledger is empty reads only the instance's events.
    IF EXISTS (SELECT 1 FROM events e
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
    UPDATE instances i SET status = p_status, output = p_output, failure = p_failure, updated_at = p_now,
        lock_token = NULL, lease_until = 0, not_before = 0, ready_at = NULL,
        history_seq = COALESCE(v_last, i.history_seq)
    WHERE i.tenant = p_tenant AND i.id = p_id;
    RETURN NULL;
END
$$;
