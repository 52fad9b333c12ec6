package rule_test

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/heraldwf/herald/bus/rule"
)

// FuzzCompileEval: Compile never panics and either returns a rule or an
// *InvalidError; a rule that compiles evaluates on any document (decoded
// either way) without panicking, its answer and Miss agree, and its
// compacted form compiles to a rule that answers the same.
func FuzzCompileEval(f *testing.F) {
	seeds := [][2]string{
		{one(`{"field":"data.role","op":"eq","value":"admin"}`), evalDoc},
		{`{"logic":"OR","conditions":[{"field":"data.age","op":"gt","value":1.5},{"logic":"AND","conditions":[{"field":"data.tags","op":"contains","value":"a"},{"field":"data.x","op":"exists"}]}]}`, evalDoc},
		{one(`{"field":"data.items.0.sku","op":"in","value":["x1","x2",3,null,true]}`), evalDoc},
		{one(`{"field":"n","op":"lte","value":9007199254740993}`), `{"n":9007199254740992.5}`},
		{one(`{"field":"a","op":"nin","value":["a","b","c","d","e","f","g","h"]}`), `{"a":"h"}`},
		{one(`{"field":"a","op":"prefix","value":"x"}`), `[1,2]`},
		{one(`{"field":"0.1","op":"suffix","value":""}`), `[[0,"s"]]`},
		{`{"logic":"AND","conditions":[{"field":"a","op":"exists","value":1}],"logic":"OR"}`, `null`},
		{strings.Repeat(`{"logic":"AND","conditions":[`, 20), `{}`},
		{`null`, `"x"`},
	}
	for _, s := range seeds {
		f.Add([]byte(s[0]), []byte(s[1]))
	}
	f.Fuzz(func(t *testing.T, raw, docRaw []byte) {
		r, err := rule.Compile(raw)
		if err != nil {
			var ie *rule.InvalidError
			if r != nil || !errors.As(err, &ie) || !errors.Is(err, rule.ErrInvalid) || len(ie.Problems) == 0 || len(ie.Problems) > rule.MaxProblems {
				t.Fatalf("Compile = %v, %#v", r, err)
			}
			return
		}
		again, err := rule.Compile(json.RawMessage(r.String()))
		if err != nil {
			t.Fatalf("compacted rule %s does not compile: %v", r, err)
		}
		var docs []any
		var plain any
		if json.Unmarshal(docRaw, &plain) == nil {
			docs = append(docs, plain)
		}
		d := json.NewDecoder(strings.NewReader(string(docRaw)))
		d.UseNumber()
		var num any
		if d.Decode(&num) == nil {
			docs = append(docs, num)
		}
		docs = append(docs, nil, map[string]any{}, []any{})
		for _, doc := range docs {
			ok, m := r.Eval(doc)
			if ok != (m == nil) {
				t.Fatalf("Eval = %v with Miss %v", ok, m)
			}
			if m != nil && (!strings.HasPrefix(m.Path, "$") || m.Reason == "") {
				t.Fatalf("Miss %+v", m)
			}
			if ok2, m2 := again.Eval(doc); ok2 != ok || m2.String() != m.String() {
				t.Fatalf("recompiled rule answers %v %v, rule %v %v", ok2, m2, ok, m)
			}
		}
	})
}

// TestFilterInjection: rules are data, never code or SQL. Text that would
// be an injection elsewhere is either refused (where the grammar has no
// room for it) or compared literally as a string.
func TestFilterInjection(t *testing.T) {
	t.Parallel()
	refused := []string{
		one(`{"field":"data.role' OR '1'='1","op":"eq","value":"x"}`),
		one(`{"field":"data.__proto__.polluted","op":"exists","sql":"DROP TABLE bus_events"}`),
		one(`{"field":"data.role","op":"$where","value":"function(){return true}"}`),
		one(`{"field":"data.role","op":"eq","value":"x","op":"exists"}`),
		one(`{"field":"data.role","op":"eq","value":{"$ne":null}}`),
		one(`{"field":"data.role","op":"in","value":[{"$gt":""}]}`),
		`{"logic":"AND) OR (1=1","conditions":[{"field":"a","op":"exists"}]}`,
		one(`{"field":"data.role\u0000","op":"exists"}`),
		one(`{"field":"data.${process.env}","op":"exists"}`),
	}
	for _, raw := range refused {
		if _, err := rule.Compile(json.RawMessage(raw)); !errors.Is(err, rule.ErrInvalid) {
			t.Errorf("accepted %s (err %v)", raw, err)
		}
	}
	// Accepted injection-looking values are plain strings: they match only
	// the same bytes.
	r := rule.MustCompile(one(`{"field":"data.role","op":"eq","value":"admin' OR '1'='1"}`))
	if r.Match(map[string]any{"data": map[string]any{"role": "admin"}}) {
		t.Error("a quoted value matched a different string")
	}
	if !r.Match(map[string]any{"data": map[string]any{"role": "admin' OR '1'='1"}}) {
		t.Error("the literal string did not match itself")
	}
	// __proto__ and constructor are ordinary keys.
	p := rule.MustCompile(one(`{"field":"data.__proto__.x","op":"eq","value":1}`))
	if p.Match(map[string]any{"data": map[string]any{}}) {
		t.Error("__proto__ resolved without being in the document")
	}
	if !p.Match(map[string]any{"data": map[string]any{"__proto__": map[string]any{"x": 1.0}}}) {
		t.Error("__proto__ as a plain key did not resolve")
	}
}
