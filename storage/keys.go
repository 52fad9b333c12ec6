package storage

import (
	"context"
	"time"

	"github.com/heraldwf/herald/heraldtype"
)

// KeyCreateParams stores a new API key.
type KeyCreateParams struct {
	// Key is stored as given (ID, Tenant, Admin, Name, Hash, CreatedAt);
	// LastUsedAt and RevokedAt must be zero.
	Key heraldtype.APIKey
}

// KeyByHashParams finds a key by the SHA-256 of its secret.
type KeyByHashParams struct {
	Hash []byte
}

// KeyListParams lists keys.
type KeyListParams struct {
	// Tenant, when set, lists that tenant's keys only; empty lists every
	// key, admin keys included.
	Tenant string
	// IncludeRevoked lists revoked keys too.
	IncludeRevoked bool
}

// KeyRevokeParams revokes a key.
type KeyRevokeParams struct {
	ID string
	// Tenant, when set, revokes the key only if it belongs to that tenant
	// (a tenant's key cannot revoke another tenant's); empty matches any.
	Tenant string
	Now    time.Time
}

// KeyTouchParams records that a key authenticated a request.
type KeyTouchParams struct {
	ID  string
	Now time.Time
}

// KeyStore keeps API keys. Keys are not scoped to a tenant the way the
// other roles are (an admin key has none); KeyByHash is how a request
// finds its key, so it must be one index probe.
type KeyStore interface {
	// KeyCreate stores p.Key. It returns ErrAlreadyExists if a key with that
	// ID or Hash exists, and ErrInvalidArgument, writing nothing, for an
	// ID or Name that breaks the text rules (MaxIDBytes), a Hash that is
	// not 32 bytes, an admin key with a Tenant, or a tenant key without
	// one.
	KeyCreate(ctx context.Context, p *KeyCreateParams) (*heraldtype.APIKey, error)
	// KeyByHash returns the key whose Hash equals p.Hash, revoked or not
	// (the caller checks RevokedAt), or ErrNotFound.
	KeyByHash(ctx context.Context, p *KeyByHashParams) (*heraldtype.APIKey, error)
	// KeyList returns the keys p selects, ordered by CreatedAt then ID.
	KeyList(ctx context.Context, p *KeyListParams) ([]*heraldtype.APIKey, error)
	// KeyRevoke sets RevokedAt = p.Now on the key (once: revoking a revoked
	// key changes nothing and is not an error) and returns it, or
	// ErrNotFound if no key has that ID (and, with p.Tenant, that tenant).
	KeyRevoke(ctx context.Context, p *KeyRevokeParams) (*heraldtype.APIKey, error)
	// KeyTouch sets LastUsedAt = p.Now if that is later than the stored
	// value. An unknown ID is not an error.
	KeyTouch(ctx context.Context, p *KeyTouchParams) error
	// KeyCount returns how many keys exist, revoked ones included (a
	// server creates the first admin key when it is 0).
	KeyCount(ctx context.Context) (int, error)
}
