package gateway_test

import (
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/contextd/contextd/internal/gateway/gatewaytest"
)

// TestAsideBilledAfterARoundCompacted: a client without a signal asks for
// the summary of its history (an aside, which does not hold its session:
// TestNextRoundWhileAnAsideIsUpstream) and, while that call is upstream,
// the conversation's next round extends the session past its window, so
// PrepareContext compacts it. The aside's answer is then recorded: its
// call goes into the session's ledger like every call the provider billed.
// It was reported as the first n messages of the active view (n those of
// the view it sent), which the compaction had shrunk below n: the report
// was refused (message_count not between 0 and the active view's count)
// and the billed call was never in the ledger.
func TestAsideBilledAfterARoundCompacted(t *testing.T) {
	s := startSmall(t)
	turn := func(i int) string {
		return fmt.Sprintf("Step %d: ", i) + strings.Repeat(fmt.Sprintf("read module %d of the parser and note its functions; ", i), 40)
	}
	msgs := []any{map[string]any{"role": "system", "content": "You are a coding agent."}}
	for i := range 6 {
		msgs = append(msgs, map[string]any{"role": "user", "content": turn(i)})
		s.fake.Script(gatewaytest.Reply{Text: fmt.Sprintf("Done with step %d.", i)})
		resp, out := s.post("/v1/chat/completions", map[string]any{"model": "small", "messages": msgs}, nil)
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("turn %d: %d %s", i, resp.StatusCode, out)
		}
		if resp.Header.Get("X-Contextd-Compacted") == "true" {
			t.Fatalf("turn %d compacted: the test's turns must stay below the window", i)
		}
		msgs = append(msgs, map[string]any{"role": "assistant", "content": fmt.Sprintf("Done with step %d.", i)})
	}
	ask := append(slices.Clone(msgs), map[string]any{"role": "user", "content": qwenDirective})
	round := append(slices.Clone(msgs), map[string]any{"role": "user", "content": strings.Repeat("Here is the whole failing test output, line by line. ", 260)})
	s.fake.Script(gatewaytest.Reply{Text: "Fixed."},
		gatewaytest.Reply{Text: "<state_snapshot>Six modules were read; the parser's tests still fail.</state_snapshot>"})
	asked := s.sendHeld(map[string]any{"model": "small", "messages": ask})
	resp, out := s.post("/v1/chat/completions", map[string]any{"model": "small", "messages": round}, nil)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("the next round: %d %s", resp.StatusCode, out)
	}
	if h, c := resp.Header.Get("X-Contextd-History"), resp.Header.Get("X-Contextd-Compacted"); h != "extended" || c != "true" {
		t.Fatalf("the next round, while the summary request is upstream: history %q, compacted %q; want extended, true", h, c)
	}
	if h := asked(); h != "aside" {
		t.Fatalf("the summary request: history %q, want aside", h)
	}
	var ids []string
	for id := range s.sessionLogs() {
		ids = append(ids, id)
	}
	if len(ids) != 1 {
		t.Fatalf("%d sessions, want 1", len(ids))
	}
	s.checkLedger(ids...)
}

// startSmall is start with the model "small" (OpenAI's, a 6,000-token
// window, 500 of output, o200k_base) in the registry.
func startSmall(t *testing.T) *server {
	t.Helper()
	models := filepath.Join(t.TempDir(), "models.json")
	if err := os.WriteFile(models, []byte(`{"models": [{"name": "small", "provider": "openai", "context_window": 6000, "max_output_tokens": 500, "encoding": "o200k_base", "exact": true}]}`), 0o600); err != nil {
		t.Fatal(err)
	}
	return start(t, map[string]string{"CONTEXTD_MODELS_FILE": models})
}
