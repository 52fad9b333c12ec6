// Package schema compiles the JSON Schemas of event definitions at a bounded
// cost and keeps the compiled schemas in a cache shared by every client of
// the process.
//
// The JSON Schema library (santhosh-tekuri/jsonschema/v6) cannot be
// cancelled, and some of its work grows faster than the schema: its compile
// queue is a list searched linearly for every subschema (quadratic in the
// number of subschemas), each $ref into a location it has not processed yet
// copies its table of processed locations (references × subschemas), each
// $id scans the resources found so far, and deep nesting costs about the cube
// of the depth. A 2.3 MB schema took 38 s. A timeout would not stop the work
// (the goroutine would go on burning a core) and would make the verdict
// depend on the machine's load, so that a schema accepted at put could be
// refused at a later raise. Instead Compile measures the document first, in
// one linear pass, and refuses one whose shape is over the limits below
// before the library sees it. Within them, the worst shapes found take at
// most about 0.7 s of CPU (BenchmarkCompileWorstCases measures them). The
// caller caps the size in bytes.
//
// After compiling, Compile walks the compiled graph and refuses a schema that
// could never validate a value: a chain of $ref (or allOf, anyOf, oneOf, not,
// if/then/else, dependentSchemas) that comes back to where it started without
// descending into the value ({"$ref":"#"}), and one whose in-place
// applicators fan out so much that validating a single value evaluates more
// than MaxEvaluations subschemas. Nothing is ever loaded from a URL or a file:
// a reference outside the document is refused (the JSON Schema meta-schemas
// are the exception: the library embeds them).
package schema

import (
	"bytes"
	"crypto/sha256"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"unicode/utf8"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// Limits on a schema's shape. Each counts what makes the library's work grow
// faster than linearly; see the package comment.
const (
	// MaxDepth caps how deeply the document's objects and arrays nest.
	MaxDepth = 64
	// MaxNodes caps the objects and booleans in the document: every
	// subschema is one (and so is anything a $ref may point at).
	MaxNodes = 4096
	// MaxRefs caps the $ref, $dynamicRef and $recursiveRef keywords.
	MaxRefs = 512
	// MaxIDs caps the $id, id, $anchor and $dynamicAnchor keywords.
	MaxIDs = 512
	// MaxPatterns caps the regular expressions (pattern, and the keys of
	// patternProperties): each takes up to about a millisecond to compile.
	MaxPatterns = 256
	// MaxEvaluations caps how many subschemas validating one value may
	// evaluate through in-place applicators ($ref, allOf, anyOf, oneOf, not,
	// if/then/else, dependentSchemas): fan-outs multiply, so a short
	// schema could otherwise take hours on every payload.
	MaxEvaluations = 10000
)

// docURL names the document inside a compiler; a fresh compiler per schema,
// so it only has to be a valid URL. It is cut out of error messages.
const docURL = "herald:///definition.json"

// Compile compiles a JSON Schema (draft 2020-12 unless its $schema names
// another draft) or says why it cannot be used: not UTF-8 or not JSON, over
// a limit, not a valid schema, a reference that does not resolve or leaves
// the document, a reference cycle, too much fan-out. The verdict depends on
// the bytes alone. The caller checks the size first.
func Compile(raw []byte) (*jsonschema.Schema, error) {
	sch, _, err := compile(raw)
	return sch, err
}

// compile is Compile, also returning the number of nodes (a proxy for the
// compiled schema's memory).
func compile(raw []byte) (sch *jsonschema.Schema, nodes int, err error) {
	defer func() {
		// The library has panics for states it deems impossible; a schema
		// must not take the process down.
		if r := recover(); r != nil {
			sch, nodes, err = nil, 0, fmt.Errorf("the JSON Schema compiler failed: %v", r)
		}
	}()
	if !utf8.Valid(raw) {
		return nil, 0, errors.New("not valid UTF-8")
	}
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
	if err != nil {
		return nil, 0, fmt.Errorf("not JSON: %w", err)
	}
	var sh shape
	if err := sh.measure(doc, 1); err != nil {
		return nil, 0, err
	}
	if err := sh.check(); err != nil {
		return nil, 0, err
	}
	countCompile(raw)
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft2020)
	c.UseLoader(noLoader{})
	if err := c.AddResource(docURL, doc); err != nil {
		return nil, 0, describe(err)
	}
	sch, err = c.Compile(docURL)
	if err != nil {
		return nil, 0, describe(err)
	}
	if err := checkGraph(sch); err != nil {
		return nil, 0, err
	}
	return sch, sh.nodes, nil
}

