package herald_test

// The event bus's part of the end-to-end harness (harness_test.go):
// subscriptions, scripts, publishing, waiting for a published event's fate,
// and an observer that records the bus's reports.

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/heraldwf/herald"
)

// TestMain lets the test binary serve as the script sandbox's child
// process: script targets re-execute this binary.
func TestMain(m *testing.M) {
	herald.ServeScriptChild()
	os.Exit(m.Run())
}

func intp(n int) *int { return &n }

// subscribe puts an enabled subscription and fails the test on error.
func (b *bundle) subscribe(s herald.Subscription) *herald.Subscription {
	b.t.Helper()
	s.Enabled = true
	out, err := b.client.PutSubscription(b.ctx, s)
	if err != nil {
		b.t.Fatalf("PutSubscription(%s): %v", s.ID, err)
	}
	return out
}

// script saves a script and fails the test on error.
func (b *bundle) script(id, source string) *herald.Script {
	b.t.Helper()
	s, err := b.client.PutScript(b.ctx, id, source)
	if err != nil {
		b.t.Fatalf("PutScript(%s): %v", id, err)
	}
	return s
}

// handlerSub subscribes pattern to the Go handler name.
func (b *bundle) handlerSub(id, pattern, handler string, maxRetries *int) *herald.Subscription {
	b.t.Helper()
	return b.subscribe(herald.Subscription{ID: id, Pattern: pattern, MaxRetries: maxRetries,
		Target: herald.Target{Kind: herald.TargetHandler, Handler: handler}})
}

// publish publishes an event with id and fails the test on error.
func (b *bundle) publish(typ string, data any, id string) *herald.PublishReceipt {
	b.t.Helper()
	var opts []herald.RaiseOption
	if id != "" {
		opts = append(opts, herald.WithEventID(id))
	}
	r, err := b.client.Publish(b.ctx, typ, data, opts...)
	if err != nil {
		b.t.Fatalf("Publish(%s, %s): %v", typ, id, err)
	}
	return r
}

// published returns a published event with its fate.
func (b *bundle) published(id string) *herald.PublishedEvent {
	b.t.Helper()
	ev, err := b.client.PublishedEvent(b.ctx, id)
	if err != nil {
		b.t.Fatalf("PublishedEvent(%s): %v", id, err)
	}
	return ev
}

// waitBus polls a published event until cond holds or the test's context
// ends (then it fails, printing the event as it last was).
func (b *bundle) waitBus(id, what string, cond func(*herald.PublishedEvent) bool) *herald.PublishedEvent {
	b.t.Helper()
	var last *herald.PublishedEvent
	if b.env != nil {
		b.waitFor(fmt.Sprintf("published event %s to be %s", id, what), func() bool {
			ev, err := b.client.PublishedEvent(b.ctx, id)
			if err != nil && !errors.Is(err, herald.ErrNotFound) {
				b.t.Fatalf("PublishedEvent(%s): %v", id, err)
			}
			if err == nil {
				last = ev
			}
			return err == nil && cond(ev)
		})
		return last
	}
	for {
		ev, err := b.client.PublishedEvent(b.ctx, id)
		if err == nil {
			last = ev
			if cond(ev) {
				return ev
			}
		} else if !errors.Is(err, herald.ErrNotFound) {
			b.t.Fatalf("PublishedEvent(%s): %v", id, err)
		}
		select {
		case <-b.ctx.Done():
			b.t.Fatalf("timed out waiting for published event %s to be %s; last: %s", id, what, describeBus(last))
		case <-time.After(2 * time.Millisecond):
		}
	}
}

// waitEnded waits until a published event's fate is final: every
// execution ended (done), or nothing matched or passed a filter.
func (b *bundle) waitEnded(id string) *herald.PublishedEvent {
	b.t.Helper()
	return b.waitBus(id, "ended", func(ev *herald.PublishedEvent) bool {
		return ev.Fate == herald.BusDone || ev.Fate == herald.BusNoMatch || ev.Fate == herald.BusFiltered
	})
}

// waitExec waits until the execution of subscription sub for event id
// satisfies cond.
func (b *bundle) waitExecution(id, sub, what string, cond func(*herald.Execution) bool) *herald.Execution {
	b.t.Helper()
	ev := b.waitBus(id, sub+" "+what, func(ev *herald.PublishedEvent) bool {
		x := routeOf(ev, sub)
		return x != nil && x.Execution != nil && cond(x.Execution)
	})
	return routeOf(ev, sub).Execution
}

