package storagetest

import (
	"bytes"
	"crypto/sha256"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/heraldwf/herald/heraldtype"
	"github.com/heraldwf/herald/storage"
)

// The API keys' part of the suite (storage.KeyStore): one subtest per rule
// of the methods' doc comments. Every test is named Key...; RunKeys runs
// them alone.
//
// Key ids and hashes are global, not scoped to a tenant, and a store may be
// shared with other subtests: every id a subtest makes starts with
// b.tenant, every hash is the SHA-256 of a string that does, and what is
// read across the store (KeyList without a tenant, KeyCount) is checked
// only for this subtest's keys, or as a bound.

// RunKeys runs the API keys' part of the suite (the tests named Key...).
func RunKeys(t *testing.T, newStore func(t *testing.T) storage.Store) {
	run(t, newStore, func(name string) bool { return strings.HasPrefix(name, "Key") })
}

// keyTests are the API keys' subtests, run by Run and RunKeys.
var keyTests = []struct {
	name string
	fn   func(b *bundle)
}{
	{"KeyCreateGet", testKeyCreateGet},
	{"KeyList", testKeyList},
	{"KeyRevoke", testKeyRevoke},
	{"KeyTouch", testKeyTouch},
	{"KeyCount", testKeyCount},
	{"KeyCreateRefusals", testKeyCreateRefusals},
	{"KeyDuplicates", testKeyDuplicates},
	{"KeyCreateConcurrent", testKeyCreateConcurrent},
	{"KeyTextBoundaries", testKeyTextBoundaries},
}

// keyID returns an id of this subtest's.
func (b *bundle) keyID(suffix string) string { return b.tenant + "-" + suffix }

// keyHash returns a hash of this subtest's.
func (b *bundle) keyHash(suffix string) []byte {
	h := sha256.Sum256([]byte(b.tenant + "/" + suffix))
	return h[:]
}

// tenantKey is a key of tenant with id and hash made from suffix.
func (b *bundle) tenantKey(suffix, tenant string, created time.Time) heraldtype.APIKey {
	return heraldtype.APIKey{ID: b.keyID(suffix), Tenant: tenant, Name: "key " + suffix,
		Hash: b.keyHash(suffix), CreatedAt: created}
}

// adminKey is an admin key with id and hash made from suffix.
func (b *bundle) adminKey(suffix string, created time.Time) heraldtype.APIKey {
	return heraldtype.APIKey{ID: b.keyID(suffix), Admin: true, Name: "admin " + suffix,
		Hash: b.keyHash(suffix), CreatedAt: created}
}

func (b *bundle) keyCreate(k heraldtype.APIKey) *heraldtype.APIKey {
	b.t.Helper()
	got, err := b.s.KeyCreate(b.ctx, &storage.KeyCreateParams{Key: k})
	if err != nil {
		b.t.Fatalf("KeyCreate(%s): %v", k.ID, err)
	}
	wantKey(b.t, "KeyCreate's result", got, &k)
	return got
}

func (b *bundle) keyByHash(hash []byte) *heraldtype.APIKey {
	b.t.Helper()
	k, err := b.s.KeyByHash(b.ctx, &storage.KeyByHashParams{Hash: hash})
	if err != nil {
		b.t.Fatalf("KeyByHash(%x): %v", hash, err)
	}
	return k
}

func (b *bundle) keyNoHash(what string, hash []byte) {
	b.t.Helper()
	k, err := b.s.KeyByHash(b.ctx, &storage.KeyByHashParams{Hash: hash})
	if err == nil {
		b.t.Fatalf("%s: KeyByHash found %+v, want ErrNotFound", what, k)
	}
	wantErr(b.t, what+": KeyByHash", err, heraldtype.ErrNotFound)
}

func (b *bundle) keyList(tenant string, revoked bool) []*heraldtype.APIKey {
	b.t.Helper()
	ks, err := b.s.KeyList(b.ctx, &storage.KeyListParams{Tenant: tenant, IncludeRevoked: revoked})
	if err != nil {
		b.t.Fatalf("KeyList(%q, revoked %v): %v", tenant, revoked, err)
	}
	return ks
}

