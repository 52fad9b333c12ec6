package main

// The output layer every client command writes through: with --json the
// API's JSON answer (indented), otherwise a table or a listing for people.
// A command that lists is then one function: fetch a page (fetchPages), and
// emitPage with its headers and a row function.

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/heraldwf/herald/httpapi/wire"
)

// maxCell caps a JSON payload shown in a table cell; listings show it whole.
const maxCell = 60

// emit writes a command's answer: v as JSON with --json, otherwise what
// human writes.
func (a *app) emit(v any, human func(w io.Writer) error) error {
	if a.json {
		return writeJSON(a.stdout, v)
	}
	return human(a.stdout)
}

// writeJSON writes v indented, as the API's JSON answer (the wire types
// encode the same as the server's).
func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	return enc.Encode(v)
}

// table writes rows under headers, columns aligned by text/tabwriter.
type table struct {
	tw *tabwriter.Writer
}

func newTable(w io.Writer, headers ...string) *table {
	t := &table{tw: tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)}
	fmt.Fprintln(t.tw, strings.Join(headers, "\t"))
	return t
}

// row adds a row; each value is formatted by cell.
func (t *table) row(values ...any) {
	cells := make([]string, len(values))
	for i, v := range values {
		cells[i] = cell(v, maxCell)
	}
	fmt.Fprintln(t.tw, strings.Join(cells, "\t"))
}

func (t *table) flush() error { return t.tw.Flush() }

// field is one line of a listing.
type field struct {
	name  string
	value any
}

// listing writes "name:  value" lines, values aligned; a field whose
// value is empty (cell "-") is left out when omitEmpty is set on it by
// naming it with a trailing "?".
func listing(w io.Writer, fields ...field) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	for _, f := range fields {
		name, optional := strings.CutSuffix(f.name, "?")
		v := cell(f.value, 0)
		if optional && v == "-" {
			continue
		}
		fmt.Fprintf(tw, "%s:\t%s\n", name, v)
	}
	return tw.Flush()
}

// cell formats a value for people: times in UTC to the second, "-" for
// an empty string, a zero time or a nil; JSON compacted and, with max > 0,
// cut to max characters.
func cell(v any, max int) string {
	var s string
	switch x := v.(type) {
	case nil:
		return "-"
	case string:
		s = x
	case time.Time:
		if x.IsZero() {
			return "-"
		}
		return x.UTC().Format(time.RFC3339)
	case fmt.Stringer:
		s = x.String()
	case json.RawMessage:
		s = compactJSON(x)
	case bool:
		if x {
			return "yes"
		}
		return "no"
	default:
		s = fmt.Sprint(v)
	}
	s = strings.Join(strings.Fields(s), " ")
	if s == "" {
		return "-"
	}
	if max > 0 && len([]rune(s)) > max {
		s = string([]rune(s)[:max-1]) + "…"
	}
	return s
}

// compactJSON returns raw on one line ("" for none).
func compactJSON(raw json.RawMessage) string {
	if len(raw) == 0 {
		return ""
	}
	var b bytes.Buffer
	if err := json.Compact(&b, raw); err != nil {
		return string(raw)
	}
	return b.String()
}

// emitPage writes a page of a list: with --json the page as the API
// answers it; otherwise a table, and on stderr how to get the next page if
// there is one.
func emitPage[T any](a *app, page *wire.Page[T], headers []string, row func(T) []any) error {
	if page.Items == nil {
		page.Items = []T{}
	}
	if a.json {
		return writeJSON(a.stdout, page)
	}
	t := newTable(a.stdout, headers...)
	for _, it := range page.Items {
		t.row(row(it)...)
	}
	if err := t.flush(); err != nil {
		return err
	}
	if page.NextCursor != "" {
		fmt.Fprintf(a.stderr, "more: add --cursor %s (or --all for every page)\n", page.NextCursor)
	}
	return nil
}

// pageFlags are a list command's paging flags.
type pageFlags struct {
	limit  int
	cursor string
	all    bool
}

// addPageFlags adds --limit, --cursor and --all to cmd.
func addPageFlags(cmd *cobra.Command) *pageFlags {
	p := &pageFlags{}
	cmd.Flags().IntVar(&p.limit, "limit", 0, "items per page, 1–1000 (default: the server's, 100)")
	cmd.Flags().StringVar(&p.cursor, "cursor", "", "start at this page (a next_cursor of an earlier answer)")
	cmd.Flags().BoolVar(&p.all, "all", false, "fetch every page from --cursor on")
	return p
}

// fetchPages returns the page p names, or with --all every item from it
// on as one page (without a next cursor), counting them on a progress line
// once there is more than one page.
func fetchPages[T any](ctx context.Context, a *app, what string, p *pageFlags,
	fetch func(ctx context.Context, limit int, cursor string) (*wire.Page[T], error)) (*wire.Page[T], error) {
	page, err := fetch(ctx, p.limit, p.cursor)
	if err != nil || !p.all || page.NextCursor == "" {
		return page, err
	}
	all := page.Items
	prog := newProgress(a.stderr, "fetching "+what, 0)
	defer prog.Done()
	prog.Add(len(all))
	for cursor := page.NextCursor; cursor != ""; cursor = page.NextCursor {
		if page, err = fetch(ctx, p.limit, cursor); err != nil {
			return nil, err
		}
		all = append(all, page.Items...)
		prog.Add(len(page.Items))
	}
	return &wire.Page[T]{Items: all}, nil
}
