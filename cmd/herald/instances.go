package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/spf13/cobra"

	"github.com/heraldwf/herald/httpapi/client"
	"github.com/heraldwf/herald/httpapi/wire"
	"github.com/heraldwf/herald/internal/timeline"
)

func init() { addCommand((*app).instancesCommand) }

// instancesCommand is `herald instances`: workflow instances of a tenant.
func (a *app) instancesCommand() *cobra.Command {
	return group("instances", "start, show, list, cancel and terminate workflow instances; their history, timeline and events",
		a.instancesList(), a.instancesShow(), a.instancesStart(), a.instancesHistory(), a.instancesTimeline(),
		a.instancesEvents(), a.instancesCancel(), a.instancesTerminate(), a.instancesQuery())
}

func (a *app) instancesList() *cobra.Command {
	var f client.InstanceFilter
	cmd := &cobra.Command{
		Use:   "list",
		Short: "list instances, newest first",
		Args:  exactArgs(),
	}
	pf := addPageFlags(cmd)
	cmd.Flags().StringVar(&f.Workflow, "workflow", "", "only instances of this workflow")
	cmd.Flags().StringVar(&f.Status, "status", "", "only instances with this status: pending, running, completed, failed, canceled or terminated")
	cmd.Flags().StringVar(&f.CreatedAfter, "created-after", "", "only instances created at or after this RFC 3339 time")
	cmd.Flags().StringVar(&f.CreatedBefore, "created-before", "", "only instances created before this RFC 3339 time")
	attrs := cmd.Flags().StringArray("attr", nil, `only instances whose searchable attribute KEY equals VALUE: KEY=VALUE, repeat for more keys ('"quoted"' is a string; else true/false, a decimal integer, an RFC 3339 time, or a string)`)
	cmd.RunE = a.withClient(func(cmd *cobra.Command, c *client.Client, args []string) error {
		for _, kv := range *attrs {
			k, v, ok := strings.Cut(kv, "=")
			if !ok || k == "" {
				return usageErrorf(cmd, "--attr %q is not KEY=VALUE", kv)
			}
			if f.Attributes == nil {
				f.Attributes = map[string]string{}
			}
			f.Attributes[k] = v
		}
		page, err := fetchPages(cmd.Context(), a, "instances", pf, func(ctx ctxT, limit int, cursor string) (*wire.Page[*wire.Instance], error) {
			f := f
			f.Limit, f.Cursor = limit, cursor
			return c.ListInstances(ctx, f)
		})
		if err != nil {
			return err
		}
		return emitPage(a, page, []string{"ID", "WORKFLOW", "STATUS", "EXECUTION", "CREATED", "UPDATED"},
			func(in *wire.Instance) []any {
				return []any{in.ID, in.Workflow, string(in.Status), in.Execution, in.CreatedAt, in.UpdatedAt}
			})
	})
	return cmd
}

func (a *app) instancesShow() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "show ID",
		Short: "show an instance: status, input, output or failure, and its timeline with every event's fate",
		Long: `Shows an instance: its status, input, output or failure, then its timeline
as herald demo prints it: every execution's history and the fate of every
event sent to it. With --json, the instance's status as the API answers it
(herald instances timeline ID --json has the timeline).`,
		Args: exactArgs("ID"),
	}
	cmd.RunE = a.withClient(func(cmd *cobra.Command, c *client.Client, args []string) error {
		in, err := c.Instance(cmd.Context(), args[0])
		if err != nil {
			return err
		}
		return a.emit(in, func(w io.Writer) error {
			tl, err := c.Timeline(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			var failure any
			if in.Failure != nil {
				failure = in.Failure.Message
			}
			if err := listing(w,
				field{"id", in.ID},
				field{"workflow", in.Workflow},
				field{"status", string(in.Status)},
				field{"execution", in.Execution},
				field{"created", in.CreatedAt},
				field{"updated", in.UpdatedAt},
				field{"blocked?", in.Blocked},
				field{"parent?", in.ParentID},
				field{"input?", in.Input},
				field{"output?", in.Output},
				field{"failure?", failure},
			); err != nil {
				return err
			}
			return writeTimeline(w, tl)
		})
	})
	return cmd
}

