package herald

import (
	"context"
	"encoding/hex"
	"strconv"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/heraldwf/herald/storage"
)

// Tracing (OpenTelemetry): the client's sends start a span, child of their
// ctx, and store its context with what they send (the W3C traceparent
// travels with the event, the start's kick, the activity task, the
// correlated event and its deliveries, the published bus event) so that
// the turn or bus attempt that consumes it joins the same trace, later and
// on whichever node claims it:
//
//	herald.raise_event / herald.enqueue / herald.start_workflow / herald.put_correlated_event
//	  └ herald.turn            (child of the first message's trace, linked to the others')
//	      └ herald.activity     (one per attempt, child of the turn that scheduled it)
//	          (its result message carries the same context: the next turn stays in the trace)
//	herald.publish (or a turn that publishes)
//	  └ herald.bus.attempt     (one per attempt of each execution)
//	      └ the target's start or correlated put (herald.start_workflow, ...) └ herald.turn ...
//	      └ herald.turn        (of a signal or enqueue target: its event carries the attempt's span)
//
// Herald uses only the OpenTelemetry API. With no TracerProvider
// configured (and none installed globally) every span is a no-op, nothing
// is formatted and nothing is stored: the trace fields stay empty.

// tracerName is the instrumentation scope of Herald's spans.
const tracerName = "github.com/heraldwf/herald"

// Span attribute keys.
const (
	attrTenant    = attribute.Key("herald.tenant")
	attrInstance  = attribute.Key("herald.instance")
	attrWorkflow  = attribute.Key("herald.workflow")
	attrExecution = attribute.Key("herald.execution")
	attrEventID   = attribute.Key("herald.event_id")
	attrEventName = attribute.Key("herald.event_name")
	attrLane      = attribute.Key("herald.lane")
	attrActivity  = attribute.Key("herald.activity")
	attrAttempt   = attribute.Key("herald.attempt")
	attrMessages  = attribute.Key("herald.messages")
	attrOutcome   = attribute.Key("herald.outcome")
	attrKey       = attribute.Key("herald.key")
	attrEventType = attribute.Key("herald.event_type")
	attrSubscr    = attribute.Key("herald.subscription")
	attrExecID    = attribute.Key("herald.bus_execution")
)

// consumerSpan and producerSpan are the start options of Herald's spans,
// made once: a variadic call through the Tracer interface would allocate
// them at every span, tracing on or off.
var (
	consumerSpan = []trace.SpanStartOption{trace.WithSpanKind(trace.SpanKindConsumer)}
	producerSpan = []trace.SpanStartOption{trace.WithSpanKind(trace.SpanKindProducer)}
)

// tracerOf returns Herald's tracer of cfg's provider.
func tracerOf(c *ClientConfig) trace.Tracer {
	return c.TracerProvider.Tracer(tracerName)
}

// traceParent formats the span context of span as a W3C traceparent
// ("00-<trace id>-<span id>-<flags>"), or "" if it is not valid (tracing
// off): then nothing is allocated and nothing is stored.
func traceParent(span trace.Span) string {
	sc := span.SpanContext()
	if !sc.IsValid() {
		return ""
	}
	var b [55]byte
	tid, sid := sc.TraceID(), sc.SpanID()
	b[0], b[1], b[2] = '0', '0', '-'
	hex.Encode(b[3:35], tid[:])
	b[35] = '-'
	hex.Encode(b[36:52], sid[:])
	b[52] = '-'
	flags := [1]byte{byte(sc.TraceFlags())}
	hex.Encode(b[53:55], flags[:])
	return string(b[:])
}

// parseTraceParent parses a traceparent that traceParent made (version 00)
// into a remote span context; ok is false for "" or anything malformed (a
// stored value is never trusted to be well-formed).
func parseTraceParent(s string) (trace.SpanContext, bool) {
	if len(s) != 55 || s[0] != '0' || s[1] != '0' || s[2] != '-' || s[35] != '-' || s[52] != '-' {
		return trace.SpanContext{}, false
	}
	tid, err := trace.TraceIDFromHex(s[3:35])
	if err != nil {
		return trace.SpanContext{}, false
	}
	sid, err := trace.SpanIDFromHex(s[36:52])
	if err != nil {
		return trace.SpanContext{}, false
	}
	var flags [1]byte
	if _, err := hex.Decode(flags[:], []byte(s[53:55])); err != nil {
		return trace.SpanContext{}, false
	}
	sc := trace.NewSpanContext(trace.SpanContextConfig{TraceID: tid, SpanID: sid,
		TraceFlags: trace.TraceFlags(flags[0]), Remote: true})
	return sc, sc.IsValid()
}

// endSpan records err (if any) on span and ends it.
func endSpan(span trace.Span, err error) {
	if err != nil && span.IsRecording() {
		span.RecordError(err)
		span.SetStatus(codes.Error, err.Error())
	}
	span.End()
}

