package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"time"

	"github.com/heraldwf/herald"
	"github.com/heraldwf/herald/examples/approval"
	"github.com/heraldwf/herald/examples/mailbox"
	"github.com/heraldwf/herald/examples/signing"
	"github.com/heraldwf/herald/history"
)

// runDemo runs the example workflows on a fresh SQLite file: events raised
// before an instance exists and before and after its waits, a wait racing a
// deadline (and the late answer it then drops), and a loop that continues as
// new with buffered events carried over. It prints each timeline.
func runDemo(ctx context.Context, args []string, w io.Writer) error {
	fs := flag.NewFlagSet("demo", flag.ContinueOnError)
	sf := addStoreFlags(fs, "herald-demo.db", "herald_demo")
	if err := fs.Parse(args); err != nil {
		return err
	}
	store, err := sf.open(ctx, true)
	if err != nil {
		return err
	}
	defer store.Close()

	logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	rt, err := herald.NewRuntime(store, &herald.Config{Logger: logger})
	if err != nil {
		return err
	}
	approval.Register(rt)
	mailbox.Register(rt)
	signing.Register(rt)
	if err := rt.Start(ctx); err != nil {
		return err
	}
	defer rt.Stop(context.Background())
	c := rt.Client()
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	fmt.Fprintf(w, "Herald demo on %s\n", sf.describe())

	// 1. A decision raised before the instance exists is kept, and the
	//    workflow receives it, buffered, the moment it waits.
	if _, err := c.RaiseEvent(ctx, "order-1", "decision", approval.Decision{Approved: true, By: "alice"},
		herald.WithEventID("order-1/early-decision")); err != nil {
		return err
	}
	if _, err := c.StartWorkflow(ctx, "approval", approval.Request{Item: "laptop", Amount: 1200,
		Deadline: time.Hour, Escalation: time.Second}, herald.WithInstanceID("order-1")); err != nil {
		return err
	}

	// 2. A decision raised after the workflow waits is delivered to the wait.
	if _, err := c.StartWorkflow(ctx, "approval", approval.Request{Item: "chair", Amount: 300,
		Deadline: time.Hour, Escalation: time.Second}, herald.WithInstanceID("order-2")); err != nil {
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
		Deadline: 300 * time.Millisecond, Escalation: 1500 * time.Millisecond}, herald.WithInstanceID("order-3")); err != nil {
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
	for {
		info, err := c.Status(ctx, "mailbox-1")
		if err != nil {
			return err
		}
		if info.Execution == 3 {
			break
		}
		time.Sleep(10 * time.Millisecond)
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
		if _, err := c.StartWorkflow(ctx, "onboard", signing.Request{Party: party, Document: "DOC-7", Deadline: time.Hour},
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
	if _, err := c.StartWorkflow(ctx, "onboard", signing.Request{Party: "dave", Document: "DOC-8", Deadline: time.Hour},
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
		if err := printTimeline(ctx, w, c, id); err != nil {
			return err
		}
	}
	// 7. An event for an instance that has ended is refused, and nothing is stored.
	_, err = c.RaiseEvent(ctx, "order-1", "decision", approval.Decision{Approved: false, By: "eve"})
	fmt.Fprintf(w, "\nraise to completed order-1 → %v\n", err)
	return nil
}

// waitHistory waits until the instance's current history has an event of kind.
func waitHistory(ctx context.Context, c *herald.Client, id string, kind history.Kind) error {
	for {
		evs, err := c.History(ctx, id, 0)
		if err == nil {
			for _, ev := range evs {
				if ev.Kind == kind {
					return nil
				}
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("waiting for %s in %s: %w", kind, id, ctx.Err())
		case <-time.After(10 * time.Millisecond):
		}
	}
}
