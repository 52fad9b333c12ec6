package httpapi

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base32"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/heraldwf/herald"
	"github.com/heraldwf/herald/heraldtype"
	"github.com/heraldwf/herald/storage"
)

// API keys.
//
// A key's secret is "hk_" + its id (16 base32 characters, 80 random bits,
// public: lists and logs show it) + "_" + 52 base32 characters (256 random
// bits). Only the SHA-256 of the whole secret is stored; a request's key is
// found by that hash (one index probe) and the stored hash is compared with
// the computed one in constant time. Secrets are shown once, when created.
//
// A key set through HERALD_ADMIN_KEY (EnsureAdminKey) may be any string of
// at least MinAdminKeyLen characters; its id is derived from its hash.

// keyPrefix starts every generated secret.
const keyPrefix = "hk_"

// MinAdminKeyLen is the shortest admin key EnsureAdminKey accepts.
const MinAdminKeyLen = 32

// touchEvery is how often a key's LastUsedAt is written at most.
const touchEvery = time.Minute

var keyEncoding = base32.StdEncoding.WithPadding(base32.NoPadding)

// NewKeySecret returns a fresh key: its public id and its secret.
func NewKeySecret() (id, secret string) {
	var idb [10]byte
	var sb [32]byte
	rand.Read(idb[:])
	rand.Read(sb[:])
	id = strings.ToLower(keyEncoding.EncodeToString(idb[:]))
	return id, keyPrefix + id + "_" + strings.ToLower(keyEncoding.EncodeToString(sb[:]))
}

// hashKey is the stored form of a secret.
func hashKey(secret string) []byte {
	h := sha256.Sum256([]byte(secret))
	return h[:]
}

// CreateKey stores a new key for tenant (admin: an admin key, tenant must
// be empty) and returns it with its secret, which is not stored.
func CreateKey(ctx context.Context, keys storage.KeyStore, tenant string, admin bool, name string, now time.Time) (*heraldtype.APIKey, string, error) {
	id, secret := NewKeySecret()
	k, err := keys.KeyCreate(ctx, &storage.KeyCreateParams{Key: heraldtype.APIKey{
		ID: id, Tenant: tenant, Admin: admin, Name: name, Hash: hashKey(secret), CreatedAt: now.UTC(),
	}})
	if err != nil {
		return nil, "", err
	}
	return k, secret, nil
}

// EnsureAdminKey creates the first admin key when the store holds no key
// at all. With fromEnv set (HERALD_ADMIN_KEY) that string becomes the admin
// key and EnsureAdminKey returns ""; otherwise a key is generated and its
// secret returned, for the caller to print once. When keys exist it does
// nothing and returns "" (fromEnv is then ignored: keys are managed through
// the API).
func EnsureAdminKey(ctx context.Context, keys storage.KeyStore, fromEnv string, now time.Time) (generated string, err error) {
	n, err := keys.KeyCount(ctx)
	if err != nil {
		return "", fmt.Errorf("count API keys: %w", err)
	}
	if n > 0 {
		return "", nil
	}
	if fromEnv != "" {
		if len(fromEnv) < MinAdminKeyLen {
			return "", fmt.Errorf("the admin key must be at least %d characters: %w", MinAdminKeyLen, herald.ErrInvalidArgument)
		}
		h := hashKey(fromEnv)
		_, err := keys.KeyCreate(ctx, &storage.KeyCreateParams{Key: heraldtype.APIKey{
			ID: "env-" + hex.EncodeToString(h[:6]), Admin: true, Name: "HERALD_ADMIN_KEY", Hash: h, CreatedAt: now.UTC(),
		}})
		if err != nil {
			return "", fmt.Errorf("store the admin key: %w", err)
		}
		return "", nil
	}
	_, secret, err := CreateKey(ctx, keys, "", true, "admin (generated at first start)", now)
	if err != nil {
		return "", fmt.Errorf("create the admin key: %w", err)
	}
	return secret, nil
}

// principal is who a request's key says it comes from.
type principal struct {
	keyID  string
	admin  bool
	tenant string // a tenant key's tenant
}

// tenantFor returns the tenant a tenant-scoped route acts on given the
// Herald-Tenant header, and false if the key may not act on it.
func (p *principal) tenantFor(header string) (string, bool) {
	if p.admin {
		if header == "" {
			return herald.DefaultTenant, true
		}
		return header, true
	}
	if header != "" && header != p.tenant {
		return "", false
	}
	return p.tenant, true
}

