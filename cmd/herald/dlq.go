package main

import (
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/heraldwf/herald/httpapi/client"
	"github.com/heraldwf/herald/httpapi/wire"
)

func init() { addCommand((*app).dlqCommand) }

// dlqCommand is `herald dlq`: the event bus's dead-letter queue.
func (a *app) dlqCommand() *cobra.Command {
	return group("dlq", "list, show, reprocess and delete the event bus's dead letters",
		a.dlqList(), a.dlqShow(), a.dlqAct(true), a.dlqAct(false))
}

// dlqFilter is the filter flags of the dlq commands.
type dlqFilter struct {
	subscription, eventType, errorKind, ids string
	includeReprocessed                      bool
}

func addDLQFilter(cmd *cobra.Command) *dlqFilter {
	f := &dlqFilter{}
	fl := cmd.Flags()
	fl.StringVar(&f.subscription, "subscription", "", "only letters of this subscription")
	fl.StringVar(&f.eventType, "event-type", "", "only letters of events of this type")
	fl.StringVar(&f.errorKind, "error-kind", "", "only letters that failed with this kind: timeout, runtime, resource, permanent, validation or permission")
	fl.StringVar(&f.ids, "ids", "", "only these letters: ids separated by commas")
	fl.BoolVar(&f.includeReprocessed, "include-reprocessed", false, "also letters already reprocessed (kept as the link to their failure)")
	return f
}

// filtered reports whether a filter (not --include-reprocessed) is set.
func (f *dlqFilter) filtered() bool {
	return f.subscription != "" || f.eventType != "" || f.errorKind != "" || f.ids != ""
}

// client returns the filter of the list route.
func (f *dlqFilter) client(cmd *cobra.Command) (client.DeadLetterFilter, error) {
	out := client.DeadLetterFilter{Subscription: f.subscription, EventType: f.eventType, ErrorKind: f.errorKind,
		IncludeReprocessed: f.includeReprocessed}
	if f.ids != "" {
		for _, s := range strings.Split(f.ids, ",") {
			id, err := strconv.ParseInt(strings.TrimSpace(s), 10, 64)
			if err != nil || id <= 0 {
				return out, usageErrorf(cmd, "--ids %q: want letter ids (positive numbers) separated by commas", f.ids)
			}
			out.IDs = append(out.IDs, id)
		}
	}
	return out, nil
}

// letterID parses a dead letter's id argument.
func letterID(cmd *cobra.Command, s string) (int64, error) {
	id, err := strconv.ParseInt(s, 10, 64)
	if err != nil || id <= 0 {
		return 0, usageErrorf(cmd, "%q is not a dead letter's id (a positive number)", s)
	}
	return id, nil
}

func (a *app) dlqList() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "list [filters]",
		Short: "list dead letters, newest first (those waiting for a decision, unless --include-reprocessed)",
		Example: `  herald dlq list
  herald dlq list --subscription audit --error-kind runtime`,
		Args: exactArgs(),
	}
	pf := addPageFlags(cmd)
	df := addDLQFilter(cmd)
	cmd.RunE = a.withClient(func(cmd *cobra.Command, c *client.Client, args []string) error {
		f, err := df.client(cmd)
		if err != nil {
			return err
		}
		page, err := fetchPages(cmd.Context(), a, "dead letters", pf, func(ctx ctxT, limit int, cursor string) (*wire.Page[*wire.DeadLetter], error) {
			f := f
			f.Limit, f.Cursor = limit, cursor
			return c.DeadLetters(ctx, f)
		})
		if err != nil {
			return err
		}
		return emitPage(a, page, []string{"ID", "SUBSCRIPTION", "EVENT", "TYPE", "KIND", "ERROR", "ATTEMPTS", "FAILED", "REPROCESSED"},
			func(d *wire.DeadLetter) []any {
				return []any{d.ID, d.Subscription, d.EventID, d.EventType, string(d.ErrorKind), d.Error, d.Attempts, d.FailedAt, d.ReprocessedAt}
			})
	})
	return cmd
}

func (a *app) dlqShow() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "show ID",
		Short: "show a dead letter: its event, target, error and stack",
		Args:  exactArgs("ID"),
	}
	cmd.RunE = a.withClient(func(cmd *cobra.Command, c *client.Client, args []string) error {
		id, err := letterID(cmd, args[0])
		if err != nil {
			return err
		}
		d, err := c.DeadLetter(cmd.Context(), id)
		if err != nil {
			return err
		}
		return a.emit(d, func(w io.Writer) error {
			if err := listing(w,
				field{"id", d.ID},
				field{"subscription", d.Subscription},
				field{"target", targetString(d.Target)},
				field{"execution", d.Execution},
				field{"event", d.EventID},
				field{"event type", d.EventType},
				field{"event data", d.EventData},
				field{"error kind", string(d.ErrorKind)},
				field{"error", d.Error},
				field{"attempts", d.Attempts},
				field{"failed", d.FailedAt},
				field{"reprocessed?", d.ReprocessedAt},
			); err != nil {
				return err
			}
			if d.Stack != "" {
				_, err := fmt.Fprintf(w, "stack:\n%s\n", indent(strings.TrimRight(d.Stack, "\n"), "  "))
				return err
			}
			return nil
		})
	})
	return cmd
}

