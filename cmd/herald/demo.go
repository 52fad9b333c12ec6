package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"github.com/spf13/cobra"

	"github.com/heraldwf/herald"
	"github.com/heraldwf/herald/examples/approval"
	"github.com/heraldwf/herald/examples/mailbox"
	"github.com/heraldwf/herald/examples/signing"
	"github.com/heraldwf/herald/history"
	"github.com/heraldwf/herald/internal/storeurl"
	"github.com/heraldwf/herald/internal/timeline"
)

const demoUsage = `usage: herald demo [--db LOCATION | --postgres URL [--schema NAME]] [--fresh]

Runs the example workflows (approval, meter, mailbox, document signing) end to
end and prints each instance's timeline and the fate of every event.

The demo writes only to a store it creates. By default that is a new SQLite
file in a temporary directory, removed when the demo ends. A store named with
--db or --postgres must not exist yet (the demo creates it and leaves it for
you to look at); if it does, the demo refuses to touch it unless --fresh is
given.

flags:
  --db LOCATION    the store: a SQLite file (a plain path or sqlite:PATH) or a
                   postgres:// URL (as --postgres)
  --postgres URL   run on PostgreSQL, e.g.
                   postgres://postgres@127.0.0.1:5432/test?sslmode=disable;
                   HERALD_DATABASE_URL is not read: write
                   --postgres "$HERALD_DATABASE_URL" to use it
  --schema NAME    the PostgreSQL schema (default herald_demo, or the URL's
                   schema= parameter)
  --fresh          if the file or schema exists, delete it and start again;
                   only a Herald store (or an empty one) is deleted, never
                   anything else
  -h, --help       this text
`

// errStoreExists refuses a demo on a store that is already there: the demo
// deletes only what it created, or what --fresh tells it to.
var errStoreExists = errors.New("already exists")

// defaultDemoSchema keeps the demo away from "herald", the schema a real
// deployment uses by default.
const defaultDemoSchema = "herald_demo"

// demoCommand is `herald demo`. It parses its own flags (with package flag,
// as before the command line moved to cobra): its usage and messages stay
// what they were.
func (a *app) demoCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:                "demo [flags]",
		Short:              "run the example workflows and print their timelines",
		DisableFlagParsing: true,
		RunE: func(cmd *cobra.Command, args []string) error {
			if code := runDemo(cmd.Context(), args, a.stdout, a.stderr); code != exitOK {
				return exitCode(code)
			}
			return nil
		},
	}
	cmd.SetHelpFunc(func(*cobra.Command, []string) { fmt.Fprint(a.stdout, demoUsage) })
	return cmd
}

// registerExamples registers the example workflows (approval, meter,
// mailbox, signing) and the bus handler "notify-sales" on rt: what the demo
// runs and what herald serve serves.
func registerExamples(rt *herald.Runtime) {
	approval.Register(rt)
	mailbox.Register(rt)
	signing.Register(rt)
	herald.RegisterBusHandler(rt, "notify-sales", func(ctx context.Context, ev herald.BusEvent) (any, error) {
		return map[string]string{"notified": "sales", "event": ev.ID}, nil
	})
}

// demoUsageError reports a usage error of the demo: a short message, then the
// usage, on stderr.
func demoUsageError(stderr io.Writer, msg string) int {
	fmt.Fprintf(stderr, "herald: %s\n\n%s", msg, demoUsage)
	return exitUsage
}

// failed reports a command that failed.
func failed(stderr io.Writer, err error) int {
	fmt.Fprintln(stderr, "herald:", err)
	return exitFail
}

