package storeurl_test

import (
	"context"
	"database/sql"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/heraldwf/herald/internal/storeurl"
	"github.com/heraldwf/herald/internal/testdb"
	"github.com/heraldwf/herald/storage/postgres"
	"github.com/heraldwf/herald/storage/sqlite"
)

func TestMain(m *testing.M) { testdb.Main(m) }

func TestParse(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		in   string
		want storeurl.Location
	}{
		{"herald.db", storeurl.Location{Backend: storeurl.SQLite, Path: "herald.db"}},
		{"./data/h?x.db", storeurl.Location{Backend: storeurl.SQLite, Path: "./data/h?x.db"}}, // a plain path is taken literally
		{"/var/lib/herald.db", storeurl.Location{Backend: storeurl.SQLite, Path: "/var/lib/herald.db"}},
		{`C:\herald\h.db`, storeurl.Location{Backend: storeurl.SQLite, Path: `C:\herald\h.db`}},
		{"sqlite:herald.db", storeurl.Location{Backend: storeurl.SQLite, Path: "herald.db"}},
		{"SQLite:herald.db", storeurl.Location{Backend: storeurl.SQLite, Path: "herald.db"}},
		{"sqlite:///var/lib/herald.db", storeurl.Location{Backend: storeurl.SQLite, Path: "/var/lib/herald.db"}},
		{"sqlite:h.db?synchronous=normal", storeurl.Location{Backend: storeurl.SQLite, Path: "h.db", Synchronous: sqlite.SynchronousNormal}},
		{"postgres://u:pw@db:5432/app?sslmode=disable", storeurl.Location{Backend: storeurl.Postgres,
			URL: "postgres://u:pw@db:5432/app?sslmode=disable"}},
		{"postgresql://db/app?schema=herald_x&pool_max_conns=4", storeurl.Location{Backend: storeurl.Postgres,
			URL: "postgresql://db/app?pool_max_conns=4", Schema: "herald_x"}},
	} {
		got, err := storeurl.Parse(tc.in)
		if err != nil {
			t.Errorf("Parse(%q): %v", tc.in, err)
			continue
		}
		if *got != tc.want {
			t.Errorf("Parse(%q) = %+v, want %+v", tc.in, *got, tc.want)
		}
	}
}

func TestParse_Refused(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ in, reason string }{
		{"", "empty"},
		{":memory:", "in-memory"},
		{"sqlite::memory:", "in-memory"},
		{"sqlite:", "no SQLite file name"},
		{"sqlite:file:x.db", "in-memory and URI"},
		{"sqlite://x.db", "names a host"},
		{"sqlite:x.db?synchronus=OFF", `unknown SQLite parameter "synchronus"`},
		{"sqlite:x.db?synchronous=SOMETIMES", "want FULL, NORMAL or OFF"},
		{"sqlite:x.db?synchronous=FULL&synchronous=OFF", "more than once"},
		{"mysql://u:secret@db/app", `unknown scheme "mysql"`},
		{"file:x.db", `unknown scheme "file"`},
		{"postgres:app", "is a URL"},
		{"host=db dbname=app password=secret", "keyword/value"},
		{"postgres://u:secret@db/app?schema=", "schema= must be given once"},
		{"postgres://u:secret@db/app?schema=a&schema=b", "schema= must be given once"},
		{"postgres://u:secret@db:port/app", "malformed URL"},
	} {
		_, err := storeurl.Parse(tc.in)
		var le *storeurl.Error
		if !errors.As(err, &le) || !errors.Is(err, storeurl.ErrInvalid) {
			t.Errorf("Parse(%q) = %v, want a *storeurl.Error", tc.in, err)
			continue
		}
		if !strings.Contains(le.Reason, tc.reason) {
			t.Errorf("Parse(%q) reason %q, want it to say %q", tc.in, le.Reason, tc.reason)
		}
		if strings.Contains(err.Error(), "secret") {
			t.Errorf("Parse(%q) error shows the password: %v", tc.in, err)
		}
	}
}

