package engine_test

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/contextd/contextd/internal/chat"
	"github.com/contextd/contextd/internal/compaction"
	"github.com/contextd/contextd/internal/engine"
	"github.com/contextd/contextd/internal/summarize"
)

// fakeLLM is a local server speaking the real wire formats of OpenAI's chat
// completions (/chat/completions) and Anthropic's messages (/v1/messages),
// with a failure mode per test.
type fakeLLM struct {
	mode     string        // "ok", "500", "slow", "malformed", "empty", "hold"
	mu       sync.Mutex    // guards release and arrived
	release  chan struct{} // "hold": answer once this closes
	arrived  chan struct{} // "hold": closed when the request arrives
	requests atomic.Int64
	lastBody atomic.Value // map[string]any
	lastAuth atomic.Value // string
}

// fromLLM reports whether summary is the fake LLM's: after the header
// contextd puts first, which names the summary's id (in the ExpandMessage
// wording without expose_expand_tool).
func fromLLM(summary string) bool {
	header, body, _ := strings.Cut(summary, "\n")
	return regexp.MustCompile(`^\[contextd summary, round \d+\. .*call ExpandMessage with message id sum_\d+_\d+ to read them\.\]$`).MatchString(header) &&
		strings.HasPrefix(body, fakeSummary)
}

const fakeSummary = "## Original task\nsee above\n## Completed work\n- ran the tests\n## Decisions\n## Errors and resolutions\n## Current state\nworking\n## Pending work\n- finish"

