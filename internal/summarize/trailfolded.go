package summarize

import (
	"slices"
	"strings"

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

// againHeading separates, in a summary's MetaTrailFolded, the lines its
// trail left out because the view showed them again (shownAgain) from
// those it folded: only the folded ones are counted by its fold line.
const againHeading = "\n## shown again\n"

// restoreFolded returns the previous trail's lines preceded by the lines
// it folded and those it left out as shown again (folded whole, one a
// line), and its fold count less the folded ones: the trail places them
// again, oldest first, and counts those that fold again.
func restoreFolded(folded string, prev []trailLine, count int) ([]trailLine, int) {
	if folded == "" {
		return prev, count
	}
	counted, again, _ := strings.Cut(folded, againHeading)
	hidden, _, _ := parseTrail("\n## " + SecTrail + "\n" + counted)
	shown, _, _ := parseTrail("\n## " + SecTrail + "\n" + again)
	restored := append(shown, hidden...)
	for i := range restored {
		restored[i].restored = true
	}
	return append(restored, prev...), max(0, count-len(hidden))
}

// foldedLines renders, whole and one a line, the lines of a trail that its
// text does not show (what it folded), the newest within
// compaction.MaxFoldedBytes, then, within what that leaves, the lines it
// left out as shown again (after againHeading); folds says it folded a
// line, whether or not the line fit in what is rendered.
func foldedLines(text string, lines, again []trailLine) (folded string, folds bool) {
	shownLines, _, _ := parseTrail(text)
	shown := make(map[string]bool, len(shownLines))
	for _, l := range shownLines {
		shown[l.key] = true
	}
	folds = slices.ContainsFunc(lines, func(l trailLine) bool { return !shown[l.key] })
	size := 0
	newest := func(lines []trailLine, limit int) []byte {
		var out []string
		for i := len(lines) - 1; i >= 0; i-- {
			if shown[lines[i].key] {
				continue
			}
			line := lines[i].render() + "\n"
			if size+len(line) > limit {
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
		return b
	}
	b := newest(lines, compaction.MaxFoldedBytes)
	if rest := newest(again, compaction.MaxFoldedBytes-len(againHeading)); len(rest) > 0 {
		b = append(append(b, againHeading...), rest...)
	}
	return string(b), folds
}

// shownAgain returns lines less those whose command, file, test, error or
// URL the messages the view keeps verbatim show again (SummaryInput.Kept):
// the view holds them, and once those messages are summarized in turn the
// next trail reads them there. A file's change stays (its line names the
// message that made it). The lines left out are returned too (again, but
// not those holding a line break, which fold anyway: foldBroken): they are
// kept beside the summary with what its trail folded (foldedLines), since
// the messages that show them may leave the view before any summary reads
// them (drop_middle drops whole turns after a summary; masking keeps only
// an output's first error lines), and the next summary then shows them
// again (TestShownAgainComesBackWhenTheViewLosesIt).
func shownAgain(lines []trailLine, kept []chat.Message) (shown, again []trailLine) {
	if len(kept) == 0 {
		return lines, nil
	}
	keys := map[string]bool{}
	for _, l := range trailLines(kept) {
		keys[l.key] = true
	}
	for _, l := range lines {
		switch {
		case !keys[l.key] || changeTag(l.tag):
			shown = append(shown, l)
		case !strings.ContainsAny(l.text, "\r\n"):
			again = append(again, l)
		}
	}
	return shown, again
}
