package summarize_test

import (
	"fmt"
	"math/rand"
	"strings"
	"testing"

	"github.com/contextd/contextd/internal/chat"
	"github.com/contextd/contextd/internal/compaction"
	"github.com/contextd/contextd/internal/summarize"
)

// trailCount counts a text as a quarter of its bytes.
func trailCount(s string) int { return len(s) / 4 }

// trailCall is message id calling tool name with args (call id "c" + id).
func trailCall(id, name, args string) chat.Message {
	return chat.Message{ID: id, Role: chat.RoleAssistant, Parts: []chat.Part{{Type: chat.PartToolCall, ToolCall: &chat.ToolCall{ID: "c" + id, Name: name, Arguments: args}}}}
}

// trailResult is message id answering the call of message call with out.
func trailResult(id, call, out string) chat.Message {
	return chat.Message{ID: id, Role: chat.RoleTool, Parts: []chat.Part{{Type: chat.PartToolResult, ToolResult: &chat.ToolResult{ToolCallID: "c" + call, Content: out}}}}
}

// TestTrailMergesAndFolds: a chained summary merges the previous trail (a
// file's newer change replaces its line, a later read does not hide it) and
// folds its oldest lines into one that names their message ids, newest
// first, within the budget.
func TestTrailMergesAndFolds(t *testing.T) {
	round1 := compaction.SummaryInput{Round: 1, ID: "sum_1_1", MaxTokens: 800, Count: trailCount, Messages: []chat.Message{
		trailCall("msg_2", "Edit", `{"file_path":"/repo/a.go","old_string":"x","new_string":"y"}`), trailResult("msg_3", "msg_2", "ok"),
		trailCall("msg_4", "Bash", `{"command":"go test ./..."}`), trailResult("msg_5", "msg_4", "--- FAIL: TestA (0.01s)\nexit status 1"),
	}}
	s1, err := summarize.Extractive{}.Summarize(t.Context(), round1)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"- edited: /repo/a.go — msg_2\n", "- ran: go test ./... — exit 1, msg_4\n", "- test failed: TestA — msg_5\n"} {
		if !strings.Contains(s1, want) {
			t.Errorf("round 1 lacks %q:\n%s", want, s1)
		}
	}
	round2 := compaction.SummaryInput{Round: 2, ID: "sum_2_1", MaxTokens: 800, Count: trailCount, Previous: s1, Messages: []chat.Message{
		trailCall("msg_7", "Read", `{"file_path":"/repo/a.go"}`), trailResult("msg_8", "msg_7", "package a"),
		trailCall("msg_9", "Bash", `{"command":"go test ./..."}`), trailResult("msg_10", "msg_9", "--- PASS: TestA (0.01s)\nok"),
	}}
	s2, _ := summarize.Extractive{}.Summarize(t.Context(), round2)
	_, trail, _ := strings.Cut(s2, "## "+summarize.SecTrail)
	for _, want := range []string{"- edited: /repo/a.go — msg_2\n", "- ran: go test ./... — msg_9\n", "- test passed: TestA — msg_10\n"} {
		if !strings.Contains(trail, want) {
			t.Errorf("round 2 lacks %q:\n%s", want, trail)
		}
	}
	if strings.Count(trail, "TestA") != 1 || strings.Count(trail, "go test") != 1 || strings.Contains(trail, "read: /repo/a.go") {
		t.Errorf("round 2 repeats a line:\n%s", trail)
	}

	// Many commands over a small budget: the newest stay (dense), the
	// oldest fold into a line naming their ids, newest first.
	var many []chat.Message
	for i := range 200 {
		many = append(many, trailCall(fmt.Sprintf("msg_%d", 100+2*i), "Bash", fmt.Sprintf(`{"command":"make step%02d"}`, i)))
		many = append(many, trailResult(fmt.Sprintf("msg_%d", 101+2*i), fmt.Sprintf("msg_%d", 100+2*i), "exit code: 0"))
	}
	s3, _ := summarize.Extractive{}.Summarize(t.Context(), compaction.SummaryInput{Round: 3, ID: "sum_3_1", MaxTokens: 400, Count: trailCount, Previous: s2, Messages: many})
	_, trail, _ = strings.Cut(s3, "## "+summarize.SecTrail)
	if trailCount(trail) > 400 || !strings.Contains(trail, "\nmake step199\n") || strings.Contains(trail, "make step00") {
		t.Errorf("over budget (%d tokens) or not the newest kept:\n%s", trailCount(trail), trail)
	}
	if !strings.Contains(trail, "- folded: ") || !strings.Contains(trail, "other lines, from messages msg_") || !strings.Contains(trail, "message id sum_3_1") {
		t.Errorf("no fold line naming ids and the summary:\n%s", trail)
	}
	_, ids, _ := strings.Cut(trail, "from messages ")
	var first int
	if _, err := fmt.Sscanf(ids, "msg_%d", &first); err != nil || first < 100 {
		t.Errorf("the fold line should name the newest ids first, starts with %q", ids[:min(len(ids), 20)])
	}
}

