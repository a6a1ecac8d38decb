package summarize

import (
	"regexp"
	"slices"
	"strings"

	"github.com/contextd/contextd/internal/chat"
	"github.com/contextd/contextd/internal/compaction"
)

// SecFiles lists the file paths the assistant itself wrote, in its text and
// its tool-call arguments, most recently mentioned first: the files the
// agent read, changed or talked about. What tools (or an agent harness, as
// user messages) printed is left out: a listing or a grep names many files
// nobody acted on; the original task and the latest request stay verbatim.
// A bare file name is left out when a listed path ends with it.
const SecFiles = "Files"

// legacyFilesPrefix started the Completed work bullet that listed files in
// summaries written before SecFiles; such a summary's files carry over.
const legacyFilesPrefix = "files touched: "

// Bounds of the files section: it takes at most half of the summary's
// token cap (beside the other sections' quarter, proseCap: a quarter here
// lost paths the assistant wrote, TestCacheAwareSaves' fact retention) and
// never more than maxFilesTokens (a hand-off has no cap of its own), and
// lists at most maxFiles paths.
const (
	maxFilesTokens = 2000
	maxFiles       = 400
)

// filesBudget is the tokens the files section of a summary capped at
// maxTokens may take.
func filesBudget(maxTokens int) int { return min(maxTokens/2, maxFilesTokens) }

// recentPaths returns the paths written in msgs (see SecFiles), then
// those of previous (carried over from an earlier round, already most
// recent first), deduplicated, most recently mentioned first, less a bare
// file name a listed path ends with. Work is linear in the text of msgs.
func recentPaths(msgs []chat.Message, previous []string) []string {
	last := map[string]int{} // path → index of the message that last wrote it
	var order []string
	note := func(text string, i int) {
		if strings.Contains(text, "://") {
			text = urlRe.ReplaceAllString(text, " ") // a URL's path is no file's
		}
		for _, p := range pathRe.FindAllString(text, -1) {
			if _, seen := last[p]; !seen {
				order = append(order, p)
			}
			last[p] = i
		}
	}
	for i := range msgs {
		m := &msgs[i]
		if m.Role != chat.RoleAssistant {
			continue
		}
		for _, part := range m.Parts {
			switch part.Type {
			case chat.PartText:
				note(part.Text, i)
			case chat.PartToolCall:
				note(part.ToolCall.Arguments, i)
			}
		}
	}
	// Most recent first: by last mention, ties in order of appearance.
	recent := make([]string, 0, len(order))
	byIndex := map[int][]string{}
	for _, p := range order {
		byIndex[last[p]] = append(byIndex[last[p]], p)
	}
	for i := len(msgs) - 1; i >= 0; i-- {
		recent = append(recent, byIndex[i]...)
	}
	for _, p := range previous {
		if _, seen := last[p]; !seen && p != "" {
			last[p] = -1
			recent = append(recent, p)
		}
	}
	dirs := map[string]bool{} // base names of the listed paths with a directory
	for _, p := range recent {
		if i := strings.LastIndexByte(p, '/'); i >= 0 {
			dirs[p[i+1:]] = true
		}
	}
	return slices.DeleteFunc(recent, func(p string) bool { return !strings.Contains(p, "/") && dirs[p] })
}

// fitPaths cuts recent (recentPaths) to the token budget (count measures
// one "- path" line) and maxFiles paths: those kept, and those the budget
// left out (the extractive summary folds them: listfold.go). It counts
// only while it can still keep a path.
func fitPaths(recent []string, budget int, count func(string) int) (kept, left []string) {
	used := 0
	for i, p := range recent {
		if i == maxFiles {
			return recent[:i:i], recent[i:]
		}
		if used += count("- " + p + "\n"); used > budget {
			return recent[:i:i], recent[i:]
		}
	}
	return recent, nil
}

