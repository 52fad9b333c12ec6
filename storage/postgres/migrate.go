package postgres

import (
	"context"
	"embed"
	"fmt"
	"hash/fnv"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/heraldwf/herald/storage/internal/backend"
)

//go:embed migrations/*.sql
var migrationFS embed.FS

// loadMigrations returns the embedded migrations in version order.
func loadMigrations() ([]backend.Migration, error) {
	return backend.Migrations(migrationFS, "migrations")
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
		if known := ms[len(ms)-1].Version; latest > known {
			return fmt.Errorf("schema version %d is newer than this Herald's (%d)", latest, known)
		}
		for _, m := range ms {
			if m.Version <= latest {
				continue
			}
			// Simple protocol: a migration file holds several statements.
			if _, err := tx.Exec(ctx, m.SQL, pgx.QueryExecModeSimpleProtocol); err != nil {
				return fmt.Errorf("migration %s: %w", m.Name, err)
			}
			if _, err := tx.Exec(ctx, `INSERT INTO schema_migrations (version, name, applied_at) VALUES ($1, $2, $3)`,
				m.Version, m.Name, time.Now().UnixNano()); err != nil {
				return fmt.Errorf("migration %s: %w", m.Name, err)
			}
		}
		return nil
	})
}
