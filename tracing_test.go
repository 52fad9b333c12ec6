package herald_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/heraldwf/herald"
	"github.com/heraldwf/herald/storage"
)

// spans is a recording TracerProvider for a test.
type spans struct {
	rec *tracetest.SpanRecorder
	tp  *sdktrace.TracerProvider
}

func newSpans(t *testing.T) *spans {
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	return &spans{rec: rec, tp: tp}
}

// named returns the ended spans called name.
func (s *spans) named(name string) []sdktrace.ReadOnlySpan {
	var out []sdktrace.ReadOnlySpan
	for _, sp := range s.rec.Ended() {
		if sp.Name() == name {
			out = append(out, sp)
		}
	}
	return out
}

// childOf returns the ended span called name whose parent is parent, or nil.
func (s *spans) childOf(name string, parent trace.SpanContext) sdktrace.ReadOnlySpan {
	for _, sp := range s.named(name) {
		if sp.Parent().SpanID() == parent.SpanID() && sp.Parent().TraceID() == parent.TraceID() {
			return sp
		}
	}
	return nil
}

func attrOf(sp sdktrace.ReadOnlySpan, key string) attribute.Value {
	for _, kv := range sp.Attributes() {
		if string(kv.Key) == key {
			return kv.Value
		}
	}
	return attribute.Value{}
}

// TestTracing_EventTurnActivity follows one event through the trace: a
// caller's span → the raise (its child) → the turn that consumes the event
// (a child of the raise, through the trace context stored with the event)
// → the activity attempt it schedules (a child of the turn, through the
// task) → the turn that consumes the activity's result (a child of the
// scheduling turn) — all in the caller's trace. Runs on the backend
// HERALD_TEST_BACKEND names.
func TestTracing_EventTurnActivity(t *testing.T) {
	sp := newSpans(t)
	var (
		mu      sync.Mutex
		actSpan trace.SpanContext
	)
	b := setup(t, &herald.Config{ClientConfig: herald.ClientConfig{TracerProvider: sp.tp}}, func(rt *herald.Runtime) {
		herald.RegisterActivity(rt, "work", func(ctx context.Context, in string) (string, error) {
			mu.Lock()
			actSpan = trace.SpanContextFromContext(ctx)
			mu.Unlock()
			return in + " done", nil
		})
		herald.RegisterWorkflow(rt, "traced", func(ctx *herald.Context, _ struct{}) (string, error) {
			var in string
			if err := ctx.WaitEvent("go").Get(&in); err != nil {
				return "", err
			}
			var out string
			err := ctx.CallActivity("work", in).Get(&out)
			return out, err
		})
	})
	b.start("traced", "i", struct{}{})
	// The first turn (the start's kick) runs on its own, so the event
	// comes in a turn of its own.
	b.waitFor("the first turn's span", func() bool { return len(sp.named("herald.turn")) >= 1 })
	start := sp.named("herald.start_workflow")
	if len(start) != 1 {
		t.Fatalf("%d herald.start_workflow spans, want 1", len(start))
	}
	if first := sp.childOf("herald.turn", start[0].SpanContext()); first == nil {
		t.Fatal("the first turn is not a child of the start's span")
	}

	ctx, caller := sp.tp.Tracer("test").Start(b.ctx, "caller")
	if _, err := b.client.RaiseEvent(ctx, "i", "go", "job"); err != nil {
		t.Fatal(err)
	}
	caller.End()
	if got := resultOf[string](b, "i"); got != "job done" {
		t.Fatalf("result %q", got)
	}
	tid := caller.SpanContext().TraceID()

	raise := sp.childOf("herald.raise_event", caller.SpanContext())
	if raise == nil {
		t.Fatal("no herald.raise_event span child of the caller's span")
	}
	turn := sp.childOf("herald.turn", raise.SpanContext())
	if turn == nil {
		t.Fatal("no herald.turn span child of the raise's span (the trace context stored with the event)")
	}
	for key, want := range map[string]string{"herald.tenant": herald.DefaultTenant, "herald.instance": "i",
		"herald.workflow": "traced", "herald.outcome": herald.TurnCommitted} {
		if got := attrOf(turn, key).AsString(); got != want {
			t.Errorf("turn span %s = %q, want %q", key, got, want)
		}
	}
	if got := attrOf(turn, "herald.execution").AsInt64(); got != 1 {
		t.Errorf("turn span herald.execution = %d, want 1", got)
	}
	var act sdktrace.ReadOnlySpan
	b.waitFor("the activity's span", func() bool {
		act = sp.childOf("herald.activity", turn.SpanContext())
		return act != nil
	})
	if got := attrOf(act, "herald.activity").AsString(); got != "work" {
		t.Errorf("activity span herald.activity = %q", got)
	}
	mu.Lock()
	if actSpan.SpanID() != act.SpanContext().SpanID() {
		t.Errorf("the activity's ctx carries span %v, want its attempt's span %v", actSpan.SpanID(), act.SpanContext().SpanID())
	}
	mu.Unlock()
	var next sdktrace.ReadOnlySpan
	b.waitFor("the span of the turn that consumes the result", func() bool {
		next = sp.childOf("herald.turn", turn.SpanContext())
		return next != nil
	})
	for _, s := range []sdktrace.ReadOnlySpan{raise, turn, act, next} {
		if s.SpanContext().TraceID() != tid {
			t.Errorf("span %s is in trace %v, want the caller's %v", s.Name(), s.SpanContext().TraceID(), tid)
		}
	}
}

