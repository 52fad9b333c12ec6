package schema

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

func TestMain(m *testing.M) {
	CountCompiles()
	os.Exit(m.Run())
}

func TestCompileAccepts(t *testing.T) {
	t.Parallel()
	for _, s := range []string{
		`true`,
		`false`,
		`{}`,
		`{"type":"object","properties":{"approved":{"type":"boolean"}},"required":["approved"]}`,
		// Recursion that descends into the value is fine: a tree.
		`{"type":"object","properties":{"left":{"$ref":"#"},"right":{"$ref":"#"}}}`,
		`{"$defs":{"node":{"items":{"$ref":"#/$defs/node"}}},"$ref":"#/$defs/node"}`,
		`{"$defs":{"flag":{"type":"boolean"}},"allOf":[{"$ref":"#/$defs/flag"},{"$ref":"#/$defs/flag"}]}`,
		// A resource with a remote-looking $id is bundled, not loaded.
		`{"$defs":{"x":{"$id":"https://example.com/x.json","type":"string"}},"$ref":"https://example.com/x.json"}`,
		`{"$defs":{"a":{"$anchor":"a","type":"string"}},"$ref":"#a"}`,
		// The meta-schemas are embedded in the library: no network.
		`{"$schema":"http://json-schema.org/draft-07/schema#","definitions":{"s":{"type":"string"}},"$ref":"#/definitions/s"}`,
		`{"$ref":"https://json-schema.org/draft/2020-12/schema"}`,
		// Within the limits.
		strings.Repeat(`{"items":`, MaxDepth-1) + `{}` + strings.Repeat(`}`, MaxDepth-1),
		`{"properties":{` + items(MaxNodes-2, func(i int) string { return fmt.Sprintf(`"p%d":{}`, i) }) + `}}`,
		`{"$defs":{"a0":{}},"allOf":[` + items(MaxRefs, func(int) string { return `{"$ref":"#/$defs/a0"}` }) + `]}`,
	} {
		if _, err := Compile([]byte(s)); err != nil {
			t.Errorf("%.120s: %v", s, err)
		}
	}
}

func TestCompileRefuses(t *testing.T) {
	t.Parallel()
	file := filepath.Join(t.TempDir(), "s.json")
	if err := os.WriteFile(file, []byte(`{"type":"string"}`), 0o600); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		what, schema, reason string
		beforeCompile        bool // refused by measuring, before the library sees it
	}{
		{"not UTF-8", "{\"title\":\"\xff\"}", "not valid UTF-8", true},
		{"not JSON", `{"type":`, "not JSON", true},
		{"trailing data", `{} {}`, "not JSON", true},
		{"not a schema", `{"type":12}`, "metaschema", false},
		{"null", `null`, "metaschema", false},

		{"$ref to itself", `{"$ref":"#"}`, "reference cycle", false},
		{"$ref to itself through allOf", `{"type":"object","allOf":[{"$ref":"#"}]}`, "reference cycle", false},
		{"$ref cycle", `{"$defs":{"a":{"$ref":"#/$defs/b"},"b":{"$ref":"#/$defs/a"}},"$ref":"#/$defs/a"}`, "#/$defs/a → #/$defs/b → #/$defs/a", false},
		{"cycle through anyOf", `{"anyOf":[{"type":"string"},{"$ref":"#/$defs/x"}],"$defs":{"x":{"not":{"$ref":"#"}}}}`, "reference cycle", false},
		{"cycle through if/then", `{"$defs":{"a":{"if":true,"then":{"$ref":"#/$defs/a"}}},"properties":{"p":{"$ref":"#/$defs/a"}}}`, "reference cycle", false},
		{"cycle through an anchor", `{"$defs":{"a":{"$anchor":"a","allOf":[{"$ref":"#a"}]}},"$ref":"#a"}`, "reference cycle", false},

		{"unresolvable pointer", `{"$ref":"#/$defs/nope"}`, `"#/$defs/nope" does not resolve`, false},
		{"unresolvable anchor", `{"$ref":"#nope"}`, "no such anchor", false},

		{"http $ref", `{"$ref":"http://example.com/s.json"}`, "never loads schemas", false},
		{"https $ref", `{"properties":{"a":{"$ref":"https://example.com/s.json#/x"}}}`, "never loads schemas", false},
		{"file $ref to a file that exists", `{"$ref":"file://` + filepath.ToSlash(file) + `"}`, "never loads schemas", false},
		{"relative $ref under a remote $id", `{"$id":"https://example.com/root.json","$ref":"other.json"}`, "never loads schemas", false},
		{"remote $schema", `{"$schema":"https://example.com/meta.json"}`, "never loads schemas", false},

		{"too deep", strings.Repeat(`{"items":`, MaxDepth) + `{}` + strings.Repeat(`}`, MaxDepth), "levels deep", true},
		{"too many subschemas", `{"properties":{` + items(MaxNodes, func(i int) string { return fmt.Sprintf(`"p%d":true`, i) }) + `}}`, "objects and booleans", true},
		{"too many references", `{"$defs":{"a":{}},"allOf":[` + items(MaxRefs+1, func(int) string { return `{"$ref":"#/$defs/a"}` }) + `]}`, "references", true},
		{"too many identifiers", `{"$defs":{` + items(MaxIDs+1, func(i int) string { return fmt.Sprintf(`"a%d":{"$anchor":"a%d"}`, i, i) }) + `}}`, "identifiers", true},
		{"too many regular expressions", `{"patternProperties":{` + items(MaxPatterns+1, func(i int) string { return fmt.Sprintf(`"^p%d$":{}`, i) }) + `}}`, "regular expressions", true},
		{"fan-out", worstCases()["fan-out"], "evaluates more than", false},
	}
	for _, tc := range cases {
		t.Run(tc.what, func(t *testing.T) {
			t.Parallel()
			// Unique bytes, so the compile count is this case's alone.
			raw := []byte(tc.schema + strings.Repeat(" ", len(tc.what)) + "\n")
			if tc.what == "trailing data" || tc.what == "not JSON" {
				raw = []byte(tc.schema)
			}
			sch, err := Compile(raw)
			if err == nil || sch != nil {
				t.Fatalf("Compile: %v, %v; want an error", sch, err)
			}
			if !strings.Contains(err.Error(), tc.reason) {
				t.Errorf("error %q, want it to contain %q", err, tc.reason)
			}
			if strings.Contains(err.Error(), docURL) {
				t.Errorf("error %q names the internal document URL", err)
			}
			if n := Compiles(raw); tc.beforeCompile && n != 0 {
				t.Errorf("reached the compiler %d times, want it refused before", n)
			}
		})
	}
}