func (a *app) instancesStart() *cobra.Command {
	var req wire.StartInstanceRequest
	var input, inputFile string
	cmd := &cobra.Command{
		Use:   "start WORKFLOW",
		Short: "start a workflow instance and print its id",
		Args:  exactArgs("WORKFLOW"),
	}
	cmd.Flags().StringVar(&req.ID, "id", "", "the instance id (default: Herald chooses one)")
	cmd.Flags().StringVar(&input, "input", "", "the workflow's input, a JSON value")
	cmd.Flags().StringVar(&inputFile, "input-file", "", "read the input (JSON) from this file; - reads stdin")
	cmd.Flags().StringVar(&req.IDReuse, "id-reuse", "", `when --id is taken: "fail" (default) or "use_existing"`)
	cmd.RunE = a.withClient(func(cmd *cobra.Command, c *client.Client, args []string) error {
		req := req
		req.Workflow = args[0]
		raw, err := readJSONArg(cmd, "input", input, inputFile)
		if err != nil {
			return err
		}
		req.Input = raw
		id, err := c.StartInstance(cmd.Context(), req)
		if err != nil {
			return err
		}
		return a.emit(wire.StartInstanceResponse{ID: id}, func(w io.Writer) error {
			_, err := fmt.Fprintln(w, id)
			return err
		})
	})
	return cmd
}

// readJSONArg returns the JSON value given inline (flag name) or in a file
// (- for stdin); nil when neither is given. Text that is not JSON is a
// usage error.
func readJSONArg(cmd *cobra.Command, name, inline, file string) (json.RawMessage, error) {
	var b []byte
	switch {
	case inline != "" && file != "":
		return nil, usageErrorf(cmd, "--%s and --%s-file both give the %s; give one", name, name, name)
	case inline != "":
		b = []byte(inline)
	case file == "-":
		var err error
		if b, err = io.ReadAll(cmd.InOrStdin()); err != nil {
			return nil, err
		}
	case file != "":
		var err error
		if b, err = os.ReadFile(file); err != nil {
			return nil, err
		}
		name += "-file"
	default:
		return nil, nil
	}
	if !json.Valid(b) {
		return nil, usageErrorf(cmd, "--%s is not JSON (a string needs quotes: '\"text\"')", name)
	}
	return json.RawMessage(b), nil
}

// writeTimeline renders tl as herald demo does (package timeline): the
// route's JSON is the renderer's input.
func writeTimeline(w io.Writer, tl *wire.Timeline) error {
	b, err := json.Marshal(tl)
	if err != nil {
		return err
	}
	var in timeline.Instance
	if err := json.Unmarshal(b, &in); err != nil {
		return fmt.Errorf("the timeline: %w", err)
	}
	return timeline.Write(w, &in)
}

func (a *app) instancesTimeline() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "timeline ID",
		Short: "print an instance's timeline: every execution's history and every event's fate",
		Args:  exactArgs("ID"),
	}
	cmd.RunE = a.withClient(func(cmd *cobra.Command, c *client.Client, args []string) error {
		tl, err := c.Timeline(cmd.Context(), args[0])
		if err != nil {
			return err
		}
		return a.emit(tl, func(w io.Writer) error { return writeTimeline(w, tl) })
	})
	return cmd
}

func (a *app) instancesHistory() *cobra.Command {
	var execution int
	cmd := &cobra.Command{
		Use:   "history ID [--execution N]",
		Short: "list an execution's history (default: the current execution)",
		Args:  exactArgs("ID"),
	}
	cmd.Flags().IntVar(&execution, "execution", 0, "the execution, from 1 (default: the current one)")
	cmd.RunE = a.withClient(func(cmd *cobra.Command, c *client.Client, args []string) error {
		h, err := c.History(cmd.Context(), args[0], execution)
		if err != nil {
			return err
		}
		return a.emit(h, func(w io.Writer) error {
			fmt.Fprintf(w, "instance %s, execution %d\n", h.InstanceID, h.Execution)
			t := newTable(w, "SEQ", "TIME", "KIND", "WHAT")
			for _, ev := range h.Events {
				t.row(ev.Seq, ev.Time, string(ev.Kind), timeline.Describe(ev, h.Execution))
			}
			return t.flush()
		})
	})
	return cmd
}

