package storeurl

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/url"
	"os"

	"github.com/jackc/pgx/v5"

	"github.com/heraldwf/herald/storage/postgres"
	_ "modernc.org/sqlite" // the "sqlite" database/sql driver, to look inside a file before deleting it
)

// ErrNotHerald is returned by Drop for a store that holds something other
// than Herald's tables: it is left as it is.
var ErrNotHerald = errors.New("not a Herald store")

// sqliteSidecars are the files SQLite keeps beside a database in WAL (and
// rollback) mode; they belong to the database and go with it.
var sqliteSidecars = []string{"-wal", "-shm", "-journal"}

// Exists reports whether the store l names exists: the SQLite file (or a
// WAL or journal file SQLite left beside it), or the PostgreSQL schema. It
// creates nothing.
func (l *Location) Exists(ctx context.Context) (bool, error) {
	switch l.Backend {
	case SQLite:
		for _, suffix := range append([]string{""}, sqliteSidecars...) {
			_, err := os.Lstat(l.Path + suffix)
			if err == nil {
				return true, nil
			}
			if !errors.Is(err, fs.ErrNotExist) {
				return false, err
			}
		}
		return false, nil
	case Postgres:
		var exists bool
		err := l.withConn(ctx, func(conn *pgx.Conn) error {
			return conn.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_namespace WHERE nspname = $1)`, l.schema()).Scan(&exists)
		})
		return exists, err
	}
	return false, &Error{Location: l.String(), Reason: "unknown backend " + l.Backend}
}

// Drop deletes the store l names, with everything in it: the SQLite file
// and its WAL and journal files, or the PostgreSQL schema. It deletes only
// what is Herald's or empty: a SQLite file that is not empty must be a
// database with Herald's tables, a schema must hold Herald's tables or
// nothing; anything else is left untouched and Drop returns an error
// matching ErrNotHerald. Dropping a store that does not exist does nothing.
func (l *Location) Drop(ctx context.Context) error {
	switch l.Backend {
	case SQLite:
		return l.dropSQLite(ctx)
	case Postgres:
		return l.withConn(ctx, func(conn *pgx.Conn) error {
			var exists, herald, empty bool
			err := conn.QueryRow(ctx, `
				SELECT n.oid IS NOT NULL,
				       (SELECT count(*) FROM pg_tables t WHERE t.schemaname = $1
				                AND t.tablename IN ('schema_migrations', 'instances')) = 2,
				       NOT EXISTS (SELECT 1 FROM pg_class c WHERE c.relnamespace = n.oid)
				   AND NOT EXISTS (SELECT 1 FROM pg_proc p WHERE p.pronamespace = n.oid)
				FROM (SELECT $1::text AS name) s
				LEFT JOIN pg_namespace n ON n.nspname = s.name`, l.schema()).Scan(&exists, &herald, &empty)
			if err != nil {
				return fmt.Errorf("look at schema %s: %w", l.schema(), err)
			}
			if !exists {
				return nil
			}
			if !herald && !empty {
				return fmt.Errorf("schema %s holds tables or functions that are not Herald's: %w", l.schema(), ErrNotHerald)
			}
			if _, err := conn.Exec(ctx, `DROP SCHEMA `+pgx.Identifier{l.schema()}.Sanitize()+` CASCADE`); err != nil {
				return fmt.Errorf("drop schema %s: %w", l.schema(), err)
			}
			return nil
		})
	}
	return &Error{Location: l.String(), Reason: "unknown backend " + l.Backend}
}

// sqliteMagic starts every SQLite database file.
var sqliteMagic = []byte("SQLite format 3\x00")

func (l *Location) dropSQLite(ctx context.Context) error {
	info, err := os.Stat(l.Path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		// Only sidecars are left: they belong to no database any more.
	case err != nil:
		return err
	case !info.Mode().IsRegular():
		return fmt.Errorf("%s is not a regular file: %w", l.Path, ErrNotHerald)
	case info.Size() > 0:
		if err := checkHeraldFile(ctx, l.Path); err != nil {
			return err
		}
	}
	for _, suffix := range append([]string{""}, sqliteSidecars...) {
		if err := os.Remove(l.Path + suffix); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
	}
	return nil
}

// checkHeraldFile returns nil if path is a SQLite database with Herald's
// tables, and an error matching ErrNotHerald if it is something else.
func checkHeraldFile(ctx context.Context, path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	head := make([]byte, len(sqliteMagic))
	_, err = io.ReadFull(f, head)
	f.Close()
	if err != nil || !bytes.Equal(head, sqliteMagic) {
		return fmt.Errorf("%s is not a SQLite database: %w", path, ErrNotHerald)
	}
	// mode=rw: opening must not create anything, and a database in WAL
	// mode may need its -shm file written to be read.
	db, err := sql.Open("sqlite", "file:"+(&url.URL{Path: path}).EscapedPath()+"?mode=rw")
	if err != nil {
		return fmt.Errorf("look inside %s: %w", path, err)
	}
	defer db.Close()
	var n int
	if err := db.QueryRowContext(ctx, `SELECT count(*) FROM sqlite_master WHERE type = 'table'
		AND name IN ('schema_migrations', 'instances')`).Scan(&n); err != nil {
		return fmt.Errorf("look inside %s: %w", path, err)
	}
	if n != 2 {
		return fmt.Errorf("%s is a SQLite database without Herald's tables: %w", path, ErrNotHerald)
	}
	return nil
}

// schema is the PostgreSQL schema the location's store lives in.
func (l *Location) schema() string {
	if l.Schema != "" {
		return l.Schema
	}
	return postgres.DefaultSchema
}

func (l *Location) withConn(ctx context.Context, fn func(*pgx.Conn) error) error {
	conn, err := pgx.Connect(ctx, l.URL)
	if err != nil {
		// pgx's connect errors name host, user and database, never the
		// password.
		return fmt.Errorf("connect to %s: %w", l.Describe(), err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	return fn(conn)
}
