// Package otelsetup installs the OpenTelemetry SDK for the herald binary:
// the library itself uses only the OpenTelemetry API (its spans are no-ops
// until a program installs a TracerProvider), so the SDK and the OTLP
// exporters live here, out of the way of programs that embed Herald.
package otelsetup

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
)

// Setup installs, when OTEL_EXPORTER_OTLP_ENDPOINT (or
// OTEL_EXPORTER_OTLP_TRACES_ENDPOINT) is set, a global TracerProvider that
// exports spans in batches with OTLP and the W3C trace-context propagator,
// and returns the function that flushes and stops it. The protocol is
// OTEL_EXPORTER_OTLP_TRACES_PROTOCOL or OTEL_EXPORTER_OTLP_PROTOCOL:
// "http/protobuf" (the default) or "grpc"; any other value is an error. The
// exporters read the other standard variables themselves (headers,
// timeout, TLS); the sampler is the SDK's (OTEL_TRACES_SAMPLER, default
// parentbased_always_on). The resource's service.name is serviceName
// unless OTEL_SERVICE_NAME or OTEL_RESOURCE_ATTRIBUTES says otherwise.
//
// With neither variable set it installs nothing and returns a shutdown
// that does nothing: Herald's spans stay no-ops.
func Setup(ctx context.Context, serviceName string) (shutdown func(context.Context) error, err error) {
	nop := func(context.Context) error { return nil }
	if os.Getenv("OTEL_EXPORTER_OTLP_ENDPOINT") == "" && os.Getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") == "" {
		return nop, nil
	}
	protocol := os.Getenv("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL")
	if protocol == "" {
		protocol = os.Getenv("OTEL_EXPORTER_OTLP_PROTOCOL")
	}
	var exp sdktrace.SpanExporter
	switch strings.TrimSpace(protocol) {
	case "", "http/protobuf":
		exp, err = otlptracehttp.New(ctx)
	case "grpc":
		exp, err = otlptracegrpc.New(ctx)
	default:
		return nop, fmt.Errorf("otelsetup: OTEL_EXPORTER_OTLP_PROTOCOL %q: want http/protobuf or grpc", protocol)
	}
	if err != nil {
		return nop, fmt.Errorf("otelsetup: OTLP exporter: %w", err)
	}
	// Later sources win: the environment's service name over serviceName.
	res, err := resource.New(ctx,
		resource.WithAttributes(attribute.String("service.name", serviceName)),
		resource.WithTelemetrySDK(),
		resource.WithFromEnv(),
	)
	if err != nil && res == nil {
		return nop, errors.Join(fmt.Errorf("otelsetup: resource: %w", err), exp.Shutdown(ctx))
	}
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp), sdktrace.WithResource(res))
	otel.SetTracerProvider(tp)
	otel.SetTextMapPropagator(propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{}))
	return tp.Shutdown, nil
}
