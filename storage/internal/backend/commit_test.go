package backend

import (
	"fmt"
	"slices"
	"testing"

	"github.com/heraldwf/herald/history"
	"github.com/heraldwf/herald/storage"
)

// LastFates keeps the last update of each event id, in the order the
// winners were given, with few updates (the scan) and many (the map).
func TestLastFates(t *testing.T) {
	for _, n := range []int{0, 1, 2, 16, 17, 40} {
		var fs []storage.FateUpdate
		for i := range n {
			// Ids repeat every third update; the wait number says which update it is.
			fs = append(fs, storage.FateUpdate{EventID: fmt.Sprintf("e%d", i%3), Fate: history.FateDelivered, WaitNumber: i})
		}
		var got []int
		LastFates(fs, func(f *storage.FateUpdate) { got = append(got, f.WaitNumber) })
		var want []int
		for i := range n {
			if i+3 >= n { // the last update of its id
				want = append(want, i)
			}
		}
		if !slices.Equal(got, want) {
			t.Errorf("%d updates: applied %v, want %v", n, got, want)
		}
	}
}
