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

	"google.golang.org/protobuf/encoding/protojson"

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
	ctlRun := ctlRunner(t, ctl, srv.addr)
	run := func(want int, args ...string) string {
		t.Helper()
		return ctlRun("", want, args...)
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

// ctlRunner runs the contextctl binary against addr with stdin, and fails
// the test unless it exits with want; the server address goes last, after
// the command (flags in any position).
func ctlRunner(t *testing.T, ctl, addr string) func(stdin string, want int, args ...string) string {
	return func(stdin string, want int, args ...string) string {
		t.Helper()
		cmd := exec.Command(ctl, append(args, "--addr", addr)...)
		cmd.Stdin = strings.NewReader(stdin)
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
}

// TestContextctlDrivesASession creates a session, appends text, a file and
// JSON on stdin, prepares, reports usage, lists messages and compactions and
// deletes, all through contextctl against the binary, and checks each
// against the server's own answer.
func TestContextctlDrivesASession(t *testing.T) {
	dir := t.TempDir()
	srv := startProc(t, build(t, dir, "contextd", "./cmd/server"), "CONTEXTD_DATA_DIR="+filepath.Join(dir, "data"))
	run := ctlRunner(t, build(t, dir, "contextctl", "./cmd/contextctl"), srv.addr)
	client := contextdv1.NewContextServiceClient(srv.conn)
	ctx := t.Context()
	write := func(name, content string) string {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		return path
	}
	tools := write("tools.json", `[{"name":"bash","description":"Run a command.","parametersJson":"{\"type\":\"object\",\"properties\":{\"command\":{\"type\":\"string\"}}}"}]`)
	system := write("system.txt", "You are a coding agent.")

	if out := run("", 0, "create", "agent", "--model", "gpt-4", "--system-file", system, "--tools-file", tools, "--labels", "team=infra"); !strings.Contains(out, "created agent (gpt-4, 8,192-token window); version 1") || !strings.Contains(out, "Tool definitions") {
		t.Errorf("create:\n%s", out)
	}
	run("", 1, "create", "agent", "--model", "gpt-4") // AlreadyExists
	run("", 2, "create", "other")                     // no --model
	got, err := client.GetSession(ctx, &contextdv1.GetSessionRequest{SessionId: "agent"})
	if err != nil || got.GetSession().GetSystemPrompt() != "You are a coding agent." || len(got.GetSession().GetTools()) != 1 || got.GetSession().GetLabels()["team"] != "infra" {
		t.Fatalf("created: %v %v", got, err)
	}

	if out := run("", 0, "append", "agent", "Fix", "the", "failing", "test", "--idempotency-key", "k1"); !strings.Contains(out, "appended 1 message(s) to agent") || !strings.Contains(out, "version 2") {
		t.Errorf("append TEXT:\n%s", out)
	}
	run("", 0, "append", "agent", "Fix", "the", "failing", "test", "--idempotency-key", "k1") // a retry: nothing new
	// Six tool steps as JSON on stdin, the first with a short result, the
	// others long enough for a prune to replace the older ones.
	var steps []string
	for i := 1; i <= 6; i++ {
		result := "1 failed"
		if i > 1 {
			result = strings.Repeat(fmt.Sprintf("FAILED tests/test_%d.py::test_a - AssertionError\n", i), 20)
		}
		call, _ := json.Marshal(map[string]any{"role": "ROLE_ASSISTANT", "parts": []any{map[string]any{"toolCall": map[string]any{
			"id": fmt.Sprintf("c%d", i), "name": "bash", "argumentsJson": `{"command":"pytest"}`}}}})
		res, _ := json.Marshal(map[string]any{"role": "ROLE_TOOL", "parts": []any{map[string]any{"toolResult": map[string]any{
			"toolCallId": fmt.Sprintf("c%d", i), "content": result}}}})
		steps = append(steps, string(call), string(res))
	}
	stdin := "[" + strings.Join(steps, ",\n") + "]"
	if out := run(stdin, 0, "append", "agent", "-", "--expected-version", "2"); !strings.Contains(out, "appended 12 message(s)") {
		t.Errorf("append - (JSON):\n%s", out)
	}
	run(stdin, 1, "append", "agent", "-", "--expected-version", "2") // stale: Aborted
	run("not json", 2, "append", "agent", "-")
	run("", 2, "append", "agent")
	note := write("note.txt", "The test expects UTC timestamps.")
	run("", 0, "append", "agent", "--file", note, "--role", "assistant")
	var view contextdv1.GetMessagesResponse
	if err := protojson.Unmarshal([]byte(run("", 0, "messages", "agent", "--json")), &view); err != nil || len(view.GetMessages()) != 14 ||
		view.GetMessages()[13].GetParts()[0].GetText().GetText() != "The test expects UTC timestamps." || view.GetVersion() != 4 {
		t.Fatalf("messages --json: %v %v", &view, err)
	}
	if out := run("", 0, "messages", "agent"); !strings.Contains(out, "→ bash({\"command\":\"pytest\"}) [c1]") || !strings.Contains(out, "← [c1] 1 failed") {
		t.Errorf("messages:\n%s", out)
	}

	var prepared contextdv1.PrepareContextResponse
	if err := protojson.Unmarshal([]byte(run("", 0, "prepare", "agent", "Now", "run", "it", "again", "--json")), &prepared); err != nil || len(prepared.GetMessages()) != 15 || prepared.GetViewToken() == "" {
		t.Fatalf("prepare --json: %v %v", &prepared, err)
	}
	if out := run("", 0, "prepare", "agent"); !strings.Contains(out, "agent: send 15 message(s)") || !strings.Contains(out, "prompt cache: the first 15 message(s)") {
		t.Errorf("prepare (nothing new):\n%s", out)
	}
	if out := run("", 0, "report", "agent", "--input", "900", "--cache-read", "100", "--output", "40", "--view-token", prepared.GetViewToken()); !strings.Contains(out, "reported to agent: 900 input (100 cache reads, 0 cache writes), 40 output") {
		t.Errorf("report:\n%s", out)
	}
	run("", 1, "report", "agent") // no tokens: InvalidArgument
	s, err := client.GetSession(ctx, &contextdv1.GetSessionRequest{SessionId: "agent"})
	if err != nil || s.GetSession().GetLedger().GetCalls().GetCalls() != 1 || s.GetSession().GetLedger().GetCalls().GetInputTokens() != 900 {
		t.Errorf("ledger after report: %v %v", s.GetSession().GetLedger(), err)
	}

	if out := run("", 0, "compactions", "agent"); !strings.Contains(out, "agent has no compactions") {
		t.Errorf("compactions (none):\n%s", out)
	}
	// The hint names the session (it printed a literal SESSION).
	if out := run("", 0, "compact", "agent", "--tier", "prune", "--target", "0.01"); !strings.Contains(out, "revert with: contextctl revert agent cmp_1\n") {
		t.Fatalf("compact:\n%s", out)
	}
	if list := run("", 0, "compactions", "agent"); !strings.Contains(list, "COMPACTION") || !strings.Contains(list, "cmp_1") || !strings.Contains(list, "revertible until") {
		t.Errorf("compactions:\n%s", list)
	}
	var listed contextdv1.ListCompactionsResponse
	if err := protojson.Unmarshal([]byte(run("", 0, "compactions", "agent", "--json")), &listed); err != nil || len(listed.GetCompactions()) != 1 {
		t.Errorf("compactions --json: %v %v", &listed, err)
	}

	if ids := run("", 0, "__sessions"); ids != "agent\n" {
		t.Errorf("__sessions: %q", ids)
	}
	if out := run("", 0, "delete", "agent"); out != "deleted agent\n" {
		t.Errorf("delete: %q", out)
	}
	if out := run("", 1, "usage", "agent"); !strings.Contains(out, "NotFound") {
		t.Errorf("after delete:\n%s", out)
	}
}
