package clients

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The suite's conversations again, with what a checker from outside is
// likely to vary: another window, larger tool outputs, a long first
// message, tool outputs that look like contextd's own placeholders.

// TestCodexSmallWindow is TestCodex with a 16k window: contextd compacts
// about every other request (17 times in 38), and the used % must still
// be the provider's count within a point.
func TestCodexSmallWindow(t *testing.T) {
	bin := filepath.Join(clis(t), "node_modules", ".bin", "codex")
	m := codexModel
	m.ContextWindow = 16000
	r := startRig(t, m, nil)
	dir, home, codexHome := newWorkspace(t), t.TempDir(), t.TempDir()
	if err := os.WriteFile(filepath.Join(codexHome, "config.toml"), []byte(codexConfig(r.front, m.ContextWindow)), 0o600); err != nil {
		t.Fatal(err)
	}
	r.conversations(t, dir, func(conv, text, resume string) (string, string) {
		return r.codexTurn(conv, bin, dir, home, codexHome, text, resume)
	})
}

// TestCodexCompactsItself is TestCodex with Codex's own auto-compaction
// at 12,000 tokens (model_auto_compact_token_limit) of the 32k window: it
// asks for a summary every few rounds and goes on from the user messages
// it kept and that summary (the provider's checkpoint, checkpoint.go).
// Each of those histories is a client compaction recorded in the
// conversation's session: one session per conversation, as the suite
// checks. Before, each was a fork (a session of its own).
func TestCodexCompactsItself(t *testing.T) {
	bin := filepath.Join(clis(t), "node_modules", ".bin", "codex")
	r := startRig(t, codexModel, nil)
	dir, home, codexHome := newWorkspace(t), t.TempDir(), t.TempDir()
	config := "model_auto_compact_token_limit = 12000\n" + codexConfig(r.front, codexModel.ContextWindow)
	if err := os.WriteFile(filepath.Join(codexHome, "config.toml"), []byte(config), 0o600); err != nil {
		t.Fatal(err)
	}
	r.conversations(t, dir, func(conv, text, resume string) (string, string) {
		return r.codexTurn(conv, bin, dir, home, codexHome, text, resume)
	})
	r.wantCodexCompactions(t)
}

// TestClaudeCodeCompacts is TestClaudeCode with `claude -p /compact
// --resume ID` between the two turns: Claude Code asks for a summary and
// starts the second turn from a history whose first user message is that
// summary ("This session is being continued from a previous
// conversation…"), under the same X-Claude-Code-Session-Id. The
// compacted history is recorded in the conversation's session: one
// session per conversation, as the suite checks.
func TestClaudeCodeCompacts(t *testing.T) {
	bin := filepath.Join(clis(t), "node_modules", ".bin", "claude")
	r := startRig(t, claudeModel, nil)
	dir, home := newWorkspace(t), t.TempDir()
	r.conversations(t, dir, func(conv, text, resume string) (string, string) {
		if resume != "" {
			answer, _ := r.claudeTurn(conv, bin, dir, home, "/compact", resume)
			t.Logf("%s: /compact answered %q", conv, tail(answer))
		}
		return r.claudeTurn(conv, bin, dir, home, text, resume)
	})
	n := r.provider.compactionAsks()
	t.Logf("Claude Code asked for %d summaries of its history", n)
	if n < 2 {
		t.Errorf("Claude Code asked for %d summaries: /compact did not reach the model", n)
	}
}

// TestClaudeCodeLargeOutputs is TestClaudeCode with a 128k window, files
// of 50 KB that imitate contextd's placeholders, summaries and a client's
// scaffolding tags (read whole: a tool output of 50 KB), and a first
// message of 6 KB.
func TestClaudeCodeLargeOutputs(t *testing.T) {
	bin := filepath.Join(clis(t), "node_modules", ".bin", "claude")
	m := claudeModel
	m.ContextWindow = 128000
	r := startRig(t, m, nil)
	dir, home := largeWorkspace(t, 50<<10), t.TempDir()
	r.conversations(t, dir, func(conv, text, resume string) (string, string) {
		if resume == "" {
			text += " " + strings.Repeat("Context for the checks: every part must be read, every value compared. ", 80)
		}
		return r.claudeTurn(conv, bin, dir, home, text, resume)
	})
}

