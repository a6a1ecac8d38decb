package app

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	contextdv1 "github.com/contextd/contextd/gen/contextd/v1"
)

// fakeSummarizer answers OpenAI chat completions with a summary after a
// delay, counting the requests.
func fakeSummarizer(t *testing.T, delay time.Duration) (*httptest.Server, *atomic.Int64) {
	var n atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		k := n.Add(1)
		_, _ = io.Copy(io.Discard, r.Body)
		select {
		case <-time.After(delay):
		case <-r.Context().Done():
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]any{"id": "chatcmpl-1", "object": "chat.completion", "created": 1,
			"model": "gpt-4o-mini", "choices": []any{map[string]any{"index": 0, "finish_reason": "stop",
				"message": map[string]any{"role": "assistant", "content": fmt.Sprintf("## Original task\nbackground summary %d\n## Current state\nworking", k)}}},
			"usage": map[string]any{"prompt_tokens": 100, "completion_tokens": 20, "total_tokens": 120}})
	}))
	t.Cleanup(srv.Close)
	return srv, &n
}

// metric reads one sample of the server's /metrics ("" labels: the first).
func metric(t *testing.T, addr, name, labels string) float64 {
	t.Helper()
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	m := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(name+labels) + ` (\S+)$`).FindSubmatch(body)
	if m == nil {
		return 0
	}
	v, _ := strconv.ParseFloat(string(m[1]), 64)
	return v
}

// TestBackgroundCompactionOverGRPC: through the real server on both stores,
// with an LLM summarizer that takes 300 ms, the call that reaches the
// critical level answers without it, a background worker prepares the
// compaction, a later call applies it (the LLM's summary, asked once), and
// the metrics say so. With CONTEXTD_BACKGROUND_COMPACTION=false the same
// call waits for the LLM.
func TestBackgroundCompactionOverGRPC(t *testing.T) {
	for _, background := range []string{"true", "false"} {
		llm, calls := fakeSummarizer(t, 300*time.Millisecond)
		env := map[string]string{"CONTEXTD_SUMMARIZER": "openai:gpt-4o-mini", "CONTEXTD_OPENAI_BASE_URL": llm.URL + "/v1",
			"CONTEXTD_OPENAI_API_KEY": "k", "CONTEXTD_BACKGROUND_COMPACTION": background}
		metricsAddr := ""
		if background == "true" {
			metricsAddr = freeAddr(t)
			env["CONTEXTD_METRICS_ADDR"] = metricsAddr
		}
		onBothStores(t, env, func(t *testing.T, client contextdv1.ContextServiceClient) {
			ctx := t.Context()
			calls.Store(0)
			keep, off := int32(1000), int32(0)
			if _, err := client.CreateSession(ctx, &contextdv1.CreateSessionRequest{Id: "bg", Model: "gpt-4",
				Policy: &contextdv1.CompactionPolicy{ProtectRecentToolResults: &keep, CachePaybackCalls: &off}}); err != nil {
				t.Fatal(err)
			}
			msgs := []*contextdv1.Message{user("Fix the failing test in src/app.py.")}
			for i := range 19 {
				msgs = append(msgs, toolStep(fmt.Sprintf("c%d", i), strings.Repeat("lorem ipsum dolor ", 100))...)
			}
			if _, err := client.AppendMessages(ctx, &contextdv1.AppendMessagesRequest{SessionId: "bg", Messages: msgs}); err != nil {
				t.Fatal(err)
			}
			res, err := client.PrepareContext(ctx, &contextdv1.PrepareContextRequest{SessionId: "bg"})
			if err != nil {
				t.Fatal(err)
			}
			if background == "false" {
				if !res.GetStatus().GetCompacted() || !strings.Contains(summaryOf(res), "background summary 1") {
					t.Fatalf("without background jobs the call did not compact with the LLM: %+v", res.GetStatus())
				}
				return
			}
			if res.GetStatus().GetCompacted() || !strings.Contains(strings.Join(res.GetStatus().GetWarnings(), " "), "prepared in the background") {
				t.Fatalf("the call compacted in place, or did not say it waits: %+v", res.GetStatus())
			}
			for i := 0; !res.GetStatus().GetCompacted(); i++ {
				if i == 500 {
					t.Fatal("the prepared compaction was never applied")
				}
				time.Sleep(20 * time.Millisecond)
				if res, err = client.PrepareContext(ctx, &contextdv1.PrepareContextRequest{SessionId: "bg"}); err != nil {
					t.Fatal(err)
				}
			}
			if s := summaryOf(res); !strings.Contains(s, "background summary 1") || calls.Load() != 1 {
				t.Fatalf("applied %q after %d LLM calls; want the first and only one's", s, calls.Load())
			}
			for outcome, want := range map[string]float64{"queued": 1, "ready": 1, "applied": 1} {
				// The worker counts "ready" just after its write commits: a
				// call may apply the result before that line runs.
				got := metric(t, metricsAddr, "contextd_compaction_jobs_total", `{outcome="`+outcome+`"}`)
				for i := 0; got < want && i < 250; i++ {
					time.Sleep(20 * time.Millisecond)
					got = metric(t, metricsAddr, "contextd_compaction_jobs_total", `{outcome="`+outcome+`"}`)
				}
				if got != want {
					t.Errorf("contextd_compaction_jobs_total{outcome=%q} = %v; want %v", outcome, got, want)
				}
			}
			if saved := metric(t, metricsAddr, "contextd_compaction_job_seconds_saved_total", ""); saved < 0.3 {
				t.Errorf("seconds saved = %v; want at least the summarizer's 0.3 s", saved)
			}
		})
	}
}

// summaryOf is the text of the summary in a prepared view.
func summaryOf(res *contextdv1.PrepareContextResponse) string {
	for _, m := range res.GetMessages() {
		if m.GetKind() == contextdv1.MessageKind_MESSAGE_KIND_SUMMARY {
			return m.GetParts()[0].GetText().GetText()
		}
	}
	return ""
}
