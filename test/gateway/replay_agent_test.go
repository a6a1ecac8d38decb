package gateway_test

import (
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestLongAgentHistoryIsCompactedNotRefused: an agent's history is one
// task and then tool rounds — no user message to cut a replay before. A
// history past CONTEXTD_MAX_VIEW_WINDOWS times the window is still fed in
// pieces (cut between rounds) and compacted, not refused (before: 400 on
// every call, the replay one piece).
func TestLongAgentHistoryIsCompactedNotRefused(t *testing.T) {
	models := filepath.Join(t.TempDir(), "models.json")
	if err := os.WriteFile(models, []byte(`{"models": [{"name": "tiny", "provider": "openai", "context_window": 2000, "max_output_tokens": 200, "encoding": "o200k_base", "exact": true}]}`), 0o600); err != nil {
		t.Fatal(err)
	}
	s := start(t, map[string]string{"CONTEXTD_MODELS_FILE": models})
	msgs := []any{map[string]any{"role": "user", "content": "Fix the parser."}}
	for i := range 120 {
		id := fmt.Sprintf("call_%d", i)
		msgs = append(msgs,
			map[string]any{"role": "assistant", "content": fmt.Sprintf("reading part %d", i), "tool_calls": []any{map[string]any{
				"id": id, "type": "function", "function": map[string]any{"name": "read", "arguments": fmt.Sprintf(`{"part":%d}`, i)}}}},
			map[string]any{"role": "tool", "tool_call_id": id, "content": fmt.Sprintf("part %d: %s", i, strings.Repeat("the parser reads tokens one by one ", 20))})
	}
	tools := []any{map[string]any{"type": "function", "function": map[string]any{"name": "read", "parameters": map[string]any{"type": "object"}}}}
	resp, raw := s.post("/v1/chat/completions", map[string]any{"model": "tiny", "messages": msgs, "tools": tools}, nil)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("%d %s", resp.StatusCode, raw)
	}
	// About 20,000 tokens of history went upstream within the window: the
	// earlier pieces were compacted.
	if used, _ := strconv.ParseFloat(resp.Header.Get("X-Contextd-Used-Percent"), 64); used <= 0 || used > 100 {
		t.Errorf("%.1f %% of the window sent", used)
	}
	if up := string(s.fake.Requests()[0].Raw); !strings.Contains(up, "part 119: ") {
		t.Errorf("the last tool result did not go upstream")
	}
}