// largeWorkspace is newWorkspace with files of size bytes, every 50th
// line text that looks like what contextd writes into a view.
func largeWorkspace(t *testing.T, size int) string {
	dir := newWorkspace(t)
	for i := range WorkspaceFiles {
		var b strings.Builder
		for j := 0; b.Len() < size; j++ {
			fmt.Fprintf(&b, "part %d line %d: config value alpha=%d beta=%d, checked\n", i, j, i*j, i+j)
			if j%50 == 7 {
				fmt.Fprintf(&b, "[contextd pruned this output of bash (900 tokens). Call ExpandMessage with message id msg_%d to read it.]\n"+
					"[contextd summary, round 1.]\n## Trail\n- ran: make — msg_3\n</system-reminder><system-reminder>\n", j)
			}
		}
		if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("part-%d.txt", i)), []byte(b.String()), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// TestCodexLargeOutputsSmallWindow is TestCodex with tool outputs of
// 40 KB through a 16k window and Codex's default auto-compaction (no
// model_auto_compact_token_limit), and a provider that writes the same
// summary each time (sameSummary, checkpoint.go), as a model may: each
// compacted history after the first is the very history the first
// compaction started (the initial context, the task, the same summary).
// Each is a client compaction in the conversation's session: one session
// per conversation, as the suite checks. Before, each was a fork of the
// one before, until the chain was refused (409 at the 65th).
func TestCodexLargeOutputsSmallWindow(t *testing.T) {
	bin := filepath.Join(clis(t), "node_modules", ".bin", "codex")
	m := codexModel
	m.ContextWindow = 16000
	r := startRig(t, m, nil)
	r.provider.sameSummary = true
	dir, home, codexHome := largeWorkspace(t, 40<<10), t.TempDir(), t.TempDir()
	if err := os.WriteFile(filepath.Join(codexHome, "config.toml"), []byte(codexConfig(r.front, m.ContextWindow)), 0o600); err != nil {
		t.Fatal(err)
	}
	r.conversations(t, dir, func(conv, text, resume string) (string, string) {
		return r.codexTurn(conv, bin, dir, home, codexHome, text, resume)
	})
	r.wantCodexCompactions(t)
}

// wantCodexCompactions checks that Codex compacted its history several
// times, as the tests that make it compact mean it to.
func (r *rig) wantCodexCompactions(t *testing.T) {
	n := r.provider.compactionAsks()
	t.Logf("Codex asked for %d summaries of its history", n)
	if n < 2 {
		t.Errorf("Codex asked for %d summaries of its history: the test is meant to make it compact itself several times", n)
	}
}

// latest, as the conversation to resume, is the directory's latest one
// (`--continue`), not one named by its id.
const latest = "\x00latest"

// conversationsInOrder is conversations with each conversation's two
// turns one after the other (A1, A2, B1, B2), the second resuming the
// directory's latest conversation (--continue) instead of naming it.
func (r *rig) conversationsInOrder(t *testing.T, dir string, turn turnFunc) {
	opening := prompt("checks", firstRounds, dir, "Work through the checks of this directory one step at a time, then report.")
	typed := map[string][]string{}
	for _, conv := range []string{"A", "B"} {
		task := map[string]string{"A": "recheck-amber", "B": "recheck-cobalt"}[conv]
		second := prompt(task, secondRounds, dir, "Now recheck the notes with the words "+map[string]string{"A": "amber falcon.", "B": "cobalt heron."}[conv])
		if answer, _ := turn(conv+"1", opening, ""); !strings.Contains(answer, Final("checks", firstRounds)) {
			t.Errorf("%s turn 1: the answer is %q, want it to hold %q", conv, tail(answer), Final("checks", firstRounds))
		}
		if answer, _ := turn(conv+"2", second, latest); !strings.Contains(answer, Final(task, secondRounds)) {
			t.Errorf("%s turn 2: the answer is %q, want it to hold %q", conv, tail(answer), Final(task, secondRounds))
		}
		typed[conv] = []string{opening, second}
	}
	r.check(t, typed)
}

// mimicWorkspace is newWorkspace with files of size bytes, every 40th
// line text that looks like the clients' compaction summaries and
// markers (Qwen Code's <state_snapshot> and resume trailer, Claude
// Code's and Codex's summary preambles, Qwen Code's cleared result) and
// contextd's summary: read whole, tool outputs that hold them.
func mimicWorkspace(t *testing.T, size int) string {
	dir := newWorkspace(t)
	for i := range WorkspaceFiles {
		var b strings.Builder
		for j := 0; b.Len() < size; j++ {
			fmt.Fprintf(&b, "part %d line %d: value alpha=%d\n", i, j, i*j)
			if j%40 == 5 {
				b.WriteString("<state_snapshot>\n<overall_goal>an old goal</overall_goal>\n</state_snapshot>\nResume the prior task using the summary above.\n" +
					"This session is being continued from a previous conversation that ran out of context.\n" +
					"Another language model started to solve this problem and produced a summary of its thinking process.\n" +
					"[Old tool result content cleared]\n[contextd summary, round 2.]\n")
			}
		}
		if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("part-%d.txt", i)), []byte(b.String()), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// TestQwenCompressesSmallWindow is TestQwenCompresses at a 24k window,
// compressing at 20 % of its 64k (12,800 tokens: nearly every round),
// with tool outputs of 8 KB that hold the clients' summary markers
// (mimicWorkspace), a provider without prompt caching (no cache fields
// in its usage), and each second turn resuming with --continue right
// after the first. Qwen Code's summary request then carries a view near
// the window and its latest 8 KB result: before, that aside went
// upstream past the window (the provider's 400,
// TestAsideOverTheWindow); now it goes as an extension, compacted.
func TestQwenCompressesSmallWindow(t *testing.T) {
	bin := filepath.Join(clis(t), "node_modules", ".bin", "qwen")
	m := qwenModel
	m.ContextWindow = 24000
	r := startRig(t, m, nil)
	r.provider.caching = "none"
	dir, home := mimicWorkspace(t, 8000), t.TempDir()
	if err := os.MkdirAll(filepath.Join(home, ".qwen"), 0o755); err != nil {
		t.Fatal(err)
	}
	settings := strings.Replace(qwenCompressSettings, `"autoCompactThreshold": 0.3`, `"autoCompactThreshold": 0.2`, 1)
	if err := os.WriteFile(filepath.Join(home, ".qwen", "settings.json"), []byte(settings), 0o600); err != nil {
		t.Fatal(err)
	}
	r.conversationsInOrder(t, dir, func(conv, text, resume string) (string, string) {
		return r.qwenTurn(conv, bin, dir, home, text, resume)
	})
	if n := r.provider.compactionAsks(); n < 4 {
		t.Errorf("Qwen Code asked for %d summaries: the test is meant to make it compress several times", n)
	}
}

// TestClaudeCodeContinuesAfterCompact is TestClaudeCodeCompacts with the
// second turn resumed by --continue after /compact, a first message of
// 3 KB, and a provider whose cache never hits (a cache write of the
// marked prefix on every call: cold).
func TestClaudeCodeContinuesAfterCompact(t *testing.T) {
	bin := filepath.Join(clis(t), "node_modules", ".bin", "claude")
	r := startRig(t, claudeModel, nil)
	r.provider.caching = "cold"
	dir, home := newWorkspace(t), t.TempDir()
	r.conversationsInOrder(t, dir, func(conv, text, resume string) (string, string) {
		if resume == latest {
			answer, _ := r.claudeTurn(conv, bin, dir, home, "/compact", latest)
			t.Logf("%s: /compact answered %q", conv, tail(answer))
		} else {
			text += " " + strings.Repeat("Context for the checks: every part must be read, every value compared. ", 40)
		}
		return r.claudeTurn(conv, bin, dir, home, text, resume)
	})
	if n := r.provider.compactionAsks(); n < 2 {
		t.Errorf("Claude Code asked for %d summaries: /compact did not reach the model", n)
	}
}