// TestTrailReadsPlaceholders: an output pruned in an earlier round reaches
// the trail through its placeholder (its exit code and error lines), named
// by the original's id, which expands to the output itself.
func TestTrailReadsPlaceholders(t *testing.T) {
	ph := chat.Message{ID: "ph_1_3", Kind: chat.KindPlaceholder, Replaces: []string{"msg_5"}, Role: chat.RoleTool, Parts: []chat.Part{{Type: chat.PartToolResult, ToolResult: &chat.ToolResult{ToolCallID: "c4",
		Content: "[contextd pruned this output of bash (900 tokens; its exit code and first error lines follow). Call ExpandMessage with message id msg_5 to read it.]\nexit code 1\nValueError: boom"}}}}
	in := compaction.SummaryInput{Round: 2, ID: "sum_2_1", MaxTokens: 800, Count: trailCount, Messages: []chat.Message{
		{ID: "msg_4", Role: chat.RoleAssistant, Parts: []chat.Part{{Type: chat.PartToolCall, ToolCall: &chat.ToolCall{ID: "c4", Name: "bash", Arguments: `{"command":"python run.py"}`}}}},
		ph,
	}}
	s, _ := summarize.Extractive{}.Summarize(t.Context(), in)
	_, trail, _ := strings.Cut(s, "## "+summarize.SecTrail)
	for _, want := range []string{"- ran: python run.py — exit 1, msg_4\n", "- error: ValueError: boom — msg_5\n"} {
		if !strings.Contains(trail, want) {
			t.Errorf("trail lacks %q:\n%s", want, trail)
		}
	}
}

// TestTrailFillsItsBudget: when the newest line does not fit, older and
// shorter ones still do; what folds is counted and named.
func TestTrailFillsItsBudget(t *testing.T) {
	var msgs []chat.Message
	for i := range 12 {
		cmd := fmt.Sprintf("ls d%02d", i)
		if i == 11 {
			cmd = "echo" + strings.Repeat(" word", 40) // quoted up to 160 bytes: more than the budget leaves
		}
		msgs = append(msgs, chat.Message{ID: fmt.Sprintf("msg_%d", 2+i), Role: chat.RoleAssistant, Parts: []chat.Part{{Type: chat.PartToolCall,
			ToolCall: &chat.ToolCall{ID: fmt.Sprintf("c%d", i), Name: "bash", Arguments: fmt.Sprintf(`{"command":%q}`, cmd)}}}})
	}
	trail := summarize.Trail(compaction.SummaryInput{Round: 1, ID: "sum_1_1", Messages: msgs}, 100, trailCount)
	if trailCount(trail) > 100 {
		t.Errorf("over budget: %d tokens\n%s", trailCount(trail), trail)
	}
	for _, want := range []string{"\nls d10\n", "\nls d09\n", "- folded: "} {
		if !strings.Contains(trail, want) {
			t.Errorf("trail lacks %q:\n%s", want, trail)
		}
	}
	if strings.Contains(trail, "echo") || !strings.Contains(trail, "msg_13") {
		t.Errorf("the long newest line should fold, named by its id:\n%s", trail)
	}
}

