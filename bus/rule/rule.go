package rule

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"strings"
)

// Bounds a rule must stay within; see the package comment.
const (
	// MaxSize is the largest raw rule Compile reads, in bytes.
	MaxSize = 64 << 10
	// MaxDepth is how deep groups nest; the root group is depth 1.
	MaxDepth = 16
	// MaxConditions is how many items (conditions and groups) all of a
	// rule's "conditions" arrays may hold together.
	MaxConditions = 256
	// MaxPathSegments is how many dot-separated segments a field path has
	// at most; MaxSegmentLen is the longest segment in bytes.
	MaxPathSegments = 32
	MaxSegmentLen   = 64
	// MaxJSONDepth is where the decoder stops reading nested JSON: deep
	// enough for MaxDepth groups (two levels each) and an in-list, with
	// room to report a too-deep group as such rather than as bad JSON.
	MaxJSONDepth = 2*MaxDepth + 8
	// MaxProblems is how many problems an *InvalidError lists.
	MaxProblems = 50
)

// Op is a condition's operator.
type Op uint8

// The operators, in the order the package comment lists them.
const (
	OpEq Op = iota + 1
	OpNe
	OpGt
	OpGte
	OpLt
	OpLte
	OpIn
	OpNin
	OpContains
	OpPrefix
	OpSuffix
	OpExists
)

var opNames = [...]string{
	OpEq: "eq", OpNe: "ne", OpGt: "gt", OpGte: "gte", OpLt: "lt", OpLte: "lte",
	OpIn: "in", OpNin: "nin", OpContains: "contains", OpPrefix: "prefix",
	OpSuffix: "suffix", OpExists: "exists",
}

func (o Op) String() string {
	if o == 0 || int(o) >= len(opNames) {
		return "op(" + strconv.Itoa(int(o)) + ")"
	}
	return opNames[o]
}

func parseOp(s string) Op {
	for o := OpEq; o <= OpExists; o++ {
		if opNames[o] == s {
			return o
		}
	}
	return 0
}

// Rule is a compiled filter rule. It is immutable and safe for concurrent
// Eval calls. The nil *Rule matches every event.
type Rule struct {
	root  *node
	raw   []byte // the rule as compacted JSON
	count int
}

// node is a compiled group or condition.
type node struct {
	path string // where it sits in the rule: "$.conditions[0]"

	// A group (kids != nil).
	or   bool
	kids []*node

	// A condition.
	op    Op
	field string
	segs  []segment
	val   scalar              // eq ne gt gte lt lte contains prefix suffix
	list  []scalar            // in nin
	set   map[string]struct{} // in nin, when every element is a string and there are many
}

// segment is one step of a field path: a key, and the array index the
// same text selects when the value there is an array (-1: none).
type segment struct {
	key string
	idx int
}

// setThreshold is the list length from which in/nin over strings use a
// map; below it a linear scan is as fast and allocates nothing to build.
const setThreshold = 8

// Compile validates raw and compiles it. An empty or null raw means "no
// filter" and gives (nil, nil): the nil *Rule matches every event.
// Otherwise every problem found is returned in one *InvalidError (which
// matches ErrInvalid) and the *Rule is nil.
func Compile(raw json.RawMessage) (*Rule, error) {
	trimmed := bytes.TrimSpace(raw)
	if len(trimmed) == 0 || string(trimmed) == "null" {
		return nil, nil
	}
	var prob problems
	if len(raw) > MaxSize {
		prob.add("$", fmt.Sprintf("rule is %d bytes, more than the %d allowed", len(raw), MaxSize))
		return nil, prob.err()
	}
	tree := decodeTree(raw, &prob)
	if tree == nil {
		return nil, prob.err()
	}
	c := compiler{prob: &prob}
	root := c.group(tree, "$", 1)
	if c.count > MaxConditions {
		prob.add("$", fmt.Sprintf("rule has %d conditions, more than the %d allowed", c.count, MaxConditions))
	}
	if err := prob.err(); err != nil {
		return nil, err
	}
	var buf bytes.Buffer
	if err := json.Compact(&buf, raw); err != nil {
		// The decoder accepted it, so Compact must too.
		return nil, fmt.Errorf("rule: compact: %w", err)
	}
	return &Rule{root: root, raw: buf.Bytes(), count: c.count}, nil
}

// MustCompile is Compile for rules written in code (tests, examples): it
// panics on an invalid rule.
func MustCompile(raw string) *Rule {
	r, err := Compile(json.RawMessage(raw))
	if err != nil {
		panic(err)
	}
	return r
}

// MarshalJSON returns the rule as compiled, compacted; null for the nil
// rule.
func (r *Rule) MarshalJSON() ([]byte, error) {
	if r == nil {
		return []byte("null"), nil
	}
	return bytes.Clone(r.raw), nil
}

// String returns the compacted JSON of the rule ("null" for nil).
func (r *Rule) String() string {
	b, _ := r.MarshalJSON()
	return string(b)
}

