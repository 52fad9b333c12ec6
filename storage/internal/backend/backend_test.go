package backend

import (
	"testing"
	"time"

	"github.com/heraldwf/herald/heraldtype"
)

func TestBookmarkRoundTrip(t *testing.T) {
	for _, key := range []string{"", "k", "a:b:c", "é/ü"} {
		b := EncodeBookmark(1234567890123, key)
		createdAt, got, err := DecodeBookmark(b)
		if err != nil || createdAt != 1234567890123 || got != key {
			t.Errorf("DecodeBookmark(EncodeBookmark(%q)) = %d, %q, %v", key, createdAt, got, err)
		}
	}
	for _, b := range []string{"", "!", EncodeBookmark(1, "k")[1:], "YzE6", "YzE6eDpr"} {
		if _, _, err := DecodeBookmark(b); err == nil {
			t.Errorf("DecodeBookmark(%q): no error", b)
		}
	}
}

func TestLimits(t *testing.T) {
	if got := SearchLimit(0); got != DefaultSearchLimit {
		t.Errorf("SearchLimit(0) = %d", got)
	}
	if got := SearchLimit(MaxSearchLimit + 1); got != MaxSearchLimit {
		t.Errorf("SearchLimit(max+1) = %d", got)
	}
	if got := SearchLimit(7); got != 7 {
		t.Errorf("SearchLimit(7) = %d", got)
	}
	if got := ClaimMax(-1); got != DefaultClaimMax {
		t.Errorf("ClaimMax(-1) = %d", got)
	}
	if got := Lease(0); got != DefaultLease {
		t.Errorf("Lease(0) = %v", got)
	}
	if got := Lease(time.Second); got != time.Second {
		t.Errorf("Lease(1s) = %v", got)
	}
}

func TestNanos(t *testing.T) {
	if Nanos(time.Time{}) != 0 || !FromNanos(0).IsZero() {
		t.Error("the zero time is not 0")
	}
	now := NowOr(time.Time{})
	if now.IsZero() || now.Location() != time.UTC || !FromNanos(Nanos(now)).Equal(now) {
		t.Errorf("NowOr/Nanos/FromNanos round trip: %v", now)
	}
}

func TestSearchPage(t *testing.T) {
	evs := []*heraldtype.CorrelatedEvent{
		{Key: "a", CreatedAt: time.Unix(0, 1)},
		{Key: "b", CreatedAt: time.Unix(0, 2)},
		{Key: "c", CreatedAt: time.Unix(0, 3)},
	}
	page, next := SearchPage(evs, 3)
	if len(page) != 3 || next != "" {
		t.Errorf("SearchPage(3 of 3) = %d events, %q", len(page), next)
	}
	page, next = SearchPage(evs, 2)
	if len(page) != 2 || next != EncodeBookmark(2, "b") {
		t.Errorf("SearchPage(3, limit 2) = %d events, %q", len(page), next)
	}
}
