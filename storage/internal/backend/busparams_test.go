package backend

import (
	"errors"
	"fmt"
	"testing"

	"github.com/heraldwf/herald/heraldtype"
	"github.com/heraldwf/herald/storage"
)

// TestCheckBusDecisions: a subscription decided twice is refused whether
// the decisions are few (scanned) or many (a map), and distinct ones pass.
func TestCheckBusDecisions(t *testing.T) {
	for _, n := range []int{2, 16, 17, 100} {
		ds := make([]storage.BusRouteDecision, n)
		for i := range ds {
			ds[i].Subscription = fmt.Sprintf("s%d", i)
		}
		if err := CheckBusDecisions(ds); err != nil {
			t.Errorf("%d distinct decisions: %v", n, err)
		}
		ds[n-1].Subscription = ds[0].Subscription
		if err := CheckBusDecisions(ds); !errors.Is(err, heraldtype.ErrInvalidArgument) {
			t.Errorf("%d decisions, the last repeating the first: got %v, want ErrInvalidArgument", n, err)
		}
	}
}
