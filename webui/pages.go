package webui

import (
	"fmt"
	"html/template"
	"io/fs"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// fragments are templates rendered without the layout (the live parts a
// page polls); every other template file is a page in the layout.
var fragments = map[string]bool{"instance_live": true, "overview_live": true}

var funcs = template.FuncMap{
	"fmtTime": func(t time.Time) string {
		if t.IsZero() {
			return ""
		}
		return t.UTC().Format("2006-01-02 15:04:05")
	},
	"clock":      func(t time.Time) string { return t.UTC().Format("15:04:05") },
	"pathEscape": url.PathEscape,
	"inc":        func(i int) int { return i + 1 },
	"num":        formatNum,
	"nump": func(v *float64) string {
		if v == nil {
			return "…"
		}
		return formatNum(*v)
	},
	"rate": func(v *float64) string {
		if v == nil {
			return "…"
		}
		return strconv.FormatFloat(*v, 'f', 1, 64)
	},
}

func formatNum(v float64) string {
	if v == float64(int64(v)) {
		return strconv.FormatInt(int64(v), 10)
	}
	return strconv.FormatFloat(v, 'f', 2, 64)
}

// parsePages parses every page with the layout and the partials.
func parsePages() (map[string]*template.Template, error) {
	names, err := fs.Glob(templateFS, "templates/*.html")
	if err != nil {
		return nil, err
	}
	pages := map[string]*template.Template{}
	for _, n := range names {
		name := strings.TrimSuffix(strings.TrimPrefix(n, "templates/"), ".html")
		if name == "layout" || name == "partials" {
			continue
		}
		files := []string{"templates/layout.html", "templates/partials.html", n}
		if fragments[name] {
			files = []string{"templates/partials.html", n}
		}
		t, err := template.New(name).Funcs(funcs).ParseFS(templateFS, files...)
		if err != nil {
			return nil, fmt.Errorf("webui: template %s: %w", name, err)
		}
		pages[name] = t
	}
	return pages, nil
}
