package summarize

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/contextd/contextd/internal/compaction"
)

// TestAsk asks one question through each provider's client over real
// HTTP, to a local server speaking that provider's wire format: the system
// prompt, the question and the answer's cap arrive, the answer and the
// usage come back; a summary (SummarizeMetered, through Ask) likewise,
// capped at its MaxTokens.
func TestAsk(t *testing.T) {
	var got []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		got = append(got, r.URL.Path+" "+string(body))
		w.Header().Set("Content-Type", "application/json")
		switch {
		case strings.HasSuffix(r.URL.Path, "/chat/completions"):
			_ = json.NewEncoder(w).Encode(map[string]any{"id": "c", "object": "chat.completion", "created": 1, "model": "m",
				"choices": []any{map[string]any{"index": 0, "finish_reason": "stop", "message": map[string]any{"role": "assistant", "content": " /src/calc.py "}}},
				"usage":   map[string]any{"prompt_tokens": 120, "completion_tokens": 7, "total_tokens": 127, "prompt_tokens_details": map[string]any{"cached_tokens": 20}}})
		case strings.HasSuffix(r.URL.Path, "/messages"):
			_ = json.NewEncoder(w).Encode(map[string]any{"id": "m", "type": "message", "role": "assistant", "model": "m", "stop_reason": "end_turn",
				"content": []any{map[string]any{"type": "text", "text": "/src/calc.py"}},
				"usage":   map[string]any{"input_tokens": 100, "output_tokens": 7, "cache_read_input_tokens": 20}})
		default:
			http.NotFound(w, r)
		}
	}))
	defer srv.Close()
	ep := Endpoint{BaseURL: srv.URL + "/v1/", APIKey: "k", Timeout: 10 * time.Second}
	aep := ep
	aep.BaseURL = srv.URL
	for _, c := range []struct {
		name string
		a    interface {
			Asker
			Metered
		}
		want Usage
		cap  string // the answer's cap on the wire
	}{
		{"openai", NewOpenAI(ep, "m"), Usage{Model: "m", Input: 100, CacheRead: 20, Output: 7}, `"max_completion_tokens":%d`},
		{"anthropic", NewAnthropic(aep, "m"), Usage{Model: "m", Input: 100, CacheRead: 20, Output: 7}, `"max_tokens":%d`},
	} {
		t.Run(c.name, func(t *testing.T) {
			got = nil
			answer, u, err := c.a.Ask(t.Context(), "SYSTEM-PROMPT", "which file?", 64)
			if err != nil || answer != "/src/calc.py" || u != c.want {
				t.Fatalf("Ask = %q, %+v, %v; want /src/calc.py, %+v", answer, u, err, c.want)
			}
			if len(got) != 1 || !strings.Contains(got[0], "SYSTEM-PROMPT") || !strings.Contains(got[0], "which file?") ||
				!strings.Contains(got[0], fmt.Sprintf(c.cap, 64)) {
				t.Errorf("request: %q", got)
			}
			// A summary goes the same way, capped at its MaxTokens.
			got = nil
			summary, u, err := c.a.SummarizeMetered(t.Context(), compaction.SummaryInput{Round: 1, OriginalTask: "fix the build", MaxTokens: 500})
			if err != nil || summary != "/src/calc.py" || u != c.want {
				t.Fatalf("SummarizeMetered = %q, %+v, %v", summary, u, err)
			}
			if len(got) != 1 || !strings.Contains(got[0], "You compact the history") || !strings.Contains(got[0], fmt.Sprintf(c.cap, 500)) {
				t.Errorf("summary request: %q", got)
			}
		})
	}
}
