package costbench

import (
	"encoding/json"
	"net/http"
	"slices"
	"strings"

	"github.com/contextd/contextd/internal/probes"
)

// fakeAnswer answers a judge's question (a chat completion whose system
// prompt is judgeSystem) as the fake LLM: with the latest fakeLines lines
// of the context that hold the question's quoted hint (« »), each quoted
// from probes.MaxHead bytes before the hint to as many after it, else the
// latest line holding the most of its words, else "not in context". So
// what it answers tracks what is in the view. Like a model, it answers
// within the request's max_completion_tokens (at 4 bytes a token, as it
// bills). Work is linear in the context. ok is false for any other request
// (a summary).
func fakeAnswer(body []byte) (answer string, ok bool) {
	var req struct {
		Messages []struct {
			Role    string          `json:"role"`
			Content json.RawMessage `json:"content"`
		} `json:"messages"`
		MaxTokens int `json:"max_completion_tokens"`
	}
	if json.Unmarshal(body, &req) != nil || len(req.Messages) < 2 || contentText(req.Messages[0].Content) != judgeSystem {
		return "", false
	}
	prompt := contentText(req.Messages[len(req.Messages)-1].Content)
	ctx, q, found := strings.Cut(prompt, "\n</context>\n\nQuestion: ")
	if !found {
		return "not in context", true
	}
	ctx = strings.TrimPrefix(ctx, "<context>\n")
	hint := q
	if _, rest, ok := strings.Cut(q, "«"); ok {
		if h, _, ok := strings.Cut(rest, "»"); ok {
			hint = h
		}
	}
	words := strings.Fields(hint)
	var whole []string
	best, bestScore := "", 0
	for line := range strings.Lines(ctx) {
		line = strings.TrimSpace(line)
		if i := strings.Index(line, hint); i >= 0 {
			whole = append(whole, line[max(0, i-probes.MaxHead):min(len(line), i+len(hint)+probes.MaxHead)])
			continue
		}
		score := 0
		for _, w := range words {
			if strings.Contains(line, w) {
				score++
			}
		}
		if score > 0 && score >= bestScore {
			best, bestScore = line, score
		}
	}
	switch {
	case len(whole) > 0:
		slices.Reverse(whole)
		answer = strings.Join(whole[:min(len(whole), fakeLines)], "\n")
	case best != "":
		answer = best
	default:
		answer = "not in context"
	}
	if req.MaxTokens > 0 && len(answer) > 4*req.MaxTokens {
		answer = answer[:4*req.MaxTokens]
	}
	return strings.ToValidUTF8(answer, ""), true
}

// fakeLines is the most lines the fake answers with.
const fakeLines = 3

// contentText is a message's content as OpenAI's wire format sends it: a
// string or an array of text parts.
func contentText(raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	var parts []struct {
		Text string `json:"text"`
	}
	_ = json.Unmarshal(raw, &parts)
	var b strings.Builder
	for _, p := range parts {
		b.WriteString(p.Text)
	}
	return b.String()
}

// writeCompletion writes an OpenAI chat completion answering content.
func writeCompletion(w http.ResponseWriter, content string, prompt, completion int64) {
	_ = json.NewEncoder(w).Encode(map[string]any{
		"id": "chatcmpl-bench", "object": "chat.completion", "created": 1, "model": "gpt-4o-mini",
		"choices": []any{map[string]any{"index": 0, "finish_reason": "stop", "message": map[string]any{"role": "assistant", "content": content}}},
		"usage":   map[string]any{"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion},
	})
}
