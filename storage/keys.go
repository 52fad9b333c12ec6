package storage

import (
	"context"
	"fmt"
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

// KeyHashBytes is the length of an APIKey's Hash (SHA-256).
const KeyHashBytes = 32

// Validate returns an error wrapping ErrInvalidArgument if p cannot be
// stored (see KeyStore.KeyCreate), or nil. Every backend calls it before it
// writes anything.
func (p *KeyCreateParams) Validate() error {
	k := &p.Key
	if problem := TextProblem(k.ID, MaxIDBytes); problem != "" {
		return fmt.Errorf("key id %s: %w", problem, heraldtype.ErrInvalidArgument)
	}
	if problem := TextProblem(k.Name, MaxIDBytes); problem != "" {
		return fmt.Errorf("key %q: name %s: %w", k.ID, problem, heraldtype.ErrInvalidArgument)
	}
	if len(k.Hash) != KeyHashBytes {
		return fmt.Errorf("key %q: hash is %d bytes, want %d: %w", k.ID, len(k.Hash), KeyHashBytes, heraldtype.ErrInvalidArgument)
	}
	switch {
	case k.Admin && k.Tenant != "":
		return fmt.Errorf("key %q: an admin key has no tenant (got %.64q): %w", k.ID, k.Tenant, heraldtype.ErrInvalidArgument)
	case !k.Admin && k.Tenant == "":
		return fmt.Errorf("key %q: a tenant key needs a tenant: %w", k.ID, heraldtype.ErrInvalidArgument)
	case !k.Admin:
		if err := ValidateTenantID(k.Tenant); err != nil {
			return fmt.Errorf("key %q: %w", k.ID, err)
		}
	}
	if !k.LastUsedAt.IsZero() || !k.RevokedAt.IsZero() {
		return fmt.Errorf("key %q: a new key has no LastUsedAt or RevokedAt: %w", k.ID, heraldtype.ErrInvalidArgument)
	}
	return nil
}

// Validate returns an error wrapping ErrInvalidArgument for a Tenant that
// breaks the text rules, or nil.
func (p *KeyListParams) Validate() error {
	if p.Tenant == "" {
		return nil
	}
	return ValidateTenantID(p.Tenant)
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
//
// Not stable; not for implementing outside this repository (see Store).
type KeyStore interface {
	// KeyCreate stores p.Key. It returns ErrAlreadyExists if a key with that
	// ID or Hash exists, and ErrInvalidArgument, writing nothing, for an
	// ID or Name that breaks the text rules (MaxIDBytes), a Hash that is
	// not 32 bytes, an admin key with a Tenant, or a tenant key without
	// one (or with a Tenant that breaks the text rules), or a LastUsedAt
	// or RevokedAt that is set (KeyCreateParams.Validate). It returns the
	// key as stored.
	KeyCreate(ctx context.Context, p *KeyCreateParams) (*heraldtype.APIKey, error)
	// KeyByHash returns the key whose Hash equals p.Hash, revoked or not
	// (the caller checks RevokedAt), or ErrNotFound.
	KeyByHash(ctx context.Context, p *KeyByHashParams) (*heraldtype.APIKey, error)
	// KeyList returns the keys p selects, ordered by CreatedAt then ID
	// (bytewise); ErrInvalidArgument for a Tenant that breaks the text
	// rules.
	KeyList(ctx context.Context, p *KeyListParams) ([]*heraldtype.APIKey, error)
	// KeyRevoke sets RevokedAt = p.Now on the key (once: revoking a revoked
	// key changes nothing and is not an error) and returns it, or
	// ErrNotFound if no key has that ID (and, with p.Tenant, that tenant):
	// also for an ID or Tenant that breaks the text rules, which no key
	// has. A zero p.Now is the current time.
	KeyRevoke(ctx context.Context, p *KeyRevokeParams) (*heraldtype.APIKey, error)
	// KeyTouch sets LastUsedAt = p.Now if that is later than the stored
	// value. An unknown ID (one that breaks the text rules included) is
	// not an error. A zero p.Now is the current time.
	KeyTouch(ctx context.Context, p *KeyTouchParams) error
	// KeyCount returns how many keys exist, revoked ones included (a
	// server creates the first admin key when it is 0).
	KeyCount(ctx context.Context) (int, error)
}
