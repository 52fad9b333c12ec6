package herald

import (
	"context"
	"testing"

	"go.opentelemetry.io/otel"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/heraldwf/herald/storage"
)

func TestTraceParent_RoundTrip(t *testing.T) {
	tp := sdktrace.NewTracerProvider()
	defer tp.Shutdown(context.Background())
	_, span := tp.Tracer("t").Start(context.Background(), "s")
	s := traceParent(span)
	if len(s) != 55 || s[:3] != "00-" || s[52:] != "-01" {
		t.Fatalf("traceParent = %q", s)
	}
	sc, ok := parseTraceParent(s)
	if !ok || sc.TraceID() != span.SpanContext().TraceID() || sc.SpanID() != span.SpanContext().SpanID() ||
		!sc.IsSampled() || !sc.IsRemote() {
		t.Fatalf("parseTraceParent(%q) = %v, %v", s, sc, ok)
	}
	for _, bad := range []string{"", "00", s[:54], s + "0", "01" + s[2:], "00-" + "zz" + s[5:],
		"00-00000000000000000000000000000000-b7ad6b7169203331-01", // zero trace id: invalid
		"00-0af7651916cd43dd8448eb211c80319c-0000000000000000-01", // zero span id
		"00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-xx",
		"00_0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"} {
		if _, ok := parseTraceParent(bad); ok {
			t.Errorf("parseTraceParent(%q) accepted it", bad)
		}
	}
}

// TestTracingOff_NoAllocs: with tracing off (the global provider, none
// installed; or a no-op one) a span's context is invalid, so nothing is
// formatted (no allocation) and nothing is stored; the turn span of a turn
// whose messages carry no trace parses nothing.
func TestTracingOff_NoAllocs(t *testing.T) {
	for name, tr := range map[string]trace.Tracer{
		"global": otel.GetTracerProvider().Tracer(tracerName),
		"noop":   noop.NewTracerProvider().Tracer(tracerName),
	} {
		_, span := tr.Start(context.Background(), "s")
		if got := traceParent(span); got != "" {
			t.Fatalf("%s: traceParent = %q with tracing off", name, got)
		}
		if n := testing.AllocsPerRun(100, func() { _ = traceParent(span) }); n != 0 {
			t.Errorf("%s: traceParent allocates %v times with tracing off", name, n)
		}
		turn := &storage.Turn{Instance: storage.Instance{Tenant: "t", ID: "i", Workflow: "w"},
			Messages: []storage.Message{{Kind: storage.MsgKick}, {Kind: storage.MsgEvent}}}
		_, ts := startTurnSpan(context.Background(), tr, turn)
		if ts.SpanContext().IsValid() || ts.IsRecording() {
			t.Errorf("%s: the turn span records with tracing off", name)
		}
		ts.End()

		// A bus attempt of an event published without a trace: no span
		// records, and starting it costs what the API's no-op costs (at
		// most the context it returns).
		it := &busItem{tenant: "t", BusClaimed: &storage.BusClaimed{Event: storage.BusEvent{ID: "e", Type: "x"}}}
		_, bs := startBusSpan(context.Background(), tr, it)
		if bs.SpanContext().IsValid() || bs.IsRecording() {
			t.Errorf("%s: the bus attempt span records with tracing off", name)
		}
		bare := testing.AllocsPerRun(100, func() {
			_, s := tr.Start(context.Background(), "s")
			s.End()
		})
		if n := testing.AllocsPerRun(100, func() {
			_, s := startBusSpan(context.Background(), tr, it)
			endOutcomeSpan(s, BusOutcomeSucceeded, nil)
		}); n > bare {
			t.Errorf("%s: a bus attempt's span allocates %v times with tracing off, the API's bare span %v", name, n, bare)
		}
	}
}
