package main

import (
	"context"
	"flag"
	"fmt"
	"os"

	"github.com/jackc/pgx/v5"

	"github.com/heraldwf/herald/storage"
	"github.com/heraldwf/herald/storage/postgres"
	"github.com/heraldwf/herald/storage/sqlite"
)

// storeFlags are the storage flags every command that opens a store takes:
// SQLite by default, PostgreSQL with --postgres URL (or HERALD_DATABASE_URL).
type storeFlags struct {
	db       *string
	postgres *string
	schema   *string
}

func addStoreFlags(fs *flag.FlagSet, defaultDB, defaultSchema string) *storeFlags {
	return &storeFlags{
		db:       fs.String("db", defaultDB, "SQLite file (the default backend)"),
		postgres: fs.String("postgres", os.Getenv("HERALD_DATABASE_URL"), "PostgreSQL URL (default $HERALD_DATABASE_URL); when set, PostgreSQL is used instead of SQLite"),
		schema:   fs.String("schema", defaultSchema, "PostgreSQL schema holding Herald's tables"),
	}
}

// describe names the store for humans.
func (f *storeFlags) describe() string {
	if *f.postgres != "" {
		return fmt.Sprintf("PostgreSQL (schema %s)", *f.schema)
	}
	return "SQLite file " + *f.db
}

// open opens the store. With fresh, the demo's data is removed first: the
// SQLite file, or the PostgreSQL schema.
func (f *storeFlags) open(ctx context.Context, fresh bool) (storage.Store, error) {
	if *f.postgres != "" {
		if fresh {
			conn, err := pgx.Connect(ctx, *f.postgres)
			if err != nil {
				return nil, fmt.Errorf("connect to postgres: %w", err)
			}
			_, err = conn.Exec(ctx, `DROP SCHEMA IF EXISTS `+pgx.Identifier{*f.schema}.Sanitize()+` CASCADE`)
			conn.Close(ctx)
			if err != nil {
				return nil, fmt.Errorf("drop schema %s: %w", *f.schema, err)
			}
		}
		return postgres.Open(ctx, *f.postgres, postgres.WithSchema(*f.schema))
	}
	if fresh {
		for _, suffix := range []string{"", "-wal", "-shm"} {
			if err := os.Remove(*f.db + suffix); err != nil && !os.IsNotExist(err) {
				return nil, err
			}
		}
	}
	return sqlite.Open(ctx, *f.db)
}
