package rule_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/heraldwf/herald/bus/rule"
)

// one wraps a single condition in an AND root.
func one(cond string) string {
	return `{"logic":"AND","conditions":[` + cond + `]}`
}

func TestCompileRefuses(t *testing.T) {
	t.Parallel()
	deepGroups := func(n int) string {
		s := `{"field":"a","op":"exists"}`
		for i := 0; i < n; i++ {
			s = `{"logic":"AND","conditions":[` + s + `]}`
		}
		return s
	}
	many := func(n int) string {
		c := make([]string, n)
		for i := range c {
			c[i] = `{"field":"a","op":"exists"}`
		}
		return `{"logic":"OR","conditions":[` + strings.Join(c, ",") + `]}`
	}
	tests := []struct {
		name string
		raw  string
		// want is one expected "path: message fragment" per problem, in order.
		want []string
	}{
		{"not JSON", `{"logic":`, []string{"$.logic: malformed JSON: unexpected end of input"}},
		{"bad token", `{"logic":"AND",}`, []string{"malformed JSON at byte"}},
		{"trailing data", `{"logic":"AND","conditions":[{"field":"a","op":"exists"}]} {}`, []string{"$: unexpected data after the rule"}},
		{"root not object", `[1]`, []string{"$: a group must be an object"}},
		{"root is a condition", `{"field":"a","op":"exists"}`, []string{"$.field: unknown key in a group", "$.op: unknown key in a group", `$: missing "logic"`, `$: missing "conditions"`}},
		{"unknown logic", `{"logic":"XOR","conditions":[{"field":"a","op":"exists"}]}`, []string{`$.logic: unknown logic "XOR"`}},
		{"lowercase logic", `{"logic":"and","conditions":[{"field":"a","op":"exists"}]}`, []string{`$.logic: unknown logic "and"`}},
		{"logic not string", `{"logic":1,"conditions":[{"field":"a","op":"exists"}]}`, []string{`$.logic: unknown logic a number`}},
		{"empty conditions", `{"logic":"AND","conditions":[]}`, []string{`$.conditions: "conditions" is empty`}},
		{"conditions not array", `{"logic":"AND","conditions":{}}`, []string{`$.conditions: "conditions" must be an array, not an object`}},
		{"empty nested group", one(`{"logic":"OR","conditions":[]}`), []string{`$.conditions[0].conditions: "conditions" is empty`}},
		{"unknown key in group", `{"logic":"AND","conditions":[{"field":"a","op":"exists"}],"extra":1}`, []string{`$.extra: unknown key in a group`}},
		{"duplicate key in group", `{"logic":"AND","logic":"OR","conditions":[{"field":"a","op":"exists"}]}`, []string{`$.logic: duplicate key`}},
		{"duplicate op", one(`{"field":"a","op":"eq","op":"exists","value":1}`), []string{`$.conditions[0].op: duplicate key`}},
		{"unknown key in condition", one(`{"field":"a","op":"eq","value":1,"sql":"1=1"}`), []string{`$.conditions[0].sql: unknown key in a condition`}},
		{"odd key quoted", one(`{"field":"a","op":"eq","value":1,"a.b\"":0}`), []string{`$.conditions[0]["a.b\""]: unknown key`}},
		{"unknown op", one(`{"field":"a","op":"regex","value":".*"}`), []string{`$.conditions[0].op: unknown op "regex"`}},
		{"op not string", one(`{"field":"a","op":["eq"],"value":1}`), []string{`$.conditions[0].op: "op" must be a string, not an array`}},
		{"missing op", one(`{"field":"a","value":1}`), []string{`$.conditions[0]: missing "op"`}},
		{"missing field", one(`{"op":"eq","value":1}`), []string{`$.conditions[0]: missing "field"`}},
		{"field not string", one(`{"field":7,"op":"eq","value":1}`), []string{`$.conditions[0].field: "field" must be a string, not a number`}},
		{"condition not object", one(`"data.role == admin"`), []string{`$.conditions[0]: a condition must be an object`}},
		{"empty field", one(`{"field":"","op":"exists"}`), []string{`$.conditions[0].field: malformed field path "": empty`}},
		{"leading dot", one(`{"field":".a","op":"exists"}`), []string{`malformed field path ".a": empty segment`}},
		{"trailing dot", one(`{"field":"a.","op":"exists"}`), []string{`empty segment`}},
		{"double dot", one(`{"field":"a..b","op":"exists"}`), []string{`empty segment`}},
		{"injection in field", one(`{"field":"data.role'; DROP TABLE subs; --","op":"exists"}`), []string{`segment 2 has '\''`}},
		{"bracket index", one(`{"field":"data.items[0]","op":"exists"}`), []string{`segment 2 has '['`}},
		{"space in field", one(`{"field":"data.first name","op":"exists"}`), []string{`segment 2 has ' '`}},
		{"too many segments", one(`{"field":"` + strings.Repeat("a.", rule.MaxPathSegments) + `a","op":"exists"}`), []string{`segments, more than the 32 allowed`}},
		{"long segment", one(`{"field":"` + strings.Repeat("a", rule.MaxSegmentLen+1) + `","op":"exists"}`), []string{`segment 1 is longer than 64 bytes`}},
		{"eq without value", one(`{"field":"a","op":"eq"}`), []string{`$.conditions[0]: op eq needs a "value"`}},
		{"eq array", one(`{"field":"a","op":"eq","value":[1]}`), []string{`$.conditions[0].value: op eq needs a string, number, boolean or null, not an array`}},
		{"ne object", one(`{"field":"a","op":"ne","value":{}}`), []string{`op ne needs a string, number, boolean or null, not an object`}},
		{"gt bool", one(`{"field":"a","op":"gt","value":true}`), []string{`$.conditions[0].value: op gt needs a number, not a boolean`}},
		{"gte null", one(`{"field":"a","op":"gte","value":null}`), []string{`op gte needs a number, not null`}},
		{"lt array", one(`{"field":"a","op":"lt","value":[1]}`), []string{`op lt needs a number, not an array`}},
		{"lte object", one(`{"field":"a","op":"lte","value":{}}`), []string{`op lte needs a number, not an object`}},
		{"gt string", one(`{"field":"a","op":"gt","value":"abc"}`), []string{`$.conditions[0].value: op gt needs a number, not "abc" (gt gte lt lte order numbers only)`}},
		{"lte numeric string", one(`{"field":"a","op":"lte","value":"10"}`), []string{`op lte needs a number, not "10"`}},
		{"in scalar", one(`{"field":"a","op":"in","value":"admin"}`), []string{`op in needs an array of values, not a string`}},
		{"nin empty", one(`{"field":"a","op":"nin","value":[]}`), []string{`op nin needs at least one value`}},
		{"in nested", one(`{"field":"a","op":"in","value":[1,[2],{"x":3}]}`), []string{`$.conditions[0].value[1]: op in needs strings`, `$.conditions[0].value[2]: op in needs strings`}},
		{"contains array", one(`{"field":"a","op":"contains","value":["x"]}`), []string{`op contains needs a string, number, boolean or null, not an array`}},
		{"prefix number", one(`{"field":"a","op":"prefix","value":1}`), []string{`op prefix needs a string, not a number`}},
		{"suffix null", one(`{"field":"a","op":"suffix","value":null}`), []string{`op suffix needs a string, not null`}},
		{"exists with value", one(`{"field":"a","op":"exists","value":true}`), []string{`$.conditions[0].value: op exists takes no value`}},
		{"number out of range", one(`{"field":"a","op":"gt","value":1e400}`), []string{`$.conditions[0].value: number 1e400 is out of range`}},
		{"number out of range in list", one(`{"field":"a","op":"in","value":[1,-1e999]}`), []string{`$.conditions[0].value[1]: number -1e999 is out of range`}},
		{"groups too deep", deepGroups(rule.MaxDepth + 1), []string{"groups nest deeper than 16"}},
		{"JSON too deep", strings.Repeat("[", 10000), []string{"JSON nests deeper than 40 levels"}},
		{"JSON too deep in value", one(`{"field":"a","op":"in","value":` + strings.Repeat("[", 100) + `}`), []string{"JSON nests deeper than 40 levels"}},
		{"too many conditions", many(rule.MaxConditions + 1), []string{"$: rule has 257 conditions, more than the 256 allowed"}},
		{"too big", `{"logic":"AND","conditions":[{"field":"a","op":"eq","value":"` + strings.Repeat("x", rule.MaxSize) + `"}]}`, []string{"$: rule is 65601 bytes, more than the 65536 allowed"}},
		{"many problems at once", `{"logic":"NAND","conditions":[{"field":"a..b","op":"gt","value":false},{"field":"x","op":"like","value":"%"},{"logic":"OR","conditions":[]}],"x":1}`,
			[]string{`$.x: unknown key`, `$.logic: unknown logic "NAND"`, `$.conditions[0].field: malformed field path`, `$.conditions[0].value: op gt needs`, `$.conditions[1].op: unknown op "like"`, `$.conditions[2].conditions: "conditions" is empty`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			r, err := rule.Compile(json.RawMessage(tt.raw))
			if err == nil {
				t.Fatalf("Compile accepted %s as %v", clipped(tt.raw), r)
			}
			if r != nil {
				t.Errorf("Compile returned a rule with its error")
			}
			if !errors.Is(err, rule.ErrInvalid) {
				t.Fatalf("error %v does not match ErrInvalid", err)
			}
			var ie *rule.InvalidError
			if !errors.As(err, &ie) {
				t.Fatalf("error %T is not *InvalidError", err)
			}
			if len(ie.Problems) != len(tt.want) {
				t.Fatalf("got %d problems, want %d:\n%s", len(ie.Problems), len(tt.want), list(ie))
			}
			for i, w := range tt.want {
				got := ie.Problems[i].Path + ": " + ie.Problems[i].Message
				if !strings.Contains(got, w) {
					t.Errorf("problem %d = %q, want it to contain %q", i, got, w)
				}
			}
		})
	}
}

