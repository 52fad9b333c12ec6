package postgres_test

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"net/url"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/heraldwf/herald/heraldtype"
	"github.com/heraldwf/herald/storage"
	"github.com/heraldwf/herald/storage/postgres"
)

// The API key calls map a connection killed under them onto
// ErrUnavailable, as every other call does, never a raw SQLSTATE: a call
// made right after its connection was killed fails so (the pool cannot know
// the connection is gone), or succeeds if the driver could retry it.
func TestKeyCallsKilledConnectionUnavailable(t *testing.T) {
	base := testURL(t)
	schema := newSchema(t)
	app := "herald-keys-" + schema
	u, err := url.Parse(base)
	if err != nil {
		t.Fatal(err)
	}
	q := u.Query()
	q.Set("application_name", app)
	u.RawQuery = q.Encode()
	ctx := context.Background()
	s, err := postgres.Open(ctx, u.String(), postgres.WithSchema(schema), postgres.WithMaxConns(1))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	killer, err := pgx.Connect(ctx, base)
	if err != nil {
		t.Fatal(err)
	}
	defer killer.Close(ctx)
	kill := func() {
		if _, err := killer.Exec(ctx, `SELECT pg_terminate_backend(pid) FROM pg_stat_activity
			WHERE application_name = $1 AND backend_type = 'client backend'`, app); err != nil {
			t.Fatal(err)
		}
	}
	hash := func(s string) []byte { h := sha256.Sum256([]byte(s)); return h[:] }
	if _, err := s.KeyCreate(ctx, &storage.KeyCreateParams{Key: heraldtype.APIKey{
		ID: "k", Admin: true, Name: "k", Hash: hash("k"), CreatedAt: t0}}); err != nil {
		t.Fatal(err)
	}
	calls := map[string]func(i int) error{
		"KeyByHash": func(int) error { return errOf(s.KeyByHash(ctx, &storage.KeyByHashParams{Hash: hash("k")})) },
		"KeyList":   func(int) error { return errOf(s.KeyList(ctx, &storage.KeyListParams{})) },
		"KeyCount":  func(int) error { return errOf(s.KeyCount(ctx)) },
		"KeyTouch":  func(int) error { return s.KeyTouch(ctx, &storage.KeyTouchParams{ID: "k", Now: t0}) },
		"KeyRevoke": func(int) error {
			return errOf(s.KeyRevoke(ctx, &storage.KeyRevokeParams{ID: "k", Now: t0}))
		},
		"KeyCreate": func(i int) error {
			id := fmt.Sprintf("k%d", i)
			return errOf(s.KeyCreate(ctx, &storage.KeyCreateParams{Key: heraldtype.APIKey{
				ID: id, Admin: true, Name: id, Hash: hash(id), CreatedAt: t0}}))
		},
	}
	for name, call := range calls {
		unavailable := 0
		for i := range 10 {
			kill()
			if err := call(i); err != nil {
				if !errors.Is(err, heraldtype.ErrUnavailable) {
					t.Fatalf("%s after its connection was killed: %v, want ErrUnavailable", name, err)
				}
				unavailable++
			}
		}
		if unavailable == 0 {
			t.Errorf("%s: no call saw its connection killed: the mapping onto ErrUnavailable was not tested", name)
		}
	}
}

func errOf[T any](_ T, err error) error { return err }
