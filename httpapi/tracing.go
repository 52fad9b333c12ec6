package httpapi

import (
	"net/http"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
)

// tracePropagator reads the W3C trace context of a request (traceparent,
// tracestate): always W3C, whatever propagator the program installed
// globally, as the API documents.
var tracePropagator = propagation.TraceContext{}

// withTracing starts a server span per request, a child of the request's
// traceparent header when it has a valid one, so that the spans of what
// the request does (a raise, a start: the runtime's client spans, and
// through the trace context stored with the event, the turn that later
// consumes it) join the caller's trace. The span is named after the route
// the mux matches ("POST /v1/instances/{id}/events"). Spans
// go to the runtime's TracerProvider (herald.ClientConfig.TracerProvider):
// with none configured they are no-ops and this costs next to nothing.
func (a *API) withTracing(next http.Handler) http.Handler {
	tracer := a.rt.TracerProvider().Tracer("github.com/heraldwf/herald/httpapi")
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ctx := r.Context()
		if r.Header.Get("traceparent") != "" {
			ctx = tracePropagator.Extract(ctx, propagation.HeaderCarrier(r.Header))
		}
		ctx, span := tracer.Start(ctx, r.Method, trace.WithSpanKind(trace.SpanKindServer))
		defer span.End()
		if !span.IsRecording() {
			next.ServeHTTP(w, r.WithContext(ctx))
			return
		}
		// The route, as the mux will match it (the mux records it on a
		// copy of the request the handlers below make).
		_, route := a.mux.Handler(r)
		if route != "" {
			span.SetName(route)
		}
		sw := &statusWriter{ResponseWriter: w}
		next.ServeHTTP(sw, r.WithContext(ctx))
		status := sw.status
		if status == 0 {
			status = http.StatusOK
		}
		span.SetAttributes(
			attribute.String("http.request.method", r.Method),
			attribute.String("http.route", route),
			attribute.Int("http.response.status_code", status),
		)
		if status >= 500 {
			span.SetStatus(codes.Error, http.StatusText(status))
		}
	})
}
