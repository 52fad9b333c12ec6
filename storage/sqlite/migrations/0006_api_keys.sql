-- Herald schema, version 6: API keys (storage.KeyStore).

-- One row per API key: never its secret, only the secret's SHA-256 (hash).
-- tenant is '' for an admin key. Times are unix nanoseconds; last_used_at
-- and revoked_at are 0 until the key is used or revoked. The UNIQUE index on
-- hash is how a request finds its key (KeyByHash): one probe. Keys are few
-- (an operator creates them), so KeyList and KeyCount read the table.
CREATE TABLE api_keys (
    id           TEXT    NOT NULL PRIMARY KEY,
    tenant       TEXT    NOT NULL,
    admin        INTEGER NOT NULL,
    name         TEXT    NOT NULL,
    hash         BLOB    NOT NULL UNIQUE,
    created_at   INTEGER NOT NULL,
    last_used_at INTEGER NOT NULL DEFAULT 0,
    revoked_at   INTEGER NOT NULL DEFAULT 0
) WITHOUT ROWID;
