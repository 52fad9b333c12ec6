package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/heraldwf/herald/heraldtype"
	"github.com/heraldwf/herald/storage"
	"github.com/heraldwf/herald/storage/internal/backend"
)

// keyByHashSQL is KeyByHash: one probe of the UNIQUE index on hash.
const keyByHashSQL = `SELECT ` + backend.KeyCols + ` FROM api_keys WHERE hash = ?`

func scanKey(sc scanner) (*heraldtype.APIKey, error) {
	var r backend.KeyRow
	if err := sc.Scan(r.Dest()...); err != nil {
		return nil, err
	}
	return r.Key(), nil
}

// KeyCreate: see storage.KeyStore. A key whose id or hash is taken is not
// inserted (ON CONFLICT DO NOTHING), so the batch it shares a transaction
// with is not disturbed.
func (s *Store) KeyCreate(ctx context.Context, p *storage.KeyCreateParams) (*heraldtype.APIKey, error) {
	if p == nil {
		return nil, backend.NilParams("sqlite: create key")
	}
	if err := p.Validate(); err != nil {
		return nil, fmt.Errorf("sqlite: create key: %w", err)
	}
	var k *heraldtype.APIKey
	err := s.write(ctx, func(w *wtx) error {
		var err error
		k, err = scanKey(w.queryRow(`INSERT INTO api_keys (`+backend.KeyCols+`) VALUES (?, ?, ?, ?, ?, ?, ?, ?)
			ON CONFLICT DO NOTHING RETURNING `+backend.KeyCols, backend.KeyArgs(p)...))
		if errors.Is(err, sql.ErrNoRows) {
			return fmt.Errorf("a key with this id or hash exists: %w", heraldtype.ErrAlreadyExists)
		}
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("sqlite: create key %q: %w", p.Key.ID, err)
	}
	return k, nil
}

// KeyByHash: see storage.KeyStore.
func (s *Store) KeyByHash(ctx context.Context, p *storage.KeyByHashParams) (_ *heraldtype.APIKey, err error) {
	defer s.afterRead(ctx, &err)
	if p == nil {
		return nil, backend.NilParams("sqlite: key by hash")
	}
	if s.closed.Load() {
		return nil, heraldtype.ErrClosed
	}
	if len(p.Hash) != storage.KeyHashBytes {
		return nil, fmt.Errorf("sqlite: key by hash: %w", heraldtype.ErrNotFound)
	}
	k, err := scanKey(s.reader(nil).QueryRowContext(ctx, keyByHashSQL, p.Hash))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("sqlite: key by hash: %w", heraldtype.ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("sqlite: key by hash: %w", s.readErr(err))
	}
	return k, nil
}

// KeyList: see storage.KeyStore.
func (s *Store) KeyList(ctx context.Context, p *storage.KeyListParams) (_ []*heraldtype.APIKey, err error) {
	defer s.afterRead(ctx, &err)
	if p == nil {
		return nil, backend.NilParams("sqlite: list keys")
	}
	if err := p.Validate(); err != nil {
		return nil, fmt.Errorf("sqlite: list keys: %w", err)
	}
	if s.closed.Load() {
		return nil, heraldtype.ErrClosed
	}
	rows, err := s.reader(nil).QueryContext(ctx, `SELECT `+backend.KeyCols+` FROM api_keys
		WHERE (?1 = '' OR tenant = ?1) AND (?2 OR revoked_at = 0) ORDER BY created_at, id`, p.Tenant, p.IncludeRevoked)
	if err != nil {
		return nil, fmt.Errorf("sqlite: list keys: %w", s.readErr(err))
	}
	defer rows.Close()
	var out []*heraldtype.APIKey
	for rows.Next() {
		k, err := scanKey(rows)
		if err != nil {
			return nil, fmt.Errorf("sqlite: list keys: %w", err)
		}
		out = append(out, k)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("sqlite: list keys: %w", s.readErr(err))
	}
	return out, nil
}

// KeyRevoke: see storage.KeyStore. One statement: a revoked key keeps its
// RevokedAt.
func (s *Store) KeyRevoke(ctx context.Context, p *storage.KeyRevokeParams) (*heraldtype.APIKey, error) {
	if p == nil {
		return nil, backend.NilParams("sqlite: revoke key")
	}
	if backend.KeyUnmatched(p.ID, p.Tenant) {
		if s.closed.Load() {
			return nil, heraldtype.ErrClosed
		}
		return nil, fmt.Errorf("sqlite: revoke key %.64q: %w", p.ID, heraldtype.ErrNotFound)
	}
	now := backend.NowOr(p.Now).UnixNano()
	var k *heraldtype.APIKey
	err := s.write(ctx, func(w *wtx) error {
		var err error
		k, err = scanKey(w.queryRow(`UPDATE api_keys SET revoked_at = CASE WHEN revoked_at = 0 THEN ?3 ELSE revoked_at END
			WHERE id = ?1 AND (?2 = '' OR tenant = ?2) RETURNING `+backend.KeyCols, p.ID, p.Tenant, now))
		if errors.Is(err, sql.ErrNoRows) {
			return heraldtype.ErrNotFound
		}
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("sqlite: revoke key %q: %w", p.ID, err)
	}
	return k, nil
}

// KeyTouch: see storage.KeyStore.
func (s *Store) KeyTouch(ctx context.Context, p *storage.KeyTouchParams) error {
	if p == nil {
		return backend.NilParams("sqlite: touch key")
	}
	if backend.KeyUnmatched(p.ID, "") {
		if s.closed.Load() {
			return heraldtype.ErrClosed
		}
		return nil
	}
	now := backend.NowOr(p.Now).UnixNano()
	err := s.write(ctx, func(w *wtx) error {
		_, err := w.exec(`UPDATE api_keys SET last_used_at = ?2 WHERE id = ?1 AND last_used_at < ?2`, p.ID, now)
		return err
	})
	if err != nil {
		return fmt.Errorf("sqlite: touch key %q: %w", p.ID, err)
	}
	return nil
}

// KeyCount: see storage.KeyStore.
func (s *Store) KeyCount(ctx context.Context) (_ int, err error) {
	defer s.afterRead(ctx, &err)
	if s.closed.Load() {
		return 0, heraldtype.ErrClosed
	}
	var n int
	if err := s.reader(nil).QueryRowContext(ctx, `SELECT COUNT(*) FROM api_keys`).Scan(&n); err != nil {
		return 0, fmt.Errorf("sqlite: count keys: %w", s.readErr(err))
	}
	return n, nil
}