// parseFlags parses args with fs, whose own output is silenced: -h prints
// the usage to stdout (exit 0), a bad flag or a stray argument prints a
// message and the usage to stderr (exit 2). ok is false when the command
// should end with code.
func parseFlags(fs *flag.FlagSet, args []string, usage string, stdout, stderr io.Writer) (code int, ok bool) {
	fs.SetOutput(io.Discard)
	err := fs.Parse(args)
	switch {
	case errors.Is(err, flag.ErrHelp):
		fmt.Fprint(stdout, usage)
		return exitOK, false
	case err != nil:
		return demoUsageError(stderr, fs.Name()+": "+err.Error()), false
	case fs.NArg() > 0:
		return demoUsageError(stderr, fmt.Sprintf("%s: unexpected argument %q", fs.Name(), fs.Arg(0))), false
	}
	return exitOK, true
}

// runDemo runs `herald demo args` and returns the exit code.
func runDemo(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("demo", flag.ContinueOnError)
	db := fs.String("db", "", "")
	pg := fs.String("postgres", "", "")
	schema := fs.String("schema", "", "")
	fresh := fs.Bool("fresh", false, "")
	if code, ok := parseFlags(fs, args, demoUsage, stdout, stderr); !ok {
		return code
	}
	loc, err := demoLocation(*db, *pg, *schema)
	if err != nil {
		return demoUsageError(stderr, "demo: "+err.Error())
	}

	temporary := loc == nil
	if temporary {
		if os.Getenv("HERALD_DATABASE_URL") != "" {
			fmt.Fprintln(stderr, `herald demo: HERALD_DATABASE_URL is set but the demo does not read it; `+
				`to run the demo on that database: herald demo --postgres "$HERALD_DATABASE_URL"`)
		}
		dir, err := os.MkdirTemp("", "herald-demo-")
		if err != nil {
			return failed(stderr, err)
		}
		defer os.RemoveAll(dir)
		loc = &storeurl.Location{Backend: storeurl.SQLite, Path: filepath.Join(dir, "demo.db")}
	}

	what := loc.Describe()
	if temporary {
		fmt.Fprintf(stdout, "Herald demo on %s (new, in a temporary directory removed when the demo ends; --db FILE keeps one)\n", what)
	} else {
		exists, err := loc.Exists(ctx)
		if err != nil {
			return failed(stderr, err)
		}
		switch {
		case exists && !*fresh:
			return failed(stderr, fmt.Errorf("demo: %s %w; the demo writes only to a store it creates: "+
				"name a new one, or add --fresh to delete it and start again", what, errStoreExists))
		case exists:
			if err := loc.Drop(ctx); err != nil {
				return failed(stderr, fmt.Errorf("demo: --fresh: %w", err))
			}
			fmt.Fprintf(stdout, "Herald demo on %s (deleted and created again: --fresh)\n", what)
		default:
			fmt.Fprintf(stdout, "Herald demo on %s (new)\n", what)
		}
	}

	store, err := loc.Open(ctx)
	if err != nil {
		return failed(stderr, err)
	}
	defer store.Close()
	logger := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	rt, err := herald.NewRuntime(store, &herald.Config{ClientConfig: herald.ClientConfig{Logger: logger}})
	if err != nil {
		return failed(stderr, err)
	}
	registerExamples(rt)
	if err := rt.Start(ctx); err != nil {
		return failed(stderr, err)
	}
	defer rt.Stop(context.Background())
	c, err := rt.Client(herald.DefaultTenant)
	if err != nil {
		return failed(stderr, err)
	}
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	if err := demo(ctx, c, stdout); err != nil {
		return failed(stderr, fmt.Errorf("demo: %w", err))
	}
	return exitOK
}

