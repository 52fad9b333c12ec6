package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/heraldwf/herald/heraldtype"
	"github.com/heraldwf/herald/httpapi/client"
	"github.com/heraldwf/herald/httpapi/wire"
)

func init() { addCommand((*app).scriptsCommand) }

// scriptsCommand is `herald scripts`: the JavaScript scripts the event
// bus's script targets run.
func (a *app) scriptsCommand() *cobra.Command {
	return group("scripts", "save, list, get, delete, validate and dry-run event-bus scripts",
		a.scriptsPut(), a.scriptsList(), a.scriptsGet(), a.deleteCommand("ID", "script", "delete every version of a script", (*client.Client).DeleteScript), a.scriptsValidate(), a.scriptsTest())
}

// scriptSource reads --file (required).
func scriptSource(cmd *cobra.Command, file string) (string, error) {
	if file == "" {
		return "", usageErrorf(cmd, "%s needs --file SCRIPT.js (- reads stdin)", cmd.CommandPath())
	}
	b, err := readFile(cmd, file)
	return string(b), err
}

func (a *app) scriptsPut() *cobra.Command {
	var file string
	cmd := &cobra.Command{
		Use:     "put ID --file SCRIPT.js",
		Short:   "save a new version of a script (a syntax error is refused with its line and column)",
		Example: "  herald scripts put audit --file audit.js",
		Args:    exactArgs("ID"),
	}
	cmd.Flags().StringVar(&file, "file", "", "the script's source; - reads stdin")
	cmd.RunE = a.withClient(func(cmd *cobra.Command, c *client.Client, args []string) error {
		src, err := scriptSource(cmd, file)
		if err != nil {
			return err
		}
		s, err := c.PutScript(cmd.Context(), args[0], src)
		if err != nil {
			return err
		}
		return a.emit(s, func(w io.Writer) error {
			_, err := fmt.Fprintf(w, "saved script %s version %d (%d bytes)\n", s.ID, s.Version, len(s.Source))
			return err
		})
	})
	return cmd
}

func (a *app) scriptsList() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "list",
		Short: "list scripts (their latest versions), by id",
		Args:  exactArgs(),
	}
	pf := addPageFlags(cmd)
	cmd.RunE = a.withClient(func(cmd *cobra.Command, c *client.Client, args []string) error {
		page, err := fetchPages(cmd.Context(), a, "scripts", pf, func(ctx ctxT, limit int, cursor string) (*wire.Page[*wire.ScriptInfo], error) {
			return c.ListScripts(ctx, limit, cursor)
		})
		if err != nil {
			return err
		}
		return emitPage(a, page, []string{"ID", "VERSION", "SIZE", "CREATED", "UPDATED"},
			func(s *wire.ScriptInfo) []any { return []any{s.ID, s.Version, s.Size, s.CreatedAt, s.UpdatedAt} })
	})
	return cmd
}

func (a *app) scriptsGet() *cobra.Command {
	var version int
	cmd := &cobra.Command{
		Use:   "get ID [--version N]",
		Short: "print a script's source (the latest version, or --version N)",
		Args:  exactArgs("ID"),
	}
	cmd.Flags().IntVar(&version, "version", 0, "the version (default: the latest)")
	cmd.RunE = a.withClient(func(cmd *cobra.Command, c *client.Client, args []string) error {
		s, err := c.Script(cmd.Context(), args[0], version)
		if err != nil {
			return err
		}
		return a.emit(s, func(w io.Writer) error {
			// The source alone on stdout, so that it can be saved and put
			// back; which version it is on stderr.
			fmt.Fprintf(a.stderr, "script %s version %d, saved %s\n", s.ID, s.Version, cell(s.UpdatedAt, 0))
			_, err := io.WriteString(w, s.Source)
			if err == nil && !strings.HasSuffix(s.Source, "\n") {
				_, err = io.WriteString(w, "\n")
			}
			return err
		})
	})
	return cmd
}

