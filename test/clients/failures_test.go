package clients

import (
	"os"
	"path/filepath"
	"testing"
)

// someFaults are a provider's failures spread over both conversations'
// turns: a rate limit with a Retry-After, an overload (Anthropic's 529,
// a 503 for OpenAI), a server error and a stream cut after a few events,
// twice each.
func someFaults(overloaded int, overloadedType string) map[int]Fault {
	return map[int]Fault{
		3:  {Status: 429, Type: "rate_limit_error", RetryAfter: "1"},
		11: {Status: overloaded, Type: overloadedType},
		24: {Status: 500, Type: "api_error"},
		33: {CutAfter: 3},
		45: {Status: 429, Type: "rate_limit_error", RetryAfter: "1"},
		58: {Status: overloaded, Type: overloadedType},
		70: {CutAfter: 3},
		80: {Status: 500, Type: "api_error"},
	}
}

// wantFaulted checks every fault was answered (the conversations were
// long enough to meet them).
func (r *rig) wantFaulted(t *testing.T, faults map[int]Fault) {
	t.Helper()
	n := 0
	for _, v := range r.provider.Faulted() {
		n += v
	}
	if n != len(faults) {
		t.Errorf("the provider answered %d faults, want %d", n, len(faults))
	}
}

// TestClaudeCodeProviderFailures: the provider fails now and then (429
// with Retry-After, 529 overloaded, 500) and Claude Code retries: every
// turn completes, one session per conversation, the ledger is what was
// billed (a failure bills nothing), every prompt in every request.
func TestClaudeCodeProviderFailures(t *testing.T) {
	bin := filepath.Join(clis(t), "node_modules", ".bin", "claude")
	r := startRig(t, claudeModel, nil)
	faults := someFaults(529, "overloaded_error")
	r.provider.SetFaults(faults)
	dir, home := newWorkspace(t), t.TempDir()
	r.conversations(t, dir, func(conv, text, resume string) (string, string) {
		return r.claudeTurn(conv, bin, dir, home, text, resume)
	})
	r.wantFaulted(t, faults)
}

// TestCodexProviderFailures: TestClaudeCodeProviderFailures with Codex
// (Responses, its own retries and stream retries).
func TestCodexProviderFailures(t *testing.T) {
	bin := filepath.Join(clis(t), "node_modules", ".bin", "codex")
	r := startRig(t, codexModel, nil)
	faults := someFaults(503, "server_error")
	r.provider.SetFaults(faults)
	dir, home, codexHome := newWorkspace(t), t.TempDir(), t.TempDir()
	if err := os.WriteFile(filepath.Join(codexHome, "config.toml"), []byte(codexConfig(r.front, codexModel.ContextWindow)), 0o600); err != nil {
		t.Fatal(err)
	}
	r.conversations(t, dir, func(conv, text, resume string) (string, string) {
		return r.codexTurn(conv, bin, dir, home, codexHome, text, resume)
	})
	r.wantFaulted(t, faults)
}

// accented is what the people of TestClaudeCodeThinkingAccented type
// after their words: other scripts, combining marks and emoji (4-byte
// runes, a ZWJ sequence).
const accented = " Prüfe bitte genau — naïve café, 日本語のメモ, Ελληνικά, עברית 🚀🧪 👩‍💻 e\u0301."

// TestClaudeCodeThinkingAccented: Claude Code with extended thinking
// (signed thinking blocks before each tool call, which Anthropic refuses
// to miss) and prompts in several scripts with emoji.
func TestClaudeCodeThinkingAccented(t *testing.T) {
	bin := filepath.Join(clis(t), "node_modules", ".bin", "claude")
	r := startRig(t, claudeModel, nil)
	r.accent, r.env = accented, []string{"MAX_THINKING_TOKENS=2048"}
	dir, home := newWorkspace(t), t.TempDir()
	r.conversations(t, dir, func(conv, text, resume string) (string, string) {
		return r.claudeTurn(conv, bin, dir, home, text, resume)
	})
	thinking := 0
	for _, c := range r.provider.Calls() {
		if th, ok := c.Body["thinking"].(map[string]any); ok && th["type"] == "enabled" {
			thinking++
		}
	}
	if thinking == 0 {
		t.Error("Claude Code asked for no thinking")
	}
}
