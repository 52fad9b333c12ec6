package main

import (
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/heraldwf/herald/httpapi/client"
	"github.com/heraldwf/herald/httpapi/wire"
	"github.com/heraldwf/herald/internal/timeline"
)

func init() { addCommand((*app).eventsCommand) }

// eventsCommand is `herald events`: events sent to instances, on the
// positional and queue lanes, and their fates.
func (a *app) eventsCommand() *cobra.Command {
	return group("events", "raise and enqueue events for instances; show their fates",
		a.eventsRaise(), a.eventsEnqueue(), a.eventsFate(), a.eventsList())
}

// receiptText says what became of a sent event.
func receiptText(verb, instance string, r *wire.EventReceipt) string {
	s := fmt.Sprintf("%s %s for %s", verb, r.EventID, instance)
	if r.Started {
		s += " (and started it)"
	}
	if r.Duplicate {
		s = fmt.Sprintf("duplicate: %s was received at %s; nothing changed", r.EventID, cell(r.ReceivedAt, 0))
	}
	return s
}

// sendFlags are the flags of raise and enqueue.
type sendFlags struct {
	id, startWorkflow, input string
}

// sendRequest builds the request of raise or enqueue from args[2] (the
// payload) and the flags.
func (f *sendFlags) sendRequest(cmd *cobra.Command, args []string) (wire.SendEventRequest, error) {
	req := wire.SendEventRequest{EventID: f.id}
	if len(args) > 2 {
		raw, err := jsonArg(cmd, "DATA", args[2])
		if err != nil {
			return req, err
		}
		req.Payload = raw
	}
	switch {
	case f.startWorkflow != "":
		req.StartIfAbsent = &wire.StartIfAbsent{Workflow: f.startWorkflow}
		if f.input != "" {
			raw, err := readJSONArg(cmd, "input", f.input, "")
			if err != nil {
				return req, err
			}
			req.StartIfAbsent.Input = raw
		}
	case f.input != "":
		return req, usageErrorf(cmd, "--input is the input of --start-if-absent WORKFLOW")
	}
	return req, nil
}

func (a *app) eventsRaise() *cobra.Command {
	f := &sendFlags{}
	cmd := &cobra.Command{
		Use:   "raise INSTANCE NAME [DATA-JSON]",
		Short: "raise event NAME for an instance (positional lane); it waits if the instance has not started",
		Example: `  herald events raise order-1 decision '{"approved": true, "by": "ann"}'
  herald events raise order-1 decision '{"approved": true}' --id decision-order-1
  herald events raise order-2 decision '{"approved": false}' --start-if-absent approval --input '{"item": "desk"}'`,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) < 2 {
				return exactArgs("INSTANCE", "NAME")(cmd, args)
			}
			return optionalArgs("INSTANCE", "NAME", "DATA-JSON")(cmd, args)
		},
	}
	cmd.Flags().StringVar(&f.id, "id", "", "the event id, its idempotency key (default: the server chooses one)")
	cmd.Flags().StringVar(&f.startWorkflow, "start-if-absent", "", "start the instance with this workflow if it does not exist (signal-with-start)")
	cmd.Flags().StringVar(&f.input, "input", "", "the input of --start-if-absent, a JSON value")
	cmd.RunE = a.withClient(func(cmd *cobra.Command, c *client.Client, args []string) error {
		req, err := f.sendRequest(cmd, args)
		if err != nil {
			return err
		}
		r, err := c.RaiseEvent(cmd.Context(), args[0], args[1], req)
		if err != nil {
			return err
		}
		return a.emit(r, func(w io.Writer) error {
			_, err := fmt.Fprintln(w, receiptText("raised "+args[1], args[0], r))
			return err
		})
	})
	return cmd
}