// TestTrailKeepsWhatFailedAndChangedFirst: over its budget, the trail keeps
// the error lines, failing tests and file changes before the commands and
// reads, newest first within each; a command's exit status shows only when
// it is not 0; a read or an edit is left out when the command that made
// it names the file (an edit makes it a "wrote" line, kept first); a fold line written before folds were "other lines" is read.
func TestTrailKeepsWhatFailedAndChangedFirst(t *testing.T) {
	bash := func(id, cmd string) chat.Message { return trailCall(id, "bash", fmt.Sprintf(`{"command":%q}`, cmd)) }
	msgs := []chat.Message{
		bash("msg_2", "cat /repo/a.py"), trailResult("msg_3", "msg_2", "x = 1\n<returncode>0</returncode>"),
		bash("msg_4", "python /repo/a.py"), trailResult("msg_5", "msg_4", "ValueError: bad x\n<returncode>1</returncode>"),
		bash("msg_6", "sed -i s/1/2/ /repo/a.py"), trailResult("msg_7", "msg_6", "<returncode>0</returncode>"),
	}
	for i := range 30 {
		msgs = append(msgs, bash(fmt.Sprintf("msg_%d", 8+2*i), fmt.Sprintf("ls /repo/dir%02d", i)), trailResult(fmt.Sprintf("msg_%d", 9+2*i), fmt.Sprintf("msg_%d", 8+2*i), "<returncode>0</returncode>"))
	}
	prev := "[contextd summary, round 1.]\n## Trail\n- folded: 4 older lines, from messages msg_1. Call ExpandMessage with message id sum_1_1 to read what they came from.\n"
	trail := summarize.Trail(compaction.SummaryInput{Round: 2, ID: "sum_2_1", Previous: prev, Messages: msgs}, 208, trailCount)
	if n := trailCount(trail); n > 208 {
		t.Errorf("trail of %d tokens for 208", n)
	}
	for _, want := range []string{"\nValueError: bad x\n", "- wrote: sed -i s/1/2/ /repo/a.py — msg_6\n", "\nls /repo/dir29\n", "msg_1."} {
		if !strings.Contains(trail, want) {
			t.Errorf("trail lacks %q:\n%s", want, trail)
		}
	}
	if strings.Contains(trail, "ls /repo/dir00") || strings.Contains(trail, "exit 0") {
		t.Errorf("the oldest commands should fold first, exit 0 go unsaid:\n%s", trail)
	}
	all := summarize.Trail(compaction.SummaryInput{Round: 1, ID: "sum_1_1", Messages: msgs[:4]}, 1000, trailCount)
	for _, want := range []string{"- ran: cat /repo/a.py — msg_2\n", "- ran: python /repo/a.py — exit 1, msg_4\n"} {
		if !strings.Contains(all, want) {
			t.Errorf("trail lacks %q:\n%s", want, all)
		}
	}
	if strings.Contains(all, "- read: /repo/a.py") || strings.Contains(trail, "- edited: /repo/a.py") {
		t.Errorf("a read its command names is listed again:\n%s", all)
	}
}

// TestFilesCarryWhatTheTrailFolds: Files leaves out the paths the trail
// shows, so a path the previous trail showed (in a file line or a command)
// comes back in Files once this trail folds it; TestCacheAwareSaves lost
// tests/custom_pk/tests.py that way.
func TestFilesCarryWhatTheTrailFolds(t *testing.T) {
	prev := "[contextd summary, round 1.]\n## Files\n(none)\n## Trail\n- ran: python -m pytest tests/custom_pk/tests.py — exit 1, msg_3\n- edited: src/app.py — msg_5\n"
	var msgs []chat.Message
	for i := range 40 {
		msgs = append(msgs, chat.Message{ID: fmt.Sprintf("msg_%d", 10+i), Role: chat.RoleAssistant, Parts: []chat.Part{{Type: chat.PartToolCall,
			ToolCall: &chat.ToolCall{ID: fmt.Sprintf("c%d", i), Name: "bash", Arguments: fmt.Sprintf(`{"command":"ls dir%02d"}`, i)}}}})
	}
	in := compaction.SummaryInput{Round: 2, ID: "sum_2_1", MaxTokens: 800, TrailMaxTokens: 120, Count: trailCount, Previous: prev, Messages: msgs}
	out, err := summarize.Extractive{}.Summarize(t.Context(), in)
	if err != nil {
		t.Fatal(err)
	}
	prose, trail, _ := strings.Cut(out, "## "+summarize.SecTrail)
	if strings.Contains(trail, "tests/custom_pk/tests.py") {
		t.Fatalf("the old command line should have folded:\n%s", trail)
	}
	if !strings.Contains(prose, "- tests/custom_pk/tests.py\n") {
		t.Errorf("Files lost a path the previous trail showed:\n%s", out)
	}
	// An LLM's summary the same: its pinned Files carry the path (they did
	// not: files 96 % in view at 8k on the corpus with the fake LLM, 100 %
	// with the extractive summary).
	llm := summarize.PinFacts("## Current state\nworking", in)
	prose, trail, _ = strings.Cut(llm, "## "+summarize.SecTrail)
	if strings.Contains(trail, "tests/custom_pk/tests.py") || !strings.Contains(prose, "- tests/custom_pk/tests.py") {
		t.Errorf("an LLM summary's Files lost a path the previous trail showed:\n%s", llm)
	}
}

