package httpapi_test

import (
	"context"
	"testing"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/heraldwf/herald"
	"github.com/heraldwf/herald/httpapi"
	"github.com/heraldwf/herald/httpapi/wire"
)

// TestTracing_TraceparentJoinsTheTrace: a request with a W3C traceparent
// gets a server span that is its child, and what the request does — the
// start's span, and the turn that later consumes the start's kick (through
// the trace context stored with it) — is in the caller's trace. A request
// without one, or with a malformed one, starts a trace of its own.
func TestTracing_TraceparentJoinsTheTrace(t *testing.T) {
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	s := newServer(t, func(cfg *herald.Config, _ *httpapi.Options) { cfg.TracerProvider = tp })
	key := s.key("acme")

	const (
		traceID  = "4bf92f3577b34da6a3ce929d0e0e4736"
		parentID = "00f067aa0ba902b7"
	)
	s.do(key, "POST", "/v1/instances", wire.StartInstanceRequest{Workflow: "echo", ID: "i1"},
		"traceparent", "00-"+traceID+"-"+parentID+"-01").ok(201, nil)

	named := func(name string) []sdktrace.ReadOnlySpan {
		var out []sdktrace.ReadOnlySpan
		for _, sp := range rec.Ended() {
			if sp.Name() == name {
				out = append(out, sp)
			}
		}
		return out
	}
	var turn sdktrace.ReadOnlySpan
	s.eventually("the span of the start's turn", func() bool {
		for _, sp := range named("herald.turn") {
			if sp.SpanContext().TraceID().String() == traceID {
				turn = sp
				return true
			}
		}
		return false
	})
	servers := named("POST /v1/instances")
	if len(servers) != 1 {
		t.Fatalf("%d server spans named after the route, want 1", len(servers))
	}
	srv := servers[0]
	if srv.SpanKind() != trace.SpanKindServer || srv.SpanContext().TraceID().String() != traceID ||
		srv.Parent().SpanID().String() != parentID || !srv.Parent().IsRemote() {
		t.Fatalf("server span: kind %v, trace %v, parent %v (remote %v); want a server child of %s-%s",
			srv.SpanKind(), srv.SpanContext().TraceID(), srv.Parent().SpanID(), srv.Parent().IsRemote(), traceID, parentID)
	}
	starts := named("herald.start_workflow")
	if len(starts) != 1 || starts[0].Parent().SpanID() != srv.SpanContext().SpanID() ||
		starts[0].SpanContext().TraceID().String() != traceID {
		t.Fatalf("start spans %v: want one, child of the server span", starts)
	}
	if turn.Parent().SpanID() != starts[0].SpanContext().SpanID() {
		t.Fatalf("turn span's parent %v, want the start's span %v", turn.Parent().SpanID(), starts[0].SpanContext().SpanID())
	}

	// No traceparent, and a malformed one: a new trace each.
	s.do(key, "POST", "/v1/instances", wire.StartInstanceRequest{Workflow: "echo", ID: "i2"}).ok(201, nil)
	s.do(key, "POST", "/v1/instances", wire.StartInstanceRequest{Workflow: "echo", ID: "i3"},
		"traceparent", "00-not-a-trace-01").ok(201, nil)
	servers = named("POST /v1/instances")
	if len(servers) != 3 {
		t.Fatalf("%d server spans, want 3", len(servers))
	}
	for _, sp := range servers[1:] {
		if sp.Parent().IsValid() || sp.SpanContext().TraceID().String() == traceID {
			t.Errorf("a request without a valid traceparent joined trace %v (parent %v)", sp.SpanContext().TraceID(), sp.Parent())
		}
	}
}