// A password never reaches what is printed: String, Describe, errors.
func TestRedaction(t *testing.T) {
	t.Parallel()
	for _, in := range []string{
		"postgres://herald:secret@db:5432/app?sslmode=disable&schema=s1",
		"postgres://herald@db/app?password=secret",
		"postgres://herald@db/app?sslpassword=secret&sslmode=verify-full",
	} {
		l, err := storeurl.Parse(in)
		if err != nil {
			t.Fatalf("Parse(%q): %v", in, err)
		}
		for what, s := range map[string]string{"String": l.String(), "Describe": l.Describe()} {
			if strings.Contains(s, "secret") {
				t.Errorf("%s of %q shows the password: %s", what, in, s)
			}
		}
		if !strings.Contains(l.URL, "secret") {
			t.Errorf("URL of %q lost the password pgx needs: %s", in, l.URL)
		}
	}
	l, _ := storeurl.Parse("postgres://herald:secret@db:5432/app?schema=s1")
	if got, want := l.Describe(), "PostgreSQL database app on db:5432 as herald, schema s1"; got != want {
		t.Errorf("Describe = %q, want %q", got, want)
	}
	if got, want := l.String(), "postgres://herald:xxxxx@db:5432/app?schema=s1"; got != want {
		t.Errorf("String = %q, want %q", got, want)
	}
}

func TestOpen_SQLite(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "h.db")
	st, err := storeurl.Open(ctx, "sqlite:"+path+"?synchronous=NORMAL", storeurl.WithSQLite(sqlite.WithReadConns(2)))
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := st.(*sqlite.Store); !ok {
		t.Errorf("opened a %T, want *sqlite.Store", st)
	}
	st.Close()
	if _, err := os.Stat(path); err != nil {
		t.Errorf("no file after Open: %v", err)
	}

	// A refused location creates nothing.
	bad := filepath.Join(t.TempDir(), "bad.db")
	if _, err := storeurl.Open(ctx, "sqlite:"+bad+"?synchronous=sometimes"); !errors.Is(err, storeurl.ErrInvalid) {
		t.Errorf("Open with a bad parameter = %v, want ErrInvalid", err)
	}
	if _, err := os.Stat(bad); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a refused location created %s (%v)", bad, err)
	}
}

