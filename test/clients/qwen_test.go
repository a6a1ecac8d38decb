package clients

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// qwenModel is a Qwen Code model id contextd's registry does not know, added
// by the models file with a small window, counted with o200k_base like the
// provider here.
var qwenModel = model{Name: "qwen3-coder-small", Provider: "qwen", ContextWindow: 40000, MaxOutput: 4096, Encoding: "o200k_base", Exact: true}

// qwenSettings is ~/.qwen/settings.json: the OpenAI-compatible auth, and
// telemetry, usage statistics and update checks off. Qwen Code clears its
// old tool results ("[Old tool result content cleared]", all but the 5
// newest) once they hold more than 500,000 characters, or after an hour
// idle; here from 20,000 on, so that the run's rounds of multi-KB outputs
// clear some, as a long real session does: each is recorded as the
// client's edit of the result, and the used % follows what it sends.
const qwenSettings = `{
  "security": {"auth": {"selectedType": "openai"}},
  "context": {"clearContextOnIdle": {"toolResultsTotalCharsThreshold": 20000}},
  "telemetry": {"enabled": false},
  "privacy": {"usageStatisticsEnabled": false},
  "general": {"disableAutoUpdate": true, "disableUpdateNag": true},
  "ui": {"hideTips": true}
}`

func (r *rig) qwenEnv(home string) []string {
	return append(r.baseEnv(home), "OPENAI_BASE_URL="+r.front+"/v1", "OPENAI_API_KEY=sk-fake-key", "OPENAI_MODEL="+qwenModel.Name)
}

// qwenTurn runs `qwen --yolo -o json PROMPT` (with --resume ID for a
// later turn, --continue for latest) and returns its result and session
// id.
func (r *rig) qwenTurn(conv, bin, dir, home, text, resume string) (answer, session string) {
	args := []string{"--yolo", "--output-format", "json", "--model", qwenModel.Name}
	switch resume {
	case "":
	case latest:
		args = append(args, "--continue")
	default:
		args = append(args, "--resume", resume)
	}
	args = append(args, text)
	out := r.run(conv, dir, r.qwenEnv(home), bin, args...)
	// The JSON output is an array of events (or one result object).
	var events []map[string]any
	if err := json.Unmarshal([]byte(strings.TrimSpace(out)), &events); err != nil {
		var one map[string]any
		if err := json.Unmarshal([]byte(strings.TrimSpace(out)), &one); err != nil {
			r.t.Errorf("%s: qwen's output is not JSON: %v\n%s", conv, err, tail(out))
			return "", ""
		}
		events = []map[string]any{one}
	}
	for _, ev := range events {
		if s, ok := ev["session_id"].(string); ok && s != "" {
			session = s
		}
		if ev["type"] == "result" {
			answer, _ = ev["result"].(string)
		}
	}
	return answer, session
}

// TestQwenCode drives Qwen Code through contextd: two conversations with
// the same opening prompt in the same directory, each a 32-round tool task
// and a second turn (--resume) with words of its own.
func TestQwenCode(t *testing.T) {
	bin := filepath.Join(clis(t), "node_modules", ".bin", "qwen")
	r := startRig(t, qwenModel, nil)
	dir, home := newWorkspace(t), t.TempDir()
	if err := os.MkdirAll(filepath.Join(home, ".qwen"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(home, ".qwen", "settings.json"), []byte(qwenSettings), 0o600); err != nil {
		t.Fatal(err)
	}
	r.conversations(t, dir, func(conv, text, resume string) (string, string) {
		return r.qwenTurn(conv, bin, dir, home, text, resume)
	})
	cleared := 0
	for _, c := range r.provider.Calls() {
		if strings.Contains(string(c.Raw), qwenCleared) {
			cleared++
		}
	}
	edits := r.clientEdits(r.listSessions()...)
	t.Logf("%d upstream requests carried results Qwen Code cleared; %d client edits recorded", cleared, edits)
	if cleared == 0 || edits == 0 {
		t.Errorf("Qwen Code cleared results in %d requests and contextd recorded %d client edits: want both (the settings' threshold)", cleared, edits)
	}
}

// qwenCleared is what Qwen Code puts in place of an old tool result.
const qwenCleared = "[Old tool result content cleared]"

// clientEdits counts the messages recorded as the client's edits in the
// sessions' compactions (tier client_edit).
func (r *rig) clientEdits(ids ...string) int {
	n := 0
	for _, id := range ids {
		var got struct {
			Compactions []struct {
				Items []struct {
					Tier string `json:"tier"`
				} `json:"items"`
			} `json:"compactions"`
		}
		r.rpc("ListCompactions", map[string]any{"sessionId": id, "pageSize": 1000}, &got)
		for _, c := range got.Compactions {
			for _, it := range c.Items {
				if it.Tier == "client_edit" {
					n++
				}
			}
		}
	}
	return n
}

// qwenCompressSettings is qwenSettings with Qwen Code's chat compression
// at 30 % of a 64k window (context.autoCompactThreshold of
// model.generationConfig.contextWindowSize: 19,200 tokens, about every
// other round here; by default
// 85 %, capped at the window less 33,000; Qwen Code refuses to send past
// the window less 23,000, so its window is not contextd's 40k, where it
// would stop at 17,000). Qwen Code asks for a
// <state_snapshot> summary with its whole history, then goes on from the
// summary, "Got it. Thanks for the additional context!" with its last
// tool call, and that call's result.
const qwenCompressSettings = `{
  "security": {"auth": {"selectedType": "openai"}},
  "model": {"generationConfig": {"contextWindowSize": 64000}},
  "context": {"autoCompactThreshold": 0.3},
  "telemetry": {"enabled": false},
  "privacy": {"usageStatisticsEnabled": false},
  "general": {"disableAutoUpdate": true, "disableUpdateNag": true},
  "ui": {"hideTips": true}
}`

// TestQwenCompresses is TestQwenCode with Qwen Code compressing its own
// chat every few rounds. Qwen Code names no session to contextd; each
// compressed history keeps its last tool call, whose id is the
// conversation's own, and is recorded as a client compaction in the
// conversation's session (gateway/unsignalled.go): one session per
// conversation, as the suite checks, and the used % follows what Qwen
// Code sends. Before, each compression started a session of its own.
func TestQwenCompresses(t *testing.T) {
	bin := filepath.Join(clis(t), "node_modules", ".bin", "qwen")
	r := startRig(t, qwenModel, nil)
	dir, home := newWorkspace(t), t.TempDir()
	if err := os.MkdirAll(filepath.Join(home, ".qwen"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(home, ".qwen", "settings.json"), []byte(qwenCompressSettings), 0o600); err != nil {
		t.Fatal(err)
	}
	r.conversations(t, dir, func(conv, text, resume string) (string, string) {
		return r.qwenTurn(conv, bin, dir, home, text, resume)
	})
	r.settled(t)
	asks := r.provider.compactionAsks()
	r.mu.Lock()
	compacted := map[string]int{}
	for _, e := range r.exchanges {
		if e.main && strings.HasPrefix(e.history, "compacted") {
			compacted[e.conv[:1]]++
		}
	}
	r.mu.Unlock()
	t.Logf("Qwen Code asked for %d summaries; compressed histories recorded in their sessions: %v", asks, compacted)
	if compacted["A"] == 0 || compacted["B"] == 0 {
		t.Errorf("compressed histories recorded as client compactions: %v, want some in each conversation (asked for %d summaries)", compacted, asks)
	}
}
