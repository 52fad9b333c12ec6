-- Herald schema, version 13 (PostgreSQL): the sender of an event a
-- workflow sent to another instance (ctx.RaiseEvent, ctx.Enqueue;
-- storage.TurnSend), shown in the receiver's fate ledger
-- (EventRecord.Sender).

-- sender: the sending instance's id (same tenant); '' for an event a
-- client sent. A constant default: adding the column does not rewrite the
-- table.
ALTER TABLE events ADD COLUMN sender text NOT NULL DEFAULT '';

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
CREATE FUNCTION herald_send(p_tenant text, p_sender text, p_instance text, p_event_id text, p_lane text,
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
