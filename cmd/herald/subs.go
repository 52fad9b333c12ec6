package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/heraldwf/herald/heraldtype"
	"github.com/heraldwf/herald/httpapi/client"
	"github.com/heraldwf/herald/httpapi/wire"
)

func init() { addCommand((*app).subsCommand) }

// subsCommand is `herald subs`: the event bus's subscriptions.
func (a *app) subsCommand() *cobra.Command {
	return group("subs", "list, show, put, enable, disable and delete event-bus subscriptions",
		a.subsList(), a.subsShow(), a.subsPut(), a.subsEnable(true), a.subsEnable(false), a.deleteCommand("ID", "subscription", "delete a subscription", (*client.Client).DeleteSubscription))
}

// targetString says what a target does, in one line: its kind and the
// fields it has ("signal name=decision instance_id=order-{data.id}").
func targetString(t wire.Target) string {
	parts := []string{string(t.Kind)}
	for _, f := range []struct{ k, v string }{{"script", t.Script}, {"workflow", t.Workflow}, {"handler", t.Handler},
		{"name", t.Name}, {"instance_id", t.InstanceID}, {"key", t.Key}} {
		if f.v != "" {
			parts = append(parts, f.k+"="+f.v)
		}
	}
	return strings.Join(parts, " ")
}

func (a *app) subsList() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "list",
		Short: "list subscriptions, by id",
		Args:  exactArgs(),
	}
	pf := addPageFlags(cmd)
	cmd.RunE = a.withClient(func(cmd *cobra.Command, c *client.Client, args []string) error {
		page, err := fetchPages(cmd.Context(), a, "subscriptions", pf, func(ctx ctxT, limit int, cursor string) (*wire.Page[*wire.Subscription], error) {
			return c.ListSubscriptions(ctx, limit, cursor)
		})
		if err != nil {
			return err
		}
		return emitPage(a, page, []string{"ID", "PATTERN", "TARGET", "ENABLED", "FILTER", "VERSION", "UPDATED"},
			func(s *wire.Subscription) []any {
				return []any{s.ID, s.Pattern, targetString(s.Target), s.Enabled, s.Filter, s.Version, s.UpdatedAt}
			})
	})
	return cmd
}

// showSubscription writes a subscription as a listing.
func showSubscription(w io.Writer, s *wire.Subscription) error {
	retries := any("3 (default)")
	if s.MaxRetries != nil {
		retries = *s.MaxRetries
	}
	timeout := any("default (30s)")
	if s.Timeout != 0 {
		timeout = time.Duration(s.Timeout)
	}
	return listing(w,
		field{"id", s.ID},
		field{"pattern", s.Pattern},
		field{"filter?", s.Filter},
		field{"target", targetString(s.Target)},
		field{"enabled", s.Enabled},
		field{"max retries", retries},
		field{"timeout", timeout},
		field{"version", s.Version},
		field{"created", s.CreatedAt},
		field{"updated", s.UpdatedAt},
	)
}

func (a *app) subsShow() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "show ID",
		Short: "show a subscription",
		Args:  exactArgs("ID"),
	}
	cmd.RunE = a.withClient(func(cmd *cobra.Command, c *client.Client, args []string) error {
		s, err := c.Subscription(cmd.Context(), args[0])
		if err != nil {
			return err
		}
		return a.emit(s, func(w io.Writer) error { return showSubscription(w, s) })
	})
	return cmd
}

const subsPutLong = `Creates subscription ID, or replaces every field of it: from flags, or
from a JSON file (--file) holding {"pattern", "filter", "target",
"enabled", "max_retries", "timeout"} as the API takes it.

The pattern is an event type (order.paid) or one with wildcards: * for one
segment (order.*), a final > for one or more (order.>). The target is one
of:
  --target script      --target-script ID
  --target workflow    --target-workflow NAME [--target-instance-id TEMPLATE]
  --target signal      --target-name EVENT --target-instance-id TEMPLATE
  --target enqueue     --target-name QUEUE --target-instance-id TEMPLATE
  --target correlated  --target-name DEFINITION --target-key TEMPLATE
  --target handler     --target-handler NAME
(--target may be left out with --target-script, --target-workflow or
--target-handler.) Templates are text with {path} placeholders over the
event: order-{data.order_id}.`

