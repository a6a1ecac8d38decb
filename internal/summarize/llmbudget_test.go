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

// TestYieldedCapLeavesTheModelItsBudget: where the summary's cap gave way
// to the trail (200 of 800), the model is still asked for
// summary_max_tokens (AskTokens, 800: a reasoning model counts its
// reasoning in it, and at 200 answered nothing), told to stay under the
// cap, and its answer is held to the cap in whole lines. Without it the
// model was asked for 200 tokens.
func TestYieldedCapLeavesTheModelItsBudget(t *testing.T) {
	var lines []string
	for i := range 20 {
		lines = append(lines, fmt.Sprintf("- step %02d: fixed the parser in /src/calc%02d.py and ran its tests again.", i, i))
	}
	answer := strings.Join(lines, "\n") // 20 lines of about 17 tokens (len/4)
	var got []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		got = append(got, string(body))
		w.Header().Set("Content-Type", "application/json")
		switch {
		case strings.HasSuffix(r.URL.Path, "/chat/completions"):
			_ = json.NewEncoder(w).Encode(map[string]any{"id": "c", "object": "chat.completion", "created": 1, "model": "m",
				"choices": []any{map[string]any{"index": 0, "finish_reason": "stop", "message": map[string]any{"role": "assistant", "content": answer}}},
				"usage":   map[string]any{"prompt_tokens": 120, "completion_tokens": 700, "total_tokens": 820}})
		case strings.HasSuffix(r.URL.Path, "/messages"):
			_ = json.NewEncoder(w).Encode(map[string]any{"id": "m", "type": "message", "role": "assistant", "model": "m", "stop_reason": "end_turn",
				"content": []any{map[string]any{"type": "text", "text": answer}},
				"usage":   map[string]any{"input_tokens": 100, "output_tokens": 700}})
		default:
			http.NotFound(w, r)
		}
	}))
	defer srv.Close()
	ep := Endpoint{BaseURL: srv.URL + "/v1/", APIKey: "k", Timeout: 10 * time.Second}
	aep := ep
	aep.BaseURL = srv.URL
	count := func(s string) int { return len(s) / 4 }
	for _, c := range []struct {
		name string
		m    Metered
		cap  string
	}{
		{"openai", NewOpenAI(ep, "m"), `"max_completion_tokens":800`},
		{"anthropic", NewAnthropic(aep, "m"), `"max_tokens":800`},
	} {
		got = nil
		in := compaction.SummaryInput{Round: 1, OriginalTask: "fix the build", MaxTokens: 200, AskTokens: 800, Count: count}
		summary, u, err := c.m.SummarizeMetered(t.Context(), in)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		// What the model wrote past the cap is billed, though left out.
		if u.Output != 700 {
			t.Errorf("%s: %d output tokens billed; want the answer's 700", c.name, u.Output)
		}
		if len(got) != 1 || !strings.Contains(got[0], c.cap) || !strings.Contains(got[0], "Stay under 200 tokens") {
			t.Errorf("%s: asked %q; want %s, told to stay under 200", c.name, got, c.cap)
		}
		if n := count(summary); n > 200 || n < 150 || !strings.HasPrefix(answer, summary+"\n") {
			t.Errorf("%s: summary of %d tokens, want the answer's first whole lines within 200:\n%s", c.name, n, summary)
		}
	}
}