// TestTracing_LinksOtherEvents: a turn that consumes events of several
// traces is a child of the first and links to the others.
func TestTracing_LinksOtherEvents(t *testing.T) {
	sp := newSpans(t)
	st := testStore(t)
	c, err := herald.NewClient(st, "links", &herald.ClientConfig{TracerProvider: sp.tp})
	if err != nil {
		t.Fatal(err)
	}
	b := on(t, c)
	// No runtime yet: the start and both events wait in one inbox.
	b.start("w", "i", nil)
	tr := sp.tp.Tracer("test")
	ctxA, a := tr.Start(b.ctx, "a")
	ctxB, bb := tr.Start(b.ctx, "b")
	if _, err := c.RaiseEvent(ctxA, "i", "x", 1); err != nil {
		t.Fatal(err)
	}
	if _, err := c.RaiseEvent(ctxB, "i", "x", 2); err != nil {
		t.Fatal(err)
	}
	a.End()
	bb.End()

	rtb := setupOn(t, st, &herald.Config{ClientConfig: herald.ClientConfig{TracerProvider: sp.tp}, Tenants: []string{"links"}},
		func(rt *herald.Runtime) {
			herald.RegisterWorkflow(rt, "w", func(ctx *herald.Context, _ any) (int, error) {
				var x, y int
				if err := ctx.WaitEvent("x").Get(&x); err != nil {
					return 0, err
				}
				err := ctx.WaitEvent("x").Get(&y)
				return x + y, err
			})
		})
	if got := resultOf[int](rtb, "i"); got != 3 {
		t.Fatalf("result %d", got)
	}
	// The instance completes in the turn, before its span ends.
	start := sp.named("herald.start_workflow")[0]
	var turn sdktrace.ReadOnlySpan
	rtb.waitFor("the turn's span, a child of the first message's (the kick's) span", func() bool {
		turn = sp.childOf("herald.turn", start.SpanContext())
		return turn != nil
	})
	want := map[trace.SpanID]bool{}
	for _, r := range sp.named("herald.raise_event") {
		want[r.SpanContext().SpanID()] = true
	}
	got := map[trace.SpanID]bool{}
	for _, l := range turn.Links() {
		got[l.SpanContext.SpanID()] = true
	}
	if len(got) != 2 || !got[keys(want)[0]] || !got[keys(want)[1]] {
		t.Fatalf("turn links %v, want the two raises %v", got, want)
	}
}

func keys[K comparable, V any](m map[K]V) []K {
	var out []K
	for k := range m {
		out = append(out, k)
	}
	return out
}

