package clients

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"testing"

	"github.com/contextd/contextd/internal/pgtest"
)

// sdkModel is the model the SDK agent asks for: gpt-4o with a small
// window (the registry's entry replaced by the models file).
var sdkModel = model{Name: "gpt-4o", Provider: "openai", ContextWindow: 16000, MaxOutput: 2048, Encoding: "o200k_base", Exact: true}

// TestOpenAISDKAgent drives an unmodified npm openai agent loop
// (node/agent.mjs: Chat Completions, JSON answers) through contextd on
// PostgreSQL (the suite's one run on it; the CLIs run on SQLite): two
// conversations with the same opening, 32 rounds, then a second turn each.
func TestOpenAISDKAgent(t *testing.T) {
	dir0 := clis(t)
	node := require(t, "node")
	r := startRig(t, sdkModel, map[string]string{"CONTEXTD_DATABASE_URL": pgtest.URL(t)})
	dir, state := newWorkspace(t), t.TempDir()
	n := 0
	r.conversations(t, dir, func(conv, text, resume string) (string, string) {
		if resume == "" {
			n++
			resume = filepath.Join(state, fmt.Sprintf("conversation-%d.json", n))
		}
		out := r.run(conv, dir, r.baseEnv(t.TempDir()), node, filepath.Join(dir0, "agent.mjs"), r.front+"/v1", sdkModel.Name, resume, text)
		var res struct {
			Answer string `json:"answer"`
		}
		if err := json.Unmarshal([]byte(out), &res); err != nil {
			t.Errorf("%s: agent.mjs: %v\n%s", conv, err, tail(out))
		}
		return res.Answer, resume
	})
}
