-- Herald schema, version 9 (PostgreSQL): API keys (storage.KeyStore).

-- One row per API key: never its secret, only the secret's SHA-256 (hash).
-- tenant is '' for an admin key. Times are unix nanoseconds; last_used_at
-- and revoked_at are 0 until the key is used or revoked. The UNIQUE index on
-- hash is how a request finds its key (KeyByHash): one probe. Keys are few
-- (an operator creates them), so KeyList and KeyCount read the table; lists
-- are sorted bytewise (COLLATE "C") as in SQLite.
CREATE TABLE api_keys (
    id           text    PRIMARY KEY,
    tenant       text    NOT NULL,
    admin        boolean NOT NULL,
    name         text    NOT NULL,
    hash         bytea   NOT NULL UNIQUE,
    created_at   bigint  NOT NULL,
    last_used_at bigint  NOT NULL DEFAULT 0,
    revoked_at   bigint  NOT NULL DEFAULT 0
);