// urlRe matches a URL, which pathRe would read a path out of (without its
// scheme and host's leading slash).
var urlRe = regexp.MustCompile(`[A-Za-z][A-Za-z0-9+.-]*://[^\s<>"'` + "`" + `)\]}]+`)

// previousFiles reads the files a previous summary carried: its SecFiles
// section less its fold line (returned too), and the legacy Completed work
// bullet.
func previousFiles(sections map[string][]string) ([]string, listFold) {
	out, fold := splitListFold(sections[SecFiles])
	for _, item := range sections[SecDone] {
		if rest, ok := strings.CutPrefix(item, legacyFilesPrefix); ok {
			out = append(out, strings.Split(rest, ", ")...)
		}
	}
	return out, fold
}

// dropLegacyFiles removes the legacy files bullet from a Completed work list.
func dropLegacyFiles(items []string) []string {
	out := items[:0:0]
	for _, it := range items {
		if !strings.HasPrefix(it, legacyFilesPrefix) {
			out = append(out, it)
		}
	}
	return out
}

func countOrEstimate(in compaction.SummaryInput) func(string) int {
	if in.Count != nil {
		return in.Count
	}
	return func(s string) int { return len(s) / 4 }
}

// holdsPath reports whether text holds path as a whole path: an occurrence
// that no path character precedes and none follows (a dot ending a
// sentence may), nor an ellipsis (the path was cut there). A path inside a
// longer one ("src/a.py" in "/repo/src/a.py.bak", "a.go" in "pkg/a.go") is
// not held: the Files section would drop a path nothing else names.
func holdsPath(text, path string) bool {
	if path == "" {
		return false
	}
	for from := 0; ; {
		i := strings.Index(text[from:], path)
		if i < 0 {
			return false
		}
		i += from
		end := i + len(path)
		before := i == 0 || !isPathByte(text[i-1])
		after := end == len(text) || !isPathByte(text[end]) && !strings.HasPrefix(text[end:], "…") ||
			text[end] == '.' && (end+1 == len(text) || !isPathByte(text[end+1]))
		if before && after {
			return true
		}
		from = i + 1
	}
}

// heldPaths returns holdsPath(text, ·) for many paths, reading text once:
// the maximal runs of path bytes in text are the whole paths it holds (a
// run an ellipsis follows is cut; a run ending in a dot holds the path
// before the dot too), so a path of path bytes is one lookup; a path with
// another byte (a space, a backslash, a letter beyond ASCII) is looked for
// in text (holdsPath). The Files section tests up to maxFiles paths against
// a trail of up to 35 % of the window (TrailShare): 400 paths over 600 KiB take 2.7 ms,
// 64 ms with holdsPath each (BenchmarkHeldPaths, one run, machine shared).
func heldPaths(text string) func(path string) bool {
	runs := map[string]bool{}
	for i := 0; i < len(text); {
		if !isPathByte(text[i]) {
			i++
			continue
		}
		j := i
		for j < len(text) && isPathByte(text[j]) {
			j++
		}
		run := text[i:j]
		if !strings.HasPrefix(text[j:], "…") {
			runs[run] = true
		}
		if len(run) > 1 && run[len(run)-1] == '.' {
			runs[run[:len(run)-1]] = true
		}
		i = j
	}
	return func(path string) bool {
		for k := 0; k < len(path); k++ {
			if !isPathByte(path[k]) {
				return holdsPath(text, path)
			}
		}
		return runs[path]
	}
}

// isPathByte reports whether b may be part of a path (pathRe's characters,
// and the home directory's ~): every byte of a character beyond ASCII
// counts (a letter of "modèle.py" holds no "le.py"; a typographic quote
// or an ellipsis next to a path makes it not held, which only lists it
// again).
func isPathByte(b byte) bool {
	return b == '/' || b == '.' || b == '-' || b == '_' || b == '~' || b >= 0x80 ||
		'0' <= b && b <= '9' || 'a' <= b && b <= 'z' || 'A' <= b && b <= 'Z'
}
