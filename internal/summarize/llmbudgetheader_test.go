package summarize

import (
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/contextd/contextd/internal/compaction"
)

// TestAnswerHeldToCapKeepsNoBareHeading: an LLM's answer held to the cap
// (withinCap) does not end on a heading whose lines went, and an answer
// that only headings would be left of is an empty one (ErrEmptyAnswer:
// the extractive summary instead). Without it a model that writes a
// section as one paragraph line over the cap left "## Current state"
// alone as the summary, accepted in place of the messages it replaced.
func TestAnswerHeldToCapKeepsNoBareHeading(t *testing.T) {
	count := func(s string) int { return len(s) / 4 }
	in := compaction.SummaryInput{Round: 1, OriginalTask: "fix the build", MaxTokens: 200, AskTokens: 800, Count: count}
	para := strings.Repeat("The parser in src/calc.py failed on nested brackets and was fixed. ", 15) // ~250 tokens, one line
	if got := withinCap("## Current state\n"+para, in); got != "" {
		t.Errorf("only a heading is left: %q; want an empty answer", got)
	}
	if got := withinCap("## Decisions\n- keep the recursive parser\n\n## Pending work\n"+para, in); got != "## Decisions\n- keep the recursive parser" {
		t.Errorf("held to the cap: %q; want the Decisions section without the bare Pending work heading", got)
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]any{"id": "c", "object": "chat.completion", "created": 1, "model": "m",
			"choices": []any{map[string]any{"index": 0, "finish_reason": "stop", "message": map[string]any{"role": "assistant", "content": "## Current state\n" + para}}},
			"usage":   map[string]any{"prompt_tokens": 120, "completion_tokens": 260, "total_tokens": 380}})
	}))
	defer srv.Close()
	_, _, err := NewOpenAI(Endpoint{BaseURL: srv.URL + "/v1/", APIKey: "k", Timeout: 10 * time.Second}, "m").SummarizeMetered(t.Context(), in)
	if !errors.Is(err, ErrEmptyAnswer) {
		t.Errorf("a heading alone within the cap: %v; want ErrEmptyAnswer", err)
	}
}