// demoLocation returns the store the flags name, or nil for the default (a
// temporary SQLite file). The environment plays no part: a store is used
// only when a flag names it.
func demoLocation(db, pg, schema string) (*storeurl.Location, error) {
	if db != "" && pg != "" {
		return nil, errors.New("--db and --postgres both name a store; give one")
	}
	var loc *storeurl.Location
	switch {
	case pg != "":
		l, err := storeurl.Parse(pg)
		if err != nil {
			return nil, fmt.Errorf("--postgres: %w", err)
		}
		if l.Backend != storeurl.Postgres {
			return nil, fmt.Errorf("--postgres wants a postgres:// URL, got %s (a SQLite file goes in --db)", l)
		}
		loc = l
	case db != "":
		l, err := storeurl.Parse(db)
		if err != nil {
			return nil, fmt.Errorf("--db: %w", err)
		}
		loc = l
	}
	if loc == nil || loc.Backend != storeurl.Postgres {
		if schema != "" {
			return nil, errors.New("--schema is for PostgreSQL (--postgres URL)")
		}
		return loc, nil
	}
	switch {
	case schema != "" && loc.Schema != "" && schema != loc.Schema:
		return nil, fmt.Errorf("--schema %s and the URL's schema=%s differ", schema, loc.Schema)
	case schema != "":
		loc.Schema = schema
	case loc.Schema == "":
		loc.Schema = defaultDemoSchema
	}
	return loc, nil
}

