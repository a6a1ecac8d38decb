// Package summarize owns the summarizers behind compaction's summarize tier:
// the Summarizer interface and the built-in extractive summarizer
// (deterministic, no LLM). LLM-backed summarizers implement the same
// interface.
package summarize

import (
	"context"
	"fmt"
	"regexp"
	"slices"
	"strings"

	"github.com/contextd/contextd/internal/chat"
	"github.com/contextd/contextd/internal/compaction"
	"github.com/contextd/contextd/internal/probes"
)

// Summarizer condenses messages into the summary text of one round.
type Summarizer interface {
	Summarize(ctx context.Context, in compaction.SummaryInput) (string, error)
}

// Section titles, in order. The LLM prompt asks for the same ones.
const (
	SecTask      = "Original task"
	SecDone      = "Completed work"
	SecDecisions = "Decisions"
	SecErrors    = "Errors and resolutions"
	SecState     = "Current state"
	SecPending   = "Pending work"
	SecFocus     = "Requested focus"
)

// taskInView is what a summary's Original task section says: every tier
// keeps the original task verbatim in the view (compaction.Validate checks
// it), so the summary does not repeat it (a task of 1,400 tokens was in
// every summary twice, and the hand-off writes its own).
const taskInView = "(the conversation's first user message, kept verbatim in the view)"

// listSections are bullet lists that accumulate across rounds.
var listSections = []string{SecDone, SecDecisions, SecErrors, SecPending}

// Extractive picks sentences and facts out of the messages without a model:
// tool calls and the file paths they touched, decisions, errors and what
// followed them, the latest state and what is still pending. It is
// deterministic and integrates the previous round's summary.
type Extractive struct{}

var (
	// pathRe: a path's letters and digits may be beyond ASCII (\w is
	// ASCII only: "es/x.py" was read out of "src/données/x.py"); a match
	// starts where its letters do, as the leftmost match does.
	pathRe     = regexp.MustCompile(`(?:~/|/)?(?:[\p{L}\p{N}_.-]+/)+[\p{L}\p{N}_.-]+\.[A-Za-z]{1,8}\b|[\p{L}\p{N}_-]+\.(?:py|go|js|ts|tsx|jsx|rs|java|c|h|cc|cpp|hpp|rb|php|md|rst|txt|json|yaml|yml|toml|cfg|ini|sh|sql|html|css|proto)\b`)
	decisionRe = regexp.MustCompile(`(?i)\b(i'll|i will|let me|let's|decided|decide|instead|the fix|the issue is|the problem is|root cause|we should|i should|approach)\b`)
	errorRe    = regexp.MustCompile(`(?i)(error|exception|traceback|failed|failure|not found|cannot|can't)`)
	pendingRe  = regexp.MustCompile(`(?i)\b(next|todo|remaining|still need|need to|then i|afterwards|finally)\b`)
	fenceRe    = regexp.MustCompile("(?s)```[a-zA-Z]*\\n(.*?)```")
)

// Summarize implements Summarizer. The tool calls and commands of the
// summarized messages are in the summary's trail (SecTrail), with their
// exit status and the message id to expand, not in Completed work, which
// keeps only what earlier summaries put there.
// Files lists only the paths the trail does not name (it names each file
// touched, with its last action and message id).
func (x Extractive) Summarize(_ context.Context, in compaction.SummaryInput) (string, error) {
	trail := trailOf(in)
	return withTrail(extract(in, false, trail), trail), nil
}