// ownKeyIDs returns the ids of the keys of ks that are this subtest's, in
// their order.
func (b *bundle) ownKeyIDs(ks []*heraldtype.APIKey) []string {
	out := []string{}
	for _, k := range ks {
		if strings.HasPrefix(k.ID, b.tenant+"-") {
			out = append(out, k.ID)
		}
	}
	return out
}

// keyIDs returns the ids of ks.
func keyIDs(ks []*heraldtype.APIKey) []string {
	out := []string{}
	for _, k := range ks {
		out = append(out, k.ID)
	}
	return out
}

func (b *bundle) keyCount() int {
	b.t.Helper()
	n, err := b.s.KeyCount(b.ctx)
	if err != nil {
		b.t.Fatalf("KeyCount: %v", err)
	}
	return n
}

func (b *bundle) keyRevoke(id, tenant string, now time.Time) *heraldtype.APIKey {
	b.t.Helper()
	k, err := b.s.KeyRevoke(b.ctx, &storage.KeyRevokeParams{ID: id, Tenant: tenant, Now: now})
	if err != nil {
		b.t.Fatalf("KeyRevoke(%s, tenant %q): %v", id, tenant, err)
	}
	return k
}

func (b *bundle) keyTouch(id string, now time.Time) {
	b.t.Helper()
	if err := b.s.KeyTouch(b.ctx, &storage.KeyTouchParams{ID: id, Now: now}); err != nil {
		b.t.Fatalf("KeyTouch(%s): %v", id, err)
	}
}

// wantKey compares every field of got with want (times with Equal).
func wantKey(t *testing.T, what string, got, want *heraldtype.APIKey) {
	t.Helper()
	if got == nil {
		t.Fatalf("%s: nil key, want %s", what, want.ID)
	}
	if got.ID != want.ID || got.Tenant != want.Tenant || got.Admin != want.Admin || got.Name != want.Name ||
		!bytes.Equal(got.Hash, want.Hash) || !got.CreatedAt.Equal(want.CreatedAt) ||
		!got.LastUsedAt.Equal(want.LastUsedAt) || !got.RevokedAt.Equal(want.RevokedAt) {
		t.Fatalf("%s:\n got %+v\nwant %+v", what, got, want)
	}
}

// testKeyCreateGet: KeyCreate stores a key as given and returns it;
// KeyByHash finds it by its hash, and nothing by another hash.
func testKeyCreateGet(b *bundle) {
	t := b.t
	// A CreatedAt with nanoseconds, in another zone: stored as the instant.
	created := time.Date(2030, 1, 2, 4, 4, 5, 123456789, time.FixedZone("CET", 3600))
	tk := b.tenantKey("tenant", b.tenant, created)
	ak := b.adminKey("admin", at(time.Second))
	// A hash with NUL, 0xff and invalid UTF-8 bytes is stored byte for byte.
	ak.Hash = append([]byte{0, 0xff, 0xc3, 0x28, 0}, ak.Hash[5:]...)
	b.keyCreate(tk)
	b.keyCreate(ak)

	gotT := b.keyByHash(tk.Hash)
	wantKey(t, "tenant key by hash", gotT, &tk)
	if gotT.Admin {
		t.Fatal("a tenant key came back as an admin key")
	}
	gotA := b.keyByHash(ak.Hash)
	wantKey(t, "admin key by hash", gotA, &ak)
	if !gotA.Admin || gotA.Tenant != "" {
		t.Fatalf("admin key came back as %+v", gotA)
	}
	if !gotT.LastUsedAt.IsZero() || !gotT.RevokedAt.IsZero() {
		t.Fatalf("a new key has LastUsedAt %v, RevokedAt %v", gotT.LastUsedAt, gotT.RevokedAt)
	}

	b.keyNoHash("an unknown hash", b.keyHash("unknown"))
	// A hash that differs from a stored one in its last byte only.
	near := bytes.Clone(tk.Hash)
	near[len(near)-1] ^= 1
	b.keyNoHash("a hash one bit off", near)
	b.keyNoHash("a prefix of a stored hash", tk.Hash[:16])
	b.keyNoHash("a nil hash", nil)
	b.keyNoHash("a hash longer than a stored one", append(bytes.Clone(tk.Hash), 0))
}

