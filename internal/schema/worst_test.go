package schema

import (
	"fmt"
	"strings"
	"testing"
)

// items writes n items made by item, separated by commas.
func items(n int, item func(i int) string) string {
	parts := make([]string, n)
	for i := range parts {
		parts[i] = item(i)
	}
	return strings.Join(parts, ",")
}

// worstCases are schemas just within the limits, each shaped after one of
// the library's superlinear costs (see the package comment).
func worstCases() map[string]string {
	return map[string]string{
		"flat subschemas (compile queue)": `{"properties":{` + items(MaxNodes-2, func(i int) string { return fmt.Sprintf(`"p%d":{}`, i) }) + `}}`,
		"booleans (compile queue)":        `{"properties":{` + items(MaxNodes-2, func(i int) string { return fmt.Sprintf(`"p%d":true`, i) }) + `}}`,
		"references outside the subschemas (table copies)": `{"x":{` + items(MaxNodes-MaxRefs-3, func(i int) string { return fmt.Sprintf(`"a%d":{}`, i) }) + `},` +
			`"allOf":[` + items(MaxRefs, func(i int) string { return fmt.Sprintf(`{"$ref":"#/x/a%d"}`, i) }) + `]}`,
		"identifiers and references to them": `{"$defs":{` + items(MaxIDs, func(i int) string { return fmt.Sprintf(`"a%d":{"$id":"a%d"}`, i, i) }) + `},` +
			`"allOf":[` + items(MaxRefs, func(i int) string { return fmt.Sprintf(`{"$ref":"a%d"}`, i%MaxIDs) }) + `],` +
			`"properties":{` + items(MaxNodes-MaxIDs-MaxRefs-3, func(i int) string { return fmt.Sprintf(`"p%d":{}`, i) }) + `}}`,
		"anchors": `{"$defs":{` + items(MaxIDs, func(i int) string { return fmt.Sprintf(`"a%d":{"$anchor":"a%d"}`, i, i) }) + `},` +
			`"allOf":[` + items(MaxRefs, func(i int) string { return fmt.Sprintf(`{"$ref":"#a%d"}`, i%MaxIDs) }) + `]}`,
		"deep and wide":            strings.Repeat(`{"items":`, MaxDepth-3) + `{"properties":{` + items(MaxNodes-MaxDepth, func(i int) string { return fmt.Sprintf(`"p%d":{}`, i) }) + `}}` + strings.Repeat(`}`, MaxDepth-3),
		"deep chain of properties": strings.Repeat(`{"properties":{"a":`, (MaxDepth-1)/2) + `{}` + strings.Repeat(`}}`, (MaxDepth-1)/2),
		"regular expressions":      `{"properties":{` + items(MaxPatterns, func(i int) string { return fmt.Sprintf(`"p%d":{"pattern":"[\\p{L}\\p{N}]{%d}"}`, i, 1000-i) }) + `}}`,
		"fan-out": `{"$defs":{` + items(13, func(i int) string {
			return fmt.Sprintf(`"d%d":{"allOf":[{"$ref":"#/$defs/d%d"},{"$ref":"#/$defs/d%d"}]}`, i, i+1, i+1)
		}) + `,"d13":{}},"$ref":"#/$defs/d0"}`,
	}
}

// BenchmarkCompileWorstCases compiles each worst case: what the limits let a
// compile cost.
func BenchmarkCompileWorstCases(b *testing.B) {
	for name, s := range worstCases() {
		b.Run(strings.ReplaceAll(name, " ", "_"), func(b *testing.B) {
			for b.Loop() {
				_, _ = Compile([]byte(s))
			}
		})
	}
}
