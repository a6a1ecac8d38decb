package clients

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
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
	r := startRig(t, sdkModel, map[string]string{"CONTEXTD_DATABASE_URL": pgtest.URL(t)})
	dir := newWorkspace(t)
	r.conversations(t, dir, r.sdkTurn(t, dir))
}

// sdkTurn is a turn of node/agent.mjs in dir: each new conversation keeps
// its messages in a state file of its own, the id it is resumed by.
func (r *rig) sdkTurn(t *testing.T, dir string) turnFunc {
	dir0 := clis(t)
	node := require(t, "node")
	state := t.TempDir()
	n := 0
	return func(conv, text, resume string) (string, string) {
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
	}
}

// TestOpenAISDKAgentHugeOutput: the npm openai loop, which cuts no tool
// output, reads a file of 1 MB whole (about 300,000 tokens, past gpt-4o's
// 128k window alone) twice a conversation. Before, every request after the
// first read was refused (400, request cannot fit the context window);
// the newest result now keeps its head and tail (compaction, oversized.go).
func TestOpenAISDKAgentHugeOutput(t *testing.T) {
	m := sdkModel
	m.ContextWindow = 128000
	r := startRig(t, m, nil)
	dir := newWorkspace(t)
	var b strings.Builder
	for i := 0; b.Len() < 1<<20; i++ {
		fmt.Fprintf(&b, "big line %d: config value alpha=%d, checked\n", i, i*7)
	}
	// part-3.txt is the file the script reads in rounds 3 and 18.
	if err := os.WriteFile(filepath.Join(dir, "part-3.txt"), []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	r.conversations(t, dir, r.sdkTurn(t, dir))
	// The variation ran: requests carried the file's head and tail
	// around the placeholder (a script that no longer reads part-3.txt
	// would pass the checks above without it).
	cut := 0
	for _, c := range r.provider.Calls() {
		if raw := string(c.Raw); strings.Contains(raw, "big line 0: config") && strings.Contains(raw, "characters of this output of") {
			cut++
		}
	}
	if cut == 0 {
		t.Error("no request carried the 1 MB output cut to its head and tail")
	}
}
