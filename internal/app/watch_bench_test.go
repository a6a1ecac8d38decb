package app

import (
	"fmt"
	"runtime"
	"slices"
	"testing"
	"time"

	"google.golang.org/grpc"

	contextdv1 "github.com/contextd/contextd/gen/contextd/v1"
)

// BenchmarkWatchFanout holds 1,000 WatchContextStatus streams on one session
// of one server (SQLite, real gRPC over loopback, 10 client connections) and
// measures, for each append, the time from the append call to the status
// reaching every subscriber: p50 and p99 over all deliveries, and the
// heap each subscriber costs (client and server side together).
func BenchmarkWatchFanout(b *testing.B) {
	const subscribers, conns = 1000, 10
	first := startServer(b, map[string]string{"CONTEXTD_WATCH_MAX_SUBSCRIBERS": "2000", "CONTEXTD_WATCH_MAX_SUBSCRIBERS_PER_TENANT": "2000"})
	client := contextdv1.NewContextServiceClient(first)
	ctx := b.Context()
	if _, err := client.CreateSession(ctx, &contextdv1.CreateSessionRequest{Id: "fan", Model: "gpt-4o"}); err != nil {
		b.Fatal(err)
	}
	clients := []contextdv1.ContextServiceClient{client}
	for i := 1; i < conns; i++ {
		clients = append(clients, contextdv1.NewContextServiceClient(dial(b, first.Target())))
	}
	var before runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)

	type delivery struct {
		version int64
		at      time.Time
	}
	got := make(chan delivery, subscribers*64)
	ready := make(chan struct{}, subscribers)
	for i := 0; i < subscribers; i++ {
		stream, err := clients[i%conns].WatchContextStatus(ctx, &contextdv1.WatchContextStatusRequest{SessionId: "fan"}, grpc.WaitForReady(true))
		if err != nil {
			b.Fatal(err)
		}
		go func() {
			for {
				resp, err := stream.Recv()
				if err != nil {
					return
				}
				if resp.GetStatus().GetEvent() == contextdv1.StatusEvent_STATUS_EVENT_SNAPSHOT {
					ready <- struct{}{}
					continue
				}
				got <- delivery{resp.GetStatus().GetVersion(), time.Now()}
			}
		}()
	}
	for i := 0; i < subscribers; i++ {
		<-ready
	}
	var after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&after)

	var latencies []time.Duration
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		sent := time.Now()
		resp, err := client.AppendMessages(ctx, &contextdv1.AppendMessagesRequest{SessionId: "fan",
			Messages: []*contextdv1.Message{user(fmt.Sprintf("message %d", i))}})
		if err != nil {
			b.Fatal(err)
		}
		for n := 0; n < subscribers; {
			d := <-got
			if d.version == resp.GetVersion() {
				latencies = append(latencies, d.at.Sub(sent))
				n++
			}
		}
	}
	b.StopTimer()
	slices.Sort(latencies)
	pct := func(p float64) float64 {
		return float64(latencies[int(p*float64(len(latencies)-1))].Microseconds()) / 1000
	}
	b.ReportMetric(pct(0.50), "p50-ms")
	b.ReportMetric(pct(0.99), "p99-ms")
	b.ReportMetric(float64(int64(after.HeapInuse)-int64(before.HeapInuse))/subscribers, "heap-B/subscriber")
}
