package clients

import (
	"encoding/json"
	"path/filepath"
	"testing"

	"github.com/contextd/contextd/internal/tokens"
)

// claudeModel is the model Claude Code is run with: claude-sonnet-4-5 with
// a small window (the registry's entry replaced by the models file),
// counted with o200k_base, which the provider here counts with too, and
// with its tool definitions read as their JSON, as Anthropic reads them
// (Anthropic's token counting of its get_weather example, 403 tokens, is
// the tool-use system prompt plus the definition's JSON; OpenAI's function
// rule would count the definition at a third of that).
var claudeModel = model{Name: "claude-sonnet-4-5", Provider: "anthropic", ContextWindow: 48000, MaxOutput: 4096, Encoding: "o200k_base", Exact: true,
	Framing: &anthropicFraming}

// anthropicFraming is OpenAI's framing of messages with tools read as JSON.
var anthropicFraming = func() tokens.Framing {
	f := tokens.DefaultFraming
	f.ToolsJSON = true
	return f
}()

// claudeEnv is Claude Code's environment: contextd as its Anthropic base
// URL, a fake key, and nothing that leaves the machine (telemetry, error
// reports, update checks, nonessential model calls off).
func (r *rig) claudeEnv(home string) []string {
	return append(r.baseEnv(home),
		"ANTHROPIC_BASE_URL="+r.front,
		"ANTHROPIC_API_KEY=sk-ant-fake-key",
		"ANTHROPIC_MODEL="+claudeModel.Name,
		"ANTHROPIC_DEFAULT_HAIKU_MODEL="+claudeModel.Name,
		"ANTHROPIC_SMALL_FAST_MODEL="+claudeModel.Name,
		"CLAUDE_CODE_MAX_OUTPUT_TOKENS=4096",
		"IS_SANDBOX=1", // root may skip permissions
		"DISABLE_TELEMETRY=1", "DISABLE_AUTOUPDATER=1", "DISABLE_ERROR_REPORTING=1", "DISABLE_BUG_COMMAND=1",
		"CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1", "CLAUDE_CODE_DISABLE_TERMINAL_TITLE=1",
		"CLAUDE_CONFIG_DIR="+filepath.Join(home, ".claude"),
	)
}

// claudeTurn runs `claude -p` (resuming session when it is set, with
// --continue for latest) and returns Claude Code's answer and its session
// id.
func (r *rig) claudeTurn(conv, bin, dir, home, text, resume string) (answer, session string) {
	args := []string{"-p", text, "--dangerously-skip-permissions", "--output-format", "json", "--model", claudeModel.Name}
	switch resume {
	case "":
	case latest:
		args = append(args, "--continue")
	default:
		args = append(args, "--resume", resume)
	}
	out := r.run(conv, dir, r.claudeEnv(home), bin, args...)
	var res struct {
		Result    string `json:"result"`
		SessionID string `json:"session_id"`
		IsError   bool   `json:"is_error"`
	}
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		r.t.Errorf("%s: claude's output is not its JSON result: %v\n%s", conv, err, tail(out))
	}
	return res.Result, res.SessionID
}

// TestClaudeCode drives Claude Code through contextd: two conversations
// with the same opening prompt in the same directory, each a 32-round
// tool task and a second turn (--resume) with words of its own.
func TestClaudeCode(t *testing.T) {
	bin := filepath.Join(clis(t), "node_modules", ".bin", "claude")
	r := startRig(t, claudeModel, nil)
	dir, home := newWorkspace(t), t.TempDir()
	r.conversations(t, dir, func(conv, text, resume string) (string, string) {
		return r.claudeTurn(conv, bin, dir, home, text, resume)
	})
}
