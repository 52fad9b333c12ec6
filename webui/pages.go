package webui

import (
	"fmt"
	"html/template"
	"io/fs"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/heraldwf/herald"
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
	"duration":   func(d herald.Duration) string { return formatDuration(time.Duration(d)) },
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

// formatDuration shows d as people read it: "167ms", "2.35s", "1m30s",
// "24h" (never raw nanoseconds), rounded to what matters at its size.
func formatDuration(d time.Duration) string {
	switch a := d.Abs(); {
	case a < time.Millisecond:
		d = d.Round(time.Microsecond)
	case a < time.Second:
		d = d.Round(time.Millisecond)
	case a < time.Minute:
		d = d.Round(10 * time.Millisecond)
	default:
		d = d.Round(time.Second)
	}
	t := d.String()
	if strings.HasSuffix(t, "m0s") {
		t = strings.TrimSuffix(t, "0s")
	}
	if strings.HasSuffix(t, "h0m") {
		t = strings.TrimSuffix(t, "0m")
	}
	return t
}

// formatWhen shows t (UTC) as the time of day when it falls on now's UTC
// day, else with its date, then how far it is from now: "14:05:00 UTC (3m
// ago)", "2026-12-02 09:00:00 UTC (in 24h)".
func formatWhen(t, now time.Time) string {
	t, now = t.UTC(), now.UTC()
	layout := "2006-01-02 15:04:05"
	if ty, tm, td := t.Date(); now.Year() == ty && now.Month() == tm && now.Day() == td {
		layout = "15:04:05"
	}
	rel := "now"
	if d := t.Sub(now).Round(time.Second); d > 0 {
		rel = "in " + formatDuration(d)
	} else if d < 0 {
		rel = formatDuration(-d) + " ago"
	}
	return t.Format(layout) + " UTC (" + rel + ")"
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