// testKeyList: KeyList orders by CreatedAt then ID (bytewise), filters by
// tenant (admin keys only in the unfiltered list) and leaves revoked keys
// out unless asked.
func testKeyList(b *bundle) {
	t := b.t
	ta, tb := b.tenant+"-a", b.tenant+"-b"
	// Created out of order; "B" < "a" < "z" < "é" bytewise.
	b.keyCreate(b.tenantKey("z", ta, at(time.Second)))
	b.keyCreate(b.tenantKey("é", ta, at(time.Second)))
	b.keyCreate(b.tenantKey("a", ta, at(time.Second)))
	b.keyCreate(b.tenantKey("B", ta, at(time.Second)))
	b.keyCreate(b.tenantKey("late", ta, at(time.Minute)))
	b.keyCreate(b.tenantKey("early", ta, at(-time.Minute)))
	b.keyCreate(b.tenantKey("other", tb, t0))
	b.keyCreate(b.adminKey("admin", at(time.Second)))

	wantA := []string{b.keyID("early"), b.keyID("B"), b.keyID("a"), b.keyID("z"), b.keyID("é"), b.keyID("late")}
	if got := keyIDs(b.keyList(ta, false)); !slices.Equal(got, wantA) {
		t.Fatalf("KeyList(a) = %q, want %q", got, wantA)
	}
	if got := keyIDs(b.keyList(tb, false)); !slices.Equal(got, []string{b.keyID("other")}) {
		t.Fatalf("KeyList(b) = %q", got)
	}
	if got := b.keyList(b.tenant+"-none", true); len(got) != 0 {
		t.Fatalf("KeyList of a tenant with no keys = %q", keyIDs(got))
	}
	// Every key; the admin key (tenant "") only here.
	wantAll := []string{b.keyID("early"), b.keyID("other"), b.keyID("B"), b.keyID("a"), b.keyID("admin"),
		b.keyID("z"), b.keyID("é"), b.keyID("late")}
	all := b.keyList("", false)
	if got := b.ownKeyIDs(all); !slices.Equal(got, wantAll) {
		t.Fatalf("KeyList() = %q, want %q", got, wantAll)
	}
	for i := 1; i < len(all); i++ {
		p, k := all[i-1], all[i]
		if k.CreatedAt.Before(p.CreatedAt) || (k.CreatedAt.Equal(p.CreatedAt) && k.ID <= p.ID) {
			t.Fatalf("KeyList(): %s (%v) after %s (%v)", k.ID, k.CreatedAt, p.ID, p.CreatedAt)
		}
	}
	for _, k := range all {
		if k.ID == b.keyID("admin") {
			wantKey(t, "admin key listed", k, &heraldtype.APIKey{ID: b.keyID("admin"), Admin: true,
				Name: "admin admin", Hash: b.keyHash("admin"), CreatedAt: at(time.Second)})
		}
	}

	// Revoked keys are left out unless IncludeRevoked.
	b.keyRevoke(b.keyID("a"), "", at(time.Hour))
	b.keyRevoke(b.keyID("admin"), "", at(time.Hour))
	wantLive := slices.DeleteFunc(slices.Clone(wantA), func(id string) bool { return id == b.keyID("a") })
	if got := keyIDs(b.keyList(ta, false)); !slices.Equal(got, wantLive) {
		t.Fatalf("KeyList(a) after a revoke = %q, want %q", got, wantLive)
	}
	withRevoked := b.keyList(ta, true)
	if got := keyIDs(withRevoked); !slices.Equal(got, wantA) {
		t.Fatalf("KeyList(a, revoked) = %q, want %q", got, wantA)
	}
	wantTime(t, "listed RevokedAt", withRevoked[2].RevokedAt, at(time.Hour))
	if slices.Contains(b.ownKeyIDs(b.keyList("", false)), b.keyID("admin")) {
		t.Fatal("KeyList() lists a revoked admin key")
	}
	if got := b.ownKeyIDs(b.keyList("", true)); !slices.Equal(got, wantAll) {
		t.Fatalf("KeyList(revoked) = %q, want %q", got, wantAll)
	}

	for _, bad := range []string{"a\x00b", "\xff", strings.Repeat("t", storage.MaxIDBytes+1)} {
		_, err := b.s.KeyList(b.ctx, &storage.KeyListParams{Tenant: bad})
		wantErr(t, fmt.Sprintf("KeyList(%.20q)", bad), err, heraldtype.ErrInvalidArgument)
	}
}

