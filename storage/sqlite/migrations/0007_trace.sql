-- Herald schema, version 7: the trace context carried with work
-- (OpenTelemetry, W3C traceparent), so that a turn run later, on any node,
-- joins the trace of the event it consumes.

-- trace: the traceparent of the span that sent the message (an event
-- raised, a start's kick, a correlated delivery) or scheduled the task (an
-- activity, and its result message); '' when tracing is off. Opaque to the
-- store.
ALTER TABLE inbox ADD COLUMN trace TEXT NOT NULL DEFAULT '';
ALTER TABLE activities ADD COLUMN trace TEXT NOT NULL DEFAULT '';
