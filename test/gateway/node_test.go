package gateway_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
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
	node, dir := nodeSDKs(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
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
		if run.Answer != "src holds main.go" || len(run.Sessions) != 2 || run.Sessions[0] == "" || run.Sessions[1] != "" || seen[run.Sessions[0]] {
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

// nodeSDKs returns node and the directory of the npm SDKs, installed.
func nodeSDKs(t *testing.T) (node, dir string) {
	t.Helper()
	node, npm := requireNode(t, "node"), requireNode(t, "npm")
	dir = filepath.Join(repoRoot(), "test", "gateway", "node")
	if _, err := os.Stat(filepath.Join(dir, "node_modules", ".package-lock.json")); err != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		cmd := exec.CommandContext(ctx, npm, "ci", "--no-audit", "--no-fund", "--loglevel=error")
		cmd.Dir = dir
		if out, err := cmd.CombinedOutput(); err != nil {
			if os.Getenv("CONTEXTD_REQUIRE_NODE") == "1" {
				t.Fatalf("npm ci: %v\n%s", err, out)
			}
			t.Skipf("npm ci failed (is the npm registry reachable?): %v\n%s", err, out)
		}
	}
	return node, dir
}

// TestNodeSDKsExpand: the contextd_expand loop driven with the npm openai
// and @anthropic-ai/sdk packages (test/gateway/node/expand.mjs), each door,
// JSON and stream. The agent's output is pruned (the operator's side goes
// through contextd's HTTP/JSON API with fetch); the model reads it back
// through the gateway, range after range, byte for byte, while the SDK
// gets only the final answer, nothing naming the tool; the next request
// extends the session; every upstream call is in the ledgers.
func TestNodeSDKsExpand(t *testing.T) {
	node, dir := nodeSDKs(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	big := bigOutput()
	bigFile := filepath.Join(t.TempDir(), "big.txt")
	if err := os.WriteFile(bigFile, []byte(big), 0o600); err != nil {
		t.Fatal(err)
	}
	s := start(t, nil)
	s.fake.Set(func(f *gatewaytest.Fake) { f.Expand = gatewaytest.ExpandOnce })
	for range 6 {
		s.fake.Script(gatewaytest.Reply{ToolCalls: []gatewaytest.ToolCall{lsCall}}, gatewaytest.Reply{Text: "listed"})
	}
	cmd := exec.CommandContext(ctx, node, "expand.mjs", s.addr, bigFile)
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("node expand.mjs: %v\n%s", err, out)
	}
	read := fmt.Sprintf("read %d bytes of ", len(big))
	var sessions []string
	sc := bufio.NewScanner(strings.NewReader(string(out)))
	for sc.Scan() {
		var run struct {
			API      string `json:"api"`
			Stream   bool   `json:"stream"`
			Question string `json:"question"`
			Session  string `json:"session"`
			Answer   string `json:"answer"`
			CallID   string `json:"callId"`
			Rounds   string `json:"rounds"`
			RawBytes int    `json:"rawBytes"`
			Leaked   bool   `json:"leaked"`
			Next     struct {
				History string `json:"history"`
				Session string `json:"session"`
				Answer  string `json:"answer"`
			} `json:"next"`
		}
		if err := json.Unmarshal(sc.Bytes(), &run); err != nil {
			t.Fatalf("%v: %s", err, sc.Text())
		}
		name := fmt.Sprintf("%s (stream %v)", run.API, run.Stream)
		if run.Session == "" || slices.Contains(sessions, run.Session) {
			t.Fatalf("%s: session %q", name, run.Session)
		}
		sessions = append(sessions, run.Session)
		if !strings.HasPrefix(run.Answer, read) || run.CallID != "" || run.Rounds != "3" || run.Leaked || run.RawBytes < len(run.Answer) {
			t.Errorf("%s: the client got %+v, want the final answer %q... after 3 rounds, nothing naming the tool", name, run, read)
		}
		if run.Next.History != "extended" || run.Next.Session != "" {
			t.Errorf("%s: next request %+v, want extended in %s", name, run.Next, run.Session)
		}
		logWant := []string{"user: " + run.Question, "assistant: call(call_ls)", "tool: result(call_ls)", "assistant: listed",
			"user: Show me that listing again.", "assistant: " + run.Answer, "user: Thanks.", "assistant: " + run.Next.Answer}
		if got := s.waitLog(run.Session, logWant); !slices.Equal(got, logWant) {
			t.Errorf("%s log:\n got %q\nwant %q", name, got, logWant)
		}
	}
	if len(sessions) != 6 {
		t.Fatalf("%d runs:\n%s", len(sessions), out)
	}
	// Each loop's last upstream request carries the three ranges the model
	// read: together, the original byte for byte (two loops a run).
	loops := 0
	for _, r := range s.fake.Requests() {
		results := r.ExpandResults()
		if len(results) != 3 {
			continue
		}
		loops++
		var b strings.Builder
		for _, res := range results {
			_, text, _ := strings.Cut(res, "\n") // after the note line
			b.WriteString(text)
		}
		if b.String() != big {
			t.Errorf("%s: the model read %d bytes, not the %d-byte original byte for byte", r.Path, b.Len(), len(big))
		}
	}
	if loops != 12 {
		t.Errorf("%d loops read the whole output, want 12", loops)
	}
	s.checkUpstream()
	s.checkLedger(sessions...)
}
