-- Herald schema, version 21 (PostgreSQL): herald_commit goes. A lone simple
-- commit is a herald_commit_many call of one, so the simple commit's rule
-- is written once (functions.sql).
DROP FUNCTION IF EXISTS herald_commit(text, text, text, integer, integer[], text[], text[], bigint[],
    text[], text[], text[], integer[], integer[], integer[], text, text, text, bigint, boolean, boolean);
