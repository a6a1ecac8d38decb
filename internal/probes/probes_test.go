package probes

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/contextd/contextd/internal/chat"
)

func user(text string) chat.Message {
	return chat.Message{Role: chat.RoleUser, Parts: []chat.Part{{Type: chat.PartText, Text: text}}}
}

func call(id, name, args string) chat.Message {
	return chat.Message{Role: chat.RoleAssistant, Parts: []chat.Part{{Type: chat.PartToolCall, ToolCall: &chat.ToolCall{ID: id, Name: name, Arguments: args}}}}
}

func result(id, content string, isErr bool) chat.Message {
	return chat.Message{Role: chat.RoleTool, Parts: []chat.Part{{Type: chat.PartToolResult, ToolResult: &chat.ToolResult{ToolCallID: id, Content: content, IsError: isErr}}}}
}

func assistant(text string) chat.Message {
	return chat.Message{Role: chat.RoleAssistant, Parts: []chat.Part{{Type: chat.PartText, Text: text}}}
}

// describe renders events as "kind text action status" lines.
func describe(events []Event) []string {
	var out []string
	for _, e := range events {
		out = append(out, strings.TrimSpace(fmt.Sprintf("%s %s %s %s", e.Kind, e.Text, e.Action, e.Status)))
	}
	return out
}

