package engine_test

import (
	"encoding/json"
	"fmt"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/contextd/contextd/internal/chat"
	"github.com/contextd/contextd/internal/compaction"
	"github.com/contextd/contextd/internal/summarize"
)

// TestLLMSummaryPromptIsBounded sends both LLM summarizers a transcript
// holding a 5 MB tool result (what a prune+summarize plan hands over) and
// checks, in the request the fake server receives, that the messages stay
// within summarize.MaxTranscriptChars, that the huge result is cut (its
// head and tail kept), and that the newest message is there. A second
// transcript of many mid-sized messages must drop the oldest, not the
// newest, and say so.
func TestLLMSummaryPromptIsBounded(t *testing.T) {
	huge := "HEAD-OF-RESULT " + strings.Repeat("línea de salida 0123456789\n", 5<<20/28) + " TAIL-OF-RESULT"
	bigCase := []chat.Message{
		idUserMsg("u1", "fix the build"),
		{ID: "a1", Role: chat.RoleAssistant, Parts: []chat.Part{{Type: chat.PartToolCall, ToolCall: &chat.ToolCall{ID: "c1", Name: "sh", Arguments: `{"cmd":"make"}`}}}},
		{ID: "r1", Role: chat.RoleTool, Parts: []chat.Part{{Type: chat.PartToolResult, ToolResult: &chat.ToolResult{ToolCallID: "c1", Content: huge}}}},
		idUserMsg("u2", "NEWEST-MESSAGE now run the tests"),
	}
	var many []chat.Message
	for i := range 400 {
		many = append(many, idUserMsg(fmt.Sprint("m", i), strings.Repeat("x", 3000)))
	}
	many = append(many, idUserMsg("last", "NEWEST-MESSAGE of many"))

	fake := &fakeLLM{mode: "ok"}
	srv := httptest.NewServer(fake)
	defer srv.Close()
	ep := summarize.Endpoint{APIKey: "k", Timeout: 5 * time.Second}
	openaiEP, anthropicEP := ep, ep
	openaiEP.BaseURL, anthropicEP.BaseURL = srv.URL+"/v1/", srv.URL
	for _, s := range []struct {
		name string
		sum  summarize.Summarizer
	}{{"openai", summarize.NewOpenAI(openaiEP, "m")}, {"anthropic", summarize.NewAnthropic(anthropicEP, "m")}} {
		for _, c := range []struct {
			name    string
			msgs    []chat.Message
			omitted bool
		}{{"huge tool result", bigCase, false}, {"many messages", many, true}} {
			t.Run(s.name+"/"+c.name, func(t *testing.T) {
				in := compaction.SummaryInput{Round: 1, OriginalTask: "fix the build", Messages: c.msgs, MaxTokens: 500}
				if c.omitted { // and a task and a previous summary of megabytes: cut too
					in.OriginalTask = "TASK-HEAD " + strings.Repeat("log line\n", 1<<20/9) + " TASK-TAIL"
					in.Previous = "SUMMARY-HEAD " + strings.Repeat("ü", 1<<20) + " SUMMARY-TAIL"
				}
				if _, err := s.sum.Summarize(t.Context(), in); err != nil {
					t.Fatal(err)
				}
				prompt := userContent(t, fake.lastBody.Load().(map[string]any))
				if limit := summarize.MaxTranscriptChars + 2*summarize.MaxSectionChars + 5000; len(prompt) > limit {
					t.Fatalf("prompt is %d bytes, over the stated %d", len(prompt), limit)
				}
				for _, want := range []string{"TASK-HEAD", "TASK-TAIL", "SUMMARY-HEAD", "SUMMARY-TAIL"} {
					if c.omitted && !strings.Contains(prompt, want) {
						t.Errorf("prompt lacks %q (head and tail of a cut section are kept)", want)
					}
				}
				start, end := strings.Index(prompt, "<messages>\n"), strings.LastIndex(prompt, "</messages>")
				if start < 0 || end < start {
					t.Fatalf("no <messages> block in the prompt (%d bytes)", len(prompt))
				}
				block := prompt[start+len("<messages>\n") : end]
				if len(block) > summarize.MaxTranscriptChars {
					t.Fatalf("messages block is %d bytes, over the %d limit", len(block), summarize.MaxTranscriptChars)
				}
				if !strings.Contains(block, "NEWEST-MESSAGE") {
					t.Fatal("the newest message is missing")
				}
				if got := strings.Contains(block, "older messages omitted"); got != c.omitted {
					t.Fatalf("omission line present = %v, want %v", got, c.omitted)
				}
				if !c.omitted {
					for _, want := range []string{"HEAD-OF-RESULT", "TAIL-OF-RESULT", "characters cut", "fix the build", "(calls sh"} {
						if !strings.Contains(block, want) {
							t.Errorf("block lacks %q", want)
						}
					}
					if len(block) < summarize.MaxTranscriptChars*9/10 {
						t.Errorf("block is %d bytes: the huge result was cut far below its share", len(block))
					}
				}
			})
		}
	}
}

// userContent is the text of the last user message of an OpenAI or
// Anthropic request body.
func userContent(t *testing.T, body map[string]any) string {
	t.Helper()
	msgs, _ := body["messages"].([]any)
	if len(msgs) == 0 {
		t.Fatalf("request has no messages")
	}
	last, _ := msgs[len(msgs)-1].(map[string]any)
	switch c := last["content"].(type) {
	case string:
		return c
	case []any:
		var b strings.Builder
		for _, blk := range c {
			if m, ok := blk.(map[string]any); ok {
				s, _ := m["text"].(string)
				b.WriteString(s)
			}
		}
		return b.String()
	}
	raw, _ := json.Marshal(last)
	t.Fatalf("unexpected user message %s", raw)
	return ""
}

func idUserMsg(id, text string) chat.Message {
	return chat.Message{ID: id, Role: chat.RoleUser, Parts: []chat.Part{{Type: chat.PartText, Text: text}}}
}
