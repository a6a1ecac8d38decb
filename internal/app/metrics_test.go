package app

import (
	"io"
	"net/http"
	"strings"
	"testing"

	contextdv1 "github.com/contextd/contextd/gen/contextd/v1"
)

// TestMetrics scrapes /metrics after some work: gRPC metrics and the domain
// metrics are there.
func TestMetrics(t *testing.T) {
	metricsAddr := freeAddr(t)
	client := contextdv1.NewContextServiceClient(startServer(t, map[string]string{"CONTEXTD_METRICS_ADDR": metricsAddr}))
	ctx := t.Context()
	if _, err := client.CountTokens(ctx, &contextdv1.CountTokensRequest{Encoding: "o200k_base", Text: "hello world"}); err != nil {
		t.Fatal(err)
	}
	if _, err := client.CreateSession(ctx, &contextdv1.CreateSessionRequest{Id: "m", Model: "gpt-4"}); err != nil {
		t.Fatal(err)
	}
	msgs := []*contextdv1.Message{user("Fix it.")}
	for i := 0; i < 16; i++ {
		msgs = append(msgs, toolStep(string(rune('a'+i)), strings.Repeat("FAILED test_x - AssertionError\n", 30))...)
	}
	if _, err := client.AppendMessages(ctx, &contextdv1.AppendMessagesRequest{SessionId: "m", Messages: msgs}); err != nil {
		t.Fatal(err)
	}
	low := 0.2
	if _, err := client.Compact(ctx, &contextdv1.CompactRequest{SessionId: "m", Target: &low}); err != nil {
		t.Fatal(err)
	}
	if _, err := client.ReportUsage(ctx, &contextdv1.ReportUsageRequest{SessionId: "m", InputTokens: 100, CacheReadInputTokens: 900, OutputTokens: 10}); err != nil {
		t.Fatal(err)
	}
	got, err := client.GetSession(ctx, &contextdv1.GetSessionRequest{SessionId: "m"})
	if err != nil {
		t.Fatal(err)
	}
	if l := got.GetSession().GetLedger(); l.GetCalls().GetCalls() != 1 || l.GetCalls().GetCacheReadTokens() != 900 || l.GetCacheHitRate() != 0.9 || l.GetTotalCostUsd() <= 0 {
		t.Errorf("GetSession ledger = %v", l)
	}
	resp, err := http.Get("http://" + metricsAddr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	for _, want := range []string{
		`grpc_server_handled_total{grpc_code="OK",grpc_method="CountTokens"`,
		`contextd_tokens_counted_total{encoding="o200k_base"} 2`,
		`contextd_tokens_counted_total{encoding="cl100k_base"}`,
		`contextd_compactions_total{tier="prune"} 1`,
		`contextd_compaction_tokens_saved_total`,
		`contextd_summarizer_duration_seconds_count{summarizer="extractive"}`,
		`contextd_watch_subscribers 0`,
		`contextd_model_calls_total{model="gpt-4",source="calls"} 1`,
		`contextd_billed_tokens_total{kind="cache_read",model="gpt-4",source="calls"} 900`,
		`contextd_estimated_spend_usd_total{model="gpt-4",source="calls"}`,
	} {
		if !strings.Contains(string(body), want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
}
