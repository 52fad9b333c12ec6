-- Herald schema, version 20 (PostgreSQL): subscriptions as of each event's
-- publish (docs/bus.md, "Routing as of publish").
--
-- Routing runs behind the publishes, so an event is matched against the
-- subscription versions that were in force when it was published, not
-- those in force when it is routed. Every put and delete of a subscription
-- takes a position from bus_events' seq identity, the order events are
-- published in: since is the position of the put that made the current
-- version (0: before this migration, in force for every event). A version
-- a put or delete replaces, while the tenant has unrouted events published
-- before it, is kept in bus_subscription_versions with its own since and
-- until, the position of the change: it routes the events with since < seq
-- <= until. BusPrune deletes a kept version once no unrouted event of the
-- tenant is at or before its until.
ALTER TABLE bus_subscriptions ADD COLUMN since bigint NOT NULL DEFAULT 0;

CREATE TABLE bus_subscription_versions (
    tenant      text    NOT NULL,
    id          text    COLLATE "C" NOT NULL,
    version     integer NOT NULL,
    pattern     text    NOT NULL,
    filter      text,
    target      text    NOT NULL,
    enabled     boolean NOT NULL,
    max_retries integer,
    timeout_ns  bigint  NOT NULL DEFAULT 0,
    created_at  bigint  NOT NULL,
    updated_at  bigint  NOT NULL,
    since       bigint  NOT NULL,
    until       bigint  NOT NULL,
    PRIMARY KEY (tenant, id, version)
);
