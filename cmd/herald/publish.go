package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"sync"
	"time"

	"github.com/spf13/cobra"

	"github.com/heraldwf/herald/httpapi/client"
	"github.com/heraldwf/herald/httpapi/wire"
)

func init() {
	addCommand((*app).publishCommand)
	addCommand((*app).publishedCommand)
}

const publishLong = `Publishes an event to the tenant's event bus: its type, its data (a JSON
value; absent: null) and optionally its id (default: a new UUID).
Publishing an id again with the same type changes nothing (duplicate).

With --file, publishes every line of a JSON Lines file (- reads stdin),
each {"type": …, "data": …, "id": …} ("data" and "id" optional), and
prints how many were accepted, how many were duplicates and which lines
were refused; the exit status is 1 if any line was refused. When the
bus's backlog is full (429 back_pressure) it waits and retries with
backoff, for at most --retry-for.`

// Backoff of a bulk publish refused with back_pressure.
const (
	publishBackoffMin = 250 * time.Millisecond
	publishBackoffMax = 5 * time.Second
)

// receiptLine describes a receipt in one line.
func receiptLine(r *wire.PublishReceipt) string {
	if r.Duplicate {
		return fmt.Sprintf("duplicate: %s was published at %s; nothing changed", r.EventID, cell(r.PublishedAt, 0))
	}
	return fmt.Sprintf("published %s", r.EventID)
}

func (a *app) publishCommand() *cobra.Command {
	var id, file string
	var parallel int
	var retryFor time.Duration
	cmd := &cobra.Command{
		Use:   "publish (TYPE [DATA-JSON] | --file EVENTS.jsonl)",
		Short: "publish an event to the bus, or every line of a JSON Lines file",
		Long:  publishLong,
		Example: `  herald publish order.paid '{"order_id": "o-1", "amount": 42}'
  herald publish order.paid '{"order_id": "o-1"}' --id order-o-1-paid
  herald publish --file events.jsonl`,
		Args: func(cmd *cobra.Command, args []string) error {
			if file != "" {
				if len(args) > 0 {
					return usageErrorf(cmd, "--file gives the events: no TYPE or DATA-JSON with it")
				}
				if id != "" {
					return usageErrorf(cmd, "--id names one event: with --file each line gives its \"id\"")
				}
				return nil
			}
			if len(args) == 0 {
				return usageErrorf(cmd, "publish needs TYPE (or --file)")
			}
			return optionalArgs("TYPE", "DATA-JSON")(cmd, args)
		},
	}
	cmd.Flags().StringVar(&id, "id", "", "the event id (default: a new UUID)")
	cmd.Flags().StringVar(&file, "file", "", "publish every line of this JSON Lines file; - reads stdin")
	cmd.Flags().IntVar(&parallel, "parallel", 4, "with --file: requests in flight at once (1–64)")
	cmd.Flags().DurationVar(&retryFor, "retry-for", 5*time.Minute, "with --file: how long to keep retrying an event refused with back_pressure")
	cmd.RunE = a.withClient(func(cmd *cobra.Command, c *client.Client, args []string) error {
		if file != "" {
			if parallel < 1 || parallel > 64 {
				return usageErrorf(cmd, "--parallel %d: want 1 to 64", parallel)
			}
			return a.publishFile(cmd, c, file, parallel, retryFor)
		}
		req := wire.PublishRequest{Type: args[0], EventID: id}
		if len(args) > 1 {
			raw, err := jsonArg(cmd, "DATA-JSON", args[1])
			if err != nil {
				return err
			}
			req.Data = raw
		}
		r, err := c.Publish(cmd.Context(), req)
		if err != nil {
			return err
		}
		return a.emit(r, func(w io.Writer) error {
			_, err := fmt.Fprintln(w, receiptLine(r))
			return err
		})
	})
	return cmd
}

// jsonArg returns arg, named name, as JSON; text that is not JSON is a
// usage error.
func jsonArg(cmd *cobra.Command, name, arg string) (json.RawMessage, error) {
	if !json.Valid([]byte(arg)) {
		return nil, usageErrorf(cmd, "%s is not JSON (a string needs quotes: '\"text\"')", name)
	}
	return json.RawMessage(arg), nil
}

// publishLine is one line of a bulk publish file.
type publishLine struct {
	Type string          `json:"type"`
	Data json.RawMessage `json:"data,omitempty"`
	ID   string          `json:"id,omitempty"`
}

// PublishSummary is what a bulk publish did (its --json output).
type PublishSummary struct {
	Accepted  int              `json:"accepted"`
	Duplicate int              `json:"duplicate"`
	Refused   int              `json:"refused"`
	Refusals  []PublishRefusal `json:"refusals,omitempty"`
}

// PublishRefusal is a line of a bulk publish that was refused.
type PublishRefusal struct {
	Line int `json:"line"`
	// ID is the line's event id, if it gave one.
	ID    string `json:"id,omitempty"`
	Code  string `json:"code,omitempty"`
	Error string `json:"error"`
}

