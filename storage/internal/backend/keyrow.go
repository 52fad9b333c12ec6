package backend

import (
	"github.com/heraldwf/herald/heraldtype"
	"github.com/heraldwf/herald/storage"
)

// KeyCols are the columns of api_keys a KeyRow scans, in its order.
const KeyCols = `id, tenant, admin, name, hash, created_at, last_used_at, revoked_at`

// KeyRow is a row of api_keys (KeyCols). Times are unix nanoseconds, 0 for
// none (Nanos).
type KeyRow struct {
	k                                heraldtype.APIKey
	createdAt, lastUsedAt, revokedAt int64
}

// Dest returns the scan destinations of the row's columns.
func (r *KeyRow) Dest() []any {
	return []any{&r.k.ID, &r.k.Tenant, &r.k.Admin, &r.k.Name, &r.k.Hash, &r.createdAt, &r.lastUsedAt, &r.revokedAt}
}

// Key returns the scanned key.
func (r *KeyRow) Key() *heraldtype.APIKey {
	k := r.k
	k.CreatedAt, k.LastUsedAt, k.RevokedAt = FromNanos(r.createdAt), FromNanos(r.lastUsedAt), FromNanos(r.revokedAt)
	return &k
}

// KeyArgs returns the values of KeyCols for a new key (p validated).
func KeyArgs(p *storage.KeyCreateParams) []any {
	k := &p.Key
	return []any{k.ID, k.Tenant, k.Admin, k.Name, k.Hash, Nanos(k.CreatedAt), int64(0), int64(0)}
}

// KeyUnmatched reports whether no stored key can have id, or (when tenant
// is set) belong to tenant: one of them breaks the text rules every stored
// key was checked against. KeyRevoke and KeyTouch answer such a call
// without a query (a PostgreSQL text parameter refuses NUL and invalid
// UTF-8).
func KeyUnmatched(id, tenant string) bool {
	return storage.TextProblem(id, storage.MaxIDBytes) != "" ||
		(tenant != "" && storage.TextProblem(tenant, storage.MaxIDBytes) != "")
}
