package webui

import (
	"strconv"
	"testing"
	"time"
)

// BenchmarkSessionCreate: a sign-in's session with the table nearly full
// (9,000 sessions of 300 keys) costs the same as with it empty; it
// scanned the whole table under the lock.
func BenchmarkSessionCreate(b *testing.B) {
	now := time.Date(2026, 3, 1, 9, 0, 0, 0, time.UTC)
	st := newSessionStore(1000*time.Hour, func() time.Time { return now }, DefaultSessionsPerKey, DefaultSessionsPerTenant)
	for i := range 9000 {
		if i%signinBurst == 0 {
			now = now.Add(time.Hour) // refill every bucket
		}
		k := strconv.Itoa(i % 300)
		if _, err := st.create(nil, "k"+k, false, "t"+strconv.Itoa(i%30)); err != nil {
			b.Fatal(err)
		}
	}
	for i := 0; b.Loop(); i++ {
		now = now.Add(signinEvery)
		if _, err := st.create(nil, "storm", false, "t0"); err != nil {
			b.Fatal(err)
		}
	}
}