// TestTrailURLsDoNotCrowdOutChanges: a page of links fetched late (an
// adversarial or merely long output: hundreds of URLs) folds before the
// files the agent edited and the errors it saw, which no command rebuilds.
func TestTrailURLsDoNotCrowdOutChanges(t *testing.T) {
	var links strings.Builder
	for i := range 300 {
		fmt.Fprintf(&links, "<a href=\"https://example.com/page/%03d\">%d</a>\n", i, i)
	}
	msgs := []chat.Message{
		{ID: "msg_2", Role: chat.RoleAssistant, Parts: []chat.Part{{Type: chat.PartToolCall, ToolCall: &chat.ToolCall{ID: "c1", Name: "Edit",
			Arguments: `{"file_path":"/repo/src/parser.go","old_string":"x","new_string":"y"}`}}}},
		{ID: "msg_3", Role: chat.RoleTool, Parts: []chat.Part{{Type: chat.PartToolResult, ToolResult: &chat.ToolResult{ToolCallID: "c1", Content: "ok"}}}},
		{ID: "msg_4", Role: chat.RoleAssistant, Parts: []chat.Part{{Type: chat.PartToolCall, ToolCall: &chat.ToolCall{ID: "c2", Name: "bash", Arguments: `{"command":"go build ./..."}`}}}},
		{ID: "msg_5", Role: chat.RoleTool, Parts: []chat.Part{{Type: chat.PartToolResult, ToolResult: &chat.ToolResult{ToolCallID: "c2", Content: "panic: runtime error: index out of range [3]\nexit status 2"}}}},
		{ID: "msg_6", Role: chat.RoleAssistant, Parts: []chat.Part{{Type: chat.PartToolCall, ToolCall: &chat.ToolCall{ID: "c3", Name: "WebFetch", Arguments: `{"url":"https://example.com/"}`}}}},
		{ID: "msg_7", Role: chat.RoleTool, Parts: []chat.Part{{Type: chat.PartToolResult, ToolResult: &chat.ToolResult{ToolCallID: "c3", Content: links.String()}}}},
	}
	in := compaction.SummaryInput{Round: 1, ID: "sum_1_1", MaxTokens: 800, TrailMaxTokens: 600, Count: trailCount, Messages: msgs}
	out, err := summarize.Extractive{}.Summarize(t.Context(), in)
	if err != nil {
		t.Fatal(err)
	}
	_, trail, _ := strings.Cut(out, "## "+summarize.SecTrail)
	for _, want := range []string{"edited: /repo/src/parser.go", "panic: runtime error: index out of range [3]"} {
		if !strings.Contains(trail, want) {
			t.Errorf("the trail lost %q to a page of links:\n%s", want, trail)
		}
	}
	if !strings.Contains(trail, "https://example.com/page/299") {
		t.Errorf("the newest links should still fill what is left:\n%s", trail)
	}
}