// extract writes the extractive summary of in without its trail; calls
// says whether Completed work lists the tool calls and commands (the
// hand-off's DONE does). Files leaves out the paths trail holds.
func extract(in compaction.SummaryInput, calls bool, trail string) string {
	in = boundInput(in)
	prev := parseSections(in.Previous)
	lists := map[string][]string{}
	folds := map[string]listFold{} // what each list left out (listfold.go)
	for _, s := range listSections {
		lists[s], folds[s] = splitListFold(prev[s])
	}
	lists[SecDone] = dropLegacyFiles(lists[SecDone])
	count := countOrEstimate(in)
	// The previous summary's files: its Files section, then the files its
	// trail named (newest first), which this trail may have folded.
	// Files is carried too: what its budget leaves out folds, its fold
	// line last (the oldest paths go), within the budget (listfold.go).
	carried, fold := previousFiles(prev)
	folds[SecFiles] = fold
	recent := recentPaths(in.Messages, append(carried, trailFiles(in.Previous)...))
	fileList, leftFiles := fitPaths(recent, filesBudget(in.MaxTokens), count)
	if len(leftFiles) > 0 {
		reserve := count("- " + folds[SecFiles].add(maxFiles*maxFiles, in.ID).line() + "\n")
		fileList, leftFiles = fitPaths(recent, filesBudget(in.MaxTokens)-reserve, count)
	}
	if trail != "" {
		held := heldPaths(trail)
		fileList = slices.DeleteFunc(fileList, held)
		leftFiles = slices.DeleteFunc(leftFiles, held) // the trail holds them
	}
	folds[SecFiles] = folds[SecFiles].add(len(leftFiles), in.ID)
	var state string
	for i := range in.Messages {
		m := &in.Messages[i]
		switch m.Role {
		case chat.RoleAssistant:
			text := textOf(m)
			if d := firstMatch(text, decisionRe); d != "" {
				lists[SecDecisions] = append(lists[SecDecisions], d)
			}
			for _, part := range m.Parts {
				if part.Type == chat.PartToolCall && calls {
					lists[SecDone] = append(lists[SecDone], describeCall(part.ToolCall.Name, part.ToolCall.Arguments))
				}
			}
			for _, block := range fenceRe.FindAllStringSubmatch(text, -1) {
				if calls {
					lists[SecDone] = append(lists[SecDone], describeCall("ran", block[1]))
				}
			}
			if text != "" {
				state = text
			}
		case chat.RoleTool, chat.RoleUser:
			content := textOf(m)
			isErr := false
			if tr := toolResult(m); tr != nil {
				isErr = tr.IsError
			}
			if line := firstLineMatching(content, errorRe); isErr || line != "" {
				if line == "" {
					line = firstLine(content)
				}
				res := ""
				if next := nextAssistantText(in.Messages[i+1:]); next != "" {
					res = " → " + clip(firstSentence(next), 160)
				}
				lists[SecErrors] = append(lists[SecErrors], clip(line, 200)+res)
			}
		}
	}
	if p := lastPending(in.Messages); p != "" {
		lists[SecPending] = append(lists[SecPending], p)
	}
	if state == "" {
		state = strings.Join(prev[SecState], "\n")
	}
	var focus []string
	if in.Instructions != "" {
		focus = append(focus, "instructions: "+clip(in.Instructions, 300))
		focus = append(focus, matchingLines(in.Messages, in.Instructions)...)
	}

	for _, s := range listSections {
		lists[s] = dedupe(quoteFoldLike(lists[s]))
	}
	doc := func(stateChars int) string {
		var b strings.Builder
		b.WriteString(compaction.SummaryHeader(in.Round, in.ID, in.Expand))
		writeSection(&b, SecTask, []string{taskInView}, false)
		// A section with nothing in it is left out (its "(none)" was
		// re-sent in every request until the next compaction).
		writeListed(&b, SecDone, withFold(folds[SecDone], lists[SecDone]), true) // the trail lists this round's calls
		writeListed(&b, SecDecisions, withFold(folds[SecDecisions], lists[SecDecisions]), true)
		writeListed(&b, SecErrors, withFold(folds[SecErrors], lists[SecErrors]), true)
		writeListed(&b, SecState, []string{clip(state, stateChars)}, false)
		writeListed(&b, SecPending, withFold(folds[SecPending], lists[SecPending]), true)
		writeListed(&b, SecFocus, focus, true)
		writeListed(&b, SecFiles, foldLast(folds[SecFiles], fileList), true)
		return b.String()
	}
	stateChars := 600
	out := doc(stateChars)
	// Cap: drop the oldest bullets of the longest list first, then shorten
	// the text sections; the files have their own budget (filesBudget).
	// What a list drops is folded into its fold line, never left out
	// silently (listfold.go).
	files := 0
	if list := foldLast(folds[SecFiles], fileList); len(list) > 0 {
		var b strings.Builder
		writeListed(&b, SecFiles, list, true)
		files = count(b.String())
	}
trim:
	for count(out)-files > proseCap(in.MaxTokens) {
		longest := ""
		for _, s := range listSections {
			if len(lists[s]) > len(lists[longest]) {
				longest = s
			}
		}
		switch {
		case longest != "" && len(lists[longest]) > 1:
			lists[longest] = lists[longest][1:]
			folds[longest] = folds[longest].add(1, in.ID)
		case len(focus) > 1:
			focus = focus[:len(focus)-1]
		case stateChars > 100:
			stateChars /= 2
		case longest != "" && len(lists[longest]) == 1:
			lists[longest] = nil
			folds[longest] = folds[longest].add(1, in.ID)
		default:
			break trim // nothing left to cut
		}
		out = doc(stateChars)
	}
	// The prose's floor (its headings, one line of focus, a short state)
	// and Files at their own half can be more than a small cap (one that
	// gave way to the trail, compaction's trailAndCap, down to 200 tokens of
	// the default 800): the oldest files go, so that the summary takes no
	// more than the planner left it (TestSummaryOvershootIsBounded).
	for len(fileList) > 0 && count(out) > in.MaxTokens {
		fileList = fileList[:len(fileList)-1]
		folds[SecFiles] = folds[SecFiles].add(1, in.ID)
		out = doc(stateChars)
	}
	// The fold lines are part of that floor (one a list): where they take
	// the summary over its cap, each names only its newest id, whose
	// originals hold the previous summary, whose fold line names the older
	// ones (one expand further; TestFoldLinesStayWithinCap).
	if count(out) > in.MaxTokens {
		for s, f := range folds {
			if len(f.ids) > 1 {
				folds[s] = listFold{n: f.n, ids: f.ids[:1]}
			}
		}
		out = doc(stateChars)
	}
	return out
}

