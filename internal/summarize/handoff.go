package summarize

import (
	"fmt"
	"strings"

	"github.com/contextd/contextd/internal/chat"
	"github.com/contextd/contextd/internal/compaction"
)

// Handoff writes a hand-off document of a conversation for a fresh session
// (or a human): CURRENT, DONE, IN_PROGRESS, NEXT, FILES and ISSUES, plus the
// original task verbatim. It is extractive and deterministic, and reuses what
// earlier summaries in the view recorded. session is the id of the session
// it is written from, which its fold lines name (handoffList; "" names
// none).
func Handoff(view []chat.Message, session string) string {
	task, latest := "", ""
	var summaries []string
	var rest []chat.Message
	// The latest request is one a person wrote: not a framework's
	// observation sent as user text (mini-swe-agent's <returncode>), as
	// PinFacts keeps it.
	human := chat.HumanAuthoredIn(view)
	for i := range view {
		m := &view[i]
		if m.Kind == chat.KindSummary {
			summaries = append(summaries, textOf(m))
			continue
		}
		if m.Role == chat.RoleUser && m.Kind == chat.KindNormal && toolResult(m) == nil {
			if task == "" {
				task = textOf(m)
			}
			if human[i] {
				latest = textOf(m)
			}
		}
		rest = append(rest, *m)
	}
	prev := ""
	if len(summaries) > 0 {
		prev = summaries[len(summaries)-1]
	}
	sum := extract(compaction.SummaryInput{
		Round: 1, OriginalTask: task, Previous: prev, Messages: rest, MaxTokens: 1 << 30}, true, "")
	sec := parseSections(sum)

	inProgress := ""
	for i := len(rest) - 1; i >= 0; i-- {
		if rest[i].Role == chat.RoleAssistant {
			inProgress = textOf(&rest[i])
			for _, p := range rest[i].Parts {
				if p.Type == chat.PartToolCall {
					inProgress = strings.TrimSpace(inProgress + "\n" + describeCall(p.ToolCall.Name, p.ToolCall.Arguments))
				}
			}
			break
		}
	}
	files := handoffList(sec[SecFiles], 0, true, session)
	done := handoffList(dropLegacyFiles(sec[SecDone]), 30, false, session)

	var b strings.Builder
	b.WriteString("# Hand-off\n\nThis document carries a conversation over to a fresh context.\n")
	writeSection(&b, "ORIGINAL TASK", []string{task}, false)
	writeSection(&b, "CURRENT", []string{clip("Latest request: "+latest, 2000)}, false)
	writeSection(&b, "DONE", done, true)
	writeSection(&b, "IN_PROGRESS", []string{clip(inProgress, 1500)}, false)
	writeSection(&b, "NEXT", handoffList(sec[SecPending], 0, false, session), true)
	writeSection(&b, "FILES", files, true)
	writeSection(&b, "ISSUES", handoffList(sec[SecErrors], 20, false, session), true)
	if d := sec[SecDecisions]; len(d) > 0 {
		writeSection(&b, "DECISIONS", handoffList(d, 20, false, session), true)
	}
	fmt.Fprintf(&b, "\n(%d messages in the active view when this was written.)\n", len(view))
	return b.String()
}
