package backend

import "time"

// NowOr returns t (or the current time if t is zero) truncated to what the
// stores keep: unix nanoseconds, in UTC.
func NowOr(t time.Time) time.Time {
	if t.IsZero() {
		t = time.Now()
	}
	return time.Unix(0, t.UnixNano()).UTC()
}

// Nanos encodes t as unix nanoseconds; the zero time is 0.
func Nanos(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixNano()
}

// FromNanos decodes a time encoded by Nanos.
func FromNanos(n int64) time.Time {
	if n == 0 {
		return time.Time{}
	}
	return time.Unix(0, n).UTC()
}