// TestTracing_OffStoresNothing: with no TracerProvider (the global no-op)
// no trace context is stored with a start, an event or a queued message.
func TestTracing_OffStoresNothing(t *testing.T) {
	st := testStore(t)
	c, err := herald.NewClient(st, "off", nil)
	if err != nil {
		t.Fatal(err)
	}
	b := on(t, c)
	b.start("w", "i", nil)
	b.raise("i", "x", 1, "")
	b.enqueue("i", "q", 2, "")
	turns, err := st.TurnClaim(b.ctx, &storage.TurnClaimParams{Tenant: "off", Now: time.Now(), Max: 1})
	if err != nil || len(turns) != 1 {
		t.Fatalf("TurnClaim: %d turns, %v", len(turns), err)
	}
	if len(turns[0].Messages) != 3 {
		t.Fatalf("%d messages, want 3", len(turns[0].Messages))
	}
	for _, m := range turns[0].Messages {
		if m.TraceParent != "" {
			t.Errorf("%s message stored trace %q with tracing off", m.Kind, m.TraceParent)
		}
	}

	// Neither with a correlated event nor with a published one.
	if _, err := c.PutEventDefinition(b.ctx, herald.EventDefinition{Name: "signed", Correlation: &herald.CorrelationConfig{}}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.PutCorrelatedEvent(b.ctx, "signed", "k", 1); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Publish(b.ctx, "order.paid", 1); err != nil {
		t.Fatal(err)
	}
	for _, table := range []string{"correlated_events", "bus_events"} {
		if n := rawExec(t, st, `UPDATE `+table+` SET trace = trace WHERE trace <> ''`); n != 0 {
			t.Errorf("%d rows of %s stored a trace context with tracing off", n, table)
		}
	}
}

// sameTrace fails the test unless every span is in trace tid.
func sameTrace(t *testing.T, tid trace.TraceID, ss ...sdktrace.ReadOnlySpan) {
	t.Helper()
	for _, s := range ss {
		if s.SpanContext().TraceID() != tid {
			t.Errorf("span %s is in trace %v, want %v", s.Name(), s.SpanContext().TraceID(), tid)
		}
	}
}

// TestTracing_CorrelatedPut: a correlated put's trace context is stored
// with the correlated event and carried by its delivery, so the turn the
// delivery wakes is a child of the put's span, in the caller's trace —
// whether the wait came first (the put delivers) or the put did (the wait
// meets the stored event; here delete-after-first). Runs on the backend
// HERALD_TEST_BACKEND names.
func TestTracing_CorrelatedPut(t *testing.T) {
	sp := newSpans(t)
	b := setup(t, &herald.Config{ClientConfig: herald.ClientConfig{TracerProvider: sp.tp}}, func(rt *herald.Runtime) {
		herald.RegisterWorkflow(rt, "signer", func(ctx *herald.Context, def string) (string, error) {
			var by string
			err := ctx.WaitCorrelated(def, "K-"+ctx.InstanceID()).Get(&by)
			return by, err
		})
	})
	b.defineCorrelated("doc.signed", nil)
	b.defineCorrelated("doc.once", &herald.CorrelationConfig{DeleteAfterFirstCorrelation: true})
	tr := sp.tp.Tracer("test")

	// The turn that consumed the correlated event: the instance completes
	// in it, before its span ends.
	wokenBy := func(what, id string, put sdktrace.ReadOnlySpan) sdktrace.ReadOnlySpan {
		t.Helper()
		var turn sdktrace.ReadOnlySpan
		b.waitFor(what, func() bool {
			turn = sp.childOf("herald.turn", put.SpanContext())
			return turn != nil
		})
		if got := attrOf(turn, "herald.instance").AsString(); got != id {
			t.Fatalf("%s: the put's child turn is %q's, want %q's", what, got, id)
		}
		return turn
	}

	// The wait first: the put delivers.
	{
		b.start("signer", "w", "doc.signed")
		startSpan := sp.named("herald.start_workflow")[0]
		b.waitFor("the first turn (the wait registered)", func() bool {
			return sp.childOf("herald.turn", startSpan.SpanContext()) != nil
		})
		ctx, caller := tr.Start(b.ctx, "caller")
		if _, err := b.client.PutCorrelatedEvent(ctx, "doc.signed", "K-w", "ann"); err != nil {
			t.Fatal(err)
		}
		caller.End()
		if got := resultOf[string](b, "w"); got != "ann" {
			t.Fatalf("result %q", got)
		}
		put := sp.childOf("herald.put_correlated_event", caller.SpanContext())
		if put == nil {
			t.Fatal("no herald.put_correlated_event span child of the caller's")
		}
		turn := wokenBy("the turn the put's delivery woke", "w", put)
		sameTrace(t, caller.SpanContext().TraceID(), put, turn)
	}

	// The put first: the wait meets the stored event.
	{
		ctx, caller := tr.Start(b.ctx, "caller2")
		if _, err := b.client.PutCorrelatedEvent(ctx, "doc.once", "K-p", "bob"); err != nil {
			t.Fatal(err)
		}
		caller.End()
		b.start("signer", "p", "doc.once")
		if got := resultOf[string](b, "p"); got != "bob" {
			t.Fatalf("result %q", got)
		}
		put := sp.childOf("herald.put_correlated_event", caller.SpanContext())
		if put == nil {
			t.Fatal("no herald.put_correlated_event span child of the caller's")
		}
		turn := wokenBy("the turn that consumed the stored event", "p", put)
		sameTrace(t, caller.SpanContext().TraceID(), put, turn)
	}
	if n := rawExec(t, b.store, `UPDATE correlated_events SET trace = trace WHERE trace <> ''`); n == 0 {
		t.Error("no correlated event stored a trace context with tracing on")
	}
}

// TestTracing_PublishBus follows a published event through the bus: the
// publish (a child of the caller's span) → the bus attempt of a workflow
// target (a child of the publish, through the trace stored with the event)
// → its start of the instance → the instance's first turn; that turn
// publishes (ctx.Publish) and the attempt of a Go handler's subscription
// to it is a child of the turn, whose span the handler's ctx carries. All
// in the caller's trace. Runs on the backend HERALD_TEST_BACKEND names.
func TestTracing_PublishBus(t *testing.T) {
	sp := newSpans(t)
	handled := make(chan trace.SpanContext, 1)
	b := setup(t, &herald.Config{ClientConfig: herald.ClientConfig{TracerProvider: sp.tp}}, func(rt *herald.Runtime) {
		herald.RegisterWorkflow(rt, "onboard", func(ctx *herald.Context, ev herald.BusEvent) (string, error) {
			if _, err := ctx.Publish("user.welcomed", ev.Data, herald.WithEventID("welcomed-"+ev.ID)); err != nil {
				return "", err
			}
			return "ok", nil
		})
		herald.RegisterBusHandler(rt, "audit", func(ctx context.Context, _ herald.BusEvent) (any, error) {
			select {
			case handled <- trace.SpanContextFromContext(ctx):
			default:
			}
			return nil, nil
		})
	})
	b.subscribe(herald.Subscription{ID: "start", Pattern: "user.created",
		Target: herald.Target{Kind: herald.TargetWorkflow, Workflow: "onboard", InstanceID: "user-{data.user}"}})
	b.handlerSub("audit", "user.welcomed", "audit", nil)

	ctx, caller := sp.tp.Tracer("test").Start(b.ctx, "caller")
	if _, err := b.client.Publish(ctx, "user.created", map[string]string{"user": "ann"}, herald.WithEventID("e1")); err != nil {
		t.Fatal(err)
	}
	caller.End()
	b.waitExecution("e1", "start", "succeeded", statusIs(herald.ExecSucceeded))
	if got := resultOf[string](b, "user-ann"); got != "ok" {
		t.Fatalf("result %q", got)
	}
	var handlerSpan trace.SpanContext
	select {
	case handlerSpan = <-handled:
	case <-b.ctx.Done():
		t.Fatal("the handler never ran")
	}

	pub := sp.childOf("herald.publish", caller.SpanContext())
	if pub == nil {
		t.Fatal("no herald.publish span child of the caller's")
	}
	var attempt sdktrace.ReadOnlySpan
	b.waitFor("the bus attempt's span, child of the publish's", func() bool {
		attempt = sp.childOf("herald.bus.attempt", pub.SpanContext())
		return attempt != nil
	})
	for key, want := range map[string]string{"herald.tenant": herald.DefaultTenant, "herald.subscription": "start",
		"herald.event_type": "user.created", "herald.event_id": "e1", "herald.outcome": herald.BusOutcomeSucceeded} {
		if got := attrOf(attempt, key).AsString(); got != want {
			t.Errorf("bus attempt span %s = %q, want %q", key, got, want)
		}
	}
	if got := attrOf(attempt, "herald.attempt").AsInt64(); got != 1 {
		t.Errorf("bus attempt span herald.attempt = %d, want 1", got)
	}
	start := sp.childOf("herald.start_workflow", attempt.SpanContext())
	if start == nil {
		t.Fatal("no herald.start_workflow span child of the bus attempt's")
	}
	var turn sdktrace.ReadOnlySpan
	b.waitFor("the started instance's first turn, child of the start's span", func() bool {
		turn = sp.childOf("herald.turn", start.SpanContext())
		return turn != nil
	})
	if got := attrOf(turn, "herald.instance").AsString(); got != "user-ann" {
		t.Fatalf("the start's child turn is %q's", got)
	}
	var audit sdktrace.ReadOnlySpan
	b.waitFor("the handler's bus attempt, child of the publishing turn's span", func() bool {
		audit = sp.childOf("herald.bus.attempt", turn.SpanContext())
		return audit != nil
	})
	if got := attrOf(audit, "herald.subscription").AsString(); got != "audit" {
		t.Errorf("the turn's child bus attempt is subscription %q's", got)
	}
	if handlerSpan.SpanID() != audit.SpanContext().SpanID() {
		t.Errorf("the handler's ctx carries span %v, want its attempt's %v", handlerSpan.SpanID(), audit.SpanContext().SpanID())
	}
	sameTrace(t, caller.SpanContext().TraceID(), pub, attempt, start, turn, audit)
}
