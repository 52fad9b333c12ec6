// Package storeurl opens a Herald store from one string, so that every
// program that takes a store from its user (the herald command, a future
// `herald serve --db URL`, the end-to-end and crash tests) names stores the
// same way and opens them with the same options:
//
//	herald.db, ./data/herald.db, /var/lib/herald.db   a SQLite file (a plain path)
//	sqlite:herald.db, sqlite:///var/lib/herald.db      the same, explicitly
//	sqlite:herald.db?synchronous=NORMAL               with a durability mode (default FULL)
//	postgres://user:pw@host:5432/db?sslmode=disable    PostgreSQL, schema "herald"
//	postgres://…/db?schema=herald_prod                  PostgreSQL, another schema
//
// A SQLite store is opened with sqlite.Open's defaults (synchronous=FULL on
// the sync pipeline: a write call that returned has been fsynced) unless the
// location says otherwise. A PostgreSQL URL is passed to pgx as it is, minus
// the parameters that are Herald's (schema); pgx reads the rest (sslmode,
// pool_max_conns, …).
//
// It is internal because it is wiring: a program that embeds Herald picks
// its backend in code (sqlite.Open, postgres.Open). The package imports both
// backends, which a library user who wants one of them should not have to
// link.
package storeurl

import (
	"context"
	"errors"
	"fmt"
	neturl "net/url"
	"regexp"
	"strings"

	"github.com/heraldwf/herald/storage"
	"github.com/heraldwf/herald/storage/postgres"
	"github.com/heraldwf/herald/storage/sqlite"
)

// Backends a Location can name.
const (
	SQLite   = "sqlite"
	Postgres = "postgres"
)

// ErrInvalid is matched (errors.Is) by every *Error: the string does not
// name a store this package can open.
var ErrInvalid = errors.New("invalid store location")

// Error says why a store location was refused. Location is redacted: it
// never holds a password.
type Error struct {
	Location string
	Reason   string
}

func (e *Error) Error() string {
	return fmt.Sprintf("invalid store location %q: %s", e.Location, e.Reason)
}

// Unwrap makes errors.Is(err, ErrInvalid) hold.
func (e *Error) Unwrap() error { return ErrInvalid }

// Location is a parsed store location. Build one with Parse.
type Location struct {
	// Backend is SQLite or Postgres.
	Backend string

	// Path is the SQLite file.
	Path string
	// Synchronous is the SQLite durability mode the location asks for
	// (synchronous=…); empty means sqlite.Open's default, FULL.
	Synchronous sqlite.Synchronous

	// URL is the PostgreSQL connection URL as pgx gets it: without
	// Herald's parameters. It may hold a password: print String or
	// Describe, never URL.
	URL string
	// Schema is the PostgreSQL schema the location asks for (schema=…);
	// empty means postgres.DefaultSchema unless an option sets it.
	Schema string
}

