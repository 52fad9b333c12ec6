-- Herald schema, version 12 (PostgreSQL): child workflows and
-- cancellation.
--
-- parent_id, parent_execution, parent_seq: the instance whose turn started
-- this one as a child workflow, the execution and the seq of its
-- ChildWorkflowScheduled ('' and 0 for an instance started otherwise);
-- parent_close: what becomes of the child when that parent ends
-- (terminate, abandon, request_cancel). has_children: a turn of the
-- instance started a child. cancel_requested: InstanceCancel (or a
-- parent's close policy) asked the instance to cancel; a second request
-- writes nothing. Constant defaults: adding the columns rewrites no rows.
ALTER TABLE instances ADD COLUMN parent_id text NOT NULL DEFAULT '';
ALTER TABLE instances ADD COLUMN parent_execution integer NOT NULL DEFAULT 0;
ALTER TABLE instances ADD COLUMN parent_seq integer NOT NULL DEFAULT 0;
ALTER TABLE instances ADD COLUMN parent_close text NOT NULL DEFAULT '';
ALTER TABLE instances ADD COLUMN has_children boolean NOT NULL DEFAULT false;
ALTER TABLE instances ADD COLUMN cancel_requested boolean NOT NULL DEFAULT false;

-- The children of a parent, for its close policy.
CREATE INDEX instances_parent ON instances (tenant, parent_id) WHERE parent_id <> '';