// Refused at put, a cyclic schema would otherwise refuse every payload at
// every raise: the library only finds the cycle while validating.
func TestCompileCycleIsWhatValidationWouldHit(t *testing.T) {
	t.Parallel()
	_, err := Compile([]byte(`{"$ref":"#"}`))
	if err == nil {
		t.Fatal("compiled")
	}
}

func TestCacheCompilesOnce(t *testing.T) {
	t.Parallel()
	c := NewCache(10, 1<<20)
	raw := []byte(`{"title":"TestCacheCompilesOnce","type":"string"}`)
	var wg sync.WaitGroup
	got := make([]any, 8)
	for i := range got {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s, err := c.Get(raw)
			if err != nil {
				t.Error(err)
			}
			got[i] = s
		}()
	}
	wg.Wait()
	for _, s := range got[1:] {
		if s != got[0] {
			t.Fatal("concurrent Gets returned different schemas")
		}
	}
	if n := Compiles(raw); n != 1 {
		t.Fatalf("compiled %d times, want 1", n)
	}
	if s, err := c.Get(raw); err != nil || s != got[0] {
		t.Fatalf("Get again: %v, %v", s, err)
	}
}

func TestCacheKeepsErrors(t *testing.T) {
	t.Parallel()
	c := NewCache(10, 1<<20)
	raw := []byte(`{"title":"TestCacheKeepsErrors","$ref":"#"}`)
	for range 3 {
		if _, err := c.Get(raw); err == nil {
			t.Fatal("no error")
		}
	}
	if n := Compiles(raw); n != 1 {
		t.Fatalf("compiled %d times, want 1", n)
	}
}

func TestCacheBounded(t *testing.T) {
	t.Parallel()
	c := NewCache(3, 1<<20)
	raw := func(i int) []byte { return []byte(fmt.Sprintf(`{"title":"TestCacheBounded %d"}`, i)) }
	for i := range 5 {
		if _, err := c.Get(raw(i)); err != nil {
			t.Fatal(err)
		}
	}
	if n := c.Len(); n != 3 {
		t.Fatalf("holds %d, want 3", n)
	}
	// The oldest were evicted: getting one compiles it again.
	if _, err := c.Get(raw(0)); err != nil || Compiles(raw(0)) != 2 {
		t.Fatalf("evicted schema: %v, compiled %d times; want 2", err, Compiles(raw(0)))
	}
	// The most recent was not.
	if _, err := c.Get(raw(4)); err != nil || Compiles(raw(4)) != 1 {
		t.Fatalf("recent schema: %v, compiled %d times; want 1", err, Compiles(raw(4)))
	}

	// By memory: each of these is about 100 nodes, 100 KiB.
	c = NewCache(100, 250<<10)
	big := func(i int) []byte {
		return []byte(fmt.Sprintf(`{"title":"TestCacheBounded big %d","properties":{`, i) +
			items(100, func(j int) string { return fmt.Sprintf(`"p%d":{}`, j) }) + `}}`)
	}
	for i := range 4 {
		if _, err := c.Get(big(i)); err != nil {
			t.Fatal(err)
		}
	}
	if n := c.Len(); n != 2 {
		t.Fatalf("holds %d schemas of about 100 KiB under a 250 KiB bound, want 2", n)
	}
}

// The worst cases are within the limits (compiling them is the benchmark's
// job: it takes seconds under the race detector).
func TestWorstCasesWithinLimits(t *testing.T) {
	t.Parallel()
	for name, s := range worstCases() {
		doc, err := jsonschema.UnmarshalJSON(strings.NewReader(s))
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		var sh shape
		if err := sh.measure(doc, 1); err != nil {
			t.Errorf("%s: %v", name, err)
		} else if err := sh.check(); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
}