// dlqBatch is how many letters one bulk request acts on.
const dlqBatch = 100

// DLQSummary is what a bulk reprocess or delete did (its --json output).
type DLQSummary struct {
	// Selected is how many letters the selection held when listed.
	Selected int `json:"selected"`
	// Reprocessed or Deleted is how many were acted on (fewer than
	// Selected when another client got to some first).
	Reprocessed *int `json:"reprocessed,omitempty"`
	Deleted     *int `json:"deleted,omitempty"`
}

// dlqAct is `dlq reprocess` (reprocess) or `dlq delete`.
func (a *app) dlqAct(reprocess bool) *cobra.Command {
	verb, doing, done, short := "delete", "deleting", "deleted", "delete a dead letter (reprocessed or not), or every letter a filter or --all selects"
	if reprocess {
		verb, doing, done, short = "reprocess", "reprocessing", "reprocessed", "queue a dead letter's execution again, or those of every letter a filter or --all selects"
	}
	var all bool
	cmd := &cobra.Command{
		Use:   verb + " (ID | --all | filters)",
		Short: short,
		Example: fmt.Sprintf(`  herald dlq %[1]s 7
  herald dlq %[1]s --subscription audit --error-kind runtime
  herald dlq %[1]s --all`, verb),
		Args: optionalArgs("ID"),
	}
	cmd.Flags().BoolVar(&all, "all", false, "every letter waiting for a decision (with --include-reprocessed: every letter)")
	df := addDLQFilter(cmd)
	cmd.RunE = a.withClient(func(cmd *cobra.Command, c *client.Client, args []string) error {
		ctx := cmd.Context()
		switch {
		case len(args) > 0 && (all || df.filtered() || df.includeReprocessed):
			return usageErrorf(cmd, "give ID, or --all, or filters: not together")
		case len(args) > 0:
			id, err := letterID(cmd, args[0])
			if err != nil {
				return err
			}
			var resp any
			if reprocess {
				err = c.ReprocessDeadLetter(ctx, id)
				resp = wire.ReprocessResponse{Reprocessed: 1}
			} else {
				err = c.DeleteDeadLetter(ctx, id)
				resp = wire.DeleteResponse{Deleted: 1}
			}
			if err != nil {
				return err
			}
			return a.emit(resp, func(w io.Writer) error {
				_, err := fmt.Fprintf(w, "%s dead letter %d\n", done, id)
				return err
			})
		case all && df.filtered():
			return usageErrorf(cmd, "--all selects every letter: no filter with it")
		case !all && !df.filtered():
			return usageErrorf(cmd, "dlq %s needs ID, a filter (--subscription, --event-type, --error-kind, --ids) or --all", verb)
		}
		f, err := df.client(cmd)
		if err != nil {
			return err
		}
		// List the selection, then act on it in batches by id: the count
		// is known up front and progress shows.
		var ids []int64
		cursor := ""
		for {
			f.Limit, f.Cursor = 1000, cursor
			page, err := c.DeadLetters(ctx, f)
			if err != nil {
				return err
			}
			for _, d := range page.Items {
				ids = append(ids, d.ID)
			}
			if cursor = page.NextCursor; cursor == "" {
				break
			}
		}
		prog := newProgress(a.stderr, doing+" dead letters", len(ids))
		n := 0
		for i := 0; i < len(ids); i += dlqBatch {
			sel := wire.DeadLetterSelection{IDs: ids[i:min(i+dlqBatch, len(ids))], IncludeReprocessed: f.IncludeReprocessed}
			var k int
			if reprocess {
				k, err = c.ReprocessDeadLetters(ctx, sel)
			} else {
				k, err = c.DeleteDeadLetters(ctx, sel)
			}
			if err != nil {
				prog.Done()
				fmt.Fprintf(a.stderr, "%s %d of %d selected dead letters before the error\n", done, n, len(ids))
				return err
			}
			n += k
			prog.Add(len(sel.IDs))
		}
		prog.Done()
		sum := DLQSummary{Selected: len(ids)}
		if reprocess {
			sum.Reprocessed = &n
		} else {
			sum.Deleted = &n
		}
		return a.emit(sum, func(w io.Writer) error {
			_, err := fmt.Fprintf(w, "%s %d of %d selected dead letters\n", done, n, len(ids))
			return err
		})
	})
	return cmd
}
