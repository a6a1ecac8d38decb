package gateway_test

import (
	"bufio"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/contextd/contextd/internal/gateway/gatewaytest"
)

// requireNode returns the path of a command, skipping when it is missing
// unless CONTEXTD_REQUIRE_NODE=1 (CI) makes that a failure.
func requireNode(t *testing.T, name string) string {
	t.Helper()
	p, err := exec.LookPath(name)
	if err != nil {
		if os.Getenv("CONTEXTD_REQUIRE_NODE") == "1" {
			t.Fatalf("%s is required (CONTEXTD_REQUIRE_NODE=1): %v", name, err)
		}
		t.Skipf("%s not found: %v", name, err)
	}
	return p
}

// TestNodeSDKs drives the gateway with the npm openai and @anthropic-ai/sdk
// packages (test/gateway/node/sdk.mjs): Chat Completions, Responses and
// Messages, streamed and not, each through a tool call.
func TestNodeSDKs(t *testing.T) {
	node, npm := requireNode(t, "node"), requireNode(t, "npm")
	dir := filepath.Join(repoRoot(), "test", "gateway", "node")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	if _, err := os.Stat(filepath.Join(dir, "node_modules", ".package-lock.json")); err != nil {
		cmd := exec.CommandContext(ctx, npm, "ci", "--no-audit", "--no-fund", "--loglevel=error")
		cmd.Dir = dir
		if out, err := cmd.CombinedOutput(); err != nil {
			if os.Getenv("CONTEXTD_REQUIRE_NODE") == "1" {
				t.Fatalf("npm ci: %v\n%s", err, out)
			}
			t.Skipf("npm ci failed (is the npm registry reachable?): %v\n%s", err, out)
		}
	}
	s := start(t, nil)
	for range 6 {
		s.fake.Script(gatewaytest.Reply{ToolCalls: []gatewaytest.ToolCall{lsCall}}, gatewaytest.Reply{Text: "src holds main.go"})
	}
	cmd := exec.CommandContext(ctx, node, "sdk.mjs", s.addr)
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("node sdk.mjs: %v\n%s", err, out)
	}
	runs, seen := 0, map[string]bool{}
	sc := bufio.NewScanner(strings.NewReader(string(out)))
	for sc.Scan() {
		var run struct {
			API      string   `json:"api"`
			Stream   bool     `json:"stream"`
			Sessions []string `json:"sessions"`
			Answer   string   `json:"answer"`
		}
		if err := json.Unmarshal(sc.Bytes(), &run); err != nil {
			t.Fatalf("%v: %s", err, sc.Text())
		}
		runs++
		if run.Answer != "src holds main.go" || len(run.Sessions) != 2 || run.Sessions[0] == "" || run.Sessions[0] != run.Sessions[1] || seen[run.Sessions[0]] {
			t.Errorf("%s (stream %v): %+v", run.API, run.Stream, run)
			continue
		}
		seen[run.Sessions[0]] = true
		want := []string{"user: What is in src?", "assistant: call(call_ls)", "tool: result(call_ls)", "assistant: src holds main.go"}
		if run.Stream {
			want[0] += " (streamed)"
		}
		if got := s.waitLog(run.Sessions[0], want); !slices.Equal(got, want) {
			t.Errorf("%s (stream %v) log:\n got %q\nwant %q", run.API, run.Stream, got, want)
		}
	}
	if runs != 6 {
		t.Fatalf("%d runs:\n%s", runs, out)
	}
	s.checkUpstream()
}
