package backend

import (
	"crypto/rand"
	"encoding/hex"
	"time"
)

// Defaults of params fields left zero, and the cap of CorrelatedSearch.
const (
	DefaultClaimMax    = 1
	DefaultLease       = 30 * time.Second
	DefaultMaxMessages = 1000
	DefaultListLimit   = 100
	MaxListLimit       = 1000
	DefaultEventLimit  = 1000
	DefaultExpireLimit = 1000
	DefaultSearchLimit = 100
	MaxSearchLimit     = 1000
)

// ClaimMax is the number of turns or activity tasks a claim of n hands out
// at most: n, or DefaultClaimMax if n is not positive.
func ClaimMax(n int) int { return orDefault(n, DefaultClaimMax) }

// Lease is the lease a claim asks for: d, or DefaultLease if d is not
// positive.
func Lease(d time.Duration) time.Duration {
	if d <= 0 {
		return DefaultLease
	}
	return d
}

// MaxMessages is the number of messages a claimed turn holds at most: n, or
// DefaultMaxMessages if n is not positive.
func MaxMessages(n int) int { return orDefault(n, DefaultMaxMessages) }

// ListLimit is InstanceList's page size: n, DefaultListLimit if n is not
// positive, at most MaxListLimit.
func ListLimit(n int) int { return min(orDefault(n, DefaultListLimit), MaxListLimit) }

// EventLimit is EventList's page size: n, or DefaultEventLimit if n is not
// positive.
func EventLimit(n int) int { return orDefault(n, DefaultEventLimit) }

// ExpireLimit is the batch size of EventExpire and CorrelatedExpire: n, or
// DefaultExpireLimit if n is not positive.
func ExpireLimit(n int) int { return orDefault(n, DefaultExpireLimit) }

// SearchLimit is CorrelatedSearch's page size: n, DefaultSearchLimit if n
// is not positive, at most MaxSearchLimit.
func SearchLimit(n int) int {
	switch {
	case n <= 0:
		return DefaultSearchLimit
	case n > MaxSearchLimit:
		return MaxSearchLimit
	}
	return n
}

func orDefault(n, def int) int {
	if n <= 0 {
		return def
	}
	return n
}

// NewToken returns a random lock token (128 bits, hex).
func NewToken() string {
	var b [16]byte
	rand.Read(b[:]) // never fails (crypto/rand crashes the program instead)
	return hex.EncodeToString(b[:])
}