func (a *app) eventsEnqueue() *cobra.Command {
	f := &sendFlags{}
	cmd := &cobra.Command{
		Use:   "enqueue INSTANCE QUEUE [DATA-JSON]",
		Short: "put a message into a queue of an instance (queue lane)",
		Example: `  herald events enqueue inbox-1 messages '"hello"'
  herald events enqueue inbox-1 messages '{"n": 2}' --id msg-2`,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) < 2 {
				return exactArgs("INSTANCE", "QUEUE")(cmd, args)
			}
			return optionalArgs("INSTANCE", "QUEUE", "DATA-JSON")(cmd, args)
		},
	}
	cmd.Flags().StringVar(&f.id, "id", "", "the message's event id, its idempotency key (default: the server chooses one)")
	cmd.Flags().StringVar(&f.startWorkflow, "start-if-absent", "", "start the instance with this workflow if it does not exist")
	cmd.Flags().StringVar(&f.input, "input", "", "the input of --start-if-absent, a JSON value")
	cmd.RunE = a.withClient(func(cmd *cobra.Command, c *client.Client, args []string) error {
		req, err := f.sendRequest(cmd, args)
		if err != nil {
			return err
		}
		r, err := c.Enqueue(cmd.Context(), args[0], args[1], req)
		if err != nil {
			return err
		}
		return a.emit(r, func(w io.Writer) error {
			_, err := fmt.Fprintln(w, receiptText("enqueued on "+args[1], args[0], r))
			return err
		})
	})
	return cmd
}

// fateText says where an event stands, in the words of the timeline.
func fateText(r *wire.EventRecord) string {
	return timeline.Fate(timeline.Event{ID: r.EventID, Lane: r.Lane, Name: r.Name, Key: r.Key, Fate: r.Fate,
		Reason: r.Reason, Execution: r.Execution, OriginExecution: r.OriginExecution, WaitNumber: r.WaitNumber})
}

func (a *app) eventsFate() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "fate EVENT_ID",
		Short: "show where an event stands: pending, buffered, delivered or dropped (and why)",
		Args:  exactArgs("EVENT_ID"),
	}
	cmd.RunE = a.withClient(func(cmd *cobra.Command, c *client.Client, args []string) error {
		r, err := c.EventFate(cmd.Context(), args[0])
		if err != nil {
			return err
		}
		return a.emit(r, func(w io.Writer) error {
			if r.Bus != nil {
				return showPublished(w, r.Bus)
			}
			return listing(w,
				field{"event", r.EventID},
				field{"instance", r.InstanceID},
				field{"lane", string(r.Lane)},
				field{"name", r.Name},
				field{"key?", r.Key},
				field{"fate", fateText(r)},
				field{"received", r.ReceivedAt},
				field{"updated", r.UpdatedAt},
			)
		})
	})
	return cmd
}

func (a *app) eventsList() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "list INSTANCE",
		Short: "list the events sent to an instance with their fates, oldest first",
		Args:  exactArgs("INSTANCE"),
	}
	a.eventsListFlags(cmd)
	return cmd
}

// eventsListFlags makes cmd (whose argument is an instance id) list the
// instance's events: herald events list and herald instances events.
func (a *app) eventsListFlags(cmd *cobra.Command) {
	var f client.EventFilter
	cmd.Flags().StringVar(&f.Lane, "lane", "", "only events of this lane: positional, queue or correlated")
	cmd.Flags().StringVar(&f.Name, "name", "", "only events of this name, queue or event definition")
	cmd.Flags().StringVar(&f.Fate, "fate", "", "only events with this fate: pending, buffered, delivered or dropped")
	cmd.Flags().IntVar(&f.Limit, "limit", 0, "at most this many, 1–1000 (default 1000)")
	cmd.RunE = a.withClient(func(cmd *cobra.Command, c *client.Client, args []string) error {
		recs, err := c.Events(cmd.Context(), args[0], f)
		if err != nil {
			return err
		}
		return emitPage(a, &wire.Page[*wire.EventRecord]{Items: recs},
			[]string{"EVENT", "LANE", "NAME", "FATE", "RECEIVED"},
			func(r *wire.EventRecord) []any {
				name := r.Name
				if r.Key != "" {
					name += " key " + r.Key
				}
				return []any{r.EventID, string(r.Lane), name, fateText(r), r.ReceivedAt}
			})
	})
}
