package rule

import (
	"encoding/json"
	"math"
	"strconv"
	"strings"
)

// Reason says why a condition or group did not hold.
type Reason string

const (
	// ReasonAbsent: the field's path does not resolve in the event.
	ReasonAbsent Reason = "absent"
	// ReasonType: the field holds a type the op cannot compare with the
	// rule's value (a string against gt 5, an object against eq "x").
	ReasonType Reason = "type"
	// ReasonValue: the types fit and the comparison is false.
	ReasonValue Reason = "value"
	// ReasonNone: an OR group, none of whose items held.
	ReasonNone Reason = "none"
)

// Miss names what filtered an event out.
type Miss struct {
	// Path locates the failing item in the rule, as Problem.Path does:
	// "$.conditions[1]". For an OR group it is the group's path.
	Path string `json:"path"`
	// Field is the condition's field path; empty for an OR group.
	Field string `json:"field,omitempty"`
	// Op is the condition's op ("gt"), or "OR" for a group.
	Op     string `json:"op"`
	Reason Reason `json:"reason"`
}

// String is a one-line summary for logs and fates:
// `$.conditions[1] (data.amount gt): value`.
func (m *Miss) String() string {
	if m == nil {
		return ""
	}
	if m.Field == "" {
		return m.Path + " (" + m.Op + "): " + string(m.Reason)
	}
	return m.Path + " (" + m.Field + " " + m.Op + "): " + string(m.Reason)
}

// Eval reports whether doc, an event decoded as JSON (see the package
// comment for the accepted Go types), passes the rule. When it does not,
// the *Miss says which item filtered it out; when it does, the *Miss is
// nil. Eval never fails and never panics on any document; it allocates
// only the *Miss.
func (r *Rule) Eval(doc any) (bool, *Miss) {
	if r == nil {
		return true, nil
	}
	ok, at, why := r.root.eval(doc)
	if ok {
		return true, nil
	}
	m := &Miss{Path: at.path, Field: at.field, Reason: why}
	if at.kids != nil {
		m.Op = "OR"
	} else {
		m.Op = at.op.String()
	}
	return false, m
}

// Match is Eval without the reason.
func (r *Rule) Match(doc any) bool {
	ok, _ := r.Eval(doc)
	return ok
}

// eval returns, when false, the node that decided it and why, so that
// Eval allocates nothing on the way.
func (n *node) eval(doc any) (bool, *node, Reason) {
	if n.kids != nil {
		if n.or {
			for _, k := range n.kids {
				if ok, _, _ := k.eval(doc); ok {
					return true, nil, ""
				}
			}
			return false, n, ReasonNone
		}
		for _, k := range n.kids {
			if ok, at, why := k.eval(doc); !ok {
				return false, at, why
			}
		}
		return true, nil, ""
	}
	v, found := lookup(doc, n.segs)
	if n.op == OpExists {
		if found {
			return true, nil, ""
		}
		return false, n, ReasonAbsent
	}
	if !found {
		// Every op but exists is false on an absent field, ne and nin
		// included: "status ne cancelled" means the event has a status
		// that is not cancelled, not that it may lack one (the reading
		// users of other brokers filed bugs to get).
		return false, n, ReasonAbsent
	}
	ok, typed := n.test(v)
	if ok {
		return true, nil, ""
	}
	if !typed {
		return false, n, ReasonType
	}
	return false, n, ReasonValue
}

// test applies the op to a present value. typed is false when the value's
// type does not fit the op at all.
func (n *node) test(v any) (ok, typed bool) {
	switch n.op {
	case OpEq:
		return equal(v, n.val)
	case OpNe:
		eq, _ := equal(v, n.val)
		return !eq, true
	case OpGt, OpGte, OpLt, OpLte:
		c, typed := compare(v, n.val)
		if !typed {
			return false, false
		}
		switch n.op {
		case OpGt:
			return c > 0, true
		case OpGte:
			return c >= 0, true
		case OpLt:
			return c < 0, true
		}
		return c <= 0, true
	case OpIn:
		return n.in(v), true
	case OpNin:
		return !n.in(v), true
	case OpContains:
		switch x := v.(type) {
		case string:
			if n.val.kind != jString {
				return false, false
			}
			return strings.Contains(x, n.val.s), true
		case []any:
			for _, e := range x {
				if eq, _ := equal(e, n.val); eq {
					return true, true
				}
			}
			return false, true
		}
		return false, false
	case OpPrefix, OpSuffix:
		s, isStr := v.(string)
		if !isStr {
			return false, false
		}
		if n.op == OpPrefix {
			return strings.HasPrefix(s, n.val.s), true
		}
		return strings.HasSuffix(s, n.val.s), true
	}
	return false, false
}