func writeSection(b *strings.Builder, title string, items []string, bullets bool) {
	fmt.Fprintf(b, "\n## %s\n", title)
	if len(items) == 0 || (len(items) == 1 && strings.TrimSpace(items[0]) == "") {
		b.WriteString("(none)\n")
		return
	}
	for _, it := range items {
		if bullets {
			b.WriteString("- ")
		}
		b.WriteString(it)
		b.WriteString("\n")
	}
}

// writeListed is writeSection of a section that has something in it, and
// nothing otherwise.
func writeListed(b *strings.Builder, title string, items []string, bullets bool) {
	if len(items) > 0 && (len(items) > 1 || strings.TrimSpace(items[0]) != "") {
		writeSection(b, title, items, bullets)
	}
}

// parseSections reads a summary in the format above back into sections.
func parseSections(text string) map[string][]string {
	out := map[string][]string{}
	cur := ""
	for _, line := range strings.Split(text, "\n") {
		if t, ok := strings.CutPrefix(line, "## "); ok {
			cur = strings.TrimSpace(t)
			continue
		}
		if cur == "" || line == "" || line == "(none)" {
			continue
		}
		out[cur] = append(out[cur], strings.TrimPrefix(line, "- "))
	}
	return out
}

func textOf(m *chat.Message) string {
	var parts []string
	for _, p := range m.Parts {
		switch p.Type {
		case chat.PartText:
			parts = append(parts, p.Text)
		case chat.PartToolResult:
			parts = append(parts, p.ToolResult.Content)
		}
	}
	return strings.TrimSpace(strings.Join(parts, "\n"))
}

func toolResult(m *chat.Message) *chat.ToolResult {
	for _, p := range m.Parts {
		if p.Type == chat.PartToolResult {
			return p.ToolResult
		}
	}
	return nil
}

func describeCall(name, args string) string {
	line := firstLine(strings.TrimSpace(args))
	if unquoted := extractCommand(args); unquoted != "" {
		line = unquoted
	}
	return fmt.Sprintf("`%s`: %s", name, clip(line, 160))
}

// extractCommand pulls a "command" or "cmd" value out of JSON arguments.
func extractCommand(args string) string {
	for _, key := range []string{`"command":`, `"cmd":`} {
		i := strings.Index(args, key)
		if i < 0 {
			continue
		}
		rest := strings.TrimSpace(args[i+len(key):])
		if !strings.HasPrefix(rest, `"`) {
			continue
		}
		var b strings.Builder
		for j := 1; j < len(rest); j++ {
			c := rest[j]
			if c == '\\' && j+1 < len(rest) {
				j++
				if rest[j] == 'n' {
					b.WriteByte(' ')
				} else {
					b.WriteByte(rest[j])
				}
				continue
			}
			if c == '"' {
				break
			}
			b.WriteByte(c)
		}
		return firstLine(b.String())
	}
	return ""
}

func firstLine(s string) string {
	s, _, _ = strings.Cut(s, "\n")
	return strings.TrimSpace(s)
}

func firstLineMatching(s string, re *regexp.Regexp) string {
	for _, line := range strings.Split(s, "\n") {
		if re.MatchString(line) {
			return strings.TrimSpace(line)
		}
	}
	return ""
}