// authenticator checks bearer keys.
type authenticator struct {
	keys storage.KeyStore
	now  func() time.Time

	mu      sync.Mutex
	touched map[string]time.Time // key id → last LastUsedAt write
}

func newAuthenticator(keys storage.KeyStore, now func() time.Time) *authenticator {
	return &authenticator{keys: keys, now: now, touched: map[string]time.Time{}}
}

// authenticate returns the request's principal, or nil with the problem to
// answer. Every failure (no header, malformed, unknown, revoked) is the
// same 401 to the client; only the detail differs, and it never echoes the
// key.
func (a *authenticator) authenticate(r *http.Request) (*principal, problemKind, string) {
	h := r.Header.Get("Authorization")
	scheme, secret, ok := strings.Cut(h, " ")
	if h == "" {
		return nil, probUnauthorized, "no Authorization header; send Authorization: Bearer <key>"
	}
	if !ok || !strings.EqualFold(scheme, "Bearer") || secret == "" || len(secret) > 1024 {
		return nil, probUnauthorized, "the Authorization header must be Bearer <key>"
	}
	k, err := Authenticate(r.Context(), a.keys, secret)
	switch {
	case errors.Is(err, ErrKeyRejected):
		return nil, probUnauthorized, strings.TrimPrefix(err.Error(), ErrKeyRejected.Error()+": ")
	case err != nil:
		kind, _ := problemFor(err)
		return nil, kind, "API keys cannot be checked: " + kind.title
	}
	a.touch(r.Context(), k.ID)
	return &principal{keyID: k.ID, admin: k.Admin, tenant: k.Tenant}, problemKind{}, ""
}

// ErrKeyRejected is Authenticate's error for a secret that is not a valid
// key: unknown, or revoked.
var ErrKeyRejected = errors.New("API key rejected")

// Authenticate checks an API key's secret exactly as the API checks a
// request's bearer key: the stored key found by the secret's SHA-256 hash
// (compared in constant time) and not revoked. It returns the key (its
// Hash included), an error wrapping ErrKeyRejected for an unknown or
// revoked key, or the store's error. The web UI (package webui) signs in
// with it and checks the key again on every request.
func Authenticate(ctx context.Context, keys storage.KeyStore, secret string) (*heraldtype.APIKey, error) {
	if secret == "" || len(secret) > 1024 {
		return nil, fmt.Errorf("%w: unknown API key", ErrKeyRejected)
	}
	return AuthenticateHash(ctx, keys, hashKey(secret))
}

// AuthenticateHash is Authenticate for a key known by its hash (the Hash
// of the key Authenticate returned): it finds the key again and refuses it
// once revoked. A web session keeps the hash, never the secret, and checks
// it on every request.
func AuthenticateHash(ctx context.Context, keys storage.KeyStore, sum []byte) (*heraldtype.APIKey, error) {
	if len(sum) != sha256.Size {
		return nil, fmt.Errorf("%w: unknown API key", ErrKeyRejected)
	}
	k, err := keys.KeyByHash(ctx, &storage.KeyByHashParams{Hash: sum})
	switch {
	case errors.Is(err, heraldtype.ErrNotFound):
		return nil, fmt.Errorf("%w: unknown API key", ErrKeyRejected)
	case err != nil:
		return nil, err
	}
	if subtle.ConstantTimeCompare(k.Hash, sum) != 1 {
		return nil, fmt.Errorf("%w: unknown API key", ErrKeyRejected)
	}
	if !k.RevokedAt.IsZero() {
		return nil, fmt.Errorf("%w: the API key was revoked", ErrKeyRejected)
	}
	return k, nil
}

// touch records the key's use, at most once per touchEvery per key and
// process. A failed write is not the request's problem.
func (a *authenticator) touch(ctx context.Context, id string) {
	now := a.now()
	a.mu.Lock()
	last, seen := a.touched[id]
	if seen && now.Sub(last) < touchEvery {
		a.mu.Unlock()
		return
	}
	a.touched[id] = now
	a.mu.Unlock()
	_ = a.keys.KeyTouch(context.WithoutCancel(ctx), &storage.KeyTouchParams{ID: id, Now: now.UTC()})
}
