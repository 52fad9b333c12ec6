package sqlite

import (
	"context"
	"database/sql"
	"embed"
	"fmt"
	"time"

	"github.com/heraldwf/herald/storage/internal/backend"
)

//go:embed migrations/*.sql
var migrationFS embed.FS

// loadMigrations returns the embedded migrations in version order.
func loadMigrations() ([]backend.Migration, error) {
	return backend.Migrations(migrationFS, "migrations")
}

// migrate applies the embedded migrations not yet recorded in
// schema_migrations, each in its own immediate transaction (so two processes
// opening the same file at once apply each migration once). It fails if the
// database has a version this binary does not know.
func migrate(ctx context.Context, db *sql.DB) error {
	ms, err := loadMigrations()
	if err != nil {
		return fmt.Errorf("load migrations: %w", err)
	}
	if _, err := db.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS schema_migrations (
		version    INTEGER PRIMARY KEY,
		name       TEXT    NOT NULL,
		applied_at INTEGER NOT NULL
	)`); err != nil {
		return fmt.Errorf("create schema_migrations: %w", err)
	}
	var latest int
	if err := db.QueryRowContext(ctx, `SELECT COALESCE(MAX(version), 0) FROM schema_migrations`).Scan(&latest); err != nil {
		return fmt.Errorf("read schema version: %w", err)
	}
	if known := ms[len(ms)-1].Version; latest > known {
		return fmt.Errorf("database schema version %d is newer than this Herald's (%d)", latest, known)
	}
	for _, m := range ms {
		if err := applyMigration(ctx, db, m); err != nil {
			return fmt.Errorf("migration %s: %w", m.Name, err)
		}
	}
	return nil
}

func applyMigration(ctx context.Context, db *sql.DB, m backend.Migration) error {
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	var n int
	if err := tx.QueryRowContext(ctx, `SELECT COUNT(*) FROM schema_migrations WHERE version = ?`, m.Version).Scan(&n); err != nil {
		return err
	}
	if n > 0 {
		return nil
	}
	if _, err := tx.ExecContext(ctx, m.SQL); err != nil {
		return err
	}
	if _, err := tx.ExecContext(ctx, `INSERT INTO schema_migrations (version, name, applied_at) VALUES (?, ?, ?)`,
		m.Version, m.Name, time.Now().UnixNano()); err != nil {
		return err
	}
	return tx.Commit()
}