// scheme matches a URL scheme at the start of a string ("postgres:",
// "mysql:", "file:"). One letter followed by ":\" or ":/" is a Windows drive,
// not a scheme; Parse checks that separately.
var scheme = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9+.-]*:`)

// Parse parses a store location (see the package documentation). It returns
// an *Error (ErrInvalid) for an empty string, an in-memory or URI SQLite
// name, an unknown scheme, a PostgreSQL keyword/value string (write a
// postgres:// URL instead), a malformed URL, or a parameter it does not
// know: an unknown parameter is refused rather than ignored, so a typo
// (synchronus=OFF) cannot silently change what a store does.
func Parse(loc string) (*Location, error) {
	if loc == "" {
		return nil, &Error{Location: loc, Reason: "empty"}
	}
	lower := strings.ToLower(loc)
	switch {
	case strings.HasPrefix(lower, "sqlite:"):
		return parseSQLite(loc, loc[len("sqlite:"):])
	case strings.HasPrefix(lower, "postgres://"), strings.HasPrefix(lower, "postgresql://"):
		return parsePostgres(loc)
	case strings.HasPrefix(lower, "postgres:"), strings.HasPrefix(lower, "postgresql:"):
		return nil, &Error{Location: redactText(loc), Reason: "a PostgreSQL location is a URL: postgres://[user[:password]@]host[:port]/database[?schema=NAME]"}
	}
	if m := scheme.FindString(loc); m != "" && !isWindowsDrive(loc) {
		return nil, &Error{Location: redactText(loc), Reason: fmt.Sprintf(
			"unknown scheme %q (want sqlite:PATH, a plain file path, or postgres://…; start a file name that has a colon with ./)",
			strings.TrimSuffix(m, ":"))}
	}
	if looksLikeKeywordDSN(loc) {
		return nil, &Error{Location: redactText(loc), Reason: "looks like a PostgreSQL keyword/value connection string; write it as a postgres:// URL"}
	}
	return sqliteLocation(loc, loc, "")
}

func isWindowsDrive(s string) bool {
	return len(s) >= 3 && s[1] == ':' && (s[2] == '\\' || s[2] == '/') &&
		(s[0] >= 'a' && s[0] <= 'z' || s[0] >= 'A' && s[0] <= 'Z')
}

// looksLikeKeywordDSN reports whether s reads like "host=db dbname=app": a
// plain path would otherwise take it as a SQLite file name.
func looksLikeKeywordDSN(s string) bool {
	for _, k := range []string{"host=", "dbname=", "user=", "password=", "port="} {
		if strings.HasPrefix(s, k) || strings.Contains(s, " "+k) {
			return true
		}
	}
	return false
}

func parseSQLite(loc, rest string) (*Location, error) {
	if strings.HasPrefix(rest, "//") {
		// URL form: sqlite:///abs/path. sqlite://name/… would put a file
		// name where a host goes; refuse it rather than guess.
		if !strings.HasPrefix(rest, "///") {
			return nil, &Error{Location: loc, Reason: "sqlite://NAME names a host, not a file: write sqlite:NAME or sqlite:///ABSOLUTE/PATH"}
		}
		rest = rest[2:]
	}
	path, query, _ := strings.Cut(rest, "?")
	return sqliteLocation(loc, path, query)
}

func sqliteLocation(loc, path, query string) (*Location, error) {
	switch {
	case path == "":
		return nil, &Error{Location: loc, Reason: "no SQLite file name"}
	case path == ":memory:" || strings.HasPrefix(path, "file:"):
		return nil, &Error{Location: loc, Reason: "in-memory and URI SQLite names are not supported: the store needs a file (its writer and readers use separate connections)"}
	}
	l := &Location{Backend: SQLite, Path: path}
	if query == "" {
		return l, nil
	}
	params, err := neturl.ParseQuery(query)
	if err != nil {
		return nil, &Error{Location: loc, Reason: "malformed parameters: " + err.Error()}
	}
	for k, vs := range params {
		switch k {
		case "synchronous":
			if len(vs) != 1 {
				return nil, &Error{Location: loc, Reason: "synchronous given more than once"}
			}
			switch s := sqlite.Synchronous(strings.ToUpper(vs[0])); s {
			case sqlite.SynchronousFull, sqlite.SynchronousNormal, sqlite.SynchronousOff:
				l.Synchronous = s
			default:
				return nil, &Error{Location: loc, Reason: fmt.Sprintf("synchronous=%s: want FULL, NORMAL or OFF", vs[0])}
			}
		default:
			return nil, &Error{Location: loc, Reason: fmt.Sprintf("unknown SQLite parameter %q (known: synchronous)", k)}
		}
	}
	return l, nil
}

// herald's own PostgreSQL URL parameters; pgx would send any parameter it
// does not know to the server as a run-time setting, which then fails the
// connection, so they are taken out before pgx sees the URL.
const schemaParam = "schema"

func parsePostgres(loc string) (*Location, error) {
	u, err := neturl.Parse(loc)
	if err != nil {
		var ue *neturl.Error
		if errors.As(err, &ue) {
			err = ue.Err // url.Error repeats the URL, password and all
		}
		return nil, &Error{Location: redactText(loc), Reason: "malformed URL: " + err.Error()}
	}
	l := &Location{Backend: Postgres}
	q := u.Query()
	if vs, ok := q[schemaParam]; ok {
		if len(vs) != 1 || vs[0] == "" {
			return nil, &Error{Location: redactURL(u), Reason: "schema= must be given once, with a name"}
		}
		l.Schema = vs[0]
		q.Del(schemaParam)
		u.RawQuery = q.Encode()
	}
	l.URL = u.String()
	return l, nil
}

// PostgresLocation returns the location of schema on the PostgreSQL server
// at url: url with schema=NAME set (replacing one it has). Tests use it to
// name a fresh schema in one string that a worker process can open too. It
// returns an *Error (ErrInvalid) if url is not a postgres:// URL or schema
// is empty.
func PostgresLocation(url, schema string) (string, error) {
	l, err := Parse(url)
	if err != nil {
		return "", err
	}
	if l.Backend != Postgres {
		return "", &Error{Location: l.String(), Reason: "not a postgres:// URL"}
	}
	if schema == "" {
		return "", &Error{Location: l.String(), Reason: "empty schema name"}
	}
	u, err := neturl.Parse(l.URL)
	if err != nil {
		return "", &Error{Location: l.String(), Reason: "malformed URL"}
	}
	q := u.Query()
	q.Set(schemaParam, schema)
	u.RawQuery = q.Encode()
	return u.String(), nil
}

// passwordParams are the URL query parameters pgx reads secrets from.
var passwordParams = []string{"password", "sslpassword"}

// redactURL writes u without its secrets.
func redactURL(u *neturl.URL) string {
	c := *u
	if c.User != nil {
		if _, has := c.User.Password(); has {
			c.User = neturl.UserPassword(c.User.Username(), "xxxxx")
		}
	}
	q := c.Query()
	changed := false
	for _, p := range passwordParams {
		if q.Has(p) {
			q.Set(p, "xxxxx")
			changed = true
		}
	}
	if changed {
		c.RawQuery = q.Encode()
	}
	return c.String()
}

// redactText redacts a location that may not parse as a URL: everything
// between "://" and the last "@" of the authority, and password parameters,
// are hidden.
func redactText(s string) string {
	if u, err := neturl.Parse(s); err == nil && u.Scheme != "" {
		return redactURL(u)
	}
	if i := strings.Index(s, "://"); i >= 0 {
		rest := s[i+3:]
		end := strings.IndexAny(rest, "/?#")
		if end < 0 {
			end = len(rest)
		}
		if at := strings.LastIndex(rest[:end], "@"); at >= 0 {
			s = s[:i+3] + "xxxxx" + rest[at:]
		}
	}
	for _, p := range passwordParams {
		for _, sep := range []string{"?", "&", " "} {
			key := sep + p + "="
			if i := strings.Index(s, key); i >= 0 {
				j := i + len(key)
				k := strings.IndexAny(s[j:], "& ")
				if k < 0 {
					k = len(s) - j
				}
				s = s[:j] + "xxxxx" + s[j+k:]
			}
		}
		if strings.HasPrefix(s, p+"=") {
			s = p + "=xxxxx (rest hidden)"
		}
	}
	return s
}

// String returns the location in the form Parse reads, with any password
// replaced by xxxxx.
func (l *Location) String() string {
	switch l.Backend {
	case SQLite:
		s := "sqlite:" + l.Path
		if l.Synchronous != "" {
			s += "?synchronous=" + string(l.Synchronous)
		}
		return s
	case Postgres:
		u, err := neturl.Parse(l.URL)
		if err != nil {
			return "postgres://(unparsable)"
		}
		if l.Schema != "" {
			q := u.Query()
			q.Set(schemaParam, l.Schema)
			u.RawQuery = q.Encode()
		}
		return redactURL(u)
	}
	return "(no store)"
}

// Describe names the store for people: "SQLite file PATH", or "PostgreSQL
// database DB on HOST as USER, schema S" (S is postgres.DefaultSchema when
// the location names none). It holds no password.
func (l *Location) Describe() string {
	switch l.Backend {
	case SQLite:
		s := "SQLite file " + l.Path
		if l.Synchronous != "" && l.Synchronous != sqlite.SynchronousFull {
			s += " (synchronous=" + string(l.Synchronous) + ")"
		}
		return s
	case Postgres:
		schema := l.schema()
		u, err := neturl.Parse(l.URL)
		if err != nil {
			return "PostgreSQL, schema " + schema
		}
		host := u.Host
		if host == "" {
			host = "the default host"
		}
		s := "PostgreSQL database " + strings.TrimPrefix(u.Path, "/") + " on " + host
		if u.User != nil && u.User.Username() != "" {
			s += " as " + u.User.Username()
		}
		return s + ", schema " + schema
	}
	return "no store"
}

// Option adds backend options to Open. A setting the location itself makes
// (synchronous=, schema=) is applied after these options, so the location
// wins.
type Option func(*options)

type options struct {
	sqlite   []sqlite.Option
	postgres []postgres.Option
}

// WithSQLite passes opts to sqlite.Open when the location is a SQLite file;
// they are ignored otherwise.
func WithSQLite(opts ...sqlite.Option) Option {
	return func(o *options) { o.sqlite = append(o.sqlite, opts...) }
}

// WithPostgres passes opts to postgres.Open when the location is a
// PostgreSQL URL; they are ignored otherwise.
func WithPostgres(opts ...postgres.Option) Option {
	return func(o *options) { o.postgres = append(o.postgres, opts...) }
}

// Open parses loc and opens the store it names, creating it (the SQLite
// file, the PostgreSQL schema) and applying migrations if needed. It returns
// an *Error (ErrInvalid) for a location Parse refuses, and otherwise what
// sqlite.Open or postgres.Open returns. ctx bounds the opening only.
func Open(ctx context.Context, loc string, opts ...Option) (storage.Store, error) {
	l, err := Parse(loc)
	if err != nil {
		return nil, err
	}
	return l.Open(ctx, opts...)
}

// Open opens the store l names; see the package-level Open.
func (l *Location) Open(ctx context.Context, opts ...Option) (storage.Store, error) {
	var o options
	for _, opt := range opts {
		if opt != nil {
			opt(&o)
		}
	}
	switch l.Backend {
	case SQLite:
		so := o.sqlite
		if l.Synchronous != "" {
			so = append(so[:len(so):len(so)], sqlite.WithSynchronous(l.Synchronous))
		}
		return sqlite.Open(ctx, l.Path, so...)
	case Postgres:
		po := o.postgres
		if l.Schema != "" {
			po = append(po[:len(po):len(po)], postgres.WithSchema(l.Schema))
		}
		return postgres.Open(ctx, l.URL, po...)
	}
	return nil, &Error{Location: l.String(), Reason: "unknown backend " + l.Backend}
}
