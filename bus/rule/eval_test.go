package rule_test

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/heraldwf/herald/bus/rule"
)

const evalDoc = `{"id":"ev-1","type":"user.created","data":{
	"role":"admin","age":42,"score":9.5,"neg":-3,"active":true,"nothing":null,
	"tags":["a","b",3,null,true],"user":{"name":"Ann"},"items":[{"sku":"x1"},{"sku":"x2"}],
	"zero":{"0":"key zero"},"name":"alice","empty":"","obj":{},"arr":[]}}`

// decodeFloat and decodeNumber return the document as encoding/json
// decodes it with float64 numbers and with json.Number: the rules must
// give the same answers for both.
func decodeFloat(t testing.TB, s string) map[string]any {
	t.Helper()
	var f map[string]any
	if err := json.Unmarshal([]byte(s), &f); err != nil {
		t.Fatal(err)
	}
	return f
}

func decodeNumber(t testing.TB, s string) map[string]any {
	t.Helper()
	var n map[string]any
	d := json.NewDecoder(strings.NewReader(s))
	d.UseNumber()
	if err := d.Decode(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

func TestEvalOps(t *testing.T) {
	t.Parallel()
	const (
		pass   = rule.Reason("")
		absent = rule.ReasonAbsent
		typ    = rule.ReasonType
		val    = rule.ReasonValue
	)
	tests := []struct {
		field, op, value string // value "" means no value key
		want             rule.Reason
	}{
		// eq / ne over every type
		{"data.role", "eq", `"admin"`, pass},
		{"data.role", "eq", `"Admin"`, val},
		{"data.role", "eq", `1`, typ},
		{"data.age", "eq", `42`, pass},
		{"data.age", "eq", `42.0`, pass},
		{"data.age", "eq", `4.2e1`, pass},
		{"data.age", "eq", `"42"`, typ},
		{"data.score", "eq", `9.5`, pass},
		{"data.active", "eq", `true`, pass},
		{"data.active", "eq", `false`, val},
		{"data.active", "eq", `"true"`, typ},
		{"data.nothing", "eq", `null`, pass},
		{"data.role", "eq", `null`, typ},
		{"data.missing", "eq", `null`, absent},
		{"data.user", "eq", `"Ann"`, typ},
		{"data.tags", "eq", `"a"`, typ},
		{"data.role", "ne", `"user"`, pass},
		{"data.role", "ne", `"admin"`, val},
		{"data.role", "ne", `5`, pass},
		{"data.missing", "ne", `"admin"`, absent}, // every op but exists is false on an absent field
		{"data.missing", "ne", `null`, absent},
		{"data.nothing", "ne", `null`, val},
		// ordering: numbers numerically, strings bytewise, nothing else
		{"data.age", "gt", `41`, pass},
		{"data.age", "gt", `42`, val},
		{"data.age", "gt", `41.999`, pass},
		{"data.age", "gte", `42`, pass},
		{"data.age", "gte", `42.5`, val},
		{"data.age", "lt", `100`, pass},
		{"data.age", "lt", `42`, val},
		{"data.age", "lte", `42.0`, pass},
		{"data.neg", "lt", `0`, pass},
		{"data.neg", "gt", `-3.5`, pass},
		{"data.score", "gt", `9`, pass},
		{"data.score", "lt", `10`, pass},
		{"data.name", "gt", `1`, typ},
		{"data.active", "gt", `0`, typ},
		{"data.nothing", "lt", `1`, typ},
		{"data.user", "gte", `1`, typ},
		{"data.missing", "gt", `1`, absent},
		// in / nin
		{"data.role", "in", `["user","admin"]`, pass},
		{"data.role", "in", `["user","root"]`, val},
		{"data.role", "in", `["a","b","c","d","e","f","g","admin"]`, pass}, // the set path
		{"data.role", "in", `["a","b","c","d","e","f","g","h"]`, val},
		{"data.age", "in", `["a","b","c","d","e","f","g","42"]`, val},
		{"data.age", "in", `[1, 42.0, "x"]`, pass},
		{"data.nothing", "in", `[null]`, pass},
		{"data.active", "in", `[false]`, val},
		{"data.missing", "in", `[null]`, absent},
		{"data.role", "nin", `["user"]`, pass},
		{"data.role", "nin", `["admin"]`, val},
		{"data.missing", "nin", `["admin"]`, absent},
		{"data.user", "nin", `["x"]`, pass},
		// contains: substring of a string, element of an array
		{"data.role", "contains", `"dmi"`, pass},
		{"data.role", "contains", `"xyz"`, val},
		{"data.role", "contains", `1`, typ},
		{"data.tags", "contains", `"b"`, pass},
		{"data.tags", "contains", `3`, pass},
		{"data.tags", "contains", `3.0`, pass},
		{"data.tags", "contains", `null`, pass},
		{"data.tags", "contains", `true`, pass},
		{"data.tags", "contains", `"z"`, val},
		{"data.arr", "contains", `"z"`, val},
		{"data.age", "contains", `4`, typ},
		{"data.user", "contains", `"Ann"`, typ},
		{"data.missing", "contains", `"a"`, absent},
		// prefix / suffix
		{"data.name", "prefix", `"ali"`, pass},
		{"data.name", "prefix", `"ice"`, val},
		{"data.name", "suffix", `"ice"`, pass},
		{"data.name", "suffix", `"ali"`, val},
		{"data.name", "prefix", `""`, pass},
		{"data.empty", "suffix", `"x"`, val},
		{"data.age", "prefix", `"4"`, typ},
		{"data.tags", "suffix", `"a"`, typ},
		{"data.missing", "prefix", `"a"`, absent},
		// exists, including a present null and empty containers
		{"data.role", "exists", "", pass},
		{"data.nothing", "exists", "", pass},
		{"data.obj", "exists", "", pass},
		{"data.missing", "exists", "", absent},
		{"data.role.deeper", "exists", "", absent},
		// paths: top-level fields, arrays by index, object keys that look like indexes
		{"type", "eq", `"user.created"`, pass},
		{"id", "prefix", `"ev-"`, pass},
		{"data.items.1.sku", "eq", `"x2"`, pass},
		{"data.items.2.sku", "exists", "", absent},
		{"data.items.01.sku", "exists", "", absent},
		{"data.items.x.sku", "exists", "", absent},
		{"data.tags.0", "eq", `"a"`, pass},
		{"data.zero.0", "eq", `"key zero"`, pass},
		{"data.user.name", "eq", `"Ann"`, pass},
		{"data.name.0", "exists", "", absent}, // strings are not indexed
	}
	for _, tt := range tests {
		cond := `{"field":"` + tt.field + `","op":"` + tt.op + `"`
		if tt.value != "" {
			cond += `,"value":` + tt.value
		}
		cond += "}"
		r, err := rule.Compile(json.RawMessage(one(cond)))
		if err != nil {
			t.Fatalf("%s: %v", cond, err)
		}
		for _, doc := range []map[string]any{decodeFloat(t, evalDoc), decodeNumber(t, evalDoc)} {
			ok, m := r.Eval(doc)
			if ok != (tt.want == pass) || (m == nil) != ok {
				t.Errorf("%s: Eval = %v, %v; want pass=%v", cond, ok, m, tt.want == pass)
				continue
			}
			if m == nil {
				continue
			}
			want := rule.Miss{Path: "$.conditions[0]", Field: tt.field, Op: tt.op, Reason: tt.want}
			if *m != want {
				t.Errorf("%s: Miss = %+v, want %+v", cond, *m, want)
			}
		}
	}
}

func TestEvalGroups(t *testing.T) {
	t.Parallel()
	doc := decodeFloat(t, evalDoc)
	tests := []struct {
		name, rule string
		miss       string // "" when the rule passes
	}{
		{"AND all pass", `{"logic":"AND","conditions":[{"field":"data.role","op":"eq","value":"admin"},{"field":"data.age","op":"gte","value":18}]}`, ""},
		{"AND names the first failing", `{"logic":"AND","conditions":[{"field":"data.role","op":"eq","value":"admin"},{"field":"data.age","op":"gt","value":50},{"field":"data.x","op":"exists"}]}`,
			"$.conditions[1] (data.age gt): value"},
		{"OR one passes", `{"logic":"OR","conditions":[{"field":"data.role","op":"eq","value":"user"},{"field":"data.age","op":"gt","value":18}]}`, ""},
		{"OR summary", `{"logic":"OR","conditions":[{"field":"data.role","op":"eq","value":"user"},{"field":"data.age","op":"gt","value":50}]}`,
			"$ (OR): none"},
		{"nested OR in AND", `{"logic":"AND","conditions":[{"field":"type","op":"prefix","value":"user."},
			{"logic":"OR","conditions":[{"field":"data.role","op":"eq","value":"root"},{"field":"data.tags","op":"contains","value":"z"}]}]}`,
			"$.conditions[1] (OR): none"},
		{"nested AND in OR", `{"logic":"OR","conditions":[{"field":"data.x","op":"exists"},
			{"logic":"AND","conditions":[{"field":"data.role","op":"eq","value":"admin"},{"field":"data.active","op":"eq","value":true}]}]}`, ""},
		{"nested AND miss inside AND", `{"logic":"AND","conditions":[
			{"logic":"AND","conditions":[{"field":"data.role","op":"eq","value":"admin"},{"field":"data.nope","op":"eq","value":1}]}]}`,
			"$.conditions[0].conditions[1] (data.nope eq): absent"},
	}
	for _, tt := range tests {
		r := rule.MustCompile(tt.rule)
		ok, m := r.Eval(doc)
		if tt.miss == "" {
			if !ok || m != nil {
				t.Errorf("%s: Eval = %v, %v; want a pass", tt.name, ok, m)
			}
			continue
		}
		if ok || m.String() != tt.miss {
			t.Errorf("%s: Eval = %v, %q; want a miss %q", tt.name, ok, m.String(), tt.miss)
		}
		if r.Match(doc) {
			t.Errorf("%s: Match disagrees with Eval", tt.name)
		}
	}
}

// TestEvalNumbersExact: integers past 2^53 are told apart (with
// json.Number, which keeps them), and an integer meets a float without
// rounding.
func TestEvalNumbersExact(t *testing.T) {
	t.Parallel()
	doc := decodeNumber(t, `{"n":9007199254740993,"m":-9223372036854775808,"u":18446744073709551615,"f":1e300}`)
	tests := []struct {
		cond string
		want bool
	}{
		{`{"field":"n","op":"eq","value":9007199254740993}`, true},
		{`{"field":"n","op":"eq","value":9007199254740992}`, false},
		{`{"field":"n","op":"gt","value":9007199254740992}`, true},
		{`{"field":"n","op":"gt","value":9007199254740992.0}`, true}, // int against float, exact
		{`{"field":"n","op":"lt","value":9007199254740994.0}`, true},
		{`{"field":"m","op":"lt","value":-9223372036854775807}`, true},
		{`{"field":"m","op":"eq","value":-9.223372036854775808e18}`, true},
		{`{"field":"u","op":"gt","value":9223372036854775807}`, true}, // past int64: a float
		{`{"field":"f","op":"gt","value":9223372036854775807}`, true},
		{`{"field":"m","op":"gt","value":-1e300}`, true},
		{`{"field":"n","op":"gte","value":0.5}`, true},
	}
	for _, tt := range tests {
		r := rule.MustCompile(one(tt.cond))
		if got := r.Match(doc); got != tt.want {
			t.Errorf("%s: %v, want %v", tt.cond, got, tt.want)
		}
	}
}

// TestEvalGoValues: documents built in Go rather than decoded.
func TestEvalGoValues(t *testing.T) {
	t.Parallel()
	gt := rule.MustCompile(one(`{"field":"v","op":"gt","value":1}`))
	for _, v := range []any{2, int8(2), int16(2), int32(2), int64(2), uint(2), uint8(2), uint16(2), uint32(2), uint64(2), float32(1.5), 1.5, json.Number("2")} {
		if !gt.Match(map[string]any{"v": v}) {
			t.Errorf("%T %v gt 1 = false", v, v)
		}
	}
	nan := []any{json.Number("NaN"), json.Number("bogus")}
	for _, v := range nan {
		ok, m := gt.Eval(map[string]any{"v": v})
		if ok || m.Reason != rule.ReasonType {
			t.Errorf("%#v: Eval = %v, %v; want a type miss", v, ok, m)
		}
	}
	// Types encoding/json never produces are opaque, not walked by reflection.
	ex := rule.MustCompile(one(`{"field":"v.k","op":"exists"}`))
	for _, doc := range []any{nil, "str", 5, map[string]any{"v": map[string]string{"k": "x"}}, map[string]any{"v": struct{ K string }{"x"}}, []any{1}} {
		if ex.Match(doc) {
			t.Errorf("%#v: v.k exists", doc)
		}
	}
}

// TestEvalDoesNotModify: evaluating never writes to the document.
func TestEvalDoesNotModify(t *testing.T) {
	t.Parallel()
	doc := decodeFloat(t, evalDoc)
	before, _ := json.Marshal(doc)
	r := rule.MustCompile(`{"logic":"OR","conditions":[{"field":"data.items.0.sku","op":"eq","value":"nope"},{"field":"data.new","op":"ne","value":1}]}`)
	r.Eval(doc)
	after, _ := json.Marshal(doc)
	if !bytes.Equal(before, after) {
		t.Fatalf("document changed:\n%s\n%s", before, after)
	}
}

func TestEvalAllocs(t *testing.T) {
	doc := decodeNumber(t, evalDoc)
	r := rule.MustCompile(`{"logic":"AND","conditions":[{"field":"data.role","op":"in","value":["admin","root"]},
		{"field":"data.age","op":"gte","value":18},{"logic":"OR","conditions":[{"field":"data.x","op":"exists"},{"field":"data.tags","op":"contains","value":"b"}]}]}`)
	if n := testing.AllocsPerRun(100, func() { r.Eval(doc) }); n != 0 {
		t.Errorf("a passing Eval allocates %v times", n)
	}
}