// testKeyRevoke: KeyRevoke sets RevokedAt once; a tenant cannot revoke
// another tenant's key (nor an admin key); an unknown id is ErrNotFound.
func testKeyRevoke(b *bundle) {
	t := b.t
	ta, tb := b.tenant+"-a", b.tenant+"-b"
	ka := b.tenantKey("a", ta, t0)
	kb := b.tenantKey("b", tb, t0)
	adm := b.adminKey("admin", t0)
	b.keyCreate(ka)
	b.keyCreate(kb)
	b.keyCreate(adm)
	b.keyTouch(ka.ID, at(time.Second))

	got := b.keyRevoke(ka.ID, "", at(time.Minute))
	want := ka
	want.LastUsedAt, want.RevokedAt = at(time.Second), at(time.Minute)
	wantKey(t, "KeyRevoke's result", got, &want)
	// A revoked key is still found by its hash: the caller checks RevokedAt.
	wantKey(t, "revoked key by hash", b.keyByHash(ka.Hash), &want)

	// Once: revoking again changes nothing and is not an error.
	wantKey(t, "KeyRevoke again", b.keyRevoke(ka.ID, "", at(time.Hour)), &want)
	wantKey(t, "KeyRevoke again, with its tenant", b.keyRevoke(ka.ID, ta, at(2*time.Hour)), &want)
	wantKey(t, "key after revoking twice", b.keyByHash(ka.Hash), &want)

	// Tenant-scoped: only that tenant's key.
	_, err := b.s.KeyRevoke(b.ctx, &storage.KeyRevokeParams{ID: kb.ID, Tenant: ta, Now: at(time.Minute)})
	wantErr(t, "KeyRevoke of b's key as a", err, heraldtype.ErrNotFound)
	_, err = b.s.KeyRevoke(b.ctx, &storage.KeyRevokeParams{ID: adm.ID, Tenant: ta, Now: at(time.Minute)})
	wantErr(t, "KeyRevoke of an admin key as a", err, heraldtype.ErrNotFound)
	wantKey(t, "b's key after a's revoke", b.keyByHash(kb.Hash), &kb)
	wantKey(t, "admin key after a's revoke", b.keyByHash(adm.Hash), &adm)

	gotB := b.keyRevoke(kb.ID, tb, at(3*time.Minute))
	wantB := kb
	wantB.RevokedAt = at(3 * time.Minute)
	wantKey(t, "KeyRevoke of b's key as b", gotB, &wantB)
	gotAdm := b.keyRevoke(adm.ID, "", at(4*time.Minute))
	wantAdm := adm
	wantAdm.RevokedAt = at(4 * time.Minute)
	wantKey(t, "KeyRevoke of the admin key", gotAdm, &wantAdm)

	for _, id := range []string{b.keyID("unknown"), "", "a\x00b", "\xff\xfe", strings.Repeat("k", storage.MaxIDBytes+1)} {
		_, err := b.s.KeyRevoke(b.ctx, &storage.KeyRevokeParams{ID: id, Now: at(time.Minute)})
		wantErr(t, fmt.Sprintf("KeyRevoke(%.20q)", id), err, heraldtype.ErrNotFound)
	}
	_, err = b.s.KeyRevoke(b.ctx, &storage.KeyRevokeParams{ID: ka.ID, Tenant: "a\x00", Now: at(time.Minute)})
	wantErr(t, "KeyRevoke with a tenant with a NUL", err, heraldtype.ErrNotFound)
}

