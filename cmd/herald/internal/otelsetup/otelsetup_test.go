package otelsetup

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"

	"go.opentelemetry.io/otel"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
)

func TestSetup_NoEndpointInstallsNothing(t *testing.T) {
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "")
	t.Setenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "")
	before := otel.GetTracerProvider()
	shutdown, err := Setup(t.Context(), "herald-test")
	if err != nil {
		t.Fatal(err)
	}
	if otel.GetTracerProvider() != before {
		t.Fatal("Setup without an endpoint replaced the global TracerProvider")
	}
	if _, span := otel.Tracer("t").Start(t.Context(), "x"); span.SpanContext().IsValid() {
		t.Fatal("a span is valid with no provider installed")
	}
	if err := shutdown(t.Context()); err != nil {
		t.Fatal(err)
	}
}

func TestSetup_BadProtocol(t *testing.T) {
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:1")
	t.Setenv("OTEL_EXPORTER_OTLP_PROTOCOL", "http/json")
	before := otel.GetTracerProvider()
	if _, err := Setup(t.Context(), "herald-test"); err == nil {
		t.Fatal("Setup accepted protocol http/json")
	}
	if otel.GetTracerProvider() != before {
		t.Fatal("a refused Setup replaced the global TracerProvider")
	}
}

// TestSetup_ExportsOverHTTP installs the provider against a collector
// stand-in and checks that a span reaches it, in OTLP over HTTP, when the
// provider shuts down (which flushes the batch).
func TestSetup_ExportsOverHTTP(t *testing.T) {
	var posts atomic.Int32
	collector := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost && r.URL.Path == "/v1/traces" &&
			r.Header.Get("Content-Type") == "application/x-protobuf" {
			posts.Add(1)
		}
		w.WriteHeader(http.StatusOK)
	}))
	defer collector.Close()
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", collector.URL)
	t.Setenv("OTEL_EXPORTER_OTLP_PROTOCOL", "")
	t.Setenv("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "")
	before := otel.GetTracerProvider()
	t.Cleanup(func() { otel.SetTracerProvider(before) })

	shutdown, err := Setup(t.Context(), "herald-test")
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := otel.GetTracerProvider().(*sdktrace.TracerProvider); !ok {
		t.Fatalf("global provider is %T, want the SDK's", otel.GetTracerProvider())
	}
	_, span := otel.Tracer("t").Start(context.Background(), "work")
	if !span.SpanContext().IsValid() {
		t.Fatal("span context not valid with the SDK installed")
	}
	span.End()
	if err := shutdown(t.Context()); err != nil {
		t.Fatal(err)
	}
	if posts.Load() == 0 {
		t.Fatal("no OTLP/HTTP export reached the collector")
	}
}
