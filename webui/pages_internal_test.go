package webui

import (
	"testing"
	"time"
)

// TestFormatDuration: durations as people read them, never nanoseconds.
func TestFormatDuration(t *testing.T) {
	for d, want := range map[time.Duration]string{
		166983438 * time.Nanosecond:      "167ms",
		2345678 * time.Microsecond:       "2.35s",
		90 * time.Second:                 "1m30s",
		2 * time.Minute:                  "2m",
		24 * time.Hour:                   "24h",
		24*time.Hour + 3*time.Second:     "24h0m3s",
		1500 * time.Nanosecond:           "2µs",
		-(3*time.Minute + 4*time.Second): "-3m4s",
	} {
		if got := formatDuration(d); got != want {
			t.Errorf("formatDuration(%d) = %q, want %q", int64(d), got, want)
		}
	}
}

// TestFormatWhen: today's times of day alone, others with their date;
// both with how far they are from now.
func TestFormatWhen(t *testing.T) {
	now := time.Date(2026, 3, 1, 23, 0, 0, 0, time.UTC)
	for at, want := range map[time.Time]string{
		now.Add(-5 * time.Minute): "22:55:00 UTC (5m ago)",
		now:                       "23:00:00 UTC (now)",
		now.Add(24 * time.Hour):   "2026-03-02 23:00:00 UTC (in 24h)",
		now.Add(2 * time.Hour):    "2026-03-02 01:00:00 UTC (in 2h)",
		now.Add(-48 * time.Hour):  "2026-02-27 23:00:00 UTC (48h ago)",
	} {
		if got := formatWhen(at.In(time.FixedZone("x", 3600)), now); got != want {
			t.Errorf("formatWhen(%v) = %q, want %q", at, got, want)
		}
	}
}
