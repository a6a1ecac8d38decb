package e2e

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	contextdv1 "github.com/contextd/contextd/gen/contextd/v1"
)

// TestContextctl drives the contextctl binary against a live server.
func TestContextctl(t *testing.T) {
	dir := t.TempDir()
	srv := startProc(t, build(t, dir, "contextd", "./cmd/server"), "CONTEXTD_DATA_DIR="+filepath.Join(dir, "data"))
	ctl := build(t, dir, "contextctl", "./cmd/contextctl")
	client := contextdv1.NewContextServiceClient(srv.conn)
	ctx := t.Context()
	if _, err := client.CreateSession(ctx, &contextdv1.CreateSessionRequest{Id: "cli", Model: "gpt-4", SystemPrompt: "You are a coding agent."}); err != nil {
		t.Fatal(err)
	}
	msgs := []*contextdv1.Message{{Role: contextdv1.Role_ROLE_USER, Parts: []*contextdv1.Part{text("Fix the failing test in src/app.py")}}}
	for i := 0; i < 14; i++ {
		id := fmt.Sprintf("c%d", i)
		msgs = append(msgs,
			&contextdv1.Message{Role: contextdv1.Role_ROLE_ASSISTANT, Parts: []*contextdv1.Part{{Kind: &contextdv1.Part_ToolCall{
				ToolCall: &contextdv1.ToolCallPart{Id: id, Name: "bash", ArgumentsJson: `{"command":"pytest"}`}}}}},
			&contextdv1.Message{Role: contextdv1.Role_ROLE_TOOL, Parts: []*contextdv1.Part{{Kind: &contextdv1.Part_ToolResult{
				ToolResult: &contextdv1.ToolResultPart{ToolCallId: id, Content: strings.Repeat("FAILED tests/test_x.py::test_a - AssertionError\n", 20)}}}}})
	}
	if _, err := client.AppendMessages(ctx, &contextdv1.AppendMessagesRequest{SessionId: "cli", Messages: msgs}); err != nil {
		t.Fatal(err)
	}
	run := func(want int, args ...string) string {
		t.Helper()
		cmd := exec.Command(ctl, append([]string{"--addr", srv.addr}, args...)...)
		out, err := cmd.CombinedOutput()
		code := 0
		if ee, ok := err.(*exec.ExitError); ok {
			code = ee.ExitCode()
		} else if err != nil {
			t.Fatal(err)
		}
		if code != want {
			t.Fatalf("contextctl %v: exit %d, want %d\n%s", args, code, want, out)
		}
		return string(out)
	}
	prose := filepath.Join(dir, "prose.txt")
	if err := os.WriteFile(prose, []byte("Fix the failing test in src/app.py, then run the suite again."), 0o600); err != nil {
		t.Fatal(err)
	}
	if out := run(0, "count", "--model", "qwen3-32b", prose); !regexp.MustCompile(`^\d+ tokens \(qwen2\)\n$`).MatchString(out) {
		t.Errorf("count --model qwen3-32b (exact, embedded vocabulary):\n%s", out)
	}
	// No vocabulary imported: Gemma 3 is counted with cl100k_base and says so.
	if out := run(0, "count", "--model", "gemma-3-27b", prose); !strings.Contains(out, " tokens (cl100k_base, approximate)\n") {
		t.Errorf("count --model gemma-3-27b without an import:\n%s", out)
	}
	if out := run(1, "count", "--encoding", "gemma3", prose); !strings.Contains(out, "InvalidArgument") || !strings.Contains(out, "encoding: the gemma3 vocabulary is not imported") || !strings.Contains(out, "contextd tokenizer import") {
		t.Errorf("count --encoding gemma3 without an import:\n%s", out)
	}
	if out := run(0, "usage", "cli", "--width", "80"); !strings.Contains(out, "gpt-4 · 8,192-token window") || !strings.Contains(out, "█ Messages") || strings.Contains(out, "\x1b[") {
		t.Errorf("usage:\n%s", out)
	}
	if out := run(0, "compact", "cli", "--dry-run", "--tier", "prune", "--target", "0.2"); !strings.Contains(out, "dry run: prune would save") {
		t.Errorf("dry run:\n%s", out)
	}
	out := run(0, "compact", "cli", "--tier", "prune", "--target", "0.2")
	if !strings.Contains(out, "compaction cmp_1 (prune)") {
		t.Fatalf("compact:\n%s", out)
	}
	if out := run(0, "expand", "cli", "ph_1_1"); !strings.Contains(out, "FAILED tests/test_x.py") {
		t.Errorf("expand:\n%s", out)
	}
	if out := run(0, "revert", "cli", "cmp_1"); !strings.Contains(out, "reverted cmp_1") {
		t.Errorf("revert:\n%s", out)
	}
	if out := run(0, "sessions"); !strings.Contains(out, "cli") || !strings.Contains(out, "gpt-4") {
		t.Errorf("sessions:\n%s", out)
	}
	if out := run(0, "handoff", "cli"); !strings.Contains(out, "## ORIGINAL TASK") {
		t.Errorf("handoff:\n%s", out)
	}
	if out := run(0, "update", "cli", "--model", "gpt-4o", "--system", "Be brief.", "--labels", "team=a"); !strings.Contains(out, "updated cli (labels, model, system_prompt)") || !strings.Contains(out, "gpt-4o") {
		t.Errorf("update:\n%s", out)
	}
	if out := run(1, "update", "cli", "--model", "gpt-4", "--expected-version", "1"); !strings.Contains(out, "Aborted") {
		t.Errorf("stale update:\n%s", out)
	}
	run(2, "update", "cli")
	got, err := client.GetSession(ctx, &contextdv1.GetSessionRequest{SessionId: "cli"})
	if err != nil || got.GetSession().GetModel() != "gpt-4o" || got.GetSession().GetSystemPrompt() != "Be brief." || got.GetSession().GetLabels()["team"] != "a" {
		t.Errorf("after update: %v, %v", got, err)
	}
	out = run(0, "clear", "cli", "--keep-task")
	if !strings.Contains(out, "cleared cli") || !strings.Contains(out, "contextctl revert cli cmp_2") {
		t.Fatalf("clear:\n%s", out)
	}
	view, err := client.GetMessages(ctx, &contextdv1.GetMessagesRequest{SessionId: "cli"})
	if err != nil || len(view.GetMessages()) != 1 {
		t.Errorf("after clear --keep-task: %v, %v", view, err)
	}
	if out := run(0, "revert", "cli", "cmp_2"); !strings.Contains(out, "reverted cmp_2") {
		t.Errorf("revert the clear:\n%s", out)
	}
	run(0, "update", "cli", "--model", "gpt-4")
	var usage struct {
		ContextWindow string `json:"contextWindow"`
	}
	if out := run(0, "usage", "cli", "--json"); json.Unmarshal([]byte(out), &usage) != nil || usage.ContextWindow != "8192" {
		t.Errorf("usage --json:\n%s", out)
	}
	if out := run(1, "usage", "missing"); !strings.Contains(out, "NotFound") {
		t.Errorf("missing session:\n%s", out)
	}
	run(2, "compact")
	run(2, "frobnicate")
}