// TestExtractToolShapes reads the tool-call shapes of Claude Code, Codex,
// OpenHands, SWE-agent and a text-mode harness.
func TestExtractToolShapes(t *testing.T) {
	cases := []struct {
		name string
		msgs []chat.Message
		want []string
	}{
		{"claude code", []chat.Message{
			user("Fix the failing test in internal/x, see https://example.com/issue/1."),
			call("c1", "Read", `{"file_path":"/repo/internal/x/x.go"}`), result("c1", "package x", false),
			call("c2", "Edit", `{"file_path":"/repo/internal/x/x.go","old_string":"a","new_string":"b"}`), result("c2", "ok", false),
			call("c3", "Write", `{"file_path":"/repo/notes.md","content":"hello"}`), result("c3", "ok", false),
			call("c4", "Bash", `{"command":"go test ./internal/x/"}`),
			result("c4", "--- FAIL: TestX (0.00s)\n    x_test.go:9: want 2\nFAIL\nExit code: 1", true),
			call("c5", "WebFetch", `{"url":"https://pkg.go.dev/strings","prompt":"read"}`), result("c5", "...", false),
		}, []string{
			"user Fix the failing test in internal/x, see https://example.com/issue/1.", "url https://example.com/issue/1",
			"file /repo/internal/x/x.go read", "file /repo/internal/x/x.go edit", "file /repo/notes.md create",
			"command go test ./internal/x/  1", "test TestX  fail",
			"error --- FAIL: TestX (0.00s)", // a failed call's first line, when no line reads as an error
			"url https://pkg.go.dev/strings",
		}},
		{"codex", []chat.Message{
			user("<environment_context>\n<cwd>/w</cwd>\n</environment_context>"),
			user("rename foo to bar"),
			call("s1", "shell", `{"command":["bash","-lc","rg -n foo src/lib.rs"]}`), result("s1", `{"output":"src/lib.rs:3: fn foo()","metadata":{"exit_code":0}}`, false),
			call("s2", "apply_patch", `{"input":"*** Begin Patch\n*** Update File: src/lib.rs\n@@\n-fn foo()\n+fn bar()\n*** Add File: src/new.rs\n+x\n*** End Patch"}`), result("s2", "Done", false),
			call("s3", "shell", `{"command":["cargo","test"]}`), result("s3", "error[E0425]: cannot find function `foo` in this scope\nProcess exited with code 101", false),
		}, []string{
			"user rename foo to bar",
			"command rg -n foo src/lib.rs  0", "file src/lib.rs read",
			"file src/lib.rs edit", "file src/new.rs create",
			"command cargo test  101", "error error[E0425]: cannot find function `foo` in this scope",
		}},
		{"openhands", []chat.Message{
			user("add a README"),
			call("o1", "str_replace_editor", `{"command":"create","path":"/workspace/README.md","file_text":"# hi"}`), result("o1", "File created", false),
			call("o2", "execute_bash", `{"command":"python -m pytest tests/test_a.py"}`),
			result("o2", "tests/test_a.py::test_one PASSED\ntests/test_a.py::test_two FAILED\nE   AssertionError: assert 1 == 2\n[Command finished with exit code 1]", false),
		}, []string{
			"user add a README", "file /workspace/README.md create",
			"command python -m pytest tests/test_a.py  1",
			"test tests/test_a.py::test_one  pass", "test tests/test_a.py::test_two  fail", "error AssertionError: assert 1 == 2",
		}},
		{"text mode", []chat.Message{
			user("<pr_description>Fix it</pr_description>"),
			assistant("THOUGHT: look\n\n```bash\nsed -i 's/a/b/' /testbed/pkg/mod.py && cat /testbed/pkg/mod.py\n```"),
			user("<returncode>0</returncode>\n<output>\nb\n</output>"),
			assistant("```bash\npython t.py\n```"),
			user("<returncode>1</returncode>\n<output>\nTraceback (most recent call last):\n  File \"t.py\", line 1\nValueError: bad value\n</output>"),
		}, []string{
			"user <pr_description>Fix it</pr_description>",
			"command sed -i 's/a/b/' /testbed/pkg/mod.py && cat /testbed/pkg/mod.py  0",
			"file /testbed/pkg/mod.py edit", "file /testbed/pkg/mod.py read",
			"command python t.py  1", "error ValueError: bad value",
		}},
		{"swe-agent editor", []chat.Message{
			user("fix the colon"),
			call("a1", "open", `{"path":"/repo/tests/missing_colon.py"}`),
			result("a1", "[File: /repo/tests/missing_colon.py (10 lines total)]\n(Open file: /repo/tests/missing_colon.py)\n(Current directory: /repo)\nbash-$", false),
			call("a2", "edit", `{"search":"-> float","replace":"-> float:"}`), result("a2", "Replaced 1 occurrences.", false),
		}, []string{
			"user fix the colon", "file /repo/tests/missing_colon.py read", "file /repo/tests/missing_colon.py edit",
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := describe(Extract(c.msgs))
			if !slices.Equal(got, c.want) {
				t.Errorf("events:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(c.want, "\n"))
			}
		})
	}
}

// TestProbesLatest: a probe answers with its latest occurrence; the state
// probes are each file's last edit and the tests whose latest run failed.
func TestProbesLatest(t *testing.T) {
	msgs := []chat.Message{
		user("go"),
		call("c1", "Edit", `{"file_path":"a.go","old_string":"x","new_string":"y"}`), result("c1", "ok", false),
		call("c2", "Bash", `{"command":"go test"}`), result("c2", "--- FAIL: TestA (0.00s)\n--- FAIL: TestB (0.00s)", false),
		call("c3", "Edit", `{"file_path":"a.go","old_string":"y","new_string":"z"}`), result("c3", "ok", false),
		call("c4", "Bash", `{"command":"go test"}`), result("c4", "--- PASS: TestA (0.00s)\n--- FAIL: TestB (0.00s)", false),
	}
	for i := range msgs {
		msgs[i].ID = fmt.Sprintf("msg_%d", i+1)
	}
	var got []string
	for _, p := range Of(Extract(msgs), -1) {
		got = append(got, fmt.Sprintf("%s %s %s", p.Kind, strings.Join(p.Needles, "+"), p.Origin))
	}
	want := []string{"user go msg_1", "file a.go msg_6", "command go test msg_8", "test TestA msg_9", "test TestB msg_9",
		"last_edit a.go+msg_6 msg_6", "failing_test TestB msg_9"}
	if !slices.Equal(got, want) {
		t.Errorf("probes:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	// Of the first 5 messages only: TestA still failing.
	n := 0
	for _, p := range Of(Extract(msgs), 5) {
		if p.Kind == FailingTest {
			n++
		}
	}
	if n != 2 {
		t.Errorf("failing tests after 5 messages: %d, want 2", n)
	}
}

func TestHeadNeverCutsAWord(t *testing.T) {
	long := strings.Repeat("word ", 40) + "/usr/local/lib/python3.11/site-packages/x.py"
	h, cut := Head(long)
	if !cut || len(h) > MaxHead || !strings.HasSuffix(h, "word") {
		t.Errorf("Head = %q, %v", h, cut)
	}
	if h, _ := Head(strings.Repeat("x", 300)); len(h) != 300 {
		t.Errorf("a single long word is kept whole, got %d bytes", len(h))
	}
}
