package app

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	contextdv1 "github.com/contextd/contextd/gen/contextd/v1"
)

// viewSession creates, on the server behind client, a session of 200
// messages (an agent task of 100 tool steps) of about 127 KB, the view the
// view-path benchmark reads.
func viewSession(b *testing.B, client contextdv1.ContextServiceClient, id string) {
	b.Helper()
	ctx := b.Context()
	if _, err := client.CreateSession(ctx, &contextdv1.CreateSessionRequest{Id: id, Model: "gpt-4o",
		SystemPrompt: "You are a coding agent."}); err != nil {
		b.Fatal(err)
	}
	msgs := []*contextdv1.Message{user("Make the API tests pass.")}
	output := strings.Repeat("tests/test_api.py::test_case FAILED AssertionError: expected 200, got 500\n", 16)
	for i := range 100 {
		msgs = append(msgs, toolStep(fmt.Sprintf("c%d", i), output)...)
	}
	msgs = msgs[:200]
	if _, err := client.AppendMessages(ctx, &contextdv1.AppendMessagesRequest{SessionId: id, Messages: msgs}); err != nil {
		b.Fatal(err)
	}
}

// BenchmarkViewPath compares, on one 200-message, ~127 KB session of one
// server (SQLite, gRPC over loopback, one client), three reads taken in
// turn in the same run: GetContextUsage (one row), PrepareContext with no
// new messages (the whole view), and PrepareContext with the view token of
// the previous answer (nothing changed, so no messages). It reports each
// p50 and the ratios to GetContextUsage.
func BenchmarkViewPath(b *testing.B) {
	client := contextdv1.NewContextServiceClient(startServer(b, map[string]string{}))
	ctx := b.Context()
	viewSession(b, client, "view")
	full, err := client.PrepareContext(ctx, &contextdv1.PrepareContextRequest{SessionId: "view"})
	if err != nil {
		b.Fatal(err)
	}
	if n := len(full.GetMessages()); n != 200 {
		b.Fatalf("view of %d messages", n)
	}
	b.Logf("view: %d messages, %d bytes on the wire", len(full.GetMessages()), proto.Size(full))
	token := full.GetViewToken()
	var usage, prepare, delta []time.Duration
	b.ResetTimer()
	for b.Loop() {
		t0 := time.Now()
		if _, err := client.GetContextUsage(ctx, &contextdv1.GetContextUsageRequest{Source: &contextdv1.GetContextUsageRequest_SessionId{SessionId: "view"}}); err != nil {
			b.Fatal(err)
		}
		t1 := time.Now()
		resp, err := client.PrepareContext(ctx, &contextdv1.PrepareContextRequest{SessionId: "view"})
		if err != nil || len(resp.GetMessages()) != 200 || resp.GetDelta() {
			b.Fatal(err)
		}
		t2 := time.Now()
		resp, err = client.PrepareContext(ctx, &contextdv1.PrepareContextRequest{SessionId: "view", ViewToken: token})
		if err != nil || len(resp.GetMessages()) != 0 || !resp.GetDelta() {
			b.Fatalf("delta: %d messages, %v", len(resp.GetMessages()), err)
		}
		t3 := time.Now()
		usage, prepare, delta = append(usage, t1.Sub(t0)), append(prepare, t2.Sub(t1)), append(delta, t3.Sub(t2))
	}
	b.StopTimer()
	u, p, d := p50(usage), p50(prepare), p50(delta)
	b.ReportMetric(u, "usage-p50-ms")
	b.ReportMetric(p, "prepare-p50-ms")
	b.ReportMetric(d, "delta-p50-ms")
	b.ReportMetric(p/u, "prepare/usage")
	b.ReportMetric(d/u, "delta/usage")
}

func p50(d []time.Duration) float64 {
	slices.Sort(d)
	return float64(d[len(d)/2].Microseconds()) / 1000
}