// shape is what measure counts.
type shape struct {
	nodes, refs, ids, patterns int
}

// measure walks a decoded document. It counts everywhere, not only where
// the keywords hold subschemas: a $ref may point anywhere in the document,
// and the library then compiles what it finds there.
func (s *shape) measure(v any, depth int) error {
	if depth > MaxDepth {
		return fmt.Errorf("nested more than %d levels deep", MaxDepth)
	}
	switch v := v.(type) {
	case bool:
		s.nodes++
	case []any:
		for _, e := range v {
			if err := s.measure(e, depth+1); err != nil {
				return err
			}
		}
	case map[string]any:
		s.nodes++
		for k, e := range v {
			_, isString := e.(string)
			switch k {
			case "$ref", "$dynamicRef", "$recursiveRef":
				if isString {
					s.refs++
				}
			case "$id", "id", "$anchor", "$dynamicAnchor":
				if isString {
					s.ids++
				}
			case "pattern":
				if isString {
					s.patterns++
				}
			case "patternProperties":
				if m, ok := e.(map[string]any); ok {
					s.patterns += len(m)
				}
			}
			if err := s.measure(e, depth+1); err != nil {
				return err
			}
		}
	}
	return nil
}

func (s *shape) check() error {
	switch {
	case s.nodes > MaxNodes:
		return fmt.Errorf("%d objects and booleans (subschemas), over the limit of %d", s.nodes, MaxNodes)
	case s.refs > MaxRefs:
		return fmt.Errorf("%d references ($ref, $dynamicRef, $recursiveRef), over the limit of %d", s.refs, MaxRefs)
	case s.ids > MaxIDs:
		return fmt.Errorf("%d identifiers ($id, id, $anchor, $dynamicAnchor), over the limit of %d", s.ids, MaxIDs)
	case s.patterns > MaxPatterns:
		return fmt.Errorf("%d regular expressions (pattern, patternProperties), over the limit of %d", s.patterns, MaxPatterns)
	}
	return nil
}

// errNoLoad is why noLoader refuses.
var errNoLoad = errors.New("herald never loads schemas from URLs or files")

// noLoader is the compiler's only loader: it loads nothing, whatever the
// scheme (http, https, file, ...). The library serves the JSON Schema
// meta-schemas from copies embedded in it before it asks the loader.
type noLoader struct{}

func (noLoader) Load(string) (any, error) { return nil, errNoLoad }

// describe turns the library's errors into reasons a user can act on.
func describe(err error) error {
	var load *jsonschema.LoadURLError
	var ptr *jsonschema.JSONPointerNotFoundError
	var anchor *jsonschema.AnchorNotFoundError
	var msg string
	switch {
	case errors.As(err, &load):
		msg = fmt.Sprintf("reference to %q outside the schema: %v; put what it refers to under $defs", load.URL, errNoLoad)
	case errors.As(err, &ptr):
		msg = fmt.Sprintf("reference to %q does not resolve: no such location in the schema", ptr.URL)
	case errors.As(err, &anchor):
		msg = fmt.Sprintf("reference %q does not resolve: no such anchor", anchor.Reference)
	default:
		msg = err.Error()
	}
	return errors.New(trimURL(msg))
}

// trimURL shows locations in the document as "#/...".
func trimURL(s string) string { return strings.ReplaceAll(s, docURL, "") }

// inPlace calls f on each subschema s applies to the value s itself is
// applied to (not to a part of it).
func inPlace(s *jsonschema.Schema, f func(*jsonschema.Schema)) {
	one := func(c *jsonschema.Schema) {
		if c != nil {
			f(c)
		}
	}
	one(s.Ref)
	one(s.RecursiveRef)
	if s.DynamicRef != nil {
		one(s.DynamicRef.Ref)
	}
	one(s.Not)
	for _, c := range s.AllOf {
		one(c)
	}
	for _, c := range s.AnyOf {
		one(c)
	}
	for _, c := range s.OneOf {
		one(c)
	}
	one(s.If)
	one(s.Then)
	one(s.Else)
	for _, c := range s.DependentSchemas {
		one(c)
	}
	for _, d := range s.Dependencies {
		if c, ok := d.(*jsonschema.Schema); ok {
			one(c)
		}
	}
}