func (a *app) instancesEvents() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "events ID",
		Short: "list the events sent to an instance with their fates, oldest first (as herald events list)",
		Args:  exactArgs("ID"),
	}
	a.eventsListFlags(cmd)
	return cmd
}

func (a *app) instancesCancel() *cobra.Command {
	var reason string
	cmd := &cobra.Command{
		Use:   "cancel ID [--reason TEXT]",
		Short: "ask a running instance to cancel: it sees ctx.Done, may clean up, and ends canceled",
		Args:  exactArgs("ID"),
	}
	cmd.Flags().StringVar(&reason, "reason", "", "why, what the workflow's ctx.Err and the instance's failure say")
	cmd.RunE = a.withClient(func(cmd *cobra.Command, c *client.Client, args []string) error {
		in, err := c.Cancel(cmd.Context(), args[0], reason)
		if err != nil {
			return err
		}
		return a.emit(in, func(w io.Writer) error {
			_, err := fmt.Fprintf(w, "%s: cancellation requested (now %s)\n", in.ID, in.Status)
			return err
		})
	})
	return cmd
}

func (a *app) instancesTerminate() *cobra.Command {
	var reason string
	cmd := &cobra.Command{
		Use:   "terminate ID [--reason TEXT]",
		Short: "terminate a running instance at once (its pending and buffered events are dropped)",
		Args:  exactArgs("ID"),
	}
	cmd.Flags().StringVar(&reason, "reason", "", "why, recorded in the instance's failure")
	cmd.RunE = a.withClient(func(cmd *cobra.Command, c *client.Client, args []string) error {
		in, err := c.Terminate(cmd.Context(), args[0], reason)
		if err != nil {
			return err
		}
		return a.emit(in, func(w io.Writer) error {
			msg := ""
			if in.Failure != nil {
				msg = ": " + in.Failure.Message
			}
			_, err := fmt.Fprintf(w, "%s is %s%s\n", in.ID, in.Status, msg)
			return err
		})
	})
	return cmd
}

func (a *app) instancesQuery() *cobra.Command {
	var argsInline, argsFile string
	cmd := &cobra.Command{
		Use:   "query ID NAME [--args JSON]",
		Short: "ask an instance's workflow a query and print the answer (JSON); writes nothing",
		Long: `Asks an instance's workflow the query NAME (a handler the workflow registered
with ctx.SetQueryHandler or herald.SetQuery) and prints its answer as JSON.
The answer comes from the workflow's state replayed from history; the query
writes nothing. Only a server whose runtime has the workflow registered can
answer (query_unavailable otherwise).`,
		Args: exactArgs("ID", "NAME"),
	}
	cmd.Flags().StringVar(&argsInline, "args", "", "the query's arguments, a JSON value")
	cmd.Flags().StringVar(&argsFile, "args-file", "", "read the arguments (JSON) from this file; - reads stdin")
	cmd.RunE = a.withClient(func(cmd *cobra.Command, c *client.Client, args []string) error {
		raw, err := readJSONArg(cmd, "args", argsInline, argsFile)
		if err != nil {
			return err
		}
		res, err := c.Query(cmd.Context(), args[0], args[1], raw)
		if err != nil {
			return err
		}
		return a.emit(wire.QueryResponse{Result: res}, func(w io.Writer) error {
			var buf bytes.Buffer
			if err := json.Indent(&buf, res, "", "  "); err != nil {
				buf.Reset()
				buf.Write(res)
			}
			_, err := fmt.Fprintln(w, buf.String())
			return err
		})
	})
	return cmd
}