// Conditions is how many items (conditions and groups below the root) the
// rule holds; 0 for nil.
func (r *Rule) Conditions() int {
	if r == nil {
		return 0
	}
	return r.count
}

type problems struct {
	list  []Problem
	extra int
}

func (p *problems) add(path, msg string) { p.addCode(path, "", msg) }

func (p *problems) addCode(path string, code ProblemCode, msg string) {
	if len(p.list) >= MaxProblems {
		p.extra++
		return
	}
	p.list = append(p.list, Problem{Path: path, Code: code, Message: msg})
}

func (p *problems) err() error {
	if len(p.list) == 0 {
		return nil
	}
	list := p.list
	if p.extra > 0 {
		// The last slot says how many were left out, itself included.
		list[len(list)-1] = Problem{Path: "$", Message: fmt.Sprintf("%d more problems not listed", p.extra+1)}
	}
	return &InvalidError{Problems: list}
}

type compiler struct {
	prob  *problems
	count int
}

// group compiles n as a group at depth. It returns a node even when
// problems were found (the result is then discarded) so that every
// problem under it is found in one pass.
func (c *compiler) group(n *jnode, path string, depth int) *node {
	g := &node{path: path}
	if n.kind != jObject {
		c.prob.add(path, "a group must be an object with \"logic\" and \"conditions\", not "+article(n.kind))
		return g
	}
	for _, k := range n.keys {
		if k != "logic" && k != "conditions" {
			c.prob.add(childPath(path, k), "unknown key in a group (a group has only \"logic\" and \"conditions\")")
		}
	}
	if l, ok := n.get("logic"); !ok {
		c.prob.add(path, "missing \"logic\" (\"AND\" or \"OR\")")
	} else if l.kind != jString || (l.s != "AND" && l.s != "OR") {
		c.prob.add(path+".logic", "unknown logic "+describe(l)+": want \"AND\" or \"OR\"")
	} else {
		g.or = l.s == "OR"
	}
	conds, ok := n.get("conditions")
	switch {
	case !ok:
		c.prob.add(path, "missing \"conditions\"")
		return g
	case conds.kind != jArray:
		c.prob.add(path+".conditions", "\"conditions\" must be an array, not "+article(conds.kind))
		return g
	case len(conds.arr) == 0:
		c.prob.add(path+".conditions", "\"conditions\" is empty")
		return g
	}
	if depth > MaxDepth {
		c.prob.add(path, fmt.Sprintf("groups nest deeper than %d", MaxDepth))
		return g
	}
	g.kids = make([]*node, 0, len(conds.arr))
	for i, item := range conds.arr {
		c.count++
		sub := path + ".conditions[" + strconv.Itoa(i) + "]"
		if item.kind == jObject {
			_, hasLogic := item.get("logic")
			_, hasConds := item.get("conditions")
			if hasLogic || hasConds {
				g.kids = append(g.kids, c.group(item, sub, depth+1))
				continue
			}
		}
		g.kids = append(g.kids, c.condition(item, sub))
	}
	return g
}

