package summarize_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/contextd/contextd/internal/chat"
	"github.com/contextd/contextd/internal/compaction"
	"github.com/contextd/contextd/internal/summarize"
)

// TestDenseWroteKeepsItsID: in a trail that folds, a command that wrote
// files is shown dense with the id of the message that made the change
// (a file's last edit is asked with it), under its head with its exit
// status, about the cost of its text where a whole line took its tag too;
// a chained summary reads the id and the status back and shows them again.
func TestDenseWroteKeepsItsID(t *testing.T) {
	count := func(s string) int { return len(s) / 4 }
	budget := compaction.TrailBudget(compaction.Defaults(8192), 8192)
	wrote := func(i int) string {
		return fmt.Sprintf("cat > scratch_%03d.py << 'EOF'\nprint(%d)\nEOF\npython scratch_%03d.py", i, i, i)
	}
	var msgs []chat.Message
	step := func(i int, cmd, out string) {
		call := fmt.Sprintf("msg_%d", 2+2*i)
		msgs = append(msgs,
			chat.Message{ID: call, Role: chat.RoleAssistant, Parts: []chat.Part{{Type: chat.PartToolCall, ToolCall: &chat.ToolCall{ID: "c" + call, Name: "bash", Arguments: fmt.Sprintf(`{"command":%q}`, cmd)}}}},
			chat.Message{ID: fmt.Sprintf("msg_%d", 3+2*i), Role: chat.RoleTool, Parts: []chat.Part{{Type: chat.PartToolResult, ToolResult: &chat.ToolResult{ToolCallID: "c" + call, Content: out}}}},
		)
	}
	for i := range 300 {
		switch {
		case i%10 == 0:
			step(i, wrote(i), "1\n<returncode>1</returncode>")
		default:
			step(i, fmt.Sprintf("grep -n 'def f%03d' src/mod%03d.py", i, i), "1: def f():\n<returncode>0</returncode>")
		}
	}
	check := func(name, trail string) {
		t.Helper()
		if !strings.Contains(trail, "- folded: ") || count(trail) > budget {
			t.Fatalf("%s: want a trail that folds within %d tokens (%d):\n%s", name, budget, count(trail), trail)
		}
		dense := 0
		for i := 0; i < 300; i += 10 {
			head, id := fmt.Sprintf("cat > scratch_%03d.py << 'EOF'…", i), fmt.Sprintf("msg_%d", 2+2*i)
			switch {
			case strings.Contains(trail, "\n"+head+" — "+id+"\n"):
				dense++
			case strings.Contains(trail, "\n- wrote: "+head+" — exit 1, "+id+"\n"): // the newest, whole (wholeShare)
			case strings.Contains(trail, head):
				t.Errorf("%s: %q shown without the id of its message, %s:\n%s", name, head, id, trail)
			}
		}
		if dense < 10 || !strings.Contains(trail, "- wrote, exit 1, earlier (behind ") {
			t.Errorf("%s: %d of 30 commands that wrote files shown dense with their ids, want 10 or more under a head with their exit status:\n%s", name, dense, trail)
		}
	}
	first := summarize.Trail(compaction.SummaryInput{Round: 1, ID: "sum_1_1", Messages: msgs}, budget, count)
	check("first", first)
	if _, dense, _ := summarize.TrailShape("[x]\n" + first); dense == 0 {
		t.Errorf("TrailShape counts no dense line")
	}
	// Chained, with one more command: the ids and statuses read back.
	msgs = nil
	step(400, "ls", "a\n<returncode>0</returncode>")
	check("chained", summarize.Trail(compaction.SummaryInput{Round: 2, ID: "sum_2_1", Previous: "[x]\n" + first, Messages: msgs}, budget, count))
}

// TestDenseWroteWithoutIDs: messages without ids (a hand-off, a summary
// input of unstored messages) name "this summary": a command that wrote
// files is then shown dense by its text alone, never with a word of that
// phrase after it that a chained summary would read back as its text.
func TestDenseWroteWithoutIDs(t *testing.T) {
	count := func(s string) int { return len(s) / 4 }
	var msgs []chat.Message
	for i := range 300 {
		cmd := fmt.Sprintf("grep -n 'def f%03d' src/mod%03d.py", i, i)
		if i%10 == 0 {
			cmd = fmt.Sprintf("cat > scratch_%03d.py << 'EOF'\nprint(1)\nEOF", i)
		}
		msgs = append(msgs,
			chat.Message{Role: chat.RoleAssistant, Parts: []chat.Part{{Type: chat.PartToolCall, ToolCall: &chat.ToolCall{ID: fmt.Sprint("c", i), Name: "bash", Arguments: fmt.Sprintf(`{"command":%q}`, cmd)}}}},
			chat.Message{Role: chat.RoleTool, Parts: []chat.Part{{Type: chat.PartToolResult, ToolResult: &chat.ToolResult{ToolCallID: fmt.Sprint("c", i), Content: "ok"}}}},
		)
	}
	trail := summarize.Trail(compaction.SummaryInput{Round: 1, ID: "sum_1_1", Messages: msgs}, 600, count)
	if !strings.Contains(trail, "- wrote, earlier (behind sum_1_1):\ncat > scratch_") || strings.Contains(trail, "… — summary") {
		t.Errorf("want the commands that wrote files dense by their texts alone:\n%s", trail)
	}
}

// TestChangeStaysWhenTheViewShowsItAgain: a command that wrote files, run
// again in the messages the view keeps, stays on the trail with the id of
// the message that made the change, as a file's edit does: shownAgain
// asked wholeFirst whether a line was a change, and a command that wrote
// files was no longer shown whole first (denseTextOf).
func TestChangeStaysWhenTheViewShowsItAgain(t *testing.T) {
	write := `{"command":"cat > fix.py << 'EOF'\nprint(1)\nEOF"}`
	msgs := []chat.Message{
		trailCall("msg_2", "Bash", write), trailResult("msg_3", "msg_2", "ok"),
		trailCall("msg_4", "Edit", `{"file_path":"/repo/a.py","old_string":"x","new_string":"y"}`), trailResult("msg_5", "msg_4", "ok"),
	}
	kept := []chat.Message{
		trailCall("msg_8", "Bash", write), trailResult("msg_9", "msg_8", "ok"),
		trailCall("msg_10", "Edit", `{"file_path":"/repo/a.py","old_string":"y","new_string":"z"}`), trailResult("msg_11", "msg_10", "ok"),
	}
	in := compaction.SummaryInput{Round: 1, ID: "sum_1_1", MaxTokens: 800, TrailMaxTokens: 2000, Count: trailCount, Messages: msgs, Kept: kept}
	got := summarize.MeasureTrail(in).Text
	for _, stays := range []string{"cat > fix.py << 'EOF'… — msg_2", "/repo/a.py — msg_4"} {
		if !strings.Contains(got, stays) {
			t.Errorf("the trail lacks %q:\n%s", stays, got)
		}
	}
}