func firstSentence(s string) string {
	s = strings.TrimSpace(strings.ReplaceAll(s, "\n", " "))
	if i := sentenceEnd(s, 0); i > 0 && i < len(s) {
		return s[:i+1]
	}
	return s
}

// sentenceEnd returns the index of the first '.', '!' or '?' at or after
// from that ends a sentence: followed by a space or the end of the text.
// A dot inside a word (a file name, a module path, a version) does not end
// one. -1 when there is none.
func sentenceEnd(s string, from int) int {
	for i := from; i < len(s); i++ {
		if c := s[i]; (c == '.' || c == '!' || c == '?') && (i+1 == len(s) || s[i+1] == ' ' || s[i+1] == '\t' || s[i+1] == '\n') {
			return i
		}
	}
	return -1
}

// firstMatch returns the first sentence of text that matches re.
func firstMatch(text string, re *regexp.Regexp) string {
	for _, sent := range splitSentences(text) {
		if re.MatchString(sent) {
			return clip(sent, 200)
		}
	}
	return ""
}

func splitSentences(text string) []string {
	text = fenceRe.ReplaceAllString(text, " ")
	var out []string
	start := 0
	for i := 0; i < len(text); i++ {
		if c := text[i]; c == '\n' || ((c == '.' || c == '!' || c == '?') && sentenceEnd(text, i) == i) {
			if s := strings.TrimSpace(text[start : i+1]); len(s) > 3 {
				out = append(out, s)
			}
			start = i + 1
		}
	}
	if s := strings.TrimSpace(text[start:]); len(s) > 3 {
		out = append(out, s)
	}
	return out
}

func nextAssistantText(msgs []chat.Message) string {
	for i := range msgs {
		if msgs[i].Role == chat.RoleAssistant {
			if t := textOf(&msgs[i]); t != "" {
				return t
			}
		}
	}
	return ""
}

func lastPending(msgs []chat.Message) string {
	for i := len(msgs) - 1; i >= 0 && i >= len(msgs)-6; i-- {
		if msgs[i].Role == chat.RoleAssistant {
			if p := firstMatch(textOf(&msgs[i]), pendingRe); p != "" {
				return p
			}
		}
	}
	return ""
}

func matchingLines(msgs []chat.Message, instructions string) []string {
	var words []string
	for _, w := range strings.Fields(strings.ToLower(instructions)) {
		if w = strings.Trim(w, ".,;:!?\"'()"); len(w) >= 4 {
			words = append(words, w)
		}
	}
	var out []string
	for i := range msgs {
		for _, line := range strings.Split(textOf(&msgs[i]), "\n") {
			l := strings.ToLower(line)
			for _, w := range words {
				if strings.Contains(l, w) {
					out = append(out, clip(strings.TrimSpace(line), 200))
					break
				}
			}
			if len(out) >= 10 {
				return dedupe(out)
			}
		}
	}
	return dedupe(out)
}

// clip shortens s to at most about n bytes, marking the cut with an
// ellipsis: it cuts before a space, never inside a word, an identifier or a
// path (a first word longer than n is kept whole).
func clip(s string, n int) string {
	s = strings.TrimSpace(s)
	if len(s) <= n {
		return s
	}
	return probes.CutAtSpace(s, n) + "…"
}

func dedupe(items []string) []string {
	seen := map[string]bool{}
	out := items[:0:0]
	for _, it := range items {
		if it != "" && !seen[it] {
			seen[it] = true
			out = append(out, it)
		}
	}
	return out
}

// proseCap is the tokens the extractive summary's sections may take: a
// quarter of summary_max_tokens. Its lists accumulate across rounds
// (Decisions keeps an opening sentence of each step: "Let me check ...")
// and filled any cap, while what the agent acted on is in the trail,
// exactly; what it leaves pays for the trail. Every token of it is re-sent
// on every call until the next compaction and pushes the view after a
// compaction toward the next one (make bench-recall, extractive, the bill
// against the code before the trail: at 12k +5.4 % with half the cap, +3.1 %
// with a quarter holding Files too, +3.6 % with Files at its own half
// (filesBudget); at 16k +3.6, +2.7 and +2.8 %; an eighth emptied the
// sections for 0.7 points more at 16k; recall in view the same or higher).
// An LLM's summary keeps the whole cap.
func proseCap(maxTokens int) int { return maxTokens / 4 }
