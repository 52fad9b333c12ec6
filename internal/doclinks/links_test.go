package doclinks

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"unicode"
)

// root is the repository root, from this package's directory.
const root = "../.."

// documents are the Markdown files whose links are checked.
func documents(t *testing.T) []string {
	t.Helper()
	files := []string{"README.md"}
	for _, pattern := range []string{"docs/*.md", "bench/*.md"} {
		m, err := filepath.Glob(filepath.Join(root, pattern))
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range m {
			rel, _ := filepath.Rel(root, f)
			files = append(files, rel)
		}
	}
	return files
}

// link matches an inline Markdown link or image: [text](target) or
// ![alt](target), target without spaces (an optional "title" ends it).
var link = regexp.MustCompile(`\]\(([^)\s]+)(?:\s+"[^"]*")?\)`)

// inlineCode matches a code span, whose text is not a link.
var inlineCode = regexp.MustCompile("`[^`]*`")

type ref struct {
	line   int
	target string
}

// parse returns a Markdown file's links (outside fenced code blocks and
// code spans) and the anchors of its headings.
func parse(t *testing.T, path string) (links []ref, anchors map[string]bool) {
	t.Helper()
	f, err := os.Open(filepath.Join(root, path))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	anchors = map[string]bool{}
	seen := map[string]int{}
	fenced := false
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		if strings.HasPrefix(strings.TrimSpace(line), "```") {
			fenced = !fenced
			continue
		}
		if fenced {
			continue
		}
		if strings.HasPrefix(line, "#") {
			text := strings.TrimSpace(strings.TrimLeft(line, "#"))
			a := slug(text)
			if k := seen[a]; k > 0 {
				anchors[fmt.Sprintf("%s-%d", a, k)] = true
			} else {
				anchors[a] = true
			}
			seen[a]++
		}
		for _, m := range link.FindAllStringSubmatch(inlineCode.ReplaceAllString(line, ""), -1) {
			links = append(links, ref{n, m[1]})
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return links, anchors
}

// slug is GitHub's anchor of a heading: lower case, every character but
// letters, digits, spaces, hyphens and underscores removed, spaces made
// hyphens (a repeated heading gets -1, -2, … in parse).
func slug(heading string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(heading) {
		switch {
		case r == ' ':
			b.WriteByte('-')
		case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r):
			b.WriteRune(r)
		}
	}
	return b.String()
}

func TestSlug(t *testing.T) {
	for heading, want := range map[string]string{
		"The server: `herald serve`":                         "the-server-herald-serve",
		"Results: 2026-11-22, 02:41 UTC (the run of record)": "results-2026-11-22-0241-utc-the-run-of-record",
		"Reading a workflow's state: queries and attributes": "reading-a-workflows-state-queries-and-attributes",
		"The positional lane: `ctx.WaitEvent(name)` ⟷ `x`":   "the-positional-lane-ctxwaiteventname--x",
		"Why is it pending? (Blocked)":                       "why-is-it-pending-blocked",
	} {
		if got := slug(heading); got != want {
			t.Errorf("slug(%q) = %q, want %q", heading, got, want)
		}
	}
}

// TestLinksResolve checks every relative link of the documents: the file
// (or directory) exists, and a #fragment names a heading of the Markdown
// file it points at.
func TestLinksResolve(t *testing.T) {
	anchorsOf := map[string]map[string]bool{}
	anchors := func(path string) map[string]bool {
		if a, ok := anchorsOf[path]; ok {
			return a
		}
		_, a := parse(t, path)
		anchorsOf[path] = a
		return a
	}
	checked := 0
	for _, doc := range documents(t) {
		links, _ := parse(t, doc)
		for _, l := range links {
			target := l.target
			if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
				continue // no network
			}
			checked++
			file, frag, _ := strings.Cut(target, "#")
			path := doc
			if file != "" {
				path = filepath.Clean(filepath.Join(filepath.Dir(doc), file))
				if strings.HasPrefix(path, "..") {
					t.Errorf("%s:%d: %s leaves the repository", doc, l.line, target)
					continue
				}
				if _, err := os.Stat(filepath.Join(root, path)); err != nil {
					t.Errorf("%s:%d: %s: no such file %s", doc, l.line, target, path)
					continue
				}
			}
			if frag == "" {
				continue
			}
			if !strings.HasSuffix(path, ".md") {
				t.Errorf("%s:%d: %s: an anchor in a file that is not Markdown", doc, l.line, target)
				continue
			}
			if !anchors(path)[frag] {
				t.Errorf("%s:%d: %s: %s has no heading #%s", doc, l.line, target, path, frag)
			}
		}
	}
	if checked < 100 {
		t.Fatalf("checked only %d links: the parser finds too few", checked)
	}
}
