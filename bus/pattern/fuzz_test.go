package pattern_test

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/heraldwf/herald/bus/pattern"
)

// The reference: the grammar written as plainly as possible, with
// strings.Split and recursion, sharing no code with the package.

func refValid(s string, isPattern bool) bool {
	if s == "" || len(s) > pattern.MaxNameBytes || !utf8.ValidString(s) || strings.Contains(s, "\x00") {
		return false
	}
	segs := strings.Split(s, ".")
	for i, seg := range segs {
		switch {
		case seg == "":
			return false
		case !isPattern && strings.ContainsAny(seg, "*>"):
			return false
		case seg == ">" && i != len(segs)-1:
			return false
		case seg != "*" && seg != ">" && strings.ContainsAny(seg, "*>"):
			return false
		}
	}
	return true
}

func refMatch(p, e []string) bool {
	switch {
	case len(p) == 0:
		return len(e) == 0
	case p[0] == ">":
		return len(e) >= 1
	case len(e) == 0:
		return false
	case p[0] == "*" || p[0] == e[0]:
		return refMatch(p[1:], e[1:])
	}
	return false
}

// refCompare is Match's documented order: segment by segment, literal
// before "*" before ">".
func refCompare(a, b string) int {
	as, bs := strings.Split(a, "."), strings.Split(b, ".")
	rank := func(s string) int {
		switch s {
		case "*":
			return 1
		case ">":
			return 2
		}
		return 0
	}
	for i := 0; i < len(as) && i < len(bs); i++ {
		if c := rank(as[i]) - rank(bs[i]); c != 0 {
			return c
		}
		if c := strings.Compare(as[i], bs[i]); c != 0 {
			return c
		}
	}
	return len(as) - len(bs)
}

type refEntry struct {
	pattern string
	value   int
}

// refIndex scans every entry, as the index must not.
type refIndex struct{ entries []refEntry }

func (r *refIndex) add(p string, v int) bool {
	if slices.Contains(r.entries, refEntry{p, v}) {
		return false
	}
	r.entries = append(r.entries, refEntry{p, v})
	return true
}

func (r *refIndex) remove(p string, v int) bool {
	i := slices.Index(r.entries, refEntry{p, v})
	if i < 0 {
		return false
	}
	r.entries = slices.Delete(r.entries, i, i+1)
	return true
}

func (r *refIndex) match(e string) []int {
	var hits []refEntry
	for _, en := range r.entries {
		if refMatch(strings.Split(en.pattern, "."), strings.Split(e, ".")) {
			hits = append(hits, en)
		}
	}
	slices.SortStableFunc(hits, func(a, b refEntry) int { return refCompare(a.pattern, b.pattern) })
	var out []int
	for _, h := range hits {
		out = append(out, h.value)
	}
	return out
}

// fuzzSegments is small so that random patterns and types collide often;
// it includes invalid pieces so refusals are exercised too.
var fuzzSegments = []string{"a", "b", "c", "ab", "*", ">", "", "a*", ">b", "é", "\xff", "\x00"}

// gen reads an input of 1–4 segments from data.
func gen(data []byte) (string, []byte) {
	if len(data) == 0 {
		return "a", data
	}
	n := 1 + int(data[0]%4)
	data = data[1:]
	segs := make([]string, 0, n)
	for range n {
		if len(data) == 0 {
			break
		}
		segs = append(segs, fuzzSegments[int(data[0])%len(fuzzSegments)])
		data = data[1:]
	}
	return strings.Join(segs, "."), data
}

// FuzzMatch drives an Index and the reference with the same operations,
// read from the input, and requires the same answers: the same refusals,
// the same reports from Add and Remove, and the same values in the same
// order from Match.
func FuzzMatch(f *testing.F) {
	f.Add([]byte{0, 1, 0, 3, 2, 3, 0, 1, 4, 0, 3, 3, 0, 1})
	f.Add([]byte{0, 0, 5, 0, 2, 0, 4, 7, 3, 2, 0, 1, 2})
	f.Add([]byte{1, 2, 0, 1, 4, 0, 2, 2, 0, 1, 3, 1, 0, 0, 1, 0})
	f.Fuzz(func(t *testing.T, data []byte) {
		var x pattern.Index[int]
		var ref refIndex
		for len(data) > 0 {
			op := data[0]
			data = data[1:]
			var in string
			in, data = gen(data)
			v := int(op>>2) % 4
			switch op % 4 {
			case 0, 1:
				added, err := x.Add(in, v)
				if !refValid(in, true) {
					if !errors.Is(err, pattern.ErrInvalidPattern) || added {
						t.Fatalf("Add(%q) = %v, %v; want a refusal", in, added, err)
					}
					continue
				}
				if want := ref.add(in, v); err != nil || added != want {
					t.Fatalf("Add(%q, %d) = %v, %v; want %v", in, v, added, err, want)
				}
			case 2:
				removed, err := x.Remove(in, v)
				if !refValid(in, true) {
					if !errors.Is(err, pattern.ErrInvalidPattern) || removed {
						t.Fatalf("Remove(%q) = %v, %v; want a refusal", in, removed, err)
					}
					continue
				}
				if want := ref.remove(in, v); err != nil || removed != want {
					t.Fatalf("Remove(%q, %d) = %v, %v; want %v", in, v, removed, err, want)
				}
			case 3:
				got, err := x.Match(in)
				if !refValid(in, false) {
					if !errors.Is(err, pattern.ErrInvalidEventType) || got != nil {
						t.Fatalf("Match(%q) = %v, %v; want a refusal", in, got, err)
					}
					continue
				}
				if want := ref.match(in); err != nil || !slices.Equal(got, want) {
					t.Fatalf("Match(%q) = %v, %v; want %v\nentries %v", in, got, err, want, ref.entries)
				}
			}
			if x.Len() != len(ref.entries) {
				t.Fatalf("Len() = %d, reference holds %d", x.Len(), len(ref.entries))
			}
		}
	})
}

// FuzzValidate checks the validators and Matches against the reference on
// arbitrary strings, and that they never panic.
func FuzzValidate(f *testing.F) {
	for _, s := range [][2]string{{"user.*", "user.created"}, {"user.>", "user.a.b"}, {">", "x"}, {"a..b", "a.b"}, {"us*er", "us*er"}, {"\xff.>", "\x00"}} {
		f.Add(s[0], s[1])
	}
	f.Fuzz(func(t *testing.T, p, e string) {
		pOK, eOK := refValid(p, true), refValid(e, false)
		if err := pattern.ValidatePattern(p); (err == nil) != pOK || (err != nil && !errors.Is(err, pattern.ErrInvalidPattern)) {
			t.Fatalf("ValidatePattern(%q) = %v, reference says valid=%v", p, err, pOK)
		}
		if err := pattern.ValidateEventType(e); (err == nil) != eOK || (err != nil && !errors.Is(err, pattern.ErrInvalidEventType)) {
			t.Fatalf("ValidateEventType(%q) = %v, reference says valid=%v", e, err, eOK)
		}
		want := pOK && eOK && refMatch(strings.Split(p, "."), strings.Split(e, "."))
		if got := pattern.Matches(p, e); got != want {
			t.Fatalf("Matches(%q, %q) = %v, want %v", p, e, got, want)
		}
		if pOK && eOK {
			var x pattern.Index[int]
			if _, err := x.Add(p, 1); err != nil {
				t.Fatal(err)
			}
			got, err := x.Match(e)
			if err != nil || (len(got) == 1) != want {
				t.Fatalf("Index with %q: Match(%q) = %v, %v; want match=%v", p, e, got, err, want)
			}
		}
	})
}