// demo runs the example workflows through c: events raised before an
// instance exists and before and after its waits, a wait racing a deadline
// (and the late answer it then drops), loops that continue as new with
// buffered events carried over, the queue lane and the correlated lane. It
// prints each timeline to w.
func demo(ctx context.Context, c *herald.Client, w io.Writer) error {
	// 1. A decision raised before the instance exists is kept, and the
	//    workflow receives it, buffered, the moment it waits.
	if _, err := c.RaiseEvent(ctx, "order-1", "decision", approval.Decision{Approved: true, By: "alice"},
		herald.WithEventID("order-1/early-decision")); err != nil {
		return err
	}
	if _, err := c.StartWorkflow(ctx, "approval", approval.Request{Item: "laptop", Amount: 1200,
		Deadline: herald.Duration(time.Hour), Escalation: herald.Duration(time.Second)}, herald.WithInstanceID("order-1")); err != nil {
		return err
	}

	// 2. A decision raised after the workflow waits is delivered to the wait.
	if _, err := c.StartWorkflow(ctx, "approval", approval.Request{Item: "chair", Amount: 300,
		Deadline: herald.Duration(time.Hour), Escalation: herald.Duration(time.Second)}, herald.WithInstanceID("order-2")); err != nil {
		return err
	}
	if err := waitHistory(ctx, c, "order-2", history.EventSubscribed); err != nil {
		return err
	}
	if _, err := c.RaiseEvent(ctx, "order-2", "decision", approval.Decision{Approved: false, By: "bob"},
		herald.WithEventID("order-2/decision")); err != nil {
		return err
	}
	// The same event id again is a no-op that returns the first receipt.
	if r, err := c.RaiseEvent(ctx, "order-2", "decision", approval.Decision{Approved: true, By: "bob"},
		herald.WithEventID("order-2/decision")); err == nil && r.Duplicate {
		fmt.Fprintf(w, "order-2: re-sent event %s → duplicate, first receipt returned, nothing changed\n", r.EventID)
	}

	// 3. The deadline wins the race: the wait is withdrawn. A decision that
	//    arrives during escalation answers the withdrawn question and is
	//    dropped; the next one reaches the new wait.
	if _, err := c.StartWorkflow(ctx, "approval", approval.Request{Item: "desk", Amount: 800,
		Deadline: herald.Duration(300 * time.Millisecond), Escalation: herald.Duration(1500 * time.Millisecond)}, herald.WithInstanceID("order-3")); err != nil {
		return err
	}
	if err := waitHistory(ctx, c, "order-3", history.EventSubscribedCancelled); err != nil {
		return err
	}
	if _, err := c.RaiseEvent(ctx, "order-3", "decision", approval.Decision{Approved: false, By: "late-dave"},
		herald.WithEventID("order-3/late")); err != nil {
		return err
	}
	if err := waitHistory(ctx, c, "order-3", history.EventDropped); err != nil {
		return err
	}
	if _, err := c.RaiseEvent(ctx, "order-3", "decision", approval.Decision{Approved: true, By: "carol"},
		herald.WithEventID("order-3/fresh")); err != nil {
		return err
	}

	// 4. Six readings raised before the meter starts, which takes two per
	//    execution: the unconsumed ones are carried across continue-as-new
	//    in order, keeping the execution they arrived in.
	for i := 1; i <= 6; i++ {
		if _, err := c.RaiseEvent(ctx, "meter-1", "reading", i*10,
			herald.WithEventID(fmt.Sprintf("meter-1/reading-%d", i))); err != nil {
			return err
		}
	}
	if _, err := c.StartWorkflow(ctx, "meter", approval.MeterState{PerRun: 2, MaxRuns: 3},
		herald.WithInstanceID("meter-1")); err != nil {
		return err
	}

	// 5. The queue lane. "settings" is a latest-value queue: of two
	//    settings sent before the worker starts, only the newer is kept.
	//    Five orders wait in the mailbox before it starts; it handles two per
	//    execution, racing each receive against an idle timer (a receive
	//    that loses consumes nothing) and carries the rest across
	//    continue-as-new. The sixth order arrives while it idles.
	if _, err := c.PutEventDefinition(ctx, herald.EventDefinition{Name: "settings", Buffer: "latest",
		Schema: []byte(`{"type":"object","properties":{"currency":{"type":"string"}},"required":["currency"]}`)}); err != nil {
		return err
	}
	if _, err := c.Enqueue(ctx, "mailbox-1", "settings", map[string]any{"currency": 42}); err != nil {
		fmt.Fprintf(w, "mailbox-1: settings with a number for currency refused: %v\n", err)
	}
	for i, cur := range []string{"USD", "EUR"} {
		if _, err := c.Enqueue(ctx, "mailbox-1", "settings", map[string]any{"currency": cur},
			herald.WithEventID(fmt.Sprintf("mailbox-1/settings-%d", i+1))); err != nil {
			return err
		}
	}
	for i := 1; i <= 5; i++ {
		if _, err := c.Enqueue(ctx, "mailbox-1", "orders", fmt.Sprintf("order #%d", i),
			herald.WithEventID(fmt.Sprintf("mailbox-1/order-%d", i))); err != nil {
			return err
		}
	}
	if _, err := c.StartWorkflow(ctx, "mailbox", mailbox.State{PerRun: 2, MaxRuns: 3},
		herald.WithInstanceID("mailbox-1")); err != nil {
		return err
	}
	if err := waitUntil(ctx, "mailbox-1's third execution", func() (bool, error) {
		info, err := c.Status(ctx, "mailbox-1")
		return err == nil && info.Execution == 3, err
	}); err != nil {
		return err
	}
	if err := waitHistory(ctx, c, "mailbox-1", history.TimerFired); err != nil {
		return err
	}
	if _, err := c.Enqueue(ctx, "mailbox-1", "orders", "order #6", herald.WithEventID("mailbox-1/order-6")); err != nil {
		return err
	}

	// 6. The correlated lane. The signing service's webhook knows a document
	//    id, not an instance: one put under the id reaches every party
	//    waiting on it (fan-out). A put before the wait works too: "dave"
	//    starts after the webhook for DOC-8 fired and completes at once.
	if _, err := c.PutEventDefinition(ctx, herald.EventDefinition{Name: signing.DocumentSigned,
		Correlation: &herald.CorrelationConfig{TTL: 24 * time.Hour}}); err != nil {
		return err
	}
	for _, party := range []string{"alice", "bob", "carol"} {
		if _, err := c.StartWorkflow(ctx, "onboard", signing.Request{Party: party, Document: "DOC-7", Deadline: herald.Duration(time.Hour)},
			herald.WithInstanceID("sign-"+party)); err != nil {
			return err
		}
		if err := waitHistory(ctx, c, "sign-"+party, history.EventSubscribed); err != nil {
			return err
		}
	}
	ce, err := c.PutCorrelatedEvent(ctx, signing.DocumentSigned, "DOC-7", signing.Signed{Document: "DOC-7", SignedBy: "the board"})
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "webhook: put %s/DOC-7 → reached %d waiting instances\n", signing.DocumentSigned, len(ce.Produced))
	if _, err := c.PutCorrelatedEvent(ctx, signing.DocumentSigned, "DOC-8", signing.Signed{Document: "DOC-8", SignedBy: "dave"}); err != nil {
		return err
	}
	if _, err := c.StartWorkflow(ctx, "onboard", signing.Request{Party: "dave", Document: "DOC-8", Deadline: herald.Duration(time.Hour)},
		herald.WithInstanceID("sign-dave")); err != nil {
		return err
	}

	ids := []string{"order-1", "order-2", "order-3", "meter-1", "mailbox-1", "sign-alice", "sign-bob", "sign-carol", "sign-dave"}
	for _, id := range ids {
		if _, err := c.WaitForCompletion(ctx, id); err != nil {
			return fmt.Errorf("wait for %s: %w", id, err)
		}
	}
	for _, id := range ids {
		if err := timeline.Print(ctx, w, c, id); err != nil {
			return err
		}
	}
	// 7. An event for an instance that has ended is refused, and nothing is stored.
	_, err = c.RaiseEvent(ctx, "order-1", "decision", approval.Decision{Approved: false, By: "eve"})
	fmt.Fprintf(w, "\nraise to completed order-1 → %v\n", err)

	return demoBus(ctx, c, w)
}

