package postgres

import (
	"reflect"
	"testing"
	"time"

	"github.com/heraldwf/herald/heraldtype"
	"github.com/heraldwf/herald/history"
	"github.com/heraldwf/herald/storage"
	"github.com/heraldwf/herald/storage/internal/backend"
)

// withField returns a copy of p with its field i set to a non-zero value.
func withField[T any](t *testing.T, p T, i int) *T {
	t.Helper()
	f := reflect.TypeFor[T]().Field(i)
	v, err := backend.NonZero(f.Type)
	if err != nil {
		t.Fatalf("field %s: %v", f.Name, err)
	}
	reflect.ValueOf(&p).Elem().Field(i).Set(v)
	return &p
}

// TestSimpleCommit_FailsClosed sets each field of TurnCommitParams in turn
// on a commit herald_commit can do: a field the fast path does not list
// (one added to TurnCommitParams later included) must make it refuse, so
// that the general path, which handles every field, does the commit.
func TestSimpleCommit_FailsClosed(t *testing.T) {
	base := storage.TurnCommitParams{Tenant: "t", InstanceID: "i", LockToken: "k", Execution: 1, Now: time.Unix(1, 0),
		NewEvents: []history.Event{{Seq: 2, Kind: history.ExecutionCompleted}}, ConsumedMessages: []int64{1},
		Fates: []storage.FateUpdate{{EventID: "e", Fate: history.FateDelivered}}, Status: heraldtype.StatusCompleted}
	if !simpleCommit(&base, nil) {
		t.Fatal("a plain completing commit does not take the fast path")
	}
	typ := reflect.TypeFor[storage.TurnCommitParams]()
	for i := range typ.NumField() {
		name := typ.Field(i).Name
		p := withField(t, base, i)
		if got, want := simpleCommit(p, nil), simpleFields.Handles(name); got != want {
			t.Errorf("%s set: simpleCommit = %v, want %v", name, got, want)
		}
		c := &commitCall{p: p, status: heraldtype.StatusRunning}
		if got, want := c.batchable(), batchableFields.Handles(name); got != want {
			t.Errorf("%s set: batchable = %v, want %v", name, got, want)
		}
	}
	if simpleCommit(&base, []withdrawnWait{{seq: 3}}) {
		t.Error("a commit that must hand on a withdrawn wait's delivery took the fast path")
	}
}

// TestRaiseFast_FailsClosed is TestSimpleCommit_FailsClosed for EventRaise's
// one-statement path.
func TestRaiseFast_FailsClosed(t *testing.T) {
	base := storage.EventRaiseParams{Tenant: "t", InstanceID: "i", EventID: "e", Lane: history.LanePositional, Name: "n"}
	if !raiseFast.Only(&base) {
		t.Fatal("a plain raise does not take the fast path")
	}
	typ := reflect.TypeFor[storage.EventRaiseParams]()
	for i := range typ.NumField() {
		name := typ.Field(i).Name
		if got, want := raiseFast.Only(withField(t, base, i)), raiseFast.Handles(name); got != want {
			t.Errorf("%s set: fast path = %v, want %v", name, got, want)
		}
	}
}

// BenchmarkSimpleCommitGuard measures what failing closed adds to every
// commit: the check of the fields the fast path does not list.
func BenchmarkSimpleCommitGuard(b *testing.B) {
	p := &storage.TurnCommitParams{Tenant: "t", InstanceID: "i", LockToken: "k", Execution: 1,
		NewEvents: []history.Event{{Seq: 2}}, ConsumedMessages: []int64{1}, Status: heraldtype.StatusCompleted}
	for b.Loop() {
		if !simpleCommit(p, nil) {
			b.Fatal("not simple")
		}
	}
}