// testKeyTouch: KeyTouch moves LastUsedAt forward only; an unknown id is
// not an error.
func testKeyTouch(b *bundle) {
	t := b.t
	k := b.tenantKey("k", b.tenant, t0)
	other := b.tenantKey("other", b.tenant, t0)
	b.keyCreate(k)
	b.keyCreate(other)

	b.keyTouch(k.ID, at(2*time.Minute))
	want := k
	want.LastUsedAt = at(2 * time.Minute)
	wantKey(t, "after a touch", b.keyByHash(k.Hash), &want)
	b.keyTouch(k.ID, at(time.Minute)) // earlier: ignored
	wantKey(t, "after an earlier touch", b.keyByHash(k.Hash), &want)
	b.keyTouch(k.ID, at(2*time.Minute)) // the same: ignored
	wantKey(t, "after the same touch", b.keyByHash(k.Hash), &want)
	b.keyTouch(k.ID, at(3*time.Minute+time.Nanosecond))
	want.LastUsedAt = at(3*time.Minute + time.Nanosecond)
	wantKey(t, "after a later touch", b.keyByHash(k.Hash), &want)
	wantKey(t, "the other key", b.keyByHash(other.Hash), &other)

	// A revoked key keeps its RevokedAt through a touch.
	b.keyRevoke(k.ID, "", at(4*time.Minute))
	b.keyTouch(k.ID, at(5*time.Minute))
	want.LastUsedAt, want.RevokedAt = at(5*time.Minute), at(4*time.Minute)
	wantKey(t, "touched after revoke", b.keyByHash(k.Hash), &want)

	for _, id := range []string{b.keyID("unknown"), "", "a\x00b", "\xff", strings.Repeat("k", storage.MaxIDBytes+1)} {
		if err := b.s.KeyTouch(b.ctx, &storage.KeyTouchParams{ID: id, Now: at(time.Hour)}); err != nil {
			t.Fatalf("KeyTouch(%.20q): %v, want nil", id, err)
		}
	}
	wantKey(t, "after touches of other ids", b.keyByHash(k.Hash), &want)
	wantKey(t, "the other key at the end", b.keyByHash(other.Hash), &other)
}

// testKeyCount: KeyCount counts every key, revoked ones included. Other
// subtests may add keys meanwhile, so it is checked as bounds: it grows by
// at least what this subtest creates, never shrinks (keys are never
// deleted, a revoke keeps them), and agrees with KeyList read between two
// counts.
func testKeyCount(b *bundle) {
	t := b.t
	before := b.keyCount()
	if before < 0 {
		t.Fatalf("KeyCount = %d", before)
	}
	b.keyCreate(b.tenantKey("1", b.tenant, t0))
	b.keyCreate(b.tenantKey("2", b.tenant, t0))
	b.keyCreate(b.adminKey("3", t0))
	afterCreate := b.keyCount()
	if afterCreate < before+3 {
		t.Fatalf("KeyCount after 3 creates = %d, was %d", afterCreate, before)
	}
	b.keyRevoke(b.keyID("1"), "", at(time.Second))
	b.keyRevoke(b.keyID("3"), "", at(time.Second))
	c1 := b.keyCount()
	if c1 < afterCreate {
		t.Fatalf("KeyCount after revokes = %d, was %d: revoked keys count", c1, afterCreate)
	}
	all := b.keyList("", true)
	c2 := b.keyCount()
	if len(all) < c1 || len(all) > c2 {
		t.Fatalf("KeyList(revoked) has %d keys, KeyCount said %d before it and %d after", len(all), c1, c2)
	}
	// A refused create counts nothing of its own.
	bad := b.tenantKey("4", "", t0)
	wantErr(t, "KeyCreate of a tenant key without a tenant",
		errOf(b.s.KeyCreate(b.ctx, &storage.KeyCreateParams{Key: bad})), heraldtype.ErrInvalidArgument)
	if got := b.ownKeyIDs(b.keyList("", true)); len(got) != 3 {
		t.Fatalf("own keys after a refused create: %q", got)
	}
}