// TestTrailGroupsLinesOfOneOutput: the tests one output names with one
// result, and the files of one patch, share a line (their texts separated
// by ", ", each verbatim); a chained summary splits the line again and
// merges each: a test that fails later leaves its group for a line of its
// own.
func TestTrailGroupsLinesOfOneOutput(t *testing.T) {
	run := "tests/test_a.py::test_one PASSED\ntests/test_a.py::test_two PASSED\ntests/test_a.py::test_three PASSED\n"
	round1 := compaction.SummaryInput{Round: 1, ID: "sum_1_1", MaxTokens: 800, Count: trailCount, Messages: []chat.Message{
		trailCall("msg_2", "Bash", `{"command":"python -m pytest -v tests/test_a.py"}`), trailResult("msg_3", "msg_2", run),
		trailCall("msg_4", "apply_patch", `{"input":"*** Begin Patch\n*** Update File: src/a.py\n@@\n-x\n+y\n*** Update File: src/b.py\n@@\n-x\n+y\n*** End Patch"}`), trailResult("msg_5", "msg_4", "Done"),
	}}
	s1, err := summarize.Extractive{}.Summarize(t.Context(), round1)
	if err != nil {
		t.Fatal(err)
	}
	_, trail, _ := strings.Cut(s1, "## "+summarize.SecTrail)
	for _, want := range []string{
		"- test passed: tests/test_a.py::test_one, tests/test_a.py::test_two, tests/test_a.py::test_three — msg_3\n",
		"- edited: src/a.py, src/b.py — msg_4\n",
	} {
		if !strings.Contains(trail, want) {
			t.Errorf("round 1 lacks %q:\n%s", want, trail)
		}
	}
	round2 := compaction.SummaryInput{Round: 2, ID: "sum_2_1", MaxTokens: 800, Count: trailCount, Previous: s1, Messages: []chat.Message{
		trailCall("msg_7", "Bash", `{"command":"python -m pytest -v tests/test_a.py -k two"}`), trailResult("msg_8", "msg_7", "tests/test_a.py::test_two FAILED\n"),
	}}
	s2, _ := summarize.Extractive{}.Summarize(t.Context(), round2)
	_, trail, _ = strings.Cut(s2, "## "+summarize.SecTrail)
	for _, want := range []string{
		"- test passed: tests/test_a.py::test_one, tests/test_a.py::test_three — msg_3\n",
		"- edited: src/a.py, src/b.py — msg_4\n",
		"- test failed: tests/test_a.py::test_two — msg_8\n",
	} {
		if !strings.Contains(trail, want) {
			t.Errorf("round 2 lacks %q:\n%s", want, trail)
		}
	}
	// Over a small budget, a group that does not fit whole keeps its
	// newest lines that fit: the budget holds.
	var many strings.Builder
	for i := range 20 {
		fmt.Fprintf(&many, "tests/t.py::test_%02d PASSED\n", i)
	}
	round1.Messages = []chat.Message{trailCall("msg_2", "Bash", `{"command":"pytest -v"}`), trailResult("msg_3", "msg_2", many.String())}
	small := summarize.Trail(round1, 130, trailCount)
	if trailCount(small) > 130 || !strings.Contains(small, "test_19") || strings.Contains(small, "test_00") {
		t.Errorf("over budget (%d tokens), or not the newest of the group kept:\n%s", trailCount(small), small)
	}
}

// TestTrailWroteIsTheCommandsOwn: a command's line says it wrote a file
// only when that command's own call changed it; an editor's call in the same
// message that changed the file the command read keeps its own line.
func TestTrailWroteIsTheCommandsOwn(t *testing.T) {
	msgs := []chat.Message{{ID: "msg_2", Role: chat.RoleAssistant, Parts: []chat.Part{
		{Type: chat.PartToolCall, ToolCall: &chat.ToolCall{ID: "c1", Name: "Bash", Arguments: `{"command":"cat /repo/a.py"}`}},
		{Type: chat.PartToolCall, ToolCall: &chat.ToolCall{ID: "c2", Name: "Edit", Arguments: `{"file_path":"/repo/a.py","old_string":"x","new_string":"y"}`}},
	}}, {ID: "msg_3", Role: chat.RoleAssistant, Parts: []chat.Part{
		{Type: chat.PartToolCall, ToolCall: &chat.ToolCall{ID: "c3", Name: "Bash", Arguments: `{"command":"touch /repo/b.py"}`}},
	}}}
	trail := summarize.Trail(compaction.SummaryInput{Round: 1, ID: "sum_1_1", Messages: msgs}, 1000, trailCount)
	for _, want := range []string{"- ran: cat /repo/a.py — msg_2\n", "- edited: /repo/a.py — msg_2\n", "- wrote: touch /repo/b.py — msg_3\n"} {
		if !strings.Contains(trail, want) {
			t.Errorf("trail lacks %q:\n%s", want, trail)
		}
	}
}

