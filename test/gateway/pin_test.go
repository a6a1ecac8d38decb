package gateway_test

import (
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestPinsSurviveCompaction: a message the caller pins through the gateway
// — by the X-Contextd-Pin header's text or by the marker in the message —
// reaches the provider verbatim in every request, however much is
// compacted around it; an unpinned message like it is compacted away.
func TestPinsSurviveCompaction(t *testing.T) {
	models := filepath.Join(t.TempDir(), "models.json")
	if err := os.WriteFile(models, []byte(`{"models": [{"name": "small", "provider": "openai", "context_window": 6000, "max_output_tokens": 500, "encoding": "o200k_base", "exact": true}]}`), 0o600); err != nil {
		t.Fatal(err)
	}
	s := start(t, map[string]string{"CONTEXTD_MODELS_FILE": models})
	plan := "# Plan\n1. read the parser\n2. fix the off-by-one\n3. run the tests " + strings.Repeat("(keep this plan) ", 20)
	rules := "House rules: tabs, not spaces. <!-- contextd:pin --> " + strings.Repeat("(keep these rules) ", 20)
	control := "# Notes\n" + strings.Repeat("(may be compacted) ", 40)
	msgs := []any{
		map[string]any{"role": "system", "content": "You are a coding agent."},
		map[string]any{"role": "user", "content": "Fix the parser."},
		map[string]any{"role": "assistant", "content": "On it."},
		map[string]any{"role": "user", "content": plan},
		map[string]any{"role": "assistant", "content": "Noted."},
		map[string]any{"role": "user", "content": rules},
		map[string]any{"role": "assistant", "content": "Noted."},
		map[string]any{"role": "user", "content": control},
	}
	compacted := 0
	for i := range 40 {
		resp, body := s.post("/v1/chat/completions", map[string]any{"model": "small", "messages": msgs}, map[string]string{"X-Contextd-Pin": "# Plan"})
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("call %d: %d %s", i, resp.StatusCode, body)
		}
		if resp.Header.Get("X-Contextd-Compacted") == "true" {
			compacted++
		}
		msgs = append(msgs, map[string]any{"role": "assistant", "content": "ok"},
			map[string]any{"role": "user", "content": fmt.Sprintf("step %d: %s", i, strings.Repeat("output line ", 60))})
	}
	if compacted == 0 {
		t.Fatal("nothing was compacted: the test proves nothing")
	}
	reqs := s.fake.Requests()
	last := string(reqs[len(reqs)-1].Raw)
	for _, kept := range []string{"(keep this plan)", "(keep these rules)"} {
		for i, r := range reqs {
			if !strings.Contains(string(r.Raw), kept) {
				t.Fatalf("request %d lost the pinned %q", i, kept)
			}
		}
	}
	if strings.Contains(last, "(may be compacted)") {
		t.Errorf("the unpinned control message was never compacted; the pins prove nothing")
	}
	s.checkUpstream()
}
