-- Herald schema, version 3 (PostgreSQL): instances_created no longer
-- competes with the primary key.
--
-- A statement's generic plan is made once per connection, after a few
-- executions, and kept: on a new schema that is while the tables are still
-- empty and never analyzed, when every index looks equally cheap. The
-- statements that find an instance by (tenant, id) then often settled on
-- instances_created, whose leading column is also tenant, and scanned every
-- instance of the tenant for each lookup until the table was first
-- analyzed (a commit cost O(instances)). As a partial index whose predicate
-- holds for every row (rid is an identity, always positive) but which only
-- InstanceList states, it serves InstanceList and is never a candidate for
-- anything else.
DROP INDEX instances_created;
CREATE INDEX instances_created ON instances (tenant, created_at, rid) WHERE rid > 0;
