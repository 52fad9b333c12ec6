package backend

import (
	"reflect"
	"testing"
	"time"
)

type guarded struct {
	A string
	B []int
	C map[string]int
	D *int
	E time.Time
	F bool
}

func TestFieldGuard(t *testing.T) {
	g := NewFieldGuard[guarded]("A")
	if !g.Only(&guarded{A: "set"}) {
		t.Fatal("a handled field refused the fast path")
	}
	if !g.Only(&guarded{B: []int{}, C: map[string]int{}}) {
		t.Fatal("empty, non-nil slices and maps refused the fast path")
	}
	typ := reflect.TypeFor[guarded]()
	for i := range typ.NumField() {
		f := typ.Field(i)
		var p guarded
		v, err := NonZero(f.Type)
		if err != nil {
			t.Fatal(err)
		}
		reflect.ValueOf(&p).Elem().Field(i).Set(v)
		if got, want := g.Only(&p), f.Name == "A"; got != want {
			t.Errorf("field %s set: Only = %v, want %v", f.Name, got, want)
		}
	}
}

func TestFieldGuard_UnknownNamePanics(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Fatal("a guard naming a field that does not exist did not panic")
		}
	}()
	NewFieldGuard[guarded]("A", "Renamed")
}