func (f *fakeLLM) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	f.requests.Add(1)
	body, _ := io.ReadAll(r.Body)
	var parsed map[string]any
	_ = json.Unmarshal(body, &parsed)
	f.lastBody.Store(parsed)
	f.lastAuth.Store(r.Header.Get("Authorization") + r.Header.Get("X-Api-Key"))
	switch f.mode {
	case "hold":
		f.mu.Lock()
		arrived, release := f.arrived, f.release
		f.mu.Unlock()
		close(arrived)
		<-release
	case "500":
		w.WriteHeader(http.StatusInternalServerError)
		_, _ = w.Write([]byte(`{"error":{"message":"boom","type":"server_error"}}`))
		return
	case "slow":
		select {
		case <-r.Context().Done():
		case <-time.After(5 * time.Second):
		}
		return
	case "malformed":
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"choices": [ {"message": `))
		return
	}
	text := fakeSummary
	if f.mode == "empty" {
		text = ""
	}
	w.Header().Set("Content-Type", "application/json")
	if strings.HasSuffix(r.URL.Path, "/chat/completions") {
		_ = json.NewEncoder(w).Encode(map[string]any{
			"id": "chatcmpl-1", "object": "chat.completion", "created": 1, "model": parsed["model"],
			"choices": []any{map[string]any{"index": 0, "finish_reason": "stop",
				"message": map[string]any{"role": "assistant", "content": text}}},
			"usage": map[string]any{"prompt_tokens": 100, "completion_tokens": 50, "total_tokens": 150,
				"prompt_tokens_details": map[string]any{"cached_tokens": 40}},
		})
		return
	}
	_ = json.NewEncoder(w).Encode(map[string]any{
		"id": "msg_1", "type": "message", "role": "assistant", "model": parsed["model"],
		"content":     []any{map[string]any{"type": "text", "text": text}},
		"stop_reason": "end_turn", "usage": map[string]any{"input_tokens": 100, "output_tokens": 50,
			"cache_read_input_tokens": 30, "cache_creation_input_tokens": 20},
	})
}

// hold makes the next request wait for release (after closing arrived).
func (f *fakeLLM) hold() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.release, f.arrived = make(chan struct{}), make(chan struct{})
}

func llmEngine(t *testing.T, srv *httptest.Server) *engine.Engine {
	return llmEngineTimeout(t, srv, 5*time.Second)
}

// llmEngineTimeout is llmEngine with the summarizer's timeout per request
// (short only where a test waits for it to pass).
func llmEngineTimeout(t *testing.T, srv *httptest.Server, timeout time.Duration) *engine.Engine {
	t.Helper()
	models, encodings := testModels(t)
	ep := summarize.Endpoint{APIKey: "test-key", Timeout: timeout, MaxRetries: 1}
	openaiEP, anthropicEP := ep, ep
	openaiEP.BaseURL, anthropicEP.BaseURL = srv.URL+"/v1/", srv.URL
	set, err := summarize.NewSet("extractive", map[string]summarize.Endpoint{
		summarize.ProviderOpenAI: openaiEP, summarize.ProviderAnthropic: anthropicEP})
	if err != nil {
		t.Fatal(err)
	}
	return engine.New(encodings, models, openSQLite(t), engine.WithSummarizers(set))
}

// TestLLMSummarizers runs the summarize tier through both LLM backends
// against a local fake server: a good answer is used (with the pinned facts
// added), and every failure falls back to the extractive summary with a
// warning while PrepareContext still succeeds.
func TestLLMSummarizers(t *testing.T) {
	for _, spec := range []string{"openai:gpt-4o-mini", "anthropic:claude-haiku-4-5"} {
		for _, mode := range []string{"ok", "500", "slow", "malformed", "empty"} {
			t.Run(spec+"/"+mode, func(t *testing.T) {
				fake := &fakeLLM{mode: mode}
				srv := httptest.NewServer(fake)
				defer srv.Close()
				timeout := 5 * time.Second
				if mode == "slow" {
					timeout = 300 * time.Millisecond
				}
				e := llmEngineTimeout(t, srv, timeout)
				keepResults := 1000 // nothing to prune: the summarize tier must run
				v := agentSession(t, e, compaction.Overrides{Summarizer: &spec, ProtectRecentToolResults: &keepResults}, 20)
				start := time.Now()
				res, err := e.PrepareContext(t.Context(), tenant, v.ID, engine.PrepareInput{})
				if err != nil {
					t.Fatalf("PrepareContext failed with the LLM %s: %v", mode, err)
				}
				if !res.Status.Compacted || res.Status.LastCompaction == nil {
					t.Fatalf("no compaction: %+v", res.Status)
				}
				summary := res.Status.LastCompaction.Summary
				warned := strings.Contains(strings.Join(res.Status.Warnings, " "), "LLM summarizer failed")
				if mode == "ok" {
					if warned || !fromLLM(summary) {
						t.Errorf("the LLM summary was not used: warnings %v\n%s", res.Status.Warnings, summary)
					}
					// The task is not repeated (every tier keeps it in the
					// view); the trail lists what the calls did, but for
					// what the messages the view keeps show again (every
					// call reads the same file): those lines are kept
					// beside the summary (compaction.MetaTrailFolded).
					again := ""
					for _, m := range res.Messages {
						if m.Kind == chat.KindSummary {
							again = m.Metadata[compaction.MetaTrailFolded]
						}
					}
					if strings.Contains(summary, "Fix the failing test in src/app.py.") ||
						!strings.Contains(summary, "\n## Trail\n") && !strings.Contains(again, "## shown again\n- read: x") {
						t.Errorf("pinned facts missing:\n%s\nbeside it:\n%s", summary, again)
					}
					body, _ := fake.lastBody.Load().(map[string]any)
					if body["model"] == nil || !strings.Contains(fake.lastAuth.Load().(string), "test-key") {
						t.Errorf("request: %v, auth %q", body, fake.lastAuth.Load())
					}
				} else {
					if !warned || !strings.Contains(summary, "## Original task") || strings.Contains(summary, "see above") {
						t.Errorf("no extractive fallback with a warning: %v\n%s", res.Status.Warnings, summary)
					}
					if n := fake.requests.Load(); n < 1 || n > 2 {
						t.Errorf("%d requests; want at most 1 retry", n)
					}
				}
				t.Logf("%s: %d requests, %v", mode, fake.requests.Load(), time.Since(start).Round(time.Millisecond))
			})
		}
	}
}

// TestAppendsDuringLLMSummary: the LLM call happens outside the database
// transaction, so appends made while the summarizer thinks neither wait nor
// get lost: they follow the compacted view.
func TestAppendsDuringLLMSummary(t *testing.T) {
	fake := &fakeLLM{mode: "hold"}
	srv := httptest.NewServer(fake)
	defer srv.Close()
	set, err := summarize.NewSet("extractive", map[string]summarize.Endpoint{summarize.ProviderOpenAI: {
		BaseURL: srv.URL + "/v1/", APIKey: "k", Timeout: 30 * time.Second}})
	if err != nil {
		t.Fatal(err)
	}
	backendsWith(t, []engine.Option{engine.WithSummarizers(set)}, func(t *testing.T, e *engine.Engine) {
		fake.hold()
		spec, keep := "openai:gpt-4o-mini", 1000
		v := agentSession(t, e, compaction.Overrides{Summarizer: &spec, ProtectRecentToolResults: &keep}, 20)
		ctx := t.Context()
		done := make(chan error, 1)
		var res engine.CompactResult
		go func() {
			var err error
			res, err = e.Compact(ctx, tenant, v.ID, engine.CompactInput{})
			done <- err
		}()
		<-fake.arrived // the summarizer is thinking now
		appended, err := e.AppendMessages(ctx, tenant, v.ID, engine.AppendInput{Messages: []chat.Message{userMsg("one more thing")}})
		if err != nil {
			t.Fatalf("append while summarizing: %v", err)
		}
		close(fake.release)
		if err := <-done; err != nil || !res.Compacted {
			t.Fatalf("compaction: %+v, %v", res, err)
		}
		page, err := e.GetMessages(ctx, tenant, v.ID, engine.ViewActive, engine.Page{Size: 1000})
		if err != nil {
			t.Fatal(err)
		}
		last := page.Messages[len(page.Messages)-1]
		if last.ID != appended.Messages[0].ID || !fromLLM(res.Compaction.Summary) {
			t.Errorf("the append made during the summary is not at the end of the view: %s", last.ID)
		}
		if got := res.Compaction.ViewAfter[len(res.Compaction.ViewAfter)-1]; got != appended.Messages[0].ID {
			t.Errorf("the record's view after misses the append: %s", got)
		}
		// Reverting gives back the pre-compaction view plus the append.
		if _, err := e.RevertCompaction(ctx, tenant, v.ID, res.Compaction.ID); err != nil {
			t.Fatal(err)
		}
		log, _ := e.GetMessages(ctx, tenant, v.ID, engine.ViewLog, engine.Page{Size: 1000})
		active, _ := e.GetMessages(ctx, tenant, v.ID, engine.ViewActive, engine.Page{Size: 1000})
		if len(active.Messages) != len(log.Messages) {
			t.Errorf("after revert: %d active, %d in the log", len(active.Messages), len(log.Messages))
		}
	})
}
