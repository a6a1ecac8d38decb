package clients

import (
	"bufio"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// opencodeConfig is OPENCODE_CONFIG_CONTENT: Anthropic through contextd,
// no sharing, no updates.
func opencodeConfig(front string) string {
	return fmt.Sprintf(`{"model": "anthropic/%s", "autoupdate": false, "share": "disabled",
  "provider": {"anthropic": {"options": {"baseURL": "%s/v1", "apiKey": "sk-ant-fake-key"}}},
  "permission": {"edit": "allow", "bash": "allow", "webfetch": "deny"}}`, claudeModel.Name, front)
}

// opencodeEnv is opencode's environment. opencode installs
// @opencode-ai/plugin into its config directory in the background at every
// start, from the npm registry of the npm config: here a loopback server
// that has no packages (404), so nothing leaves the machine.
func (r *rig) opencodeEnv(home string) []string {
	return append(r.baseEnv(home), "OPENCODE_CONFIG_CONTENT="+opencodeConfig(r.front), "npm_config_registry="+r.noRegistry(),
		"OPENCODE_DISABLE_MODELS_FETCH=1", "OPENCODE_DISABLE_AUTOUPDATE=1", "OPENCODE_DISABLE_DEFAULT_PLUGINS=1",
		"OPENCODE_DISABLE_LSP_DOWNLOAD=1", "OPENCODE_DISABLE_SHARE=1", "OPENCODE_DISABLE_EXTERNAL_SKILLS=1",
		"OPENCODE_DISABLE_CLAUDE_CODE=1", "OPENCODE_DISABLE_TERMINAL_TITLE=1")
}

// opencodeTurn runs `opencode run --format json` (with --session ID for a
// later turn) and returns its last text and the session id.
func (r *rig) opencodeTurn(conv, bin, dir, home, text, resume string) (answer, session string) {
	args := []string{"run", "--format", "json", "--auto"}
	if resume != "" {
		args = append(args, "--session", resume)
	}
	args = append(args, text)
	out := r.run(conv, dir, r.opencodeEnv(home), bin, args...)
	sc := bufio.NewScanner(strings.NewReader(out))
	sc.Buffer(nil, 1<<24)
	for sc.Scan() {
		var ev struct {
			Type      string `json:"type"`
			SessionID string `json:"sessionID"`
			Part      struct {
				Type string `json:"type"`
				Text string `json:"text"`
			} `json:"part"`
		}
		if json.Unmarshal(sc.Bytes(), &ev) != nil {
			continue
		}
		if ev.SessionID != "" {
			session = ev.SessionID
		}
		if ev.Part.Type == "text" && ev.Part.Text != "" {
			answer = ev.Part.Text
		}
	}
	return answer, session
}

// noRegistry starts a loopback npm registry without packages.
func (r *rig) noRegistry() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.registry == "" {
		srv := httptest.NewServer(http.NotFoundHandler())
		r.t.Cleanup(srv.Close)
		r.registry = srv.URL + "/"
	}
	return r.registry
}

// TestOpencode drives opencode (its Anthropic provider) through contextd:
// two conversations with the same opening prompt in the same directory,
// each a 32-round tool task and a second turn (--session) with words of
// its own.
func TestOpencode(t *testing.T) {
	bin := filepath.Join(clis(t), "node_modules", ".bin", "opencode")
	if _, err := exec.LookPath(bin); err != nil {
		t.Fatal(err)
	}
	r := startRig(t, claudeModel, nil)
	dir, home := newWorkspace(t), t.TempDir()
	r.conversations(t, dir, func(conv, text, resume string) (string, string) {
		return r.opencodeTurn(conv, bin, dir, home, text, resume)
	})
}
