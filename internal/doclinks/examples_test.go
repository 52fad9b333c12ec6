package doclinks

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// funcDecl matches a top-level function declaration of a Go listing, up to
// the closing brace at the start of a line.
var funcDecl = regexp.MustCompile(`(?ms)^func (\w+)\(.*?^}$`)

// goBlocks returns the ```go blocks of a Markdown file that follow the
// heading named after (up to the next heading of its level or higher).
func goBlocks(t *testing.T, path, after string) []string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(root, path))
	if err != nil {
		t.Fatal(err)
	}
	s := string(b)
	i := strings.Index(s, "\n"+after+"\n")
	if i < 0 {
		t.Fatalf("%s has no heading %q", path, after)
	}
	level := after[:strings.IndexByte(after, ' ')+1]
	s = s[i+len(after)+2:]
	if j := regexp.MustCompile(`(?m)^#{1,` + itoa(len(level)-1) + `} `).FindStringIndex(s); j != nil {
		s = s[:j[0]]
	}
	var blocks []string
	for {
		i := strings.Index(s, "```go\n")
		if i < 0 {
			return blocks
		}
		s = s[i+6:]
		j := strings.Index(s, "\n```")
		if j < 0 {
			t.Fatalf("%s: an unclosed code block under %q", path, after)
		}
		blocks = append(blocks, s[:j+1])
		s = s[j+4:]
	}
}

func itoa(n int) string { return string(rune('0' + n)) }

// TestPrintedTestsAreTested checks that the test functions the README and
// docs/testing.md print for heraldtest are, word for word, functions of
// heraldtest's own tests (example_test.go, and main_test.go's TestMain in
// spirit: the printed one serves scripts the same way), so a printed
// example cannot drift from code that runs.
func TestPrintedTestsAreTested(t *testing.T) {
	code, err := os.ReadFile(filepath.Join(root, "heraldtest/example_test.go"))
	if err != nil {
		t.Fatal(err)
	}
	found := 0
	for _, place := range []struct{ doc, heading string }{
		{"README.md", "## Testing your workflows"},
		{"docs/testing.md", "## An example"},
	} {
		blocks := goBlocks(t, place.doc, place.heading)
		if len(blocks) == 0 {
			t.Errorf("%s: no Go listing under %q", place.doc, place.heading)
		}
		for _, b := range blocks {
			for _, f := range funcDecl.FindAllStringSubmatch(b, -1) {
				if f[1] == "TestMain" {
					if !strings.Contains(f[0], "herald.ServeScriptChild()") {
						t.Errorf("%s: the printed TestMain does not serve script children", place.doc)
					}
					continue
				}
				found++
				if !strings.Contains(string(code), f[0]) {
					t.Errorf("%s: func %s under %q is not heraldtest/example_test.go's", place.doc, f[1], place.heading)
				}
			}
		}
	}
	if found < 4 {
		t.Fatalf("found only %d printed functions", found)
	}
}
