package app

import (
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	contextdv1 "github.com/contextd/contextd/gen/contextd/v1"
	"github.com/contextd/contextd/internal/pgtest"
)

// BenchmarkPrepareContextLoad is the load test: 32 agent sessions on one
// server over PostgreSQL call PrepareContext concurrently through gRPC on
// loopback, each call appending one agent step (an assistant tool call and a
// ~400-token result), with compaction running whenever a session's policy
// asks (gpt-4: an 8k window, so every session compacts many times). It
// reports p50 and p99 latency and calls per second.
func BenchmarkPrepareContextLoad(b *testing.B) {
	const sessions = 32
	conn := startServer(b, map[string]string{"CONTEXTD_DATABASE_URL": pgtest.URL(b)})
	client := contextdv1.NewContextServiceClient(conn)
	ctx := b.Context()
	output := strings.Repeat("tests/test_api.py::test_case FAILED AssertionError: expected 200, got 500\n", 20)
	for i := 0; i < sessions; i++ {
		if _, err := client.CreateSession(ctx, &contextdv1.CreateSessionRequest{Id: fmt.Sprintf("load-%d", i), Model: "gpt-4",
			SystemPrompt: "You are a coding agent."}); err != nil {
			b.Fatal(err)
		}
		if _, err := client.PrepareContext(ctx, &contextdv1.PrepareContextRequest{SessionId: fmt.Sprintf("load-%d", i),
			Messages: []*contextdv1.Message{user("Make the API tests pass.")}}); err != nil {
			b.Fatal(err)
		}
	}
	var next atomic.Int64
	latencies := make([][]time.Duration, sessions)
	var compactions atomic.Int64
	b.ResetTimer()
	start := time.Now()
	var wg sync.WaitGroup
	for w := 0; w < sessions; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			id := fmt.Sprintf("load-%d", w)
			for step := 0; next.Add(1) <= int64(b.N); step++ {
				msgs := toolStep(fmt.Sprintf("c%d", step), output)
				t0 := time.Now()
				resp, err := client.PrepareContext(ctx, &contextdv1.PrepareContextRequest{SessionId: id, Messages: msgs})
				latencies[w] = append(latencies[w], time.Since(t0))
				if err != nil {
					b.Error(err)
					return
				}
				if resp.GetStatus().GetCompacted() {
					compactions.Add(1)
				}
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	b.StopTimer()
	all := slices.Concat(latencies...)
	slices.Sort(all)
	pct := func(p float64) float64 { return float64(all[int(p*float64(len(all)-1))].Microseconds()) / 1000 }
	b.ReportMetric(pct(0.50), "p50-ms")
	b.ReportMetric(pct(0.99), "p99-ms")
	b.ReportMetric(float64(len(all))/elapsed.Seconds(), "calls/s")
	b.ReportMetric(float64(compactions.Load()), "compactions")
}
