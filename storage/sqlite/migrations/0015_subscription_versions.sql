-- Herald schema, version 15 (SQLite): subscriptions as of each event's
-- publish (docs/bus.md, "Routing as of publish").
--
-- Routing runs behind the publishes, so an event is matched against the
-- subscription versions that were in force when it was published, not
-- those in force when it is routed. Every put and delete of a subscription
-- takes a position in the order events are published in: the highest
-- bus_events seq given so far (writes are serial, so every event published
-- later has a higher seq). since is the position of the put that made the
-- current version (0: before this migration, in force for every event). A
-- version a put or delete replaces, while the tenant has unrouted events
-- published before it, is kept in bus_subscription_versions with its own
-- since and until, the position of the change: it routes the events with
-- since < seq <= until. BusPrune deletes a kept version once no unrouted
-- event of the tenant is at or before its until.
ALTER TABLE bus_subscriptions ADD COLUMN since INTEGER NOT NULL DEFAULT 0;

CREATE TABLE bus_subscription_versions (
    tenant      TEXT    NOT NULL,
    id          TEXT    NOT NULL,
    version     INTEGER NOT NULL,
    pattern     TEXT    NOT NULL,
    filter      TEXT,
    target      TEXT    NOT NULL,
    enabled     INTEGER NOT NULL,
    max_retries INTEGER,
    timeout     INTEGER NOT NULL,
    created_at  INTEGER NOT NULL,
    updated_at  INTEGER NOT NULL,
    since       INTEGER NOT NULL,
    until       INTEGER NOT NULL,
    PRIMARY KEY (tenant, id, version)
) WITHOUT ROWID;