func (n *node) in(v any) bool {
	if n.set != nil {
		s, isStr := v.(string)
		if !isStr {
			return false
		}
		_, ok := n.set[s]
		return ok
	}
	for _, e := range n.list {
		if eq, _ := equal(v, e); eq {
			return true
		}
	}
	return false
}

// lookup walks doc along segs; found is false when the path does not
// resolve. Only the types encoding/json produces are walked into.
func lookup(doc any, segs []segment) (any, bool) {
	cur := doc
	for _, s := range segs {
		switch c := cur.(type) {
		case map[string]any:
			v, ok := c[s.key]
			if !ok {
				return nil, false
			}
			cur = v
		case []any:
			if s.idx < 0 || s.idx >= len(c) {
				return nil, false
			}
			cur = c[s.idx]
		default:
			return nil, false
		}
	}
	return cur, true
}

// scalar is a rule's value, or a document value converted for comparing.
type scalar struct {
	kind jkind
	b    bool
	s    string
	n    number
}

// number is an integer when it fits int64 exactly, else a float64.
type number struct {
	isInt bool
	i     int64
	f     float64
}

// parseNumber reads a JSON number literal. Integers past int64 and
// exponents become float64 (±Inf past its range, which JSON can spell but
// the rule compiler refuses).
func parseNumber(s string) (number, bool) {
	if !strings.ContainsAny(s, ".eE") {
		if i, err := strconv.ParseInt(s, 10, 64); err == nil {
			return number{isInt: true, i: i}, true
		}
	}
	f, err := strconv.ParseFloat(s, 64)
	if (err != nil && !isRange(err)) || math.IsNaN(f) {
		return number{}, false
	}
	return number{f: f}, true
}

func isRange(err error) bool {
	ne, ok := err.(*strconv.NumError)
	return ok && ne.Err == strconv.ErrRange
}

// docNumber converts a document value to a number when it is one.
func docNumber(v any) (number, bool) {
	switch x := v.(type) {
	case float64:
		return number{f: x}, !math.IsNaN(x)
	case json.Number:
		return parseNumber(string(x))
	case int:
		return number{isInt: true, i: int64(x)}, true
	case int64:
		return number{isInt: true, i: x}, true
	case int32:
		return number{isInt: true, i: int64(x)}, true
	case int16:
		return number{isInt: true, i: int64(x)}, true
	case int8:
		return number{isInt: true, i: int64(x)}, true
	case uint:
		return fromUint(uint64(x)), true
	case uint64:
		return fromUint(x), true
	case uint32:
		return number{isInt: true, i: int64(x)}, true
	case uint16:
		return number{isInt: true, i: int64(x)}, true
	case uint8:
		return number{isInt: true, i: int64(x)}, true
	case float32:
		return number{f: float64(x)}, !math.IsNaN(float64(x))
	}
	return number{}, false
}

func fromUint(u uint64) number {
	if u <= math.MaxInt64 {
		return number{isInt: true, i: int64(u)}
	}
	return number{f: float64(u)}
}

// equal compares a document value with a rule scalar. typed is false when
// their types differ (a mismatch rather than a different value).
func equal(v any, s scalar) (eq, typed bool) {
	switch s.kind {
	case jString:
		x, ok := v.(string)
		return ok && x == s.s, ok
	case jBool:
		x, ok := v.(bool)
		return ok && x == s.b, ok
	case jNull:
		return v == nil, v == nil
	case jNumber:
		n, ok := docNumber(v)
		if !ok {
			return false, false
		}
		return cmpNumber(n, s.n) == 0, true
	}
	return false, false
}

// compare orders a document value against a number scalar (the compiler
// accepts nothing else for an ordering op).
func compare(v any, s scalar) (c int, typed bool) {
	n, ok := docNumber(v)
	if !ok {
		return 0, false
	}
	return cmpNumber(n, s.n), true
}

func cmpNumber(a, b number) int {
	switch {
	case a.isInt && b.isInt:
		return cmp3(a.i < b.i, a.i > b.i)
	case !a.isInt && !b.isInt:
		return cmp3(a.f < b.f, a.f > b.f)
	case a.isInt:
		return cmpIntFloat(a.i, b.f)
	}
	return -cmpIntFloat(b.i, a.f)
}

func cmp3(less, more bool) int {
	if less {
		return -1
	}
	if more {
		return 1
	}
	return 0
}

// cmpIntFloat compares exactly: converting i to float64 would make
// 2^53+1 equal 2^53.
func cmpIntFloat(i int64, f float64) int {
	const two63 = 9223372036854775808.0
	if f >= two63 {
		return -1
	}
	if f < -two63 {
		return 1
	}
	t := math.Trunc(f)
	ti := int64(t)
	if i != ti {
		return cmp3(i < ti, i > ti)
	}
	frac := f - t
	return cmp3(frac > 0, frac < 0)
}
