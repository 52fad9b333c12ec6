-- Herald schema, version 14 (SQLite): whether a running bus execution's
-- attempt has started (as PostgreSQL's migration 19).
--
-- A claim used to count an attempt though the execution then waited in the
-- claiming runtime's dispatch queue, and a takeover after its lease ran
-- out counted another. Now an attempt is counted when it starts
-- (BusHeartbeat with Start sets started and counts it), a claim sets
-- started back to 0, a takeover is one (TakenOver) only of a started
-- attempt, and a release takes back the count of a started attempt. The
-- executions running at the upgrade were counted at their claim: they are
-- marked started.
ALTER TABLE bus_routes ADD COLUMN started INTEGER NOT NULL DEFAULT 0;
UPDATE bus_routes SET started = 1 WHERE status = 'running';
