package httpapi_test

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/heraldwf/herald"
	"github.com/heraldwf/herald/httpapi/wire"
	"github.com/heraldwf/herald/internal/crashfs"
	"github.com/heraldwf/herald/internal/testdb"
)

// backendText is what a backend's or driver's text looks like in a
// message: a backend name, a SQLSTATE, a SQLite result code, the driver's
// words.
var backendText = regexp.MustCompile(`sqlite:|postgres:|SQLSTATE|FATAL|\(\d+\)$|preprocessing|pgx|database or disk`)

// TestStoreErrors_BusRecordsInHeraldsWords: a bus delivery to an instance
// that has ended is recorded (attempt and dead letter) in Herald's words,
// the same on every backend: no "sqlite: raise event …" prefix.
func TestStoreErrors_BusRecordsInHeraldsWords(t *testing.T) {
	s := newServer(t)
	key := s.key("acme")
	s.do(key, "POST", "/v1/instances", wire.StartInstanceRequest{Workflow: "echo", ID: "bm-0"}).ok(201, nil)
	s.do(key, "POST", "/v1/instances/bm-0/terminate", `{"reason":"test"}`).ok(200, nil)
	s.do(key, "PUT", "/v1/subscriptions/sig", wire.PutSubscriptionRequest{Pattern: "order.paid", MaxRetries: ptr(0),
		Target: wire.Target{Kind: herald.TargetSignal, InstanceID: "bm-0", Name: "go"}}).ok(200, nil)
	s.do(key, "POST", "/v1/publish", wire.PublishRequest{Type: "order.paid", EventID: "o1", Data: json.RawMessage(`{}`)}).ok(202, nil)
	x := s.executionIs(key, "o1", "sig", herald.ExecDeadLettered)

	var attempts wire.Page[*wire.Attempt]
	s.do(key, "GET", fmt.Sprint("/v1/executions?execution=", x.ID), nil).ok(200, &attempts)
	if len(attempts.Items) != 1 {
		t.Fatalf("attempts %+v", attempts.Items)
	}
	var d wire.DeadLetter
	s.do(key, "GET", fmt.Sprint("/v1/dead-letters/", x.DeadLetter), nil).ok(200, &d)
	for what, msg := range map[string]string{"attempt": attempts.Items[0].Error, "dead letter": d.Error} {
		if msg == "" || backendText.MatchString(msg) {
			t.Errorf("%s error %q: want Herald's words, without backend text", what, msg)
		}
	}
	if d.ErrorKind != herald.ErrorPermanent || !regexp.MustCompile(`instance "bm-0" is terminated`).MatchString(d.Error) {
		t.Errorf("dead letter %s %q", d.ErrorKind, d.Error)
	}
}

// TestStoreErrors_KilledConnectionAnsweredInHeraldsWords: a PostgreSQL
// backend killed under a write (pg_terminate_backend, as an administrator, a
// restarted server or a failover does) is answered 503 unavailable in
// Herald's words; the driver's text ("FATAL: terminating connection due to
// administrator command (SQLSTATE 57P01)") is only logged. The backend is
// killed by a trigger on the scripts table, so the kill lands inside the
// write every time, and the key check before it goes through.
func TestStoreErrors_KilledConnectionAnsweredInHeraldsWords(t *testing.T) {
	if testdb.Backend() != "postgres" {
		t.Skip("SQLite has no connection to kill (TestStoreErrors_FullDiskAnsweredInHeraldsWords)")
	}
	s := newServer(t)
	key := s.key("acme")
	schema := pgx.Identifier{strings.TrimPrefix(s.pgApp, "herald-")}.Sanitize()
	db, err := pgx.Connect(s.ctx, testdb.PostgresURL(t))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close(s.ctx)
	if _, err := db.Exec(s.ctx, `CREATE FUNCTION `+schema+`.kill_backend() RETURNS trigger LANGUAGE plpgsql AS $$
		BEGIN PERFORM pg_terminate_backend(pg_backend_pid()); PERFORM pg_sleep(10); RETURN NEW; END $$;
		CREATE TRIGGER kill_backend BEFORE INSERT ON `+schema+`.bus_scripts
		FOR EACH ROW EXECUTE FUNCTION `+schema+`.kill_backend()`); err != nil {
		t.Fatal(err)
	}
	p := s.do(key, "PUT", "/v1/scripts/s", wire.PutScriptRequest{Source: "return 1"}).problem(503, "unavailable")
	if p.Detail == "" || backendText.MatchString(p.Detail) {
		t.Errorf("503 detail %q: want Herald's words, without the driver's text", p.Detail)
	}
	if !strings.Contains(s.logs.String(), "SQLSTATE 57P01") {
		t.Errorf("the driver's text is not in the log:\n%s", s.logs.String())
	}
	if _, err := db.Exec(s.ctx, `DROP TRIGGER kill_backend ON `+schema+`.bus_scripts`); err != nil {
		t.Fatal(err)
	}
	s.do(key, "PUT", "/v1/scripts/s", wire.PutScriptRequest{Source: "return 1"}).ok(200, nil)
}

// TestStoreErrors_FullDiskAnsweredInHeraldsWords: a write refused for a full
// disk (a SQLite file on crashfs, out of room) is answered 507 storage_full
// in Herald's words, not "database or disk is full (13)", which is only
// logged.
func TestStoreErrors_FullDiskAnsweredInHeraldsWords(t *testing.T) {
	if testdb.Backend() == "postgres" {
		t.Skip("a full disk is a SQLite file's (storage/postgres's TestFullDisk covers PostgreSQL's); here PostgreSQL has TestStoreErrors_KilledConnectionAnsweredInHeraldsWords")
	}
	fsys, err := crashfs.StartRemote("TestCrashFSServer", t.TempDir())
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("FUSE IS NOT AVAILABLE: this test needs /dev/fuse and the right to mount (root): %v", err)
		}
		t.Skipf("FUSE IS NOT AVAILABLE, test skipped (it fails in CI): %v", err)
	}
	t.Cleanup(func() { // after the store is closed (cleanups run last first)
		if err := fsys.Close(); err != nil {
			t.Errorf("crashfs: %v", err)
		}
	})
	s := newServerAt(t, filepath.Join(fsys.Dir, "herald.db"))
	key := s.key("acme")
	used, err := fsys.Used()
	if err != nil {
		t.Fatal(err)
	}
	if err := fsys.SetCapacity(used + 256<<10); err != nil {
		t.Fatal(err)
	}
	source := "return " + strconv.Quote(strings.Repeat("x", 32<<10))
	full := false
	for i := 0; i < 100 && !full; i++ {
		a := s.do(key, "PUT", fmt.Sprintf("/v1/scripts/s%d", i), wire.PutScriptRequest{Source: source})
		if a.Status == 200 {
			continue
		}
		p := a.problem(507, "storage_full")
		full = true
		if p.Detail == "" || backendText.MatchString(p.Detail) {
			t.Errorf("507 detail %q: want Herald's words, without the driver's text", p.Detail)
		}
	}
	if !full {
		t.Fatal("no write was refused for the full disk")
	}
	if !strings.Contains(s.logs.String(), "database or disk is full") {
		t.Errorf("the store's error is not in the log:\n%s", s.logs.String())
	}
}

// TestCrashFSServer is the crashfs server process of
// TestStoreErrors_FullDiskAnsweredInHeraldsWords (crashfs.StartRemote); run
// otherwise, it does nothing.
func TestCrashFSServer(t *testing.T) {
	if _, err := crashfs.ServeChild(); err != nil {
		t.Fatal(err)
	}
}