// publishFile publishes every line of file, parallel requests at once.
func (a *app) publishFile(cmd *cobra.Command, c *client.Client, file string, parallel int, retryFor time.Duration) error {
	ctx := cmd.Context()
	b, err := readFile(cmd, file)
	if err != nil {
		return err
	}
	type job struct {
		line int
		req  wire.PublishRequest
	}
	var jobs []job
	var sum PublishSummary
	refuse := func(line int, id, code, msg string) {
		sum.Refusals = append(sum.Refusals, PublishRefusal{Line: line, ID: id, Code: code, Error: msg})
	}
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(make([]byte, 0, 64*1024), 16<<20)
	for n := 1; sc.Scan(); n++ {
		text := bytes.TrimSpace(sc.Bytes())
		if len(text) == 0 {
			continue
		}
		var l publishLine
		dec := json.NewDecoder(bytes.NewReader(text))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&l); err != nil || dec.More() {
			if err == nil {
				err = errors.New("more than one JSON value")
			}
			refuse(n, "", "", "not a JSON object {\"type\", \"data\", \"id\"}: "+err.Error())
			continue
		}
		if l.Type == "" {
			refuse(n, l.ID, "", `no "type"`)
			continue
		}
		jobs = append(jobs, job{n, wire.PublishRequest{Type: l.Type, Data: l.Data, EventID: l.ID}})
	}
	if err := sc.Err(); err != nil {
		return fmt.Errorf("%s: %w", file, err)
	}

	prog := newProgress(a.stderr, "publishing", len(jobs))
	bp := &backPressure{w: a.stderr}
	var mu sync.Mutex
	next := make(chan job)
	var wg sync.WaitGroup
	for range min(parallel, max(1, len(jobs))) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range next {
				r, err := bp.publish(ctx, c, j.req, retryFor)
				mu.Lock()
				switch {
				case err != nil:
					refuse(j.line, j.req.EventID, client.Code(err), publishError(err))
				case r.Duplicate:
					sum.Duplicate++
				default:
					sum.Accepted++
				}
				mu.Unlock()
				prog.Add(1)
			}
		}()
	}
	for _, j := range jobs {
		if ctx.Err() != nil {
			break
		}
		next <- j
	}
	close(next)
	wg.Wait()
	prog.Done()
	if err := ctx.Err(); err != nil {
		return err
	}
	slices.SortFunc(sum.Refusals, func(x, y PublishRefusal) int { return x.Line - y.Line })
	sum.Refused = len(sum.Refusals)
	err = a.emit(sum, func(w io.Writer) error {
		fmt.Fprintf(w, "accepted %d, duplicate %d, refused %d\n", sum.Accepted, sum.Duplicate, sum.Refused)
		for _, r := range sum.Refusals {
			fmt.Fprintf(w, "  line %d: %s\n", r.Line, r.Error)
		}
		return nil
	})
	if err == nil && sum.Refused > 0 {
		return exitCode(exitFail)
	}
	return err
}

// publishError says why an event was refused, in one line.
func publishError(err error) string {
	var ae *client.Error
	if errors.As(err, &ae) {
		return problemLine(ae)
	}
	return err.Error()
}

// backPressure retries publishes refused with back_pressure, saying so on
// w once per episode (not once per event).
type backPressure struct {
	w       io.Writer
	mu      sync.Mutex
	waiting int // publishes waiting now
}

// publish publishes req, waiting and retrying with backoff while the bus
// answers back_pressure, for at most retryFor.
func (b *backPressure) publish(ctx context.Context, c *client.Client, req wire.PublishRequest, retryFor time.Duration) (*wire.PublishReceipt, error) {
	deadline := time.Now().Add(retryFor)
	wait := publishBackoffMin
	waiting := false
	defer func() {
		if waiting {
			b.mu.Lock()
			b.waiting--
			b.mu.Unlock()
		}
	}()
	for {
		r, err := c.Publish(ctx, req)
		if client.Code(err) != "back_pressure" || time.Now().Add(wait).After(deadline) {
			return r, err
		}
		if !waiting {
			waiting = true
			b.mu.Lock()
			if b.waiting == 0 {
				fmt.Fprintf(b.w, "the bus's backlog is full (429 back_pressure): waiting and retrying, for at most %s\n", retryFor)
			}
			b.waiting++
			b.mu.Unlock()
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, ctx.Err()
		case <-t.C:
		}
		wait = min(2*wait, publishBackoffMax)
	}
}

func (a *app) publishedCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "published EVENT_ID",
		Short: "show a published event's fate: its routes and their executions",
		Args:  exactArgs("EVENT_ID"),
	}
	cmd.RunE = a.withClient(func(cmd *cobra.Command, c *client.Client, args []string) error {
		ev, err := c.PublishedEvent(cmd.Context(), args[0])
		if err != nil {
			return err
		}
		return a.emit(ev, func(w io.Writer) error { return showPublished(w, ev) })
	})
	return cmd
}

// showPublished writes a published event and its routes.
func showPublished(w io.Writer, ev *wire.PublishedEvent) error {
	if err := listing(w,
		field{"id", ev.ID},
		field{"type", ev.Type},
		field{"data", ev.Data},
		field{"source?", ev.Source},
		field{"published", ev.PublishedAt},
		field{"fate", string(ev.Fate)},
		field{"routed?", ev.RoutedAt},
	); err != nil {
		return err
	}
	if len(ev.Routes) == 0 {
		return nil
	}
	fmt.Fprintln(w, "routes:")
	t := newTable(w, "SUBSCRIPTION", "MATCHED", "EXECUTION", "STATUS", "ATTEMPTS", "DEAD LETTER", "RESULT OR ERROR")
	for _, r := range ev.Routes {
		if r.Execution == nil {
			t.row(r.Subscription, false, nil, "filtered: "+r.FilteredBy, nil, nil, nil)
			continue
		}
		x := r.Execution
		outcome := any(x.Result)
		if x.LastError != "" && x.Status != "succeeded" {
			outcome = x.LastError
		}
		t.row(r.Subscription, r.Matched, x.ID, string(x.Status), x.Attempts, num64(x.DeadLetter), outcome)
	}
	return t.flush()
}

// num64 shows an id: "-" for none (zero).
func num64(n int64) any {
	if n == 0 {
		return nil
	}
	return n
}
