-- Herald schema, version 11 (PostgreSQL): the trace context
-- (OpenTelemetry, W3C traceparent) of correlated events and published bus
-- events, so that the turn a correlated delivery wakes and the attempts of
-- a bus event's executions join the trace of the put or publish that sent
-- it.

-- trace: the traceparent of the put's span (replaced by a later put's,
-- carried by every delivery: storage.CorrelatedPutParams.TraceParent) or of
-- the publisher's (storage.BusPublishEvent.TraceParent); '' when tracing is
-- off. Opaque to the store. A constant default: adding the columns rewrites
-- no rows.
ALTER TABLE correlated_events ADD COLUMN trace text NOT NULL DEFAULT '';
ALTER TABLE bus_events ADD COLUMN trace text NOT NULL DEFAULT '';
