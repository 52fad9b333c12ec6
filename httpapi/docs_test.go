package httpapi

import (
	"os"
	"strings"
	"testing"
)

// TestDocs_HTTP: docs/http.md, the API's contract in the repository, lists
// every route the server runs and every problem code it can answer.
func TestDocs_HTTP(t *testing.T) {
	b, err := os.ReadFile("../docs/http.md")
	if err != nil {
		t.Fatal(err)
	}
	doc := string(b)
	a := &API{}
	for _, rt := range a.routeTable() {
		if !strings.Contains(doc, "`"+rt.method+" "+rt.path+"`") {
			t.Errorf("docs/http.md does not list %s %s", rt.method, rt.path)
		}
	}
	codes := append([]problemKind(nil), ownProblems...)
	for _, row := range problemTable {
		codes = append(codes, row.kind)
	}
	for _, k := range codes {
		if !strings.Contains(doc, "| `"+k.code+"` |") {
			t.Errorf("docs/http.md does not list problem code %s (%d)", k.code, k.status)
		}
	}
}