// startTurnSpan starts the span of turn t: a child of the trace of the
// first message that carries one, linked to the other messages' traces.
// With no message carrying a trace it is a root span (or, tracing off, a
// no-op).
func startTurnSpan(ctx context.Context, tr trace.Tracer, t *storage.Turn) (context.Context, trace.Span) {
	var (
		parent bool
		links  []trace.Link
	)
	for i := range t.Messages {
		tp := t.Messages[i].TraceParent
		if tp == "" {
			continue
		}
		sc, ok := parseTraceParent(tp)
		if !ok {
			continue
		}
		if !parent {
			ctx, parent = trace.ContextWithRemoteSpanContext(ctx, sc), true
			continue
		}
		if !sc.Equal(trace.SpanContextFromContext(ctx)) && !linked(links, sc) {
			links = append(links, trace.Link{SpanContext: sc})
		}
	}
	var (
		ctx2 context.Context
		span trace.Span
	)
	if len(links) > 0 {
		ctx2, span = tr.Start(ctx, "herald.turn", trace.WithSpanKind(trace.SpanKindConsumer), trace.WithLinks(links...))
	} else {
		ctx2, span = tr.Start(ctx, "herald.turn", consumerSpan...)
	}
	if span.IsRecording() {
		span.SetAttributes(attrTenant.String(t.Instance.Tenant), attrInstance.String(t.Instance.ID),
			attrWorkflow.String(t.Instance.Workflow), attrExecution.Int(t.Instance.Execution),
			attrMessages.Int(len(t.Messages)))
	}
	return ctx2, span
}

func linked(links []trace.Link, sc trace.SpanContext) bool {
	for _, l := range links {
		if l.SpanContext.Equal(sc) {
			return true
		}
	}
	return false
}

// startActivitySpan starts the span of an attempt of task t: a child of the
// turn that scheduled it (the task's stored trace), or a root span.
func startActivitySpan(ctx context.Context, tr trace.Tracer, t *storage.ActivityTask) (context.Context, trace.Span) {
	if sc, ok := parseTraceParent(t.TraceParent); ok {
		ctx = trace.ContextWithRemoteSpanContext(ctx, sc)
	}
	ctx, span := tr.Start(ctx, "herald.activity", consumerSpan...)
	if span.IsRecording() {
		span.SetAttributes(attrTenant.String(t.Tenant), attrInstance.String(t.InstanceID),
			attrExecution.Int(t.Execution), attrActivity.String(t.Name), attrAttempt.Int(t.Attempt),
			attribute.String("herald.task", t.InstanceID+"/"+strconv.Itoa(t.Execution)+"/"+strconv.Itoa(t.TaskSeq)))
	}
	return ctx, span
}

// startBusSpan starts the span of a bus attempt ("herald.bus.attempt"): a
// child of the trace stored with the published event (the publisher's
// span), or a root span. The target's work runs in its context, so a
// workflow start, signal, enqueue or correlated put it makes is its child
// (and the turn that consumes it joins the trace), and a Go handler's ctx
// carries it.
func startBusSpan(ctx context.Context, tr trace.Tracer, it *busItem) (context.Context, trace.Span) {
	if sc, ok := parseTraceParent(it.Event.TraceParent); ok {
		ctx = trace.ContextWithRemoteSpanContext(ctx, sc)
	}
	ctx, span := tr.Start(ctx, "herald.bus.attempt", consumerSpan...)
	if span.IsRecording() {
		ex := &it.Execution
		span.SetAttributes(attrTenant.String(it.tenant), attrSubscr.String(ex.Subscription),
			attrEventType.String(it.Event.Type), attrEventID.String(ex.EventID), attrAttempt.Int(ex.Attempts),
			attrExecID.Int64(ex.ID))
	}
	return ctx, span
}

// startSendSpan starts the span of a client send (kind producer), with the
// attributes set only when it records.
func (c *Client) startSendSpan(ctx context.Context, name string, attrs func() []attribute.KeyValue) (context.Context, trace.Span) {
	ctx, span := c.tracer.Start(ctx, name, producerSpan...)
	if span.IsRecording() {
		span.SetAttributes(attrTenant.String(c.tenant))
		span.SetAttributes(attrs()...)
	}
	return ctx, span
}

// endOutcomeSpan ends the span of a turn or an activity attempt with its
// outcome (TurnReport.Outcome, ActivityReport.Outcome) and error.
func endOutcomeSpan(span trace.Span, outcome string, err error) {
	if span.IsRecording() {
		span.SetAttributes(attrOutcome.String(outcome))
	}
	endSpan(span, err)
}

// TracerProvider returns the provider the runtime's spans go to
// (ClientConfig.TracerProvider, or the global one), so that a server in
// front of the runtime (package httpapi) makes its spans with the same.
func (r *Runtime) TracerProvider() trace.TracerProvider { return r.cfg.TracerProvider }

// returnedTraces gives each correlated event a turn returns the trace
// context its copy carried, when the copy is among the turn's messages (it
// was delivered in an earlier turn otherwise: its trace is not kept), so
// that a delete-after-first hand-on stays in the put's trace.
func returnedTraces(msgs []storage.Message, returned []storage.ReturnedCorrelated) {
	for i := range returned {
		for j := range msgs {
			if msgs[j].EventID == returned[i].EventID && msgs[j].TraceParent != "" {
				returned[i].TraceParent = msgs[j].TraceParent
				break
			}
		}
	}
}