// testKeyCreateRefusals: every key KeyCreate must refuse is
// ErrInvalidArgument and writes nothing: the same id and hash are free
// afterwards.
func testKeyCreateRefusals(b *bundle) {
	t := b.t
	long := strings.Repeat("x", storage.MaxIDBytes+1)
	cases := []struct {
		name string
		edit func(k *heraldtype.APIKey)
	}{
		{"empty id", func(k *heraldtype.APIKey) { k.ID = "" }},
		{"id over the cap", func(k *heraldtype.APIKey) { k.ID = k.ID + long }},
		{"id with a NUL", func(k *heraldtype.APIKey) { k.ID += "\x00" }},
		{"id not UTF-8", func(k *heraldtype.APIKey) { k.ID += "\xc3\x28" }},
		{"empty name", func(k *heraldtype.APIKey) { k.Name = "" }},
		{"name over the cap", func(k *heraldtype.APIKey) { k.Name = long }},
		{"name with a NUL", func(k *heraldtype.APIKey) { k.Name = "n\x00" }},
		{"name not UTF-8", func(k *heraldtype.APIKey) { k.Name = "\xff" }},
		{"nil hash", func(k *heraldtype.APIKey) { k.Hash = nil }},
		{"31-byte hash", func(k *heraldtype.APIKey) { k.Hash = k.Hash[:31] }},
		{"33-byte hash", func(k *heraldtype.APIKey) { k.Hash = append(bytes.Clone(k.Hash), 1) }},
		{"64-byte hash (hex)", func(k *heraldtype.APIKey) { k.Hash = fmt.Appendf(nil, "%x", k.Hash) }},
		{"admin key with a tenant", func(k *heraldtype.APIKey) { k.Admin = true }},
		{"tenant key without a tenant", func(k *heraldtype.APIKey) { k.Tenant = "" }},
		{"tenant with a NUL", func(k *heraldtype.APIKey) { k.Tenant = "t\x00" }},
		{"tenant not UTF-8", func(k *heraldtype.APIKey) { k.Tenant = "\xff" }},
		{"tenant over the cap", func(k *heraldtype.APIKey) { k.Tenant = long }},
		{"LastUsedAt set", func(k *heraldtype.APIKey) { k.LastUsedAt = at(time.Second) }},
		{"RevokedAt set", func(k *heraldtype.APIKey) { k.RevokedAt = at(time.Second) }},
	}
	for i, c := range cases {
		suffix := fmt.Sprintf("k%02d", i)
		good := b.tenantKey(suffix, b.tenant, t0)
		bad := good
		bad.Hash = bytes.Clone(good.Hash)
		c.edit(&bad)
		got, err := b.s.KeyCreate(b.ctx, &storage.KeyCreateParams{Key: bad})
		if err == nil {
			t.Fatalf("%s: KeyCreate stored %+v", c.name, got)
		}
		wantErr(t, c.name, err, heraldtype.ErrInvalidArgument)
		// Nothing written, under any id or hash this case used.
		for _, k := range b.keyList("", true) {
			if k.ID == bad.ID || k.ID == good.ID || bytes.Equal(k.Hash, bad.Hash) || bytes.Equal(k.Hash, good.Hash) {
				t.Fatalf("%s: KeyCreate refused the key but stored %+v", c.name, k)
			}
		}
		if len(bad.Hash) == storage.KeyHashBytes {
			b.keyNoHash(c.name, bad.Hash)
		}
		// The id and hash are free: the corrected key is stored.
		b.keyCreate(good)
	}
	if got := b.ownKeyIDs(b.keyList(b.tenant, true)); len(got) != len(cases) {
		t.Fatalf("own keys: %d, want %d", len(got), len(cases))
	}
	// A refusal comes before the duplicate check.
	dup := b.tenantKey("k00", b.tenant, t0)
	dup.Name = ""
	wantErr(t, "a duplicate with an empty name",
		errOf(b.s.KeyCreate(b.ctx, &storage.KeyCreateParams{Key: dup})), heraldtype.ErrInvalidArgument)
	if _, err := b.s.KeyCreate(b.ctx, nil); err == nil {
		t.Fatal("KeyCreate(nil) succeeded")
	}
}

