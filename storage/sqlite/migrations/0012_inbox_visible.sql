-- Herald schema, version 12 (SQLite): no index of the inbox by visibility.
--
-- inbox_visible served only NextWake, which now reads each instance's
-- earliest message from instances.ready_at (through instances_ready and
-- instances_leased), as the PostgreSQL store does. Every message written
-- and every message consumed paid for an entry in it, inside the single
-- writer that bounds the store's throughput.
DROP INDEX inbox_visible;
