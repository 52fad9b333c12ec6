-- Herald schema, version 19 (PostgreSQL): whether a running bus
-- execution's attempt has started.
--
-- A claim used to count an attempt (attempts + 1) though the execution
-- then waited in the claiming runtime's dispatch queue; a takeover after
-- its lease ran out counted another, so an execution that never ran could
-- be dead-lettered as if its final attempt had been lost. Now an attempt
-- is counted when it starts (BusHeartbeat with Start sets started and
-- counts it), a claim sets started back to false, a takeover is one
-- (TakenOver) only of a started attempt, and a release takes back the
-- count of a started attempt. The executions running at the upgrade were
-- counted at their claim: they are marked started.
ALTER TABLE bus_routes ADD COLUMN started boolean NOT NULL DEFAULT false;
UPDATE bus_routes SET started = true WHERE status = 'running';
