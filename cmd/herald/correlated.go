package main

import (
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/heraldwf/herald/httpapi/client"
	"github.com/heraldwf/herald/httpapi/wire"
	"github.com/heraldwf/herald/internal/timeline"
)

func init() { addCommand((*app).correlatedCommand) }

// correlatedCommand is `herald correlated`: the correlated lane's events,
// put under (event definition, key).
func (a *app) correlatedCommand() *cobra.Command {
	return group("correlated", "put, get, search and delete correlated events",
		a.correlatedPut(), a.correlatedGet(), a.correlatedSearch(), a.correlatedDelete())
}

// showCorrelated writes a correlated event and the events it produced.
func showCorrelated(w io.Writer, e *wire.CorrelatedEvent) error {
	if err := listing(w,
		field{"definition", e.Def},
		field{"key", e.Key},
		field{"payload", e.Payload},
		field{"created", e.CreatedAt},
		field{"updated", e.UpdatedAt},
		field{"expires?", e.ExpiresAt},
		field{"produced", len(e.Produced)},
	); err != nil {
		return err
	}
	if len(e.Produced) == 0 {
		return nil
	}
	t := newTable(w, "EVENT", "INSTANCE", "EXECUTION", "WAIT (TASK SEQ)", "CREATED")
	for _, p := range e.Produced {
		t.row(p.EventID, p.InstanceID, p.Execution, p.TaskSeq, p.CreatedAt)
	}
	return t.flush()
}

func (a *app) correlatedPut() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "put DEFINITION KEY [PAYLOAD-JSON]",
		Short: "put a correlated event under (definition, key): every instance waiting on the key receives it",
		Example: `  herald correlated put signature doc-7 '{"signed_by": "ann"}'
  herald correlated get signature doc-7`,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) < 2 {
				return exactArgs("DEFINITION", "KEY")(cmd, args)
			}
			return optionalArgs("DEFINITION", "KEY", "PAYLOAD-JSON")(cmd, args)
		},
	}
	cmd.RunE = a.withClient(func(cmd *cobra.Command, c *client.Client, args []string) error {
		var payload []byte
		if len(args) > 2 {
			raw, err := jsonArg(cmd, "PAYLOAD-JSON", args[2])
			if err != nil {
				return err
			}
			payload = raw
		}
		e, err := c.PutCorrelated(cmd.Context(), args[0], args[1], payload)
		if err != nil {
			return err
		}
		return a.emit(e, func(w io.Writer) error { return showCorrelated(w, e) })
	})
	return cmd
}

func (a *app) correlatedGet() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "get DEFINITION KEY",
		Short: "show a correlated event and the events it produced",
		Args:  exactArgs("DEFINITION", "KEY"),
	}
	cmd.RunE = a.withClient(func(cmd *cobra.Command, c *client.Client, args []string) error {
		e, err := c.Correlated(cmd.Context(), args[0], args[1])
		if err != nil {
			return err
		}
		return a.emit(e, func(w io.Writer) error { return showCorrelated(w, e) })
	})
	return cmd
}

func (a *app) correlatedSearch() *cobra.Command {
	var s client.CorrelatedSearch
	var produced string
	cmd := &cobra.Command{
		Use:   "search DEFINITION",
		Short: "list a definition's correlated events, oldest first",
		Args:  exactArgs("DEFINITION"),
	}
	pf := addPageFlags(cmd)
	cmd.Flags().StringVar(&s.Earliest, "earliest", "", "only those created at or after this RFC 3339 time")
	cmd.Flags().StringVar(&s.Latest, "latest", "", "only those created at or before this RFC 3339 time")
	cmd.Flags().StringVar(&produced, "produced", "", timeline.ProducedHelp)
	cmd.RunE = a.withClient(func(cmd *cobra.Command, c *client.Client, args []string) error {
		has, err := timeline.ParseProduced(produced)
		if err != nil {
			return usageErrorf(cmd, "--%v", err)
		}
		s.HasCorrelatedEvents = has
		page, err := fetchPages(cmd.Context(), a, "correlated events", pf, func(ctx ctxT, limit int, cursor string) (*wire.Page[*wire.CorrelatedEvent], error) {
			s := s
			s.Limit, s.Cursor = limit, cursor
			return c.SearchCorrelated(ctx, args[0], s)
		})
		if err != nil {
			return err
		}
		return emitPage(a, page, []string{"KEY", "PAYLOAD", "PRODUCED", "CREATED", "UPDATED", "EXPIRES"},
			func(e *wire.CorrelatedEvent) []any {
				return []any{e.Key, e.Payload, len(e.Produced), e.CreatedAt, e.UpdatedAt, e.ExpiresAt}
			})
	})
	return cmd
}

func (a *app) correlatedDelete() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "delete DEFINITION KEY",
		Short: "delete a correlated event",
		Args:  exactArgs("DEFINITION", "KEY"),
	}
	cmd.RunE = a.withClient(func(cmd *cobra.Command, c *client.Client, args []string) error {
		if err := c.DeleteCorrelated(cmd.Context(), args[0], args[1]); err != nil {
			return err
		}
		return a.emitDeleted("correlated event", fmt.Sprintf("%s/%s", args[0], args[1]))
	})
	return cmd
}
