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

// answerServer is a fake model API that answers every summary request
// with answer (output tokens billed), at OpenAI's /chat/completions and
// Anthropic's /messages, and the request bodies it got.
func answerServer(t *testing.T, answer string, output int) (*httptest.Server, *[]string) {
	var got []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		got = append(got, string(body))
		w.Header().Set("Content-Type", "application/json")
		switch {
		case strings.HasSuffix(r.URL.Path, "/chat/completions"):
			_ = json.NewEncoder(w).Encode(map[string]any{"id": "c", "object": "chat.completion", "created": 1, "model": "m",
				"choices": []any{map[string]any{"index": 0, "finish_reason": "stop", "message": map[string]any{"role": "assistant", "content": answer}}},
				"usage":   map[string]any{"prompt_tokens": 120, "completion_tokens": output, "total_tokens": 120 + output}})
		case strings.HasSuffix(r.URL.Path, "/messages"):
			_ = json.NewEncoder(w).Encode(map[string]any{"id": "m", "type": "message", "role": "assistant", "model": "m", "stop_reason": "end_turn",
				"content": []any{map[string]any{"type": "text", "text": answer}},
				"usage":   map[string]any{"input_tokens": 100, "output_tokens": output}})
		default:
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(srv.Close)
	return srv, &got
}

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
	srv, got := answerServer(t, answer, 700)
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
		*got = nil
		in := compaction.SummaryInput{Round: 1, OriginalTask: "fix the build", MaxTokens: 200, AskTokens: 800, Count: count}
		summary, u, err := c.m.SummarizeMetered(t.Context(), in)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		// What the model wrote past the cap is billed, though left out.
		if u.Output != 700 {
			t.Errorf("%s: %d output tokens billed; want the answer's 700", c.name, u.Output)
		}
		if len(*got) != 1 || !strings.Contains((*got)[0], c.cap) || !strings.Contains((*got)[0], "Stay under 200 tokens") {
			t.Errorf("%s: asked %q; want %s, told to stay under 200", c.name, *got, c.cap)
		}
		if n := count(summary); n > 200 || n < 150 || !strings.HasPrefix(answer, summary+"\n") {
			t.Errorf("%s: summary of %d tokens, want the answer's first whole lines within 200:\n%s", c.name, n, summary)
		}
	}
}

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
	srv, _ := answerServer(t, "## Current state\n"+para, 260)
	_, _, err := NewOpenAI(Endpoint{BaseURL: srv.URL + "/v1/", APIKey: "k", Timeout: 10 * time.Second}, "m").SummarizeMetered(t.Context(), in)
	if !errors.Is(err, ErrEmptyAnswer) {
		t.Errorf("a heading alone within the cap: %v; want ErrEmptyAnswer", err)
	}
}

// TestAnswerHeldToCapCountsLogarithmically: holding an LLM's answer to
// the cap counts the answer's text a number of times logarithmic in its
// lines, not once a line left out: the answer is as long as
// summary_max_tokens, a tenant's setting, while the cap can be a quarter
// of it, and each count is over the whole text (quadratic: an answer of
// 2,000 lines counted 1,500 times). The lines kept are the same: the most
// whole lines from the start that fit.
func TestAnswerHeldToCapCountsLogarithmically(t *testing.T) {
	var lines []string
	for i := range 2000 {
		lines = append(lines, fmt.Sprintf("- step %04d: fixed the parser in src/calc%04d.py.", i, i))
	}
	answer := strings.Join(lines, "\n") // 2,000 lines of 12 tokens (len/4)
	calls := 0
	count := func(s string) int { calls++; return len(s) / 4 }
	in := compaction.SummaryInput{MaxTokens: 6000, AskTokens: 24000, Count: count}
	got := withinCap(answer, in)
	if n := len(got) / 4; n > 6000 || n < 6000-13 || !strings.HasPrefix(answer, got+"\n") {
		t.Errorf("held to %d tokens, want the first whole lines within 6000", n)
	}
	if calls > 40 {
		t.Errorf("the answer was counted %d times; want at most 40 (log2 of 2,000 lines and a few)", calls)
	}
}
