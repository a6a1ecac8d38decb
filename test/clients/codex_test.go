package clients

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// codexModel is gpt-5-codex with a small window (the registry's entry
// replaced by the models file); o200k_base is its own encoding.
var codexModel = model{Name: "gpt-5-codex", Provider: "openai", ContextWindow: 32000, MaxOutput: 4096, Encoding: "o200k_base", Exact: true}

// codexConfig is CODEX_HOME/config.toml: contextd as the model provider,
// as docs/gateway.md gives it, plus what keeps Codex on loopback and
// non-interactive.
func codexConfig(front string, window int64) string {
	return fmt.Sprintf(`model = %q
model_provider = "contextd"
model_context_window = %d
check_for_update_on_startup = false

[model_providers.contextd]
name = "OpenAI through contextd"
base_url = "%s/v1"
env_key = "OPENAI_API_KEY"
wire_api = "responses"

[analytics]
enabled = false

# Curated plugins sync from github.com and chatgpt.com at every start.
[features]
plugins = false
remote_plugin = false
apps = false
`, codexModel.Name, window, front)
}

func (r *rig) codexEnv(home, codexHome string) []string {
	return append(r.baseEnv(home), "CODEX_HOME="+codexHome, "OPENAI_API_KEY=sk-fake-key")
}

// codexTurn runs `codex exec` (or `codex exec resume ID`) and returns
// the last agent message and the thread id.
func (r *rig) codexTurn(conv, bin, dir, home, codexHome, text, resume string) (answer, thread string) {
	args := []string{"exec"}
	if resume != "" {
		args = append(args, "resume", resume)
	}
	// The base URL again as an override of the config's: run names the
	// conversation in it when CLIs run alongside.
	args = append(args, "-c", fmt.Sprintf("model_providers.contextd.base_url=%q", r.front+"/v1"))
	args = append(args, "--json", "--skip-git-repo-check", "--dangerously-bypass-approvals-and-sandbox", text)
	out := r.run(conv, dir, r.codexEnv(home, codexHome), bin, args...)
	sc := bufio.NewScanner(strings.NewReader(out))
	sc.Buffer(nil, 1<<24)
	for sc.Scan() {
		var ev struct {
			Type     string `json:"type"`
			ThreadID string `json:"thread_id"`
			Item     struct {
				Type string `json:"type"`
				Text string `json:"text"`
			} `json:"item"`
		}
		if json.Unmarshal(sc.Bytes(), &ev) != nil {
			continue
		}
		switch {
		case ev.Type == "thread.started":
			thread = ev.ThreadID
		case ev.Type == "item.completed" && ev.Item.Type == "agent_message":
			answer = ev.Item.Text
		}
	}
	return answer, thread
}

// TestCodex drives Codex CLI through contextd: two conversations with the
// same opening prompt in the same directory, each a 32-round tool task and
// a second turn (exec resume) with words of its own.
func TestCodex(t *testing.T) {
	bin := filepath.Join(clis(t), "node_modules", ".bin", "codex")
	r := startRig(t, codexModel, nil)
	dir, home, codexHome := newWorkspace(t), t.TempDir(), t.TempDir()
	if err := os.WriteFile(filepath.Join(codexHome, "config.toml"), []byte(codexConfig(r.front, codexModel.ContextWindow)), 0o600); err != nil {
		t.Fatal(err)
	}
	r.conversations(t, dir, func(conv, text, resume string) (string, string) {
		return r.codexTurn(conv, bin, dir, home, codexHome, text, resume)
	})
}