// descending calls f on each subschema s applies to a part of the value
// (a property, an item, a property name, decoded content).
func descending(s *jsonschema.Schema, f func(*jsonschema.Schema)) {
	one := func(c *jsonschema.Schema) {
		if c != nil {
			f(c)
		}
	}
	anyOne := func(v any) {
		switch v := v.(type) {
		case *jsonschema.Schema:
			one(v)
		case []*jsonschema.Schema:
			for _, c := range v {
				one(c)
			}
		}
	}
	one(s.PropertyNames)
	for _, c := range s.Properties {
		one(c)
	}
	for _, c := range s.PatternProperties {
		one(c)
	}
	anyOne(s.AdditionalProperties)
	one(s.UnevaluatedProperties)
	one(s.Contains)
	anyOne(s.Items)
	anyOne(s.AdditionalItems)
	for _, c := range s.PrefixItems {
		one(c)
	}
	one(s.Items2020)
	one(s.UnevaluatedItems)
	one(s.ContentSchema)
}

// checkGraph refuses in-place cycles and excessive fan-out in the compiled
// schema reachable from root.
func checkGraph(root *jsonschema.Schema) error {
	g := graph{state: map[*jsonschema.Schema]uint8{}, evals: map[*jsonschema.Schema]int{}}
	seen := map[*jsonschema.Schema]bool{root: true}
	work := []*jsonschema.Schema{root}
	for len(work) > 0 {
		s := work[len(work)-1]
		work = work[:len(work)-1]
		if _, err := g.visit(s); err != nil {
			return err
		}
		next := func(c *jsonschema.Schema) {
			if !seen[c] {
				seen[c] = true
				work = append(work, c)
			}
		}
		inPlace(s, next)
		descending(s, next)
	}
	return nil
}

// graph is a depth-first search along in-place edges.
type graph struct {
	state map[*jsonschema.Schema]uint8 // 1 on the path, 2 done
	evals map[*jsonschema.Schema]int   // subschemas one value meets from here, done nodes
	path  []*jsonschema.Schema
}

const (
	onPath = 1
	done   = 2
)

// visit returns how many subschemas validating one value against s
// evaluates, at most MaxEvaluations+1.
func (g *graph) visit(s *jsonschema.Schema) (int, error) {
	switch g.state[s] {
	case done:
		return g.evals[s], nil
	case onPath:
		i := len(g.path) - 1
		for g.path[i] != s {
			i--
		}
		locs := make([]string, 0, len(g.path)-i+1)
		for _, p := range g.path[i:] {
			locs = append(locs, trimURL(p.Location))
		}
		locs = append(locs, trimURL(s.Location))
		return 0, fmt.Errorf("reference cycle that never descends into the value, so no value can be validated: %s",
			strings.Join(locs, " → "))
	}
	g.state[s] = onPath
	g.path = append(g.path, s)
	n := 1
	var err error
	inPlace(s, func(c *jsonschema.Schema) {
		if err != nil {
			return
		}
		var k int
		k, err = g.visit(c)
		n = min(n+k, MaxEvaluations+1)
	})
	if err != nil {
		return 0, err
	}
	g.path = g.path[:len(g.path)-1]
	g.state[s] = done
	g.evals[s] = n
	if n > MaxEvaluations {
		return 0, fmt.Errorf("validating one value against %s evaluates more than %d subschemas (allOf, anyOf, oneOf, $ref ... multiply)",
			trimURL(s.Location), MaxEvaluations)
	}
	return n, nil
}

// Compile counts, for tests.
var (
	counting atomic.Bool
	counts   sync.Map // [sha256.Size]byte → *atomic.Int64
)

// CountCompiles makes the package count, from now on, how many times each
// schema reaches the JSON Schema compiler (see Compiles). For tests.
func CountCompiles() { counting.Store(true) }

// Compiles returns how many times raw reached the JSON Schema compiler since
// CountCompiles was first called. For tests.
func Compiles(raw []byte) int64 {
	if v, ok := counts.Load(sha256.Sum256(raw)); ok {
		return v.(*atomic.Int64).Load()
	}
	return 0
}

func countCompile(raw []byte) {
	if !counting.Load() {
		return
	}
	v, _ := counts.LoadOrStore(sha256.Sum256(raw), new(atomic.Int64))
	v.(*atomic.Int64).Add(1)
}