// demoBus shows the event bus: published events matched against
// subscriptions with a filter, a script target and a Go handler, an event
// nothing matches, a script failure that lands in the dead-letter queue and
// is reprocessed once the script is fixed — each with its fate.
func demoBus(ctx context.Context, c *herald.Client, w io.Writer) error {
	fmt.Fprintln(w, "\n== event bus")
	if _, err := c.PutScript(ctx, "fraud-check", `
		if (ctx.event.data.amount > 5000) throw new PermanentError("amount " + ctx.event.data.amount + " needs a human");
		return {checked: ctx.event.data.order_id};`); err != nil {
		return err
	}
	for _, s := range []herald.Subscription{
		{ID: "fraud", Pattern: "order.*", Enabled: true, Target: herald.Target{Kind: herald.TargetScript, Script: "fraud-check"}},
		{ID: "big-orders", Pattern: "order.paid", Enabled: true,
			Filter: []byte(`{"logic":"AND","conditions":[{"field":"data.amount","op":"gte","value":1000}]}`),
			Target: herald.Target{Kind: herald.TargetHandler, Handler: "notify-sales"}},
	} {
		if _, err := c.PutSubscription(ctx, s); err != nil {
			return err
		}
	}
	events := []struct {
		id, typ string
		data    any
	}{
		{"bus-1", "order.paid", map[string]any{"order_id": 1, "amount": 1200}},
		{"bus-2", "order.paid", map[string]any{"order_id": 2, "amount": 30}},
		{"bus-3", "order.paid", map[string]any{"order_id": 3, "amount": 9000}},
		{"bus-4", "user.signed_up", map[string]any{"user": "zoe"}},
	}
	for _, e := range events {
		if _, err := c.Publish(ctx, e.typ, e.data, herald.WithEventID(e.id)); err != nil {
			return err
		}
	}
	for _, e := range events {
		ev, err := waitBusEnded(ctx, c, e.id)
		if err != nil {
			return err
		}
		printBus(w, ev)
	}
	// The fraud check dead-lettered bus-3. Fix the script, reprocess.
	page, err := c.DeadLetters(ctx, herald.DeadLetterFilter{Subscription: "fraud"})
	if err != nil {
		return err
	}
	for _, d := range page.Letters {
		fmt.Fprintf(w, "dead letter %d: %s %s via %s after %d attempt(s): %s: %s\n", d.ID, d.EventType, d.EventID,
			d.Subscription, d.Attempts, d.ErrorKind, d.Error)
	}
	if _, err := c.PutScript(ctx, "fraud-check", `return {checked: ctx.event.data.order_id, manual: ctx.event.data.amount > 5000};`); err != nil {
		return err
	}
	n, err := c.ReprocessDeadLetters(ctx, herald.DeadLetterFilter{Subscription: "fraud"})
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "fraud-check fixed (version 2); reprocessed %d dead letter(s)\n", n)
	ev, err := waitBusEnded(ctx, c, "bus-3")
	if err != nil {
		return err
	}
	if r := busRoute(ev, "fraud"); r != nil && r.Execution.Status != herald.ExecSucceeded {
		return fmt.Errorf("bus-3 after reprocessing: %s", r.Execution.Status)
	}
	printBus(w, ev)
	return nil
}

