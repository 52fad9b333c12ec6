package rule_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/heraldwf/herald/bus/rule"
)

// benchRule is a subscription filter of the shape the seed describes:
// a type check, a role set, a range and a nested OR.
const benchRule = `{"logic":"AND","conditions":[
	{"field":"type","op":"prefix","value":"user."},
	{"field":"data.role","op":"in","value":["admin","owner","billing","support","ops","sre","audit","root"]},
	{"field":"data.age","op":"gte","value":18},
	{"logic":"OR","conditions":[
		{"field":"data.user.name","op":"suffix","value":"nn"},
		{"field":"data.tags","op":"contains","value":"b"}]}]}`

func BenchmarkEval(b *testing.B) {
	r := rule.MustCompile(benchRule)
	for _, c := range []struct {
		name string
		doc  map[string]any
	}{
		{"match/float64", decodeFloat(b, evalDoc)},
		{"match/json.Number", decodeNumber(b, evalDoc)},
		{"miss", decodeFloat(b, strings.Replace(evalDoc, `"age":42`, `"age":12`, 1))},
	} {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				r.Eval(c.doc)
			}
		})
	}
}

func BenchmarkCompile(b *testing.B) {
	raw := json.RawMessage(benchRule)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := rule.Compile(raw); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkCompileDeepJSON: a 10,000-deep document is refused after a few
// dozen bytes, not by walking it.
func BenchmarkCompileDeepJSON(b *testing.B) {
	raw := json.RawMessage(strings.Repeat(`{"a":`, 10000))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := rule.Compile(raw); err == nil {
			b.Fatal("accepted")
		}
	}
}