// testKeyDuplicates: a key whose id or hash is taken — by a key of any
// tenant, revoked or not — is ErrAlreadyExists and writes nothing.
func testKeyDuplicates(b *bundle) {
	t := b.t
	ta, tb := b.tenant+"-a", b.tenant+"-b"
	first := b.tenantKey("k", ta, t0)
	b.keyCreate(first)
	cases := []struct {
		name string
		key  heraldtype.APIKey
	}{
		{"same id, other hash", heraldtype.APIKey{ID: first.ID, Tenant: ta, Name: "n", Hash: b.keyHash("other"), CreatedAt: t0}},
		{"same id, other tenant", heraldtype.APIKey{ID: first.ID, Tenant: tb, Name: "n", Hash: b.keyHash("other"), CreatedAt: t0}},
		{"same id, admin", heraldtype.APIKey{ID: first.ID, Admin: true, Name: "n", Hash: b.keyHash("other"), CreatedAt: t0}},
		{"same hash, other id", heraldtype.APIKey{ID: b.keyID("other"), Tenant: ta, Name: "n", Hash: first.Hash, CreatedAt: t0}},
		{"same hash, other tenant", heraldtype.APIKey{ID: b.keyID("other"), Tenant: tb, Name: "n", Hash: first.Hash, CreatedAt: t0}},
		{"same id and hash", first},
	}
	check := func(phase string) {
		t.Helper()
		for _, c := range cases {
			got, err := b.s.KeyCreate(b.ctx, &storage.KeyCreateParams{Key: c.key})
			if err == nil {
				t.Fatalf("%s, %s: KeyCreate stored %+v", phase, c.name, got)
			}
			wantErr(t, phase+", "+c.name, err, heraldtype.ErrAlreadyExists)
		}
		b.keyNoHash(phase+": the other hash", b.keyHash("other"))
		if got := b.ownKeyIDs(b.keyList("", true)); !slices.Equal(got, []string{first.ID}) {
			t.Fatalf("%s: own keys %q, want only %s", phase, got, first.ID)
		}
	}
	check("live")
	want := first
	wantKey(t, "the first key", b.keyByHash(first.Hash), &want)
	want.RevokedAt = at(time.Second)
	b.keyRevoke(first.ID, "", at(time.Second))
	check("revoked")
	wantKey(t, "the first key, revoked", b.keyByHash(first.Hash), &want)
}

// testKeyCreateConcurrent: of concurrent creates of one id (or one hash),
// exactly one succeeds; the others are ErrAlreadyExists.
func testKeyCreateConcurrent(b *bundle) {
	t := b.t
	const n = 8
	for _, sameID := range []bool{true, false} {
		var (
			wg      sync.WaitGroup
			errs    = make([]error, n)
			winners []int
		)
		for i := range n {
			wg.Add(1)
			go func() {
				defer wg.Done()
				k := b.tenantKey(fmt.Sprintf("id-%v", sameID), b.tenant, t0)
				k.Name = fmt.Sprint(i)
				if sameID {
					k.Hash = b.keyHash(fmt.Sprintf("hash-%d", i))
				} else {
					k.ID = b.keyID(fmt.Sprintf("hash-%d", i))
				}
				_, errs[i] = b.s.KeyCreate(b.ctx, &storage.KeyCreateParams{Key: k})
			}()
		}
		wg.Wait()
		for i, err := range errs {
			switch {
			case err == nil:
				winners = append(winners, i)
			default:
				wantErr(t, fmt.Sprintf("same id %v, create %d", sameID, i), err, heraldtype.ErrAlreadyExists)
			}
		}
		if len(winners) != 1 {
			t.Fatalf("same id %v: %d creates succeeded, want 1", sameID, len(winners))
		}
		// The winner's key is the one stored.
		hash := b.keyHash(fmt.Sprintf("id-%v", sameID))
		if sameID {
			hash = b.keyHash(fmt.Sprintf("hash-%d", winners[0]))
		}
		wantEqual(t, "stored name", b.keyByHash(hash).Name, fmt.Sprint(winners[0]))
	}
	if got := b.ownKeyIDs(b.keyList(b.tenant, false)); len(got) != 2 {
		t.Fatalf("own keys %q, want 2", got)
	}
}

