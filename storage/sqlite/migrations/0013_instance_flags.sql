-- Herald schema, version 13 (SQLite): whether an instance may have
-- activity tasks and correlation markers, on its row.
--
-- A turn that ends its instance deletes its tasks and markers and hands on
-- the deliveries of its withdrawn waits: three statements on the single
-- writer that find nothing for most instances. Only the lease holder's
-- commits make tasks (has_tasks) and markers (has_markers), and each sets
-- its flag in the update of the instance row it makes anyway; a flag is
-- never cleared while the instance runs, so it can only say "maybe" too
-- often. A claim reads the flags with the row (backend.ClaimNotes), and the
-- ending commit skips what they rule out.
ALTER TABLE instances ADD COLUMN has_tasks INTEGER NOT NULL DEFAULT 0;
ALTER TABLE instances ADD COLUMN has_markers INTEGER NOT NULL DEFAULT 0;
UPDATE instances SET
    has_tasks = EXISTS (SELECT 1 FROM activities a WHERE a.tenant = instances.tenant AND a.instance_id = instances.id),
    has_markers = EXISTS (SELECT 1 FROM correlated_waits w WHERE w.tenant = instances.tenant AND w.instance_id = instances.id);
