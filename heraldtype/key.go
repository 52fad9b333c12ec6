package heraldtype

import "time"

// APIKey is an API key as stored: never the secret itself, only its hash.
// The secret is shown once, when the key is created.
type APIKey struct {
	// ID identifies the key (not secret; it is the key's prefix, shown in
	// lists and logs so an operator can tell keys apart).
	ID string `json:"id"`
	// Tenant is the tenant the key reaches. Empty for an admin key.
	Tenant string `json:"tenant,omitempty"`
	// Admin keys manage tenants, keys and limits and may act on any tenant
	// they name.
	Admin bool `json:"admin"`
	// Name is the operator's label ("billing-webhook").
	Name string `json:"name"`
	// Hash is the SHA-256 of the secret. It is not part of the key's JSON.
	Hash []byte `json:"-"`
	// CreatedAt is when the key was created.
	CreatedAt time.Time `json:"created_at"`
	// LastUsedAt is when the key last authenticated a request (updated at
	// most about once a minute); zero if never.
	LastUsedAt time.Time `json:"last_used_at,omitzero"`
	// RevokedAt is when the key was revoked; zero while it is valid. A
	// revoked key authenticates nothing.
	RevokedAt time.Time `json:"revoked_at,omitzero"`
}
