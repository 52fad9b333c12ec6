package main

import (
	"bytes"
	"encoding/json"
	"io"
	"time"

	"github.com/spf13/cobra"

	"github.com/heraldwf/herald/httpapi/client"
	"github.com/heraldwf/herald/httpapi/wire"
)

func init() { addCommand((*app).defsCommand) }

// defsCommand is `herald defs`: event definitions (schema, buffering,
// retention, payload cap, correlated-lane config).
func (a *app) defsCommand() *cobra.Command {
	return group("defs", "put, get, list and delete event definitions",
		a.defsPut(), a.defsGet(), a.defsList(), a.deleteCommand("NAME", "event definition", "delete an event definition", (*client.Client).DeleteDefinition))
}

// showDefinition writes an event definition as a listing.
func showDefinition(w io.Writer, d *wire.EventDefinition) error {
	var ttl, once any
	if d.Correlation != nil {
		ttl, once = "none (kept)", d.Correlation.DeleteAfterFirstCorrelation
		if d.Correlation.TTL != 0 {
			ttl = time.Duration(d.Correlation.TTL)
		}
	}
	return listing(w,
		field{"name", d.Name},
		field{"schema", orDefault(d.Schema, "none (any JSON)")},
		field{"buffer", orDefault(d.Buffer, "fifo")},
		field{"retention", orDefault(dur(time.Duration(d.Retention)), "the tenant's default")},
		field{"max payload bytes", orDefault(num(d.MaxPayloadBytes), "the tenant's default")},
		field{"correlation", orDefault(correlationString(d.Correlation != nil), "off")},
		field{"correlation ttl?", ttl},
		field{"delete after first?", once},
		field{"created", d.CreatedAt},
		field{"updated", d.UpdatedAt},
	)
}

func correlationString(on bool) any {
	if on {
		return "on"
	}
	return nil
}

// orDefault is v, or def when v shows as "-".
func orDefault(v any, def string) any {
	if cell(v, 0) == "-" {
		return def
	}
	return v
}

const defsPutLong = `Creates the event definition NAME, or replaces it, from a JSON file: the
definition as herald defs get NAME --json prints it, or as the API takes
it: {"schema", "buffer", "retention", "max_payload_bytes", "correlation":
{"ttl", "delete_after_first_correlation"}}. NAME may be left out when the
file holds "name".`

func (a *app) defsPut() *cobra.Command {
	var file string
	cmd := &cobra.Command{
		Use:   "put [NAME] --file DEFINITION.json",
		Short: "create or replace an event definition",
		Long:  defsPutLong,
		Example: `  herald defs put decision --file decision.json
  herald defs get decision --json > decision.json && herald defs put --file decision.json`,
		Args: optionalArgs("NAME"),
	}
	cmd.Flags().StringVar(&file, "file", "", "the definition (JSON); - reads stdin")
	cmd.RunE = a.withClient(func(cmd *cobra.Command, c *client.Client, args []string) error {
		if file == "" {
			return usageErrorf(cmd, "defs put needs --file DEFINITION.json")
		}
		b, err := readFile(cmd, file)
		if err != nil {
			return err
		}
		var d wire.EventDefinition
		dec := json.NewDecoder(bytes.NewReader(b))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&d); err != nil {
			return usageErrorf(cmd, "--file %s is not an event definition: %v", file, err)
		}
		name := d.Name
		switch {
		case len(args) > 0 && name != "" && name != args[0]:
			return usageErrorf(cmd, "NAME %q and the file's name %q differ", args[0], name)
		case len(args) > 0:
			name = args[0]
		case name == "":
			return usageErrorf(cmd, `defs put needs NAME (or "name" in the file)`)
		}
		out, err := c.PutDefinition(cmd.Context(), name, wire.PutDefinitionRequest{Schema: d.Schema, Buffer: d.Buffer,
			Retention: d.Retention, MaxPayloadBytes: d.MaxPayloadBytes, Correlation: d.Correlation})
		if err != nil {
			return err
		}
		return a.emit(out, func(w io.Writer) error { return showDefinition(w, out) })
	})
	return cmd
}

func (a *app) defsGet() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "get NAME",
		Short: "show an event definition",
		Args:  exactArgs("NAME"),
	}
	cmd.RunE = a.withClient(func(cmd *cobra.Command, c *client.Client, args []string) error {
		d, err := c.Definition(cmd.Context(), args[0])
		if err != nil {
			return err
		}
		return a.emit(d, func(w io.Writer) error { return showDefinition(w, d) })
	})
	return cmd
}

func (a *app) defsList() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "list",
		Short: "list event definitions, by name",
		Args:  exactArgs(),
	}
	pf := addPageFlags(cmd)
	cmd.RunE = a.withClient(func(cmd *cobra.Command, c *client.Client, args []string) error {
		page, err := fetchPages(cmd.Context(), a, "definitions", pf, func(ctx ctxT, limit int, cursor string) (*wire.Page[*wire.EventDefinition], error) {
			return c.Definitions(ctx, limit, cursor)
		})
		if err != nil {
			return err
		}
		return emitPage(a, page, []string{"NAME", "BUFFER", "RETENTION", "MAX PAYLOAD", "CORRELATION", "SCHEMA", "UPDATED"},
			func(d *wire.EventDefinition) []any {
				return []any{d.Name, orDefault(d.Buffer, "fifo"), dur(time.Duration(d.Retention)), num(d.MaxPayloadBytes),
					d.Correlation != nil, d.Schema, d.UpdatedAt}
			})
	})
	return cmd
}
