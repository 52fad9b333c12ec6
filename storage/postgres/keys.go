package postgres

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/heraldwf/herald/heraldtype"
	"github.com/heraldwf/herald/storage"
	"github.com/heraldwf/herald/storage/internal/backend"
)

const (
	// keyCreateSQL is KeyCreate; a taken id or hash is a unique violation
	// (23505), mapped onto heraldtype.ErrAlreadyExists.
	keyCreateSQL = `INSERT INTO api_keys (` + backend.KeyCols + `) VALUES ($1, $2, $3, $4, $5, $6, $7, $8)
		RETURNING ` + backend.KeyCols
	// keyByHashSQL is KeyByHash: one probe of the UNIQUE index on hash.
	keyByHashSQL = `SELECT ` + backend.KeyCols + ` FROM api_keys WHERE hash = $1`
	// keyTouchSQL is KeyTouch: a primary key probe, and a row version only
	// when last_used_at moves forward.
	keyTouchSQL = `UPDATE api_keys SET last_used_at = $2 WHERE id = $1 AND last_used_at < $2`
	// keyRevokeSQL is KeyRevoke: a revoked key keeps its revoked_at.
	keyRevokeSQL = `UPDATE api_keys SET revoked_at = CASE WHEN revoked_at = 0 THEN $3 ELSE revoked_at END
		WHERE id = $1 AND ($2 = '' OR tenant = $2) RETURNING ` + backend.KeyCols
	keyListSQL = `SELECT ` + backend.KeyCols + ` FROM api_keys
		WHERE ($1 = '' OR tenant = $1) AND ($2 OR revoked_at = 0) ORDER BY created_at, id COLLATE "C"`
)

func scanKey(row pgx.Row) (*heraldtype.APIKey, error) {
	var r backend.KeyRow
	if err := row.Scan(r.Dest()...); err != nil {
		return nil, err
	}
	return r.Key(), nil
}

// KeyCreate: see storage.KeyStore.
func (s *Store) KeyCreate(ctx context.Context, p *storage.KeyCreateParams) (*heraldtype.APIKey, error) {
	if p == nil {
		return nil, backend.NilParams("postgres: create key")
	}
	if err := p.Validate(); err != nil {
		return nil, fmt.Errorf("postgres: create key: %w", err)
	}
	var k *heraldtype.APIKey
	err := s.do(ctx, func(ctx context.Context) error {
		var err error
		k, err = scanKey(s.pool.QueryRow(ctx, keyCreateSQL, backend.KeyArgs(p)...))
		if c := pgConstraint(err); c != "" {
			return fmt.Errorf("a key with this id or hash exists (%s): %w", c, heraldtype.ErrAlreadyExists)
		}
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("postgres: create key %q: %w", p.Key.ID, err)
	}
	return k, nil
}

// KeyByHash: see storage.KeyStore.
func (s *Store) KeyByHash(ctx context.Context, p *storage.KeyByHashParams) (*heraldtype.APIKey, error) {
	if p == nil {
		return nil, backend.NilParams("postgres: key by hash")
	}
	if len(p.Hash) != storage.KeyHashBytes {
		if s.closed.Load() {
			return nil, heraldtype.ErrClosed
		}
		return nil, fmt.Errorf("postgres: key by hash: %w", heraldtype.ErrNotFound)
	}
	var k *heraldtype.APIKey
	err := s.do(ctx, func(ctx context.Context) error {
		var err error
		k, err = scanKey(s.pool.QueryRow(ctx, keyByHashSQL, p.Hash))
		if errors.Is(err, pgx.ErrNoRows) {
			return heraldtype.ErrNotFound
		}
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("postgres: key by hash: %w", err)
	}
	return k, nil
}

// KeyList: see storage.KeyStore.
func (s *Store) KeyList(ctx context.Context, p *storage.KeyListParams) ([]*heraldtype.APIKey, error) {
	if p == nil {
		return nil, backend.NilParams("postgres: list keys")
	}
	if err := p.Validate(); err != nil {
		return nil, fmt.Errorf("postgres: list keys: %w", err)
	}
	var out []*heraldtype.APIKey
	err := s.do(ctx, func(ctx context.Context) error {
		out = nil
		rows, err := s.pool.Query(ctx, keyListSQL, p.Tenant, p.IncludeRevoked)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			k, err := scanKey(rows)
			if err != nil {
				return err
			}
			out = append(out, k)
		}
		return rows.Err()
	})
	if err != nil {
		return nil, fmt.Errorf("postgres: list keys: %w", err)
	}
	return out, nil
}

// KeyRevoke: see storage.KeyStore.
func (s *Store) KeyRevoke(ctx context.Context, p *storage.KeyRevokeParams) (*heraldtype.APIKey, error) {
	if p == nil {
		return nil, backend.NilParams("postgres: revoke key")
	}
	if backend.KeyUnmatched(p.ID, p.Tenant) {
		if s.closed.Load() {
			return nil, heraldtype.ErrClosed
		}
		return nil, fmt.Errorf("postgres: revoke key %.64q: %w", p.ID, heraldtype.ErrNotFound)
	}
	now := backend.NowOr(p.Now).UnixNano()
	var k *heraldtype.APIKey
	err := s.do(ctx, func(ctx context.Context) error {
		var err error
		k, err = scanKey(s.pool.QueryRow(ctx, keyRevokeSQL, p.ID, p.Tenant, now))
		if errors.Is(err, pgx.ErrNoRows) {
			return heraldtype.ErrNotFound
		}
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("postgres: revoke key %q: %w", p.ID, err)
	}
	return k, nil
}

// KeyTouch: see storage.KeyStore.
func (s *Store) KeyTouch(ctx context.Context, p *storage.KeyTouchParams) error {
	if p == nil {
		return backend.NilParams("postgres: touch key")
	}
	if backend.KeyUnmatched(p.ID, "") {
		if s.closed.Load() {
			return heraldtype.ErrClosed
		}
		return nil
	}
	now := backend.NowOr(p.Now).UnixNano()
	err := s.do(ctx, func(ctx context.Context) error {
		_, err := s.pool.Exec(ctx, keyTouchSQL, p.ID, now)
		return err
	})
	if err != nil {
		return fmt.Errorf("postgres: touch key %q: %w", p.ID, err)
	}
	return nil
}

// KeyCount: see storage.KeyStore.
func (s *Store) KeyCount(ctx context.Context) (int, error) {
	var n int
	err := s.do(ctx, func(ctx context.Context) error {
		return s.pool.QueryRow(ctx, `SELECT count(*) FROM api_keys`).Scan(&n)
	})
	if err != nil {
		return 0, fmt.Errorf("postgres: count keys: %w", err)
	}
	return n, nil
}
