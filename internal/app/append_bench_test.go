package app

import (
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	contextdv1 "github.com/contextd/contextd/gen/contextd/v1"
)

// BenchmarkAppendContention: 16 clients append one small message per call,
// each to its own session, concurrently, over gRPC on loopback to one server
// on SQLite (synchronous=FULL). It reports calls/s and the p50 and p99
// latency of a call.
func BenchmarkAppendContention(b *testing.B) {
	const clients = 16
	client := contextdv1.NewContextServiceClient(startServer(b, map[string]string{}))
	ctx := b.Context()
	for i := range clients {
		if _, err := client.CreateSession(ctx, &contextdv1.CreateSessionRequest{Id: fmt.Sprintf("append-%d", i), Model: "gpt-4o"}); err != nil {
			b.Fatal(err)
		}
	}
	latencies := make([][]time.Duration, clients)
	b.ResetTimer()
	start := time.Now()
	var wg sync.WaitGroup
	for w := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			req := &contextdv1.AppendMessagesRequest{SessionId: fmt.Sprintf("append-%d", w),
				Messages: []*contextdv1.Message{user("Run the tests again and show me the failures, please.")}}
			for i := w; i < b.N; i += clients {
				t0 := time.Now()
				_, err := client.AppendMessages(ctx, req)
				latencies[w] = append(latencies[w], time.Since(t0))
				if err != nil {
					b.Error(err)
					return
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
	b.ReportMetric(float64(len(all))/elapsed.Seconds(), "calls/s")
	b.ReportMetric(pct(0.50), "p50-ms")
	b.ReportMetric(pct(0.99), "p99-ms")
}
