-- Herald schema, version 15 (PostgreSQL): no planner statistics for
-- payload columns.
--
-- No query filters, joins or sorts on a payload (a history event, a
-- message's payload or result, an instance's input or output, a bus
-- event's data, an attempt's logs), yet ANALYZE sampled and sorted every
-- one of them: half of what an ANALYZE of history cost (104-140 ms for
-- 60,000 rows, 50 ms without the event column), on the server's CPU,
-- while the store analyzes its tables as they grow (stats.go). In a paced
-- run on the 2-core benchmark machine, the ANALYZE of history stalled the
-- sends around it by 40-50 ms. A statistics target of 0 makes ANALYZE
-- skip the column; the columns the queries use keep theirs.
ALTER TABLE instances
    ALTER COLUMN input SET STATISTICS 0,
    ALTER COLUMN output SET STATISTICS 0,
    ALTER COLUMN failure SET STATISTICS 0,
    ALTER COLUMN attributes SET STATISTICS 0;
ALTER TABLE history ALTER COLUMN event SET STATISTICS 0;
ALTER TABLE inbox
    ALTER COLUMN payload SET STATISTICS 0,
    ALTER COLUMN result SET STATISTICS 0,
    ALTER COLUMN failure SET STATISTICS 0,
    ALTER COLUMN trace SET STATISTICS 0;
ALTER TABLE activities
    ALTER COLUMN input SET STATISTICS 0,
    ALTER COLUMN retry SET STATISTICS 0,
    ALTER COLUMN trace SET STATISTICS 0;
ALTER TABLE correlated_events
    ALTER COLUMN payload SET STATISTICS 0,
    ALTER COLUMN trace SET STATISTICS 0;
ALTER TABLE bus_events
    ALTER COLUMN data SET STATISTICS 0,
    ALTER COLUMN trace SET STATISTICS 0;
ALTER TABLE bus_routes
    ALTER COLUMN filtered_by SET STATISTICS 0,
    ALTER COLUMN last_error SET STATISTICS 0,
    ALTER COLUMN result SET STATISTICS 0;
ALTER TABLE bus_attempts
    ALTER COLUMN result SET STATISTICS 0,
    ALTER COLUMN error SET STATISTICS 0,
    ALTER COLUMN stack SET STATISTICS 0,
    ALTER COLUMN logs SET STATISTICS 0;
ALTER TABLE bus_dead_letters
    ALTER COLUMN event_data SET STATISTICS 0,
    ALTER COLUMN error SET STATISTICS 0,
    ALTER COLUMN stack SET STATISTICS 0;
