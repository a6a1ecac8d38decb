package summarize

import (
	"slices"

	"github.com/contextd/contextd/internal/chat"
	"github.com/contextd/contextd/internal/compaction"
)

// What a trail folds is kept whole beside the summary, never sent
// (compaction.MetaTrailFolded): a chained summary reads it back
// (SummaryInput.PreviousFolded) and shows those lines again where it has
// room. A trail read back from a summary's text alone had only the count
// of what it folded, so a trail squeezed once (a large latest step left it
// little room) lost those lines for good; at 8k on the corpus, one squeeze
// folded 31 commands that every later summary only counted.

// restoreFolded returns the previous trail's lines preceded by the lines
// it folded (folded whole, one a line), and its fold count less those: the
// trail places them again, oldest first, and counts those that fold again.
func restoreFolded(folded string, prev []trailLine, count int) ([]trailLine, int) {
	if folded == "" {
		return prev, count
	}
	hidden, _, _ := parseTrail("\n## " + SecTrail + "\n" + folded)
	return append(hidden, prev...), max(0, count-len(hidden))
}

// foldedLines renders, whole and one a line, the lines of a trail that its
// text does not show (what it folded), the newest within
// compaction.MaxFoldedBytes.
func foldedLines(text string, lines []trailLine) string {
	shownLines, _, _ := parseTrail(text)
	shown := make(map[string]bool, len(shownLines))
	for _, l := range shownLines {
		shown[l.key] = true
	}
	var out []string
	size := 0
	for i := len(lines) - 1; i >= 0; i-- {
		if shown[lines[i].key] {
			continue
		}
		line := lines[i].render() + "\n"
		if size+len(line) > compaction.MaxFoldedBytes {
			break
		}
		size += len(line)
		out = append(out, line)
	}
	slices.Reverse(out)
	var b []byte
	for _, l := range out {
		b = append(b, l...)
	}
	return string(b)
}

// shownAgain returns lines less those whose command, file, test, error or
// URL the messages the view keeps verbatim show again (SummaryInput.Kept):
// the view holds them, and once those messages are summarized in turn the
// next trail reads them there. A file's change stays (its line names the
// message that made it).
func shownAgain(lines []trailLine, kept []chat.Message) []trailLine {
	if len(kept) == 0 {
		return lines
	}
	again := map[string]bool{}
	for _, l := range trailLines(kept) {
		again[l.key] = true
	}
	return slices.DeleteFunc(lines, func(l trailLine) bool { return again[l.key] && !wholeFirst(l) })
}