func statusIs(s herald.ExecutionStatus) func(*herald.Execution) bool {
	return func(x *herald.Execution) bool { return x.Status == s }
}

func routeOf(ev *herald.PublishedEvent, sub string) *herald.Route {
	if ev == nil {
		return nil
	}
	for _, r := range ev.Routes {
		if r.Subscription == sub {
			return r
		}
	}
	return nil
}

func describeBus(ev *herald.PublishedEvent) string {
	if ev == nil {
		return "<not found>"
	}
	var sb strings.Builder
	fmt.Fprintf(&sb, "%s %s fate=%s", ev.ID, ev.Type, ev.Fate)
	for _, r := range ev.Routes {
		fmt.Fprintf(&sb, " [%s matched=%v", r.Subscription, r.Matched)
		if r.FilteredBy != "" {
			fmt.Fprintf(&sb, " by %q", r.FilteredBy)
		}
		if x := r.Execution; x != nil {
			fmt.Fprintf(&sb, " %s attempts=%d next=%v err=%q", x.Status, x.Attempts, x.NextAttemptAt, x.LastError)
		}
		sb.WriteString("]")
	}
	return sb.String()
}

// matchedSubs returns the ids of the subscriptions that matched an event,
// sorted as the store returns them, and those that filtered it out.
func matchedSubs(ev *herald.PublishedEvent) (matched, filtered []string) {
	for _, r := range ev.Routes {
		if r.Matched {
			matched = append(matched, r.Subscription)
		} else {
			filtered = append(filtered, r.Subscription)
		}
	}
	return matched, filtered
}

// attempts lists every attempt record of an event.
func (b *bundle) attempts(eventID string) []*herald.Attempt {
	b.t.Helper()
	var out []*herald.Attempt
	cursor := int64(0)
	for {
		p, err := b.client.Attempts(b.ctx, herald.AttemptFilter{EventID: eventID, Cursor: cursor})
		if err != nil {
			b.t.Fatalf("Attempts(%s): %v", eventID, err)
		}
		out = append(out, p.Attempts...)
		if p.NextCursor == 0 {
			return out
		}
		cursor = p.NextCursor
	}
}

// busObserver records the bus's publish reports and its dispatch queue's
// depth (and counts the rest as the countingObserver does).
type busObserver struct {
	*countingObserver
	mu        sync.Mutex
	published []herald.BusPublishReport
	maxDepth  int
	depth     int
}

func newBusObserver() *busObserver { return &busObserver{countingObserver: newCountingObserver()} }

func (o *busObserver) BusPublished(r herald.BusPublishReport) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.published = append(o.published, r)
}

func (o *busObserver) BusQueue(r herald.BusQueueReport) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.depth = r.Depth
	o.maxDepth = max(o.maxDepth, r.Depth)
}

// gate is a handler that blocks until released, counting how many run at
// once.
type gate struct {
	once    sync.Once
	mu      sync.Mutex
	running int
	peak    int
	started chan string // receives each event id as its attempt starts
	release chan struct{}
}

func newGate() *gate {
	return &gate{started: make(chan string, 1000), release: make(chan struct{})}
}

// open lets every blocked and later run through (idempotent).
func (g *gate) open() { g.once.Do(func() { close(g.release) }) }

func (g *gate) run(ev herald.BusEvent) {
	g.mu.Lock()
	g.running++
	g.peak = max(g.peak, g.running)
	g.mu.Unlock()
	g.started <- ev.ID
	<-g.release
	g.mu.Lock()
	g.running--
	g.mu.Unlock()
}

func (g *gate) counts() (running, peak int) {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.running, g.peak
}

// waitStarted waits for n attempts to have started.
func (g *gate) waitStarted(t *testing.T, n int) []string {
	t.Helper()
	var ids []string
	deadline := time.After(testTimeout(t))
	for len(ids) < n {
		select {
		case id := <-g.started:
			ids = append(ids, id)
		case <-deadline:
			t.Fatalf("only %d of %d attempts started", len(ids), n)
		}
	}
	return ids
}