func (a *app) subsPut() *cobra.Command {
	var req wire.PutSubscriptionRequest
	var file, filter, filterFile string
	var disabled bool
	var maxRetries int
	var timeout time.Duration
	cmd := &cobra.Command{
		Use:   "put ID (--pattern PATTERN --target… | --file SUBSCRIPTION.json)",
		Short: "create or replace a subscription",
		Long:  subsPutLong,
		Example: `  herald subs put audit --pattern 'order.>' --target-script audit
  herald subs put big-orders --pattern order.paid --target-handler notify-sales \
      --filter '{"logic": "AND", "conditions": [{"field": "data.amount", "op": "gte", "value": 1000}]}'
  herald subs put approve --file subscription.json`,
		Args: exactArgs("ID"),
	}
	fl := cmd.Flags()
	fl.StringVar(&file, "file", "", "read the subscription (the API's JSON) from this file; - reads stdin")
	fl.StringVar(&req.Pattern, "pattern", "", "the event type or pattern to match")
	fl.StringVar(&filter, "filter", "", "filter rules, a JSON rule tree (docs/bus.md)")
	fl.StringVar(&filterFile, "filter-file", "", "read the filter rules from this file")
	fl.StringVar((*string)(&req.Target.Kind), "target", "", "the target's kind: script, workflow, signal, enqueue, correlated or handler")
	fl.StringVar(&req.Target.Script, "target-script", "", "the script a script target runs")
	fl.StringVar(&req.Target.Workflow, "target-workflow", "", "the workflow a workflow target starts")
	fl.StringVar(&req.Target.InstanceID, "target-instance-id", "", "the instance id template of a workflow, signal or enqueue target")
	fl.StringVar(&req.Target.Name, "target-name", "", "the event (signal), queue (enqueue) or definition (correlated)")
	fl.StringVar(&req.Target.Key, "target-key", "", "the key template of a correlated target")
	fl.StringVar(&req.Target.Handler, "target-handler", "", "the Go handler a handler target calls")
	fl.BoolVar(&disabled, "disabled", false, "create it disabled (it matches no event until enabled)")
	fl.IntVar(&maxRetries, "max-retries", 0, "retries after a transient failure, 0–20 (default 3)")
	fl.DurationVar(&timeout, "timeout", 0, "the timeout of one attempt, at most 15m (default 30s)")
	cmd.RunE = a.withClient(func(cmd *cobra.Command, c *client.Client, args []string) error {
		req := req
		if file != "" {
			for _, name := range []string{"pattern", "filter", "filter-file", "target", "target-script", "target-workflow",
				"target-instance-id", "target-name", "target-key", "target-handler", "disabled", "max-retries", "timeout"} {
				if cmd.Flags().Changed(name) {
					return usageErrorf(cmd, "--file gives the whole subscription: no --%s with it", name)
				}
			}
			b, err := readFile(cmd, file)
			if err != nil {
				return err
			}
			req = wire.PutSubscriptionRequest{}
			dec := json.NewDecoder(bytes.NewReader(b))
			dec.DisallowUnknownFields()
			if err := dec.Decode(&req); err != nil {
				return usageErrorf(cmd, "--file %s is not a subscription: %v", file, err)
			}
		} else {
			if req.Pattern == "" {
				return usageErrorf(cmd, "subs put needs --pattern (or --file)")
			}
			if req.Target.Kind == "" {
				switch {
				case req.Target.Script != "" && req.Target.Workflow == "" && req.Target.Handler == "":
					req.Target.Kind = heraldtype.TargetScript
				case req.Target.Workflow != "" && req.Target.Script == "" && req.Target.Handler == "":
					req.Target.Kind = heraldtype.TargetWorkflow
				case req.Target.Handler != "" && req.Target.Script == "" && req.Target.Workflow == "":
					req.Target.Kind = heraldtype.TargetHandler
				default:
					return usageErrorf(cmd, "subs put needs --target KIND (or one of --target-script, --target-workflow, --target-handler)")
				}
			}
			raw, err := readJSONArg(cmd, "filter", filter, filterFile)
			if err != nil {
				return err
			}
			req.Filter = raw
			if disabled {
				f := false
				req.Enabled = &f
			}
			if cmd.Flags().Changed("max-retries") {
				req.MaxRetries = &maxRetries
			}
			req.Timeout = heraldtype.Duration(timeout)
		}
		s, err := c.PutSubscription(cmd.Context(), args[0], req)
		if err != nil {
			return err
		}
		return a.emit(s, func(w io.Writer) error { return showSubscription(w, s) })
	})
	return cmd
}

func (a *app) subsEnable(enable bool) *cobra.Command {
	use, short, done := "enable ID", "enable a subscription: it matches new events again", "enabled"
	if !enable {
		use, short, done = "disable ID", "disable a subscription: it matches no new event (queued executions still run)", "disabled"
	}
	cmd := &cobra.Command{Use: use, Short: short, Args: exactArgs("ID")}
	cmd.RunE = a.withClient(func(cmd *cobra.Command, c *client.Client, args []string) error {
		s, err := c.SetSubscriptionEnabled(cmd.Context(), args[0], enable)
		if err != nil {
			return err
		}
		return a.emit(s, func(w io.Writer) error {
			_, err := fmt.Fprintf(w, "%s subscription %s (version %d)\n", done, s.ID, s.Version)
			return err
		})
	})
	return cmd
}

// Deleted is the --json output of a delete whose API answer has no body.
type Deleted struct {
	ID      string `json:"id"`
	Deleted bool   `json:"deleted"`
}

// emitDeleted reports that the what named id was deleted.
// deleteCommand is `delete ARG` for an object the API deletes by one id
// (definitions, scripts, subscriptions).
func (a *app) deleteCommand(arg, what, short string, del func(*client.Client, context.Context, string) error) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "delete " + arg,
		Short: short,
		Args:  exactArgs(arg),
	}
	cmd.RunE = a.withClient(func(cmd *cobra.Command, c *client.Client, args []string) error {
		if err := del(c, cmd.Context(), args[0]); err != nil {
			return err
		}
		return a.emitDeleted(what, args[0])
	})
	return cmd
}

func (a *app) emitDeleted(what, id string) error {
	return a.emit(Deleted{ID: id, Deleted: true}, func(w io.Writer) error {
		_, err := fmt.Fprintf(w, "deleted %s %s\n", what, id)
		return err
	})
}

// readFile reads file, - for stdin.
func readFile(cmd *cobra.Command, file string) ([]byte, error) {
	if file == "-" {
		return io.ReadAll(cmd.InOrStdin())
	}
	return os.ReadFile(file)
}