func (a *app) scriptsValidate() *cobra.Command {
	var file string
	cmd := &cobra.Command{
		Use:   "validate --file SCRIPT.js",
		Short: "check a script's syntax (nothing is stored); exit 1 if it does not parse",
		Args:  exactArgs(),
	}
	cmd.Flags().StringVar(&file, "file", "", "the script's source; - reads stdin")
	cmd.RunE = a.withClient(func(cmd *cobra.Command, c *client.Client, args []string) error {
		src, err := scriptSource(cmd, file)
		if err != nil {
			return err
		}
		v, err := c.ValidateScript(cmd.Context(), src)
		if err != nil {
			return err
		}
		err = a.emit(v, func(w io.Writer) error {
			if v.OK {
				_, err := fmt.Fprintln(w, "ok: the script parses")
				return err
			}
			e := v.SyntaxError
			_, err := fmt.Fprintf(w, "syntax error: line %d, column %d: %s\n", e.Line, e.Column, e.Message)
			return err
		})
		if err == nil && !v.OK {
			return exitCode(exitFail)
		}
		return err
	})
	return cmd
}

const scriptsTestLong = `Runs a script once on a sample event in the bus's sandbox, as an attempt
would run it, and prints its result, logs, or error and stack; nothing is
stored. The script is the source in --file, or the stored script ID (its
latest version, or --version N). --event is the event the script sees as
ctx.event: {"type": …, "data": …} ("id" and "timestamp" optional).
The exit status is 1 when the script fails.`

func (a *app) scriptsTest() *cobra.Command {
	var file, event string
	var version int
	var timeout time.Duration
	cmd := &cobra.Command{
		Use:   "test (ID | --file SCRIPT.js) --event EVENT-JSON",
		Short: "dry-run a script on a sample event (nothing is stored)",
		Long:  scriptsTestLong,
		Example: `  herald scripts test audit --event '{"type": "order.paid", "data": {"order_id": "o-1"}}'
  herald scripts test --file audit.js --event '{"type": "order.paid", "data": {}}'`,
		Args: func(cmd *cobra.Command, args []string) error {
			if file != "" {
				if len(args) > 0 {
					return usageErrorf(cmd, "give ID or --file, not both")
				}
				return nil
			}
			if len(args) == 0 {
				return usageErrorf(cmd, "scripts test needs ID or --file")
			}
			return exactArgs("ID")(cmd, args)
		},
	}
	cmd.Flags().StringVar(&file, "file", "", "run this source (- reads stdin) instead of a stored script")
	cmd.Flags().IntVar(&version, "version", 0, "the stored script's version (default: the latest)")
	cmd.Flags().StringVar(&event, "event", "", `the sample event, {"type": …, "data": …}`)
	cmd.Flags().DurationVar(&timeout, "timeout", 0, "bounds the run, at most 1m (default: the bus's)")
	cmd.RunE = a.withClient(func(cmd *cobra.Command, c *client.Client, args []string) error {
		req := wire.TestScriptRequest{Version: version, Timeout: heraldtype.Duration(timeout)}
		if event == "" {
			return usageErrorf(cmd, `scripts test needs --event '{"type": …, "data": …}'`)
		}
		dec := json.NewDecoder(strings.NewReader(event))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&req.Event); err != nil {
			return usageErrorf(cmd, `--event is not an event {"type", "data", "id", "timestamp"}: %v`, err)
		}
		if file != "" {
			if version != 0 {
				return usageErrorf(cmd, "--version names a stored script's version: not with --file")
			}
			src, err := scriptSource(cmd, file)
			if err != nil {
				return err
			}
			req.Source = src
		} else {
			req.Script = args[0]
		}
		r, err := c.TestScript(cmd.Context(), req)
		if err != nil {
			return err
		}
		err = a.emit(r, func(w io.Writer) error { return showTestRun(w, r) })
		if err == nil && !r.Succeeded {
			return exitCode(exitFail)
		}
		return err
	})
	return cmd
}

// showTestRun writes a dry run's outcome.
func showTestRun(w io.Writer, r *wire.TestScriptResponse) error {
	var b bytes.Buffer
	if r.Succeeded {
		fmt.Fprintf(&b, "succeeded in %s\n", time.Duration(r.Duration))
		fmt.Fprintf(&b, "result: %s\n", cell(r.Result, 0))
	} else {
		fmt.Fprintf(&b, "failed (%s) in %s: %s\n", r.ErrorKind, time.Duration(r.Duration), r.Error)
	}
	for _, l := range r.Logs {
		fmt.Fprintf(&b, "log: %s\n", l)
	}
	if !r.Succeeded && r.Stack != "" {
		fmt.Fprintf(&b, "stack:\n%s\n", indent(strings.TrimRight(r.Stack, "\n"), "  "))
	}
	_, err := w.Write(b.Bytes())
	return err
}

// indent prefixes every line of s.
func indent(s, prefix string) string {
	return prefix + strings.ReplaceAll(s, "\n", "\n"+prefix)
}