// TestTrailFoldLineLeavesRoomToLines: what the fold line does not take of
// its quarter goes to lines: the commands of one message fold behind one
// id, a short fold line, and the trail fills its budget (it kept three
// quarters before), never more.
func TestTrailFoldLineLeavesRoomToLines(t *testing.T) {
	var cmds strings.Builder
	for i := range 80 {
		fmt.Fprintf(&cmds, "```bash\nls -la /repo/some/longer/directory/dir%03d\n```\n", i)
	}
	msgs := []chat.Message{{ID: "msg_2", Role: chat.RoleAssistant, Parts: []chat.Part{{Type: chat.PartText, Text: cmds.String()}}}}
	const budget = 400
	trail := summarize.Trail(compaction.SummaryInput{Round: 1, ID: "sum_1_1", Messages: msgs}, budget, trailCount)
	if n := trailCount(trail); n > budget || n < budget*7/8 {
		t.Errorf("trail of %d tokens for a budget of %d: want it filled, within it\n%s", n, budget, trail)
	}
	if !strings.Contains(trail, "- folded: ") || !strings.Contains(trail, "\nls -la /repo/some/longer/directory/dir079\n") {
		t.Errorf("want the newest kept and the rest folded:\n%s", trail)
	}
}

// TestTrailLineHoldingTheSeparator: a file whose path holds ", " (a
// Windows folder "Docs, 2024") has a line of its own, and a chained
// summary reads it back as one path, not as two files: a later edit of it
// replaces its line, and the previous trail's files are that path.
func TestTrailLineHoldingTheSeparator(t *testing.T) {
	edit := func(id, path string) chat.Message {
		return chat.Message{ID: id, Role: chat.RoleAssistant, Parts: []chat.Part{{Type: chat.PartToolCall, ToolCall: &chat.ToolCall{
			ID: "c" + id, Name: "Edit", Arguments: fmt.Sprintf(`{"file_path":%q,"old_string":"x","new_string":"y"}`, path)}}}}
	}
	const odd = `C:\Users\ann\Docs, 2024\notes.txt`
	round1 := compaction.SummaryInput{Round: 1, ID: "sum_1_1", MaxTokens: 800, Count: trailCount, Messages: []chat.Message{
		edit("msg_2", odd), edit("msg_3", "src/a.py"), edit("msg_4", `"quoted".txt`)}}
	s1, err := summarize.Extractive{}.Summarize(t.Context(), round1)
	if err != nil {
		t.Fatal(err)
	}
	round2 := compaction.SummaryInput{Round: 2, ID: "sum_2_1", MaxTokens: 800, Count: trailCount, Previous: s1, Messages: []chat.Message{edit("msg_9", odd)}}
	s2, _ := summarize.Extractive{}.Summarize(t.Context(), round2)
	_, trail, _ := strings.Cut(s2, "## "+summarize.SecTrail)
	if n := strings.Count(trail, "Docs, 2024"); n != 1 || !strings.Contains(trail, odd) || !strings.Contains(trail, "msg_9") || strings.Contains(trail, "msg_2") {
		t.Errorf("want the path once, from msg_9:\n%s", trail)
	}
	if !strings.Contains(trail, `"quoted".txt`) {
		t.Errorf("a path with quotes lost them:\n%s", trail)
	}
	if strings.Contains(s2, "- 2024") || strings.Contains(s2, `- C:\Users\ann\Docs`+"\n") {
		t.Errorf("a piece of the path is listed as a file:\n%s", s2)
	}
}

