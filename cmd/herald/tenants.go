package main

import (
	"io"
	"time"

	"github.com/spf13/cobra"

	"github.com/heraldwf/herald/httpapi/client"
	"github.com/heraldwf/herald/httpapi/wire"
)

func init() { addCommand((*app).tenantsCommand) }

// tenantsCommand is `herald tenants`: registered tenants and their limit
// overrides (admin key needed).
func (a *app) tenantsCommand() *cobra.Command {
	return group("tenants", "list tenants, show and set their limits (admin key needed)",
		a.tenantsList(), a.tenantsShow(), a.tenantsSetLimits())
}

// limitsColumns and limitsRow show a tenant's overrides ("-": the
// engine's default).
var limitsColumns = []string{"UNCONSUMED", "CARRY-FORWARD", "QUEUED", "PAYLOAD BYTES", "PAYLOAD DEPTH", "RETENTION"}

func limitsRow(l wire.Limits) []any {
	return []any{num(l.MaxUnconsumedEvents), num(l.MaxCarryForwardExecutions), num(l.MaxQueuedEvents),
		num(l.MaxPayloadBytes), num(l.MaxPayloadDepth), dur(l.EventRetention)}
}

// num shows an override: "-" for none (zero).
func num(n int) any {
	if n == 0 {
		return nil
	}
	return n
}

func dur(d time.Duration) any {
	if d == 0 {
		return nil
	}
	return d
}

func (a *app) tenantsList() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "list",
		Short: "list registered tenants with their limit overrides (- is the engine's default)",
		Args:  exactArgs(),
	}
	cmd.RunE = a.withClient(func(cmd *cobra.Command, c *client.Client, args []string) error {
		ts, err := c.Tenants(cmd.Context())
		if err != nil {
			return err
		}
		return emitPage(a, &wire.Page[*wire.Tenant]{Items: ts}, append([]string{"TENANT"}, limitsColumns...),
			func(t *wire.Tenant) []any { return append([]any{t.ID}, limitsRow(t.Limits)...) })
	})
	return cmd
}

func (a *app) tenantsShow() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "show TENANT",
		Short: "show a tenant's limit overrides",
		Args:  exactArgs("TENANT"),
	}
	cmd.RunE = a.withClient(func(cmd *cobra.Command, c *client.Client, args []string) error {
		t, err := c.TenantInfo(cmd.Context(), args[0])
		if err != nil {
			return err
		}
		return a.emit(t, func(w io.Writer) error { return showTenant(w, t) })
	})
	return cmd
}

func showTenant(w io.Writer, t *wire.Tenant) error {
	l := t.Limits
	return listing(w,
		field{"tenant", t.ID},
		field{"max unconsumed events", num(l.MaxUnconsumedEvents)},
		field{"max carry-forward executions", num(l.MaxCarryForwardExecutions)},
		field{"max queued events", num(l.MaxQueuedEvents)},
		field{"max payload bytes", num(l.MaxPayloadBytes)},
		field{"max payload depth", num(l.MaxPayloadDepth)},
		field{"event retention", dur(l.EventRetention)},
		field{"created", t.CreatedAt},
		field{"updated", t.UpdatedAt},
	)
}

func (a *app) tenantsSetLimits() *cobra.Command {
	var l wire.Limits
	var reset bool
	cmd := &cobra.Command{
		Use:   "set-limits TENANT [flags]",
		Short: "register a tenant and set limit overrides; the limits not given keep their values (0 restores the engine's default)",
		Args:  exactArgs("TENANT"),
	}
	fl := cmd.Flags()
	fl.IntVar(&l.MaxUnconsumedEvents, "max-unconsumed-events", 0, "events an instance may hold unconsumed")
	fl.IntVar(&l.MaxCarryForwardExecutions, "max-carry-forward-executions", 0, "executions an unconsumed event is carried across")
	fl.IntVar(&l.MaxQueuedEvents, "max-queued-events", 0, "events a queue may hold")
	fl.IntVar(&l.MaxPayloadBytes, "max-payload-bytes", 0, "the largest payload, in bytes")
	fl.IntVar(&l.MaxPayloadDepth, "max-payload-depth", 0, "the deepest payload nesting")
	fl.DurationVar(&l.EventRetention, "event-retention", 0, "how long events are kept, e.g. 720h")
	fl.BoolVar(&reset, "reset", false, "start from no overrides instead of the tenant's current ones")
	cmd.RunE = a.withClient(func(cmd *cobra.Command, c *client.Client, args []string) error {
		ctx := cmd.Context()
		// PUT replaces every override: start from the current ones so that
		// only the flags given change.
		next := wire.Limits{}
		if !reset {
			cur, err := c.TenantInfo(ctx, args[0])
			switch {
			case err == nil:
				next = cur.Limits
			case client.Code(err) != "not_found":
				return err
			}
		}
		set := func(name string, dst *int, v int) {
			if cmd.Flags().Changed(name) {
				*dst = v
			}
		}
		set("max-unconsumed-events", &next.MaxUnconsumedEvents, l.MaxUnconsumedEvents)
		set("max-carry-forward-executions", &next.MaxCarryForwardExecutions, l.MaxCarryForwardExecutions)
		set("max-queued-events", &next.MaxQueuedEvents, l.MaxQueuedEvents)
		set("max-payload-bytes", &next.MaxPayloadBytes, l.MaxPayloadBytes)
		set("max-payload-depth", &next.MaxPayloadDepth, l.MaxPayloadDepth)
		if cmd.Flags().Changed("event-retention") {
			next.EventRetention = l.EventRetention
		}
		t, err := c.PutTenant(ctx, args[0], next)
		if err != nil {
			return err
		}
		return a.emit(t, func(w io.Writer) error { return showTenant(w, t) })
	})
	return cmd
}