func (c *compiler) condition(n *jnode, path string) *node {
	cn := &node{path: path}
	if n.kind != jObject {
		c.prob.add(path, "a condition must be an object with \"field\", \"op\" and \"value\", not "+article(n.kind))
		return cn
	}
	for _, k := range n.keys {
		if k != "field" && k != "op" && k != "value" {
			c.prob.add(childPath(path, k), "unknown key in a condition (a condition has only \"field\", \"op\" and \"value\")")
		}
	}
	if f, ok := n.get("field"); !ok {
		c.prob.add(path, "missing \"field\"")
	} else if f.kind != jString {
		c.prob.add(path+".field", "\"field\" must be a string, not "+article(f.kind))
	} else if segs, msg := parsePath(f.s); msg != "" {
		c.prob.add(path+".field", "malformed field path "+strconv.Quote(clip(f.s))+": "+msg)
	} else {
		cn.field, cn.segs = f.s, segs
	}
	o, ok := n.get("op")
	switch {
	case !ok:
		c.prob.add(path, "missing \"op\"")
		return cn
	case o.kind != jString:
		c.prob.add(path+".op", "\"op\" must be a string, not "+article(o.kind))
		return cn
	}
	cn.op = parseOp(o.s)
	if cn.op == 0 {
		c.prob.add(path+".op", "unknown op "+strconv.Quote(clip(o.s))+": want one of eq ne gt gte lt lte in nin contains prefix suffix exists")
		return cn
	}
	v, has := n.get("value")
	vpath := path + ".value"
	if cn.op == OpExists {
		if has {
			c.prob.add(vpath, "op exists takes no value")
		}
		return cn
	}
	if !has {
		c.prob.add(path, "op "+cn.op.String()+" needs a \"value\"")
		return cn
	}
	switch cn.op {
	case OpEq, OpNe, OpContains:
		if s, ok := c.scalar(v, vpath); ok {
			cn.val = s
		} else if v.kind == jArray || v.kind == jObject {
			c.prob.add(vpath, "op "+cn.op.String()+" needs a string, number, boolean or null, not "+article(v.kind))
		}
	case OpGt, OpGte, OpLt, OpLte:
		// Ordering is numeric only: a string operand ("gt": "abc") would
		// order bytewise, so "10" < "9" and an amount saved as text would
		// silently pass or fail; it is refused instead.
		if v.kind != jNumber {
			c.prob.addCode(vpath, CodeNotNumeric, "op "+cn.op.String()+" needs a number, not "+describe(v)+" (gt gte lt lte order numbers only)")
		} else if s, ok := c.scalar(v, vpath); ok {
			cn.val = s
		}
	case OpPrefix, OpSuffix:
		if v.kind != jString {
			c.prob.add(vpath, "op "+cn.op.String()+" needs a string, not "+article(v.kind))
		} else {
			cn.val = scalar{kind: jString, s: v.s}
		}
	case OpIn, OpNin:
		if v.kind != jArray {
			c.prob.add(vpath, "op "+cn.op.String()+" needs an array of values, not "+article(v.kind))
			return cn
		}
		if len(v.arr) == 0 {
			c.prob.add(vpath, "op "+cn.op.String()+" needs at least one value")
			return cn
		}
		allStrings := true
		for i, e := range v.arr {
			epath := vpath + "[" + strconv.Itoa(i) + "]"
			s, ok := c.scalar(e, epath)
			if !ok {
				if e.kind == jArray || e.kind == jObject {
					c.prob.add(epath, "op "+cn.op.String()+" needs strings, numbers, booleans or null in its array, not "+article(e.kind))
				}
				continue
			}
			allStrings = allStrings && s.kind == jString
			cn.list = append(cn.list, s)
		}
		if allStrings && len(cn.list) >= setThreshold {
			cn.set = make(map[string]struct{}, len(cn.list))
			for _, s := range cn.list {
				cn.set[s.s] = struct{}{}
			}
		}
	}
	return cn
}

// scalar converts a JSON scalar; numbers that cannot be represented are a
// problem (reported here), arrays and objects are not scalars (reported
// by the caller, which knows what the op wanted).
func (c *compiler) scalar(n *jnode, path string) (scalar, bool) {
	switch n.kind {
	case jNull:
		return scalar{kind: jNull}, true
	case jBool:
		return scalar{kind: jBool, b: n.b}, true
	case jString:
		return scalar{kind: jString, s: n.s}, true
	case jNumber:
		num, ok := parseNumber(n.s)
		if !ok || (!num.isInt && math.IsInf(num.f, 0)) {
			c.prob.add(path, "number "+clip(n.s)+" is out of range")
			return scalar{}, false
		}
		return scalar{kind: jNumber, n: num}, true
	}
	return scalar{}, false
}

// parsePath splits a field path; msg says what is wrong with it.
func parsePath(p string) ([]segment, string) {
	if p == "" {
		return nil, "empty"
	}
	parts := strings.Split(p, ".")
	if len(parts) > MaxPathSegments {
		return nil, fmt.Sprintf("%d segments, more than the %d allowed", len(parts), MaxPathSegments)
	}
	segs := make([]segment, len(parts))
	for i, s := range parts {
		if s == "" {
			return nil, "empty segment (a leading, trailing or doubled dot)"
		}
		if len(s) > MaxSegmentLen {
			return nil, fmt.Sprintf("segment %d is longer than %d bytes", i+1, MaxSegmentLen)
		}
		for j := 0; j < len(s); j++ {
			if !segmentByte(s[j]) {
				return nil, fmt.Sprintf("segment %d has %q; segments use only A-Z a-z 0-9 _ -", i+1, rune(s[j]))
			}
		}
		segs[i] = segment{key: s, idx: arrayIndex(s)}
	}
	return segs, ""
}

func segmentByte(b byte) bool {
	return b >= 'a' && b <= 'z' || b >= 'A' && b <= 'Z' || b >= '0' && b <= '9' || b == '_' || b == '-'
}

// arrayIndex is the array index s names, or -1: decimal digits without a
// leading zero, small enough that no JSON array could be longer.
func arrayIndex(s string) int {
	if len(s) == 0 || len(s) > 9 || (s[0] == '0' && len(s) > 1) {
		return -1
	}
	n := 0
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return -1
		}
		n = n*10 + int(s[i]-'0')
	}
	return n
}

func article(k jkind) string {
	switch k {
	case jNull:
		return "null"
	case jArray, jObject:
		return "an " + k.String()
	}
	return "a " + k.String()
}

func describe(n *jnode) string {
	if n.kind == jString {
		return strconv.Quote(clip(n.s))
	}
	return article(n.kind)
}

// clip keeps user text in error messages short: a 60 KiB op name is
// refused, not echoed back.
func clip(s string) string {
	const max = 64
	if len(s) <= max {
		return s
	}
	return s[:max] + "…"
}
