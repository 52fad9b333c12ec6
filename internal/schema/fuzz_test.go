package schema

import (
	"strings"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// FuzzCompile: Compile never panics, gives the same verdict twice, and a
// schema it accepts validates values without panicking. (The end-to-end
// target is the root package's FuzzPutEventDefinitionSchema; this one runs
// thousands of inputs a second.)
func FuzzCompile(f *testing.F) {
	for _, s := range []string{
		`{}`, `true`, `{"$ref":"#"}`, `{"properties":{"a":{"$ref":"#"}}}`,
		`{"$defs":{"a":{"$ref":"#/$defs/b"},"b":{"$ref":"#/$defs/a"}},"$ref":"#/$defs/a"}`,
		`{"$dynamicAnchor":"n","items":{"$dynamicRef":"#n"}}`,
		`{"$schema":"http://json-schema.org/draft-04/schema#","id":"#a","properties":{"x":{"$ref":"#a"}}}`,
		`{"$schema":"https://json-schema.org/draft/2019-09/schema","$recursiveAnchor":true,"items":{"$recursiveRef":"#"}}`,
		`{"dependencies":{"a":{"$ref":"#"}},"dependentSchemas":{"b":{"not":{"$ref":"#"}}}}`,
		`{"if":{"$ref":"#/$defs/x"},"then":{"$ref":"#/$defs/x"},"$defs":{"x":{"type":"string"}}}`,
		`{"patternProperties":{"^a+$":{"pattern":"[\\p{L}]{10}"}},"contentMediaType":"application/json","contentSchema":{"$ref":"#"}}`,
		`{"$ref":"#/properties/a","properties":{"a":{"$ref":"#/properties/b"},"b":{"type":"integer"}}}`,
	} {
		f.Add([]byte(s))
	}
	values := []string{`null`, `0`, `1.5`, `"a"`, `"aaaaaaaaaaaa"`, `[]`, `[1,"a",[null]]`, `{}`, `{"a":{"a":{"b":[1]}},"b":"x"}`}
	f.Fuzz(func(t *testing.T, raw []byte) {
		sch, err := Compile(raw)
		if _, err2 := Compile(raw); (err == nil) != (err2 == nil) {
			t.Fatalf("verdicts differ: %v, then %v", err, err2)
		}
		if err != nil {
			if sch != nil {
				t.Fatal("a schema and an error")
			}
			return
		}
		for _, v := range values {
			inst, err := jsonschema.UnmarshalJSON(strings.NewReader(v))
			if err != nil {
				t.Fatal(err)
			}
			_ = sch.Validate(inst)
		}
	})
}
