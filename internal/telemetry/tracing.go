package telemetry

import (
	"context"
	"fmt"

	"go.opentelemetry.io/contrib/exporters/autoexport"
	"go.opentelemetry.io/contrib/instrumentation/google.golang.org/grpc/otelgrpc"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/propagation"
	sdkresource "go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"google.golang.org/grpc"
	"google.golang.org/grpc/stats"
)

// TracingEnabled reports whether the environment asks for traces: any of
// OTEL_TRACES_EXPORTER (other than "none"), OTEL_EXPORTER_OTLP_ENDPOINT or
// OTEL_EXPORTER_OTLP_TRACES_ENDPOINT is set.
func TracingEnabled(getenv func(string) string) bool {
	if e := getenv("OTEL_TRACES_EXPORTER"); e != "" {
		return e != "none"
	}
	return getenv("OTEL_EXPORTER_OTLP_ENDPOINT") != "" || getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") != ""
}

// Tracing is an installed tracer provider and the gRPC handler that
// records a span per call.
type Tracing struct {
	provider *sdktrace.TracerProvider
	Handler  stats.Handler
}

// NewTracing builds tracing from the OTEL_* environment (exporter, endpoint,
// headers, sampler, OTEL_SERVICE_NAME, OTEL_RESOURCE_ATTRIBUTES). exporter
// overrides the environment's exporter (tests).
func NewTracing(ctx context.Context, exporter sdktrace.SpanExporter) (*Tracing, error) {
	if exporter == nil {
		var err error
		if exporter, err = autoexport.NewSpanExporter(ctx); err != nil {
			return nil, fmt.Errorf("OTEL trace exporter: %w", err)
		}
	}
	// service.name defaults to contextd; OTEL_SERVICE_NAME and
	// OTEL_RESOURCE_ATTRIBUTES, detected later, override it.
	res, err := sdkresource.New(ctx, sdkresource.WithAttributes(attribute.String("service.name", "contextd")),
		sdkresource.WithTelemetrySDK(), sdkresource.WithHost(), sdkresource.WithFromEnv())
	if err != nil {
		return nil, fmt.Errorf("OTEL resource: %w", err)
	}
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exporter), sdktrace.WithResource(res))
	otel.SetTracerProvider(tp)
	otel.SetTextMapPropagator(propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{}))
	return &Tracing{provider: tp, Handler: otelgrpc.NewServerHandler(otelgrpc.WithTracerProvider(tp))}, nil
}

// ServerOption installs the span-per-call handler.
func (t *Tracing) ServerOption() grpc.ServerOption { return grpc.StatsHandler(t.Handler) }

// Shutdown flushes pending spans.
func (t *Tracing) Shutdown(ctx context.Context) error { return t.provider.Shutdown(ctx) }

// ForceFlush exports pending spans now.
func (t *Tracing) ForceFlush(ctx context.Context) error { return t.provider.ForceFlush(ctx) }
