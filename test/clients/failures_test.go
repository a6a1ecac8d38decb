package clients

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/contextd/contextd/internal/pgtest"
)

// cli starts a rig for one of the real CLIs (claude, codex, qwen, set up
// as TestClaudeCode, TestCodex and TestQwenCode set them up) and returns
// it with the CLI's turn.
func cli(t *testing.T, name string, env map[string]string) (*rig, string, turnFunc) {
	t.Helper()
	bin := filepath.Join(clis(t), "node_modules", ".bin", name)
	dir, home := newWorkspace(t), t.TempDir()
	switch name {
	case "claude":
		r := startRig(t, claudeModel, env)
		return r, dir, func(conv, text, resume string) (string, string) {
			return r.claudeTurn(conv, bin, dir, home, text, resume)
		}
	case "codex":
		r := startRig(t, codexModel, env)
		codexHome := t.TempDir()
		if err := os.WriteFile(filepath.Join(codexHome, "config.toml"), []byte(codexConfig(r.front, codexModel.ContextWindow)), 0o600); err != nil {
			t.Fatal(err)
		}
		return r, dir, func(conv, text, resume string) (string, string) {
			return r.codexTurn(conv, bin, dir, home, codexHome, text, resume)
		}
	case "qwen":
		r := startRig(t, qwenModel, env)
		if err := os.MkdirAll(filepath.Join(home, ".qwen"), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(home, ".qwen", "settings.json"), []byte(qwenSettings), 0o600); err != nil {
			t.Fatal(err)
		}
		return r, dir, func(conv, text, resume string) (string, string) {
			return r.qwenTurn(conv, bin, dir, home, text, resume)
		}
	}
	t.Fatalf("no CLI %q", name)
	return nil, "", nil
}

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

// TestVaried runs each CLI with the variations of an outside check at
// once (each held alone too; see the history of this file): the two
// conversations at the same time (alongside), on two contextd replicas of
// one PostgreSQL database behind a round-robin, the first restarted between the
// first and second turns and once in the middle of the first; a provider that fails now and then (someFaults:
// 429 with Retry-After, 529/503, 500, a cut stream) and makes two tool
// calls a round (Claude Code with extended thinking, Codex with reasoning
// items under store:false); prompts in several scripts with emoji.
func TestVaried(t *testing.T) {
	for _, name := range []string{"claude", "codex", "qwen"} {
		t.Run(name, func(t *testing.T) {
			r, dir, turn := cli(t, name, map[string]string{"CONTEXTD_DATABASE_URL": pgtest.URL(t)})
			first := r.addr
			r.addReplica()
			r.between = r.restart
			r.alongside = true
			r.accent = accented
			r.provider.parallel = 2
			faults := someFaults(503, "server_error")
			if name == "claude" {
				faults = someFaults(529, "overloaded_error")
				r.env = []string{"MAX_THINKING_TOKENS=2048"}
			}
			r.provider.SetFaults(faults)
			// And a restart in the middle of the first turns: the
			// requests that meet it are answered 502 (unreached) and
			// retried.
			// Each variation is asserted to have happened: a fault
			// never injected, a stream never cut, a replica never
			// reached or a restart that came after the conversations
			// would let the checks pass without running.
			restarted, finished := make(chan bool, 1), make(chan struct{})
			go func() {
				mid := false
				defer func() { restarted <- mid }() // also when restart fails t (runtime.Goexit)
				for len(r.provider.Calls()) < 20 {
					select {
					case <-finished:
						return
					case <-time.After(5 * time.Millisecond):
					}
				}
				r.mu.Lock()
				before := r.addr
				r.mu.Unlock()
				r.restart()
				mid = before == first // the between-turns restart came first otherwise
			}()
			r.conversations(t, dir, turn)
			close(finished)
			if !<-restarted {
				t.Error("contextd did not restart in the middle of the first turns")
			}
			n := 0
			for _, v := range r.provider.Faulted() {
				n += v
			}
			if n != len(faults) {
				t.Errorf("the provider answered %d faults, want %d", n, len(faults))
			}
			cuts, wantCuts := 0, 0
			for _, c := range r.provider.Calls() {
				if c.Cut {
					cuts++
				}
			}
			for _, f := range faults {
				if f.CutAfter > 0 {
					wantCuts++
				}
			}
			if cuts != wantCuts {
				t.Errorf("the provider cut %d streams, want %d (a fault on a request not streamed, or one of fewer events, cuts nothing)", cuts, wantCuts)
			}
			r.mu.Lock()
			for _, addr := range append([]string{first, r.addr}, r.replicas...) {
				if r.served[addr] == 0 {
					t.Errorf("contextd at %s (first %s, last %s, replicas %v) answered no request", addr, first, r.addr, r.replicas)
				}
			}
			r.mu.Unlock()
			if r.addr == first {
				t.Error("contextd did not restart")
			}
			if name == "claude" {
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
		})
	}
}

// accented is what the people of TestVaried type after their words:
// other scripts, combining marks and emoji (4-byte runes, a ZWJ
// sequence).
const accented = " Prüfe bitte genau — naïve café, 日本語のメモ, Ελληνικά, עברית 🚀🧪 👩‍💻 e\u0301."