func busRoute(ev *herald.PublishedEvent, sub string) *herald.Route {
	for _, r := range ev.Routes {
		if r.Subscription == sub {
			return r
		}
	}
	return nil
}

// waitBusEnded waits until every execution of a published event has ended
// (or none was queued).
func waitBusEnded(ctx context.Context, c *herald.Client, id string) (*herald.PublishedEvent, error) {
	var ev *herald.PublishedEvent
	err := waitUntil(ctx, "published event "+id, func() (bool, error) {
		var err error
		ev, err = c.PublishedEvent(ctx, id)
		if err != nil {
			return false, err
		}
		switch ev.Fate {
		case herald.BusDone, herald.BusNoMatch, herald.BusFiltered:
			// Reprocessed executions are queued again: wait for them too.
			for _, r := range ev.Routes {
				if r.Execution != nil && !r.Execution.Status.Terminal() {
					return false, nil
				}
			}
			return true, nil
		}
		return false, nil
	})
	return ev, err
}

// printBus prints a published event's fate, one line per route.
func printBus(w io.Writer, ev *herald.PublishedEvent) {
	fmt.Fprintf(w, "published %s %s %s → %s\n", ev.ID, ev.Type, ev.Data, ev.Fate)
	for _, r := range ev.Routes {
		switch {
		case !r.Matched:
			fmt.Fprintf(w, "    %-10s filtered out by %s\n", r.Subscription, r.FilteredBy)
		case r.Execution.Status == herald.ExecSucceeded:
			re := ""
			if r.Execution.Reprocessed > 0 {
				re = ", reprocessed"
			}
			fmt.Fprintf(w, "    %-10s succeeded after %d attempt(s)%s → %s\n", r.Subscription, r.Execution.Attempts, re, r.Execution.Result)
		default:
			fmt.Fprintf(w, "    %-10s %s after %d attempt(s): %s\n", r.Subscription, r.Execution.Status, r.Execution.Attempts, r.Execution.LastError)
		}
	}
}

// waitHistory waits until the instance's current history has an event of kind.
func waitHistory(ctx context.Context, c *herald.Client, id string, kind history.Kind) error {
	return waitUntil(ctx, fmt.Sprintf("%s in %s", kind, id), func() (bool, error) {
		evs, err := c.History(ctx, id, 0)
		if err != nil {
			return false, nil // not started yet
		}
		for _, ev := range evs {
			if ev.Kind == kind {
				return true, nil
			}
		}
		return false, nil
	})
}

// waitUntil polls cond until it holds, fails, or ctx ends. The demo polls
// because it watches instances as any client would, through the Client.
func waitUntil(ctx context.Context, what string, cond func() (bool, error)) error {
	for {
		ok, err := cond()
		if err != nil || ok {
			return err
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("waiting for %s: %w", what, ctx.Err())
		case <-time.After(10 * time.Millisecond):
		}
	}
}
