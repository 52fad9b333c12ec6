package backend

import (
	"fmt"
	"reflect"
	"time"
)

// FieldGuard lets a fast path fail closed. A fast path handles some fields
// of a params struct and must not run when any other field is set: a field
// added to the struct later, which the fast path has never heard of, would
// otherwise be silently ignored. The guard names the fields the fast path
// handles; Only reports whether every other field is zero, so a new field
// makes the fast path fall back to the general one until someone teaches
// it the field.
type FieldGuard[T any] struct {
	known map[string]bool
	other []int // indexes of the fields the fast path does not handle
}

// NewFieldGuard returns the guard of a fast path that handles the fields
// named known of T (a struct type). It panics if a name is not a field of
// T: a renamed field must be renamed in the fast path's list too.
func NewFieldGuard[T any](known ...string) *FieldGuard[T] {
	t := reflect.TypeFor[T]()
	if t.Kind() != reflect.Struct {
		panic(fmt.Sprintf("backend: field guard of %v, which is not a struct", t))
	}
	g := &FieldGuard[T]{known: make(map[string]bool, len(known))}
	for _, name := range known {
		if _, ok := t.FieldByName(name); !ok {
			panic(fmt.Sprintf("backend: field guard of %v: no field %q", t, name))
		}
		g.known[name] = true
	}
	for i := range t.NumField() {
		if !g.known[t.Field(i).Name] {
			g.other = append(g.other, i)
		}
	}
	return g
}

// Handles reports whether the fast path handles the field named name.
func (g *FieldGuard[T]) Handles(name string) bool { return g.known[name] }

// Only reports whether every field of p the fast path does not handle is
// zero. An empty slice or map counts as zero, as the fast paths' callers
// may pass either.
func (g *FieldGuard[T]) Only(p *T) bool {
	v := reflect.ValueOf(p).Elem()
	for _, i := range g.other {
		f := v.Field(i)
		switch f.Kind() {
		case reflect.Slice, reflect.Map:
			if f.Len() != 0 {
				return false
			}
		default:
			if !f.IsZero() {
				return false
			}
		}
	}
	return true
}

// NonZero returns a non-zero value of type typ: the tests of the fast paths
// set each field of a params struct to one in turn. It fails for kinds no
// params struct uses (channels, functions, interfaces).
func NonZero(typ reflect.Type) (reflect.Value, error) {
	v := reflect.New(typ).Elem()
	switch typ.Kind() {
	case reflect.String:
		v.SetString("x")
	case reflect.Bool:
		v.SetBool(true)
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		v.SetInt(1)
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		v.SetUint(1)
	case reflect.Float32, reflect.Float64:
		v.SetFloat(1)
	case reflect.Slice:
		v.Set(reflect.MakeSlice(typ, 1, 1))
	case reflect.Map:
		v.Set(reflect.MakeMap(typ))
		v.SetMapIndex(reflect.New(typ.Key()).Elem(), reflect.New(typ.Elem()).Elem())
	case reflect.Pointer:
		v.Set(reflect.New(typ.Elem()))
	case reflect.Func:
		v.Set(reflect.MakeFunc(typ, func([]reflect.Value) []reflect.Value {
			out := make([]reflect.Value, typ.NumOut())
			for i := range out {
				out[i] = reflect.New(typ.Out(i)).Elem()
			}
			return out
		}))
	case reflect.Struct:
		if typ == reflect.TypeFor[time.Time]() {
			v.Set(reflect.ValueOf(time.Unix(1, 0)))
			break
		}
		if typ.NumField() == 0 {
			return v, fmt.Errorf("no non-zero value of %v", typ)
		}
		f, err := NonZero(typ.Field(0).Type)
		if err != nil {
			return v, err
		}
		v.Field(0).Set(f)
	default:
		return v, fmt.Errorf("no non-zero value of %v", typ)
	}
	return v, nil
}
