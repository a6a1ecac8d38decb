package gateway_test

import (
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/contextd/contextd/internal/gateway/gatewaytest"
)

// TestClaudeCodeFilesAfterCompactFit (issue 29/31): after /compact Claude
// Code puts the files it read back into the user message of the next typed
// prompt, as <system-reminder> text blocks; alone past the window (here a
// 7k one), that message made every request a 400 "request cannot fit the
// context window". Now the blocks go upstream as notes, the typed prompt
// verbatim, and the client's next round, which resends the message whole,
// extends the session.
func TestClaudeCodeFilesAfterCompactFit(t *testing.T) {
	models := filepath.Join(t.TempDir(), "models.json")
	if err := os.WriteFile(models, []byte(`{"models": [{"name": "small-claude", "provider": "anthropic", "context_window": 7000, "max_output_tokens": 500, "encoding": "cl100k_base"}]}`), 0o600); err != nil {
		t.Fatal(err)
	}
	s := start(t, map[string]string{"CONTEXTD_MODELS_FILE": models})
	hdr := map[string]string{"X-Claude-Code-Session-Id": "5f0c2a4e-3b1d-4e8f-9a6b-2c7d8e9f0a1b"}
	text := func(t string) map[string]any { return map[string]any{"type": "text", "text": t} }
	var blocks []any
	for _, part := range []string{"part-2", "part-4", "part-1"} {
		var b strings.Builder
		b.WriteString("<system-reminder>\nResult of calling the Read tool:\n")
		for i := range 400 {
			b.WriteString("     " + part + " line: value alpha=" + strings.Repeat("7", i%19) + "\n")
		}
		b.WriteString("</system-reminder>")
		blocks = append(blocks, text(b.String()))
	}
	typed := "TASK=recheck-amber Now recheck the notes with the words amber falcon."
	blocks = append(blocks, text(typed))
	msgs := []any{
		map[string]any{"role": "user", "content": []any{text("This session is being continued from a previous conversation that ran out of context. The notes were checked.")}},
		map[string]any{"role": "assistant", "content": []any{text("DONE.")}},
		map[string]any{"role": "user", "content": blocks},
	}
	send := func(msgs []any) (*http.Response, []byte) {
		t.Helper()
		return s.post("/v1/messages", map[string]any{"model": "small-claude", "max_tokens": 500, "messages": msgs}, hdr)
	}
	s.fake.Script(gatewaytest.Reply{Text: "Rechecked."}, gatewaytest.Reply{Text: "Ok."})
	resp, body := send(msgs)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("%d %s", resp.StatusCode, body) // without the fix: 400 request cannot fit the context window
	}
	reqs := s.fake.Requests()
	if p := reqs[len(reqs)-1].Problems; len(p) > 0 {
		t.Fatalf("the provider would refuse what went upstream: %v", p)
	}
	up, _ := json.Marshal(reqs[len(reqs)-1].Body["messages"])
	if !strings.Contains(string(up), typed) || strings.Contains(string(up), "part-2 line") || !strings.Contains(string(up), "contextd pruned a block of client context") {
		t.Fatalf("upstream messages: %.2000s", up)
	}
	// The client's next round resends the message whole: the session is extended.
	msgs = append(msgs, map[string]any{"role": "assistant", "content": []any{text("Rechecked.")}},
		map[string]any{"role": "user", "content": []any{text("Thanks.")}})
	resp, body = send(msgs)
	if resp.StatusCode != http.StatusOK || resp.Header.Get("X-Contextd-History") != "extended" {
		t.Fatalf("next round: %d %q %s", resp.StatusCode, resp.Header.Get("X-Contextd-History"), body)
	}
}
