package app

import (
	"sync"
	"sync/atomic"
	"testing"
	"time"

	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	contextdv1 "github.com/contextd/contextd/gen/contextd/v1"
	"github.com/contextd/contextd/internal/pgtest"
)

// BenchmarkUsageVsHealth is the polling path a dashboard or an agent
// exercises most: 16 clients call GetContextUsage on one 200-message session
// (viewSession) of one server over gRPC on loopback, and, in the same run,
// the same 16 clients call the health check (no store). Each phase makes
// b.N calls; the phases alternate twice so a burst of the shared machine's
// load falls on both. It reports both rates and usage/health, the figure
// the README states (target ≥ 0.60 on 2 cores).
func BenchmarkUsageVsHealth(b *testing.B) {
	for _, backend := range []string{"sqlite", "postgres"} {
		b.Run(backend, func(b *testing.B) {
			env := map[string]string{}
			if backend == "postgres" {
				env["CONTEXTD_DATABASE_URL"] = pgtest.URL(b)
			}
			conn := startServer(b, env)
			client := contextdv1.NewContextServiceClient(conn)
			health := healthpb.NewHealthClient(conn)
			viewSession(b, client, "usage")
			ctx := b.Context()
			usageReq := &contextdv1.GetContextUsageRequest{Source: &contextdv1.GetContextUsageRequest_SessionId{SessionId: "usage"}}
			healthReq := &healthpb.HealthCheckRequest{Service: "contextd.v1.ContextService"}
			calls := map[string]func() error{
				"usage": func() error {
					resp, err := client.GetContextUsage(ctx, usageReq)
					if err == nil && resp.GetUsage().GetMessageCount() != 200 {
						b.Fatalf("usage of %d messages", resp.GetUsage().GetMessageCount())
					}
					return err
				},
				"health": func() error { _, err := health.Check(ctx, healthReq); return err },
			}
			const clients = 16
			elapsed := map[string]time.Duration{}
			phase := func(name string, n int) {
				var next atomic.Int64
				var wg sync.WaitGroup
				start := time.Now()
				for range clients {
					wg.Add(1)
					go func() {
						defer wg.Done()
						for next.Add(1) <= int64(n) {
							if err := calls[name](); err != nil {
								b.Error(err)
								return
							}
						}
					}()
				}
				wg.Wait()
				elapsed[name] += time.Since(start)
			}
			phase("usage", 200) // warm: connections, view cache, prepared statements
			phase("health", 200)
			clear(elapsed)
			b.ResetTimer()
			for range 2 {
				phase("health", b.N/2+1)
				phase("usage", b.N/2+1)
			}
			b.StopTimer()
			rate := func(name string) float64 { return float64(2*(b.N/2+1)) / elapsed[name].Seconds() }
			b.ReportMetric(rate("usage"), "usage-calls/s")
			b.ReportMetric(rate("health"), "health-calls/s")
			b.ReportMetric(rate("usage")/rate("health"), "usage/health")
		})
	}
}
