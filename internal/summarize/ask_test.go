package summarize

import (
	"encoding/json"
	"errors"
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

// TestSummaryCutAtMaxTokensEndsWhole: an LLM's summary that stopped at its
// max_tokens (OpenAI's finish_reason "length", Anthropic's stop_reason
// "max_tokens") loses the line the cap cut, so no summary ends inside a
// word or a path; one cut line alone is an empty answer (the extractive
// summary then). Where the summary's cap gives way to the trail the model
// is asked for a quarter of summary_max_tokens (200 of 800), and the cut
// line went into the view as is.
func TestSummaryCutAtMaxTokensEndsWhole(t *testing.T) {
	answer := "Fixed the parser in /src/calc.py.\nNext: run the tests in /src/te"
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		switch {
		case strings.HasSuffix(r.URL.Path, "/chat/completions"):
			_ = json.NewEncoder(w).Encode(map[string]any{"id": "c", "object": "chat.completion", "created": 1, "model": "m",
				"choices": []any{map[string]any{"index": 0, "finish_reason": "length", "message": map[string]any{"role": "assistant", "content": answer}}},
				"usage":   map[string]any{"prompt_tokens": 120, "completion_tokens": 200, "total_tokens": 320}})
		case strings.HasSuffix(r.URL.Path, "/messages"):
			_ = json.NewEncoder(w).Encode(map[string]any{"id": "m", "type": "message", "role": "assistant", "model": "m", "stop_reason": "max_tokens",
				"content": []any{map[string]any{"type": "text", "text": answer}},
				"usage":   map[string]any{"input_tokens": 100, "output_tokens": 200}})
		default:
			http.NotFound(w, r)
		}
	}))
	defer srv.Close()
	ep := Endpoint{BaseURL: srv.URL + "/v1/", APIKey: "k", Timeout: 10 * time.Second}
	aep := ep
	aep.BaseURL = srv.URL
	for name, m := range map[string]Metered{"openai": NewOpenAI(ep, "m"), "anthropic": NewAnthropic(aep, "m")} {
		in := compaction.SummaryInput{Round: 1, OriginalTask: "fix the build", MaxTokens: 200}
		got, u, err := m.SummarizeMetered(t.Context(), in)
		if err != nil || got != "Fixed the parser in /src/calc.py." || u.Output != 200 {
			t.Errorf("%s: %q, %+v, %v; want the whole first line, the call billed", name, got, u, err)
		}
	}
	answer = "Fixed the parser in /src/ca"
	for name, m := range map[string]Metered{"openai": NewOpenAI(ep, "m"), "anthropic": NewAnthropic(aep, "m")} {
		if got, _, err := m.SummarizeMetered(t.Context(), compaction.SummaryInput{Round: 1, MaxTokens: 200}); !errors.Is(err, ErrEmptyAnswer) {
			t.Errorf("%s: one cut line gave %q, %v; want ErrEmptyAnswer", name, got, err)
		}
	}
}

// TestPromptLeavesOutThePreviousTrail: the previous summary the model is
// asked to integrate is sent without its trail, which contextd merges into
// the new summary itself (PinFacts): sent, it asked the model to restate
// in prose, within its cap, what the trail holds exactly. Its prose is
// sent; a previous summary without a trail is sent as it is.
func TestPromptLeavesOutThePreviousTrail(t *testing.T) {
	prose := "[contextd summary, round 1.]\n\n## Current state\nworking on the parser"
	in := compaction.SummaryInput{Round: 2, OriginalTask: "fix the build", MaxTokens: 800,
		Previous: prose + "\n## Trail\n(exact, from the original messages)\n- ran: pytest tests/test_calc.py — exit 1, msg_3\n- edited: src/calc.py — msg_5\n"}
	got := userPrompt(in)
	if !strings.Contains(got, "<previous_summary>\n"+prose+"\n"+trailLeftOut+"\n</previous_summary>") {
		t.Errorf("the previous summary's prose is not sent, or not with the note:\n%s", got)
	}
	for _, gone := range []string{"## Trail", "pytest tests/test_calc.py", "src/calc.py — msg_5"} {
		if strings.Contains(got, gone) {
			t.Errorf("the prompt holds %q of the previous trail:\n%s", gone, got)
		}
	}
	in.Previous = prose
	if got := userPrompt(in); !strings.Contains(got, "<previous_summary>\n"+prose+"\n</previous_summary>") {
		t.Errorf("a previous summary without a trail is not sent as it is:\n%s", got)
	}
}
