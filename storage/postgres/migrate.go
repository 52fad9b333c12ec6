package postgres

import (
	"context"
	"embed"
	"fmt"
	"hash/fnv"
	"io/fs"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

//go:embed migrations/*.sql
var migrationFS embed.FS

// migration is one embedded schema change, named NNNN_description.sql.
type migration struct {
	version int
	name    string
	sql     string
}

func loadMigrations() ([]migration, error) {
	names, err := fs.Glob(migrationFS, "migrations/*.sql")
	if err != nil {
		return nil, err
	}
	var ms []migration
	seen := make(map[int]string)
	for _, n := range names {
		base := strings.TrimPrefix(n, "migrations/")
		prefix, _, ok := strings.Cut(base, "_")
		if !ok {
			return nil, fmt.Errorf("migration %s: name must be NNNN_description.sql", base)
		}
		v, err := strconv.Atoi(prefix)
		if err != nil || v <= 0 {
			return nil, fmt.Errorf("migration %s: bad version %q", base, prefix)
		}
		if other, dup := seen[v]; dup {
			return nil, fmt.Errorf("migrations %s and %s share version %d", other, base, v)
		}
		seen[v] = base
		b, err := migrationFS.ReadFile(n)
		if err != nil {
			return nil, err
		}
		ms = append(ms, migration{version: v, name: base, sql: string(b)})
	}
	sort.Slice(ms, func(i, j int) bool { return ms[i].version < ms[j].version })
	return ms, nil
}

// migrationLockKey is the advisory lock that serializes migrations of one
// schema across processes.
func migrationLockKey(schema string) int64 {
	h := fnv.New64a()
	h.Write([]byte("herald migrate\x00" + schema))
	return int64(h.Sum64())
}

// migrate creates the schema if needed and applies the embedded migrations
// not yet recorded in its schema_migrations table, all in one transaction
// holding a transaction-level advisory lock: concurrent Opens of the same
// schema wait for each other and apply each migration once. It fails if the
// schema has a version this binary does not know.
func migrate(ctx context.Context, pool *pgxpool.Pool, schema string) error {
	ms, err := loadMigrations()
	if err != nil {
		return fmt.Errorf("load migrations: %w", err)
	}
	return pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock($1)`, migrationLockKey(schema)); err != nil {
			return fmt.Errorf("lock: %w", err)
		}
		quoted := `"` + schema + `"`
		for _, q := range []string{
			`CREATE SCHEMA IF NOT EXISTS ` + quoted,
			`SET LOCAL search_path TO ` + quoted,
			`CREATE TABLE IF NOT EXISTS schema_migrations (
				version    integer PRIMARY KEY,
				name       text    NOT NULL,
				applied_at bigint  NOT NULL
			)`,
		} {
			if _, err := tx.Exec(ctx, q); err != nil {
				return fmt.Errorf("prepare schema: %w", err)
			}
		}
		var latest int
		if err := tx.QueryRow(ctx, `SELECT COALESCE(MAX(version), 0) FROM schema_migrations`).Scan(&latest); err != nil {
			return fmt.Errorf("read schema version: %w", err)
		}
		if known := ms[len(ms)-1].version; latest > known {
			return fmt.Errorf("schema version %d is newer than this Herald's (%d)", latest, known)
		}
		for _, m := range ms {
			if m.version <= latest {
				continue
			}
			// Simple protocol: a migration file holds several statements.
			if _, err := tx.Exec(ctx, m.sql, pgx.QueryExecModeSimpleProtocol); err != nil {
				return fmt.Errorf("migration %s: %w", m.name, err)
			}
			if _, err := tx.Exec(ctx, `INSERT INTO schema_migrations (version, name, applied_at) VALUES ($1, $2, $3)`,
				m.version, m.name, time.Now().UnixNano()); err != nil {
				return fmt.Errorf("migration %s: %w", m.name, err)
			}
		}
		return nil
	})
}
