-- Herald schema, version 10 (PostgreSQL): the trace context carried with
-- work (OpenTelemetry, W3C traceparent), so that a turn run later, on any
-- node, joins the trace of the event it consumes.

-- trace: the traceparent of the span that sent the message (an event
-- raised, a start's kick, a correlated delivery) or scheduled the task (an
-- activity, and its result message); '' when tracing is off. Opaque to the
-- store. A constant default: adding the columns rewrites no rows.
ALTER TABLE inbox ADD COLUMN trace text NOT NULL DEFAULT '';
ALTER TABLE activities ADD COLUMN trace text NOT NULL DEFAULT '';