// TestTrailWithinItsBudget: whatever the lines, the budget and how text is
// counted (a count of a whole may exceed the sum of its lines'), the trail,
// and the trail of a summary that chains it, take at most their budget
// (its budget can be all the request has left, trailRoom). The fold line's
// ", from messages" and a header with a fold line over three quarters of a
// small budget made it overrun (1,290 bytes for 1,284; 321 for 290).
func TestTrailWithinItsBudget(t *testing.T) {
	counts := []struct {
		name  string
		count func(string) int
	}{
		{"len4", func(s string) int { return len(s) / 4 }},
		{"words", func(s string) int { return len(strings.Fields(s)) }},
		{"ceil", func(s string) int { return (len(s) + 3) / 4 }},
		{"bytes", func(s string) int { return len(s) }},
	}
	r := rand.New(rand.NewSource(1))
	bad := 0
	for iter := range 40 {
		var msgs []chat.Message
		n := 1 + r.Intn(40)
		for i := range n {
			id := fmt.Sprintf("msg_%d", 2*i+2)
			var out strings.Builder
			k := r.Intn(30)
			for j := range k {
				v := "PASSED"
				if r.Intn(5) == 0 {
					v = "FAILED"
				}
				fmt.Fprintf(&out, "tests/test_%d.py::test_%d_%s %s\n", i, j, strings.Repeat("x", r.Intn(20)), v)
			}
			if r.Intn(3) == 0 {
				fmt.Fprintf(&out, "ValueError: bad %d\nhttps://example.com/%d\n", i, i)
			}
			cmd := fmt.Sprintf("pytest -v tests/test_%d.py && sed -i s/a/b/ src/f%d.py", i, i)
			msgs = append(msgs,
				chat.Message{ID: id, Role: chat.RoleAssistant, Parts: []chat.Part{{Type: chat.PartToolCall, ToolCall: &chat.ToolCall{ID: "c" + id, Name: "Bash", Arguments: fmt.Sprintf(`{"command":%q}`, cmd)}}}},
				chat.Message{ID: fmt.Sprintf("msg_%d", 2*i+3), Role: chat.RoleTool, Parts: []chat.Part{{Type: chat.PartToolResult, ToolResult: &chat.ToolResult{ToolCallID: "c" + id, Content: out.String()}}}})
		}
		for _, c := range counts {
			name, count := c.name, c.count
			budget := r.Intn(1500)
			in := compaction.SummaryInput{Round: 1, ID: "sum_1_1", Messages: msgs}
			tr := summarize.Trail(in, budget, count)
			if count(tr) > budget {
				bad++
				if bad < 6 {
					t.Errorf("iter %d %s: %d > %d\n%s", iter, name, count(tr), budget, tr)
				}
			}
			in2 := compaction.SummaryInput{Round: 2, ID: "sum_2_1", Previous: "[x]\n" + tr, Messages: msgs[len(msgs)/2:]}
			tr2 := summarize.Trail(in2, budget, count)
			if count(tr2) > budget {
				bad++
				if bad < 6 {
					t.Errorf("chained iter %d %s: %d > %d\n%s", iter, name, count(tr2), budget, tr2)
				}
			}
		}
	}
}

// TestTrailCountsALongTrailOnce: a trail that folds nothing but is too
// long to be all whole is rendered and counted whole once (the trail it
// returns): not first as the all-whole candidate too (the sum of its
// groups' counts already says that one is over 1/8 of the budget), nor
// twice when it fits. Before, 4 times.
func TestTrailCountsALongTrailOnce(t *testing.T) {
	var msgs []chat.Message
	for i := range 40 {
		msgs = append(msgs, trailCall(fmt.Sprintf("msg_%d", i+1), "Bash", fmt.Sprintf(`{"command":"go test ./pkg/module%d/... -run TestSomething"}`, i)))
	}
	wholes := 0
	count := func(s string) int {
		if strings.HasPrefix(s, "\n## Trail\n") && strings.Contains(s, "- ran") {
			wholes++
		}
		return trailCount(s)
	}
	trail := summarize.Trail(compaction.SummaryInput{Round: 1, ID: "sum_1_1", Messages: msgs}, 4000, count)
	if !strings.Contains(trail, "module39") || strings.Contains(trail, "folded") {
		t.Fatalf("want every line shown, none folded:\n%s", trail)
	}
	if wholes != 1 {
		t.Errorf("the whole trail was counted %d times, want once", wholes)
	}
}