func TestDrop_SQLite(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	loc := func(name string) *storeurl.Location {
		l, err := storeurl.Parse(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		return l
	}
	exists := func(l *storeurl.Location) bool {
		ok, err := l.Exists(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return ok
	}

	// A Herald database goes, with its WAL files.
	h := loc("herald.db")
	if exists(h) {
		t.Fatal("Exists before creation")
	}
	st, err := h.Open(ctx)
	if err != nil {
		t.Fatal(err)
	}
	st.Close()
	if err := os.WriteFile(h.Path+"-wal", nil, 0o600); err != nil { // as a crash leaves it
		t.Fatal(err)
	}
	if !exists(h) {
		t.Fatal("Exists after creation = false")
	}
	if err := h.Drop(ctx); err != nil {
		t.Fatalf("Drop a Herald database: %v", err)
	}
	for _, f := range []string{h.Path, h.Path + "-wal", h.Path + "-shm"} {
		if _, err := os.Stat(f); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s still there after Drop (%v)", f, err)
		}
	}
	if exists(h) {
		t.Error("Exists after Drop")
	}
	if err := h.Drop(ctx); err != nil {
		t.Errorf("Drop of nothing: %v", err)
	}

	// An empty file goes.
	e := loc("empty.db")
	if err := os.WriteFile(e.Path, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := e.Drop(ctx); err != nil || exists(e) {
		t.Errorf("Drop of an empty file: %v, exists %v", err, exists(e))
	}

	// Anything else stays, byte for byte.
	text := loc("README.md")
	other := loc("other.db")
	if err := os.WriteFile(text.Path, []byte("# my notes\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := plainSQLite(other.Path); err != nil {
		t.Fatal(err)
	}
	for _, l := range []*storeurl.Location{text, other} {
		before, _ := os.ReadFile(l.Path)
		if err := l.Drop(ctx); !errors.Is(err, storeurl.ErrNotHerald) {
			t.Errorf("Drop(%s) = %v, want ErrNotHerald", l.Path, err)
		}
		after, err := os.ReadFile(l.Path)
		if err != nil || string(after) != string(before) {
			t.Errorf("Drop(%s) changed the file (%v)", l.Path, err)
		}
	}
}

// plainSQLite creates a SQLite database that is not Herald's.
func plainSQLite(path string) error {
	db, err := sql.Open("sqlite", path)
	if err != nil {
		return err
	}
	defer db.Close()
	_, err = db.Exec(`CREATE TABLE notes (body text); INSERT INTO notes VALUES ('keep me')`)
	return err
}

func TestPostgres_OpenExistsDrop(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	base := testdb.PostgresURL(t)
	schema := testdb.NewSchema(t)
	u, err := storeurl.PostgresLocation(base, schema)
	if err != nil {
		t.Fatal(err)
	}
	l, err := storeurl.Parse(u)
	if err != nil {
		t.Fatal(err)
	}
	if ok, err := l.Exists(ctx); err != nil || ok {
		t.Fatalf("Exists before Open = %v, %v", ok, err)
	}
	st, err := l.Open(ctx, storeurl.WithPostgres(postgres.WithMaxConns(2), postgres.WithSchema("not_this_one")))
	if err != nil {
		t.Fatal(err)
	}
	if got := st.(*postgres.Store).Schema(); got != schema {
		t.Errorf("store in schema %s, want the location's %s (it wins over options)", got, schema)
	}
	st.Close()
	if ok, err := l.Exists(ctx); err != nil || !ok {
		t.Fatalf("Exists after Open = %v, %v", ok, err)
	}
	if err := l.Drop(ctx); err != nil {
		t.Fatalf("Drop a Herald schema: %v", err)
	}
	if ok, err := l.Exists(ctx); err != nil || ok {
		t.Fatalf("Exists after Drop = %v, %v", ok, err)
	}

	// A schema holding someone else's table stays.
	conn, err := pgx.Connect(ctx, base)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, `CREATE SCHEMA "`+schema+`"; CREATE TABLE "`+schema+`".precious (x int); INSERT INTO "`+schema+`".precious VALUES (42)`); err != nil {
		t.Fatal(err)
	}
	if err := l.Drop(ctx); !errors.Is(err, storeurl.ErrNotHerald) {
		t.Errorf("Drop of a foreign schema = %v, want ErrNotHerald", err)
	}
	var x int
	if err := conn.QueryRow(ctx, `SELECT x FROM "`+schema+`".precious`).Scan(&x); err != nil || x != 42 {
		t.Errorf("the foreign table after Drop: %d, %v", x, err)
	}
}

func TestPostgresLocation(t *testing.T) {
	t.Parallel()
	got, err := storeurl.PostgresLocation("postgres://u:pw@db/app?sslmode=disable&schema=old", "herald_t1")
	if err != nil {
		t.Fatal(err)
	}
	l, err := storeurl.Parse(got)
	if err != nil {
		t.Fatalf("Parse(%q): %v", got, err)
	}
	if l.Schema != "herald_t1" || l.URL != "postgres://u:pw@db/app?sslmode=disable" {
		t.Errorf("PostgresLocation gave %q: schema %q, URL %q", got, l.Schema, l.URL)
	}
	for _, bad := range [][2]string{{"herald.db", "s"}, {"postgres://db/app", ""}, {"", "s"}} {
		if _, err := storeurl.PostgresLocation(bad[0], bad[1]); !errors.Is(err, storeurl.ErrInvalid) {
			t.Errorf("PostgresLocation(%q, %q) = %v, want ErrInvalid", bad[0], bad[1], err)
		}
	}
}
