package sqlite

import (
	"context"
	"testing"

	"github.com/heraldwf/herald/storage/storagetest"
)

// Markers are deleted, not merely ignored, when their instance completes,
// continues as new or is terminated; a put's delivery deletes the marker.
func TestCorrelationMarkersDeleted(t *testing.T) {
	ctx := context.Background()
	s := openTest(t)
	storagetest.CorrelationMarkersDeleted(t, s, func() int {
		t.Helper()
		var n int
		if err := s.rdb.QueryRowContext(ctx, `SELECT COUNT(*) FROM correlated_waits`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	})
}