// testKeyTextBoundaries: an id, name and tenant at MaxIDBytes, of
// multi-byte runes and characters SQL treats specially, are stored and
// found unchanged by every call.
func testKeyTextBoundaries(b *bundle) {
	t := b.t
	tenant := maxText(b.tenant+"/t€nant'%_", storage.MaxIDBytes)
	id := maxText(b.tenant+"-"+`é'"%_\/`+" 🎉", storage.MaxIDBytes)
	name := maxText("ñame;DROP TABLE api_keys;--", storage.MaxIDBytes)
	for what, s := range map[string]string{"tenant": tenant, "id": id, "name": name} {
		if p := storage.TextProblem(s, storage.MaxIDBytes); p != "" || len(s) < storage.MaxIDBytes-3 {
			t.Fatalf("test bug: %s %s (%d bytes)", what, p, len(s))
		}
	}
	k := heraldtype.APIKey{ID: id, Tenant: tenant, Name: name, Hash: b.keyHash("max"), CreatedAt: t0}
	b.keyCreate(k)
	wantKey(t, "by hash", b.keyByHash(k.Hash), &k)
	ks := b.keyList(tenant, false)
	if len(ks) != 1 {
		t.Fatalf("KeyList(tenant at the cap) = %q", keyIDs(ks))
	}
	wantKey(t, "listed", ks[0], &k)
	b.keyTouch(id, at(time.Second))
	k.LastUsedAt = at(time.Second)
	wantKey(t, "touched", b.keyByHash(k.Hash), &k)
	k.RevokedAt = at(2 * time.Second)
	wantKey(t, "revoked", b.keyRevoke(id, tenant, at(2*time.Second)), &k)

	// An admin key with an id and name at the cap.
	adm := heraldtype.APIKey{ID: maxText(b.tenant+"-ädmin", storage.MaxIDBytes), Admin: true,
		Name: maxText("€", storage.MaxIDBytes), Hash: b.keyHash("admin"), CreatedAt: t0}
	b.keyCreate(adm)
	wantKey(t, "admin by hash", b.keyByHash(adm.Hash), &adm)

	// One byte over: refused, nothing written.
	for what, edit := range map[string]func(k *heraldtype.APIKey){
		"id":     func(k *heraldtype.APIKey) { k.ID = maxText(b.tenant+"-x", storage.MaxIDBytes) + "x" },
		"name":   func(k *heraldtype.APIKey) { k.Name = strings.Repeat("n", storage.MaxIDBytes+1) },
		"tenant": func(k *heraldtype.APIKey) { k.Tenant = strings.Repeat("t", storage.MaxIDBytes+1) },
	} {
		over := heraldtype.APIKey{ID: b.keyID("over-" + what), Tenant: b.tenant, Name: "n", Hash: b.keyHash("over-" + what), CreatedAt: t0}
		edit(&over)
		wantErr(t, what+" one byte over the cap", errOf(b.s.KeyCreate(b.ctx, &storage.KeyCreateParams{Key: over})),
			heraldtype.ErrInvalidArgument)
		b.keyNoHash(what+" one byte over the cap", over.Hash)
	}
}