func TestCompileProblemsCapped(t *testing.T) {
	t.Parallel()
	c := make([]string, 100)
	for i := range c {
		c[i] = `{"field":"a","op":"nope"}`
	}
	_, err := rule.Compile(json.RawMessage(`{"logic":"AND","conditions":[` + strings.Join(c, ",") + `]}`))
	var ie *rule.InvalidError
	if !errors.As(err, &ie) {
		t.Fatalf("err = %v", err)
	}
	if len(ie.Problems) != rule.MaxProblems {
		t.Fatalf("got %d problems, want %d", len(ie.Problems), rule.MaxProblems)
	}
	if last := ie.Problems[rule.MaxProblems-1]; last.Message != "51 more problems not listed" {
		t.Errorf("last problem = %+v", last)
	}
}

func TestCompileAccepts(t *testing.T) {
	t.Parallel()
	deep := `{"field":"a","op":"exists"}`
	for i := 0; i < rule.MaxDepth; i++ {
		deep = `{"logic":"AND","conditions":[` + deep + `]}`
	}
	c := make([]string, rule.MaxConditions)
	for i := range c {
		c[i] = `{"field":"a","op":"exists"}`
	}
	for name, raw := range map[string]string{
		"every op": `{"logic":"AND","conditions":[
			{"field":"a","op":"eq","value":"s"},{"field":"a","op":"eq","value":1.5},{"field":"a","op":"eq","value":true},{"field":"a","op":"eq","value":null},
			{"field":"a","op":"ne","value":"s"},{"field":"a","op":"gt","value":1},{"field":"a","op":"gte","value":0},
			{"field":"a","op":"lt","value":-2e3},{"field":"a","op":"lte","value":1e9},{"field":"a","op":"in","value":["x",1,true,null]},
			{"field":"a","op":"nin","value":[1]},{"field":"a","op":"contains","value":"x"},{"field":"a","op":"contains","value":3},
			{"field":"a","op":"prefix","value":""},{"field":"a","op":"suffix","value":"z"},{"field":"a","op":"exists"}]}`,
		"max depth":         deep,
		"max conditions":    `{"logic":"OR","conditions":[` + strings.Join(c, ",") + `]}`,
		"path characters":   one(`{"field":"data.user_id.Item-2.0","op":"exists"}`),
		"keys in any order": `{"conditions":[{"value":1,"op":"eq","field":"a"}],"logic":"AND"}`,
	} {
		if _, err := rule.Compile(json.RawMessage(raw)); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
}

func TestCompileNoFilter(t *testing.T) {
	t.Parallel()
	for _, raw := range []string{"", " ", "null", " null\n"} {
		r, err := rule.Compile(json.RawMessage(raw))
		if err != nil || r != nil {
			t.Fatalf("Compile(%q) = %v, %v; want nil, nil", raw, r, err)
		}
		if ok, m := r.Eval(map[string]any{}); !ok || m != nil {
			t.Fatalf("nil rule: Eval = %v, %v", ok, m)
		}
	}
}

func TestRuleMarshalJSON(t *testing.T) {
	t.Parallel()
	r := rule.MustCompile("{ \"logic\": \"AND\",\n \"conditions\": [ {\"field\": \"a\", \"op\": \"exists\"} ] }")
	b, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	if want := `{"logic":"AND","conditions":[{"field":"a","op":"exists"}]}`; string(b) != want {
		t.Fatalf("MarshalJSON = %s, want %s", b, want)
	}
	if r2, err := rule.Compile(b); err != nil || r2.String() != string(b) {
		t.Fatalf("round trip: %v %v", r2, err)
	}
	if r.Conditions() != 1 {
		t.Errorf("Conditions = %d", r.Conditions())
	}
}

func list(ie *rule.InvalidError) string {
	var b strings.Builder
	for _, p := range ie.Problems {
		fmt.Fprintf(&b, "  %s: %s\n", p.Path, p.Message)
	}
	return b.String()
}

func clipped(s string) string {
	if len(s) > 120 {
		return s[:120] + "…"
	}
	return s
}

// TestOrderingNeedsNumber: an ordering op given anything but a number is
// refused with a typed problem (Code, ErrNotNumeric), every such problem
// listed, not compared bytewise at evaluation.
func TestOrderingNeedsNumber(t *testing.T) {
	t.Parallel()
	_, err := rule.Compile(json.RawMessage(`{"logic":"AND","conditions":[
		{"field":"a","op":"gt","value":"abc"},{"field":"b","op":"gte","value":"10"},
		{"field":"c","op":"lt","value":true},{"field":"d","op":"lte","value":5},{"field":"e","op":"eq","value":"x"}]}`))
	var ie *rule.InvalidError
	if !errors.As(err, &ie) || !errors.Is(err, rule.ErrInvalid) || !errors.Is(err, rule.ErrNotNumeric) {
		t.Fatalf("Compile = %v, want an *InvalidError matching ErrInvalid and ErrNotNumeric", err)
	}
	want := []rule.Problem{
		{Path: "$.conditions[0].value", Code: rule.CodeNotNumeric, Message: `op gt needs a number, not "abc" (gt gte lt lte order numbers only)`},
		{Path: "$.conditions[1].value", Code: rule.CodeNotNumeric, Message: `op gte needs a number, not "10" (gt gte lt lte order numbers only)`},
		{Path: "$.conditions[2].value", Code: rule.CodeNotNumeric, Message: `op lt needs a number, not a boolean (gt gte lt lte order numbers only)`},
	}
	if len(ie.Problems) != len(want) {
		t.Fatalf("problems = %+v, want %+v", ie.Problems, want)
	}
	for i := range want {
		if ie.Problems[i] != want[i] {
			t.Errorf("problem %d = %+v, want %+v", i, ie.Problems[i], want[i])
		}
	}
	// Other refusals carry no code and do not match ErrNotNumeric.
	_, err = rule.Compile(json.RawMessage(one(`{"field":"a","op":"prefix","value":1}`)))
	if !errors.Is(err, rule.ErrInvalid) || errors.Is(err, rule.ErrNotNumeric) {
		t.Errorf("prefix 1: %v", err)
	}
}

// TestAbsentFieldOnlyExists: on a field the event does not have, every op
// but exists is false, ne and nin included (peers' users filed "ne
// matches a missing field" as a bug: knative #7488, moto #5134).
func TestAbsentFieldOnlyExists(t *testing.T) {
	t.Parallel()
	values := map[string]string{"eq": `"x"`, "ne": `"x"`, "gt": `1`, "gte": `1`, "lt": `1`, "lte": `1`,
		"in": `["x"]`, "nin": `["x"]`, "contains": `"x"`, "prefix": `"x"`, "suffix": `"x"`}
	doc := map[string]any{"data": map[string]any{"present": "y"}}
	for op, v := range values {
		r := rule.MustCompile(one(`{"field":"data.missing","op":"` + op + `","value":` + v + `}`))
		ok, m := r.Eval(doc)
		if ok || m == nil || m.Reason != rule.ReasonAbsent {
			t.Errorf("%s on an absent field: Eval = %v, %v; want false, absent", op, ok, m)
		}
	}
	if !rule.MustCompile(one(`{"field":"data.present","op":"exists"}`)).Match(doc) ||
		rule.MustCompile(one(`{"field":"data.missing","op":"exists"}`)).Match(doc) {
		t.Error("exists does not follow presence")
	}
}
