package telemetry_test

import (
	"net"
	"testing"

	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/contextd/contextd/internal/telemetry"
)

func TestTracingEnabled(t *testing.T) {
	for env, want := range map[string]bool{"": false, "none": false, "otlp": true, "console": true} {
		got := telemetry.TracingEnabled(func(k string) string {
			if k == "OTEL_TRACES_EXPORTER" {
				return env
			}
			return ""
		})
		if got != want {
			t.Errorf("OTEL_TRACES_EXPORTER=%q: %v", env, got)
		}
	}
	if !telemetry.TracingEnabled(func(k string) string {
		if k == "OTEL_EXPORTER_OTLP_ENDPOINT" {
			return "http://collector:4318"
		}
		return ""
	}) {
		t.Error("an OTLP endpoint alone must turn tracing on")
	}
}

// TestSpanPerCall: every gRPC call becomes a server span.
func TestSpanPerCall(t *testing.T) {
	exp := tracetest.NewInMemoryExporter()
	tr, err := telemetry.NewTracing(t.Context(), exp)
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer(tr.ServerOption())
	healthpb.RegisterHealthServer(srv, health.NewServer())
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go srv.Serve(lis)
	defer srv.Stop()
	conn, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := healthpb.NewHealthClient(conn).Check(t.Context(), &healthpb.HealthCheckRequest{}); err != nil {
		t.Fatal(err)
	}
	conn.Close()
	srv.GracefulStop()                                 // the server span ends after the answer is sent
	if err := tr.ForceFlush(t.Context()); err != nil { // Shutdown would also empty the in-memory exporter
		t.Fatal(err)
	}
	spans := exp.GetSpans()
	if len(spans) == 0 || spans[0].Name != "grpc.health.v1.Health/Check" {
		t.Fatalf("spans: %v", spans)
	}
	found := false
	for _, a := range spans[0].Resource.Attributes() {
		if a.Key == "service.name" && a.Value.AsString() == "contextd" {
			found = true
		}
	}
	if !found {
		t.Errorf("service.name is not contextd: %v", spans[0].Resource.Attributes())
	}
}
