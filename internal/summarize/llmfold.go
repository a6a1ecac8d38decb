package summarize

import (
	"slices"
	"strings"
)

// carryFolds keeps, in an LLM's summary, the fold lines of the lists the
// previous summary carried (listfold.go: `- folded: 12 earlier entries, in
// sum_4_1`; an extractive summary's, or one the model copied): a model
// writes its sections anew and leaves such a line out as often as not,
// and then the count and the ids that lead to those entries were gone for
// good, where an extractive summary merges them from summary to summary. A
// line the answer's section already has (the model kept it) is not added
// again. It goes first in its section (last in Files), as the extractive
// summary places it; a section the answer lacks is added with the line
// alone (TestLLMSummaryCarriesListFolds).
func carryFolds(summary, previous string) string {
	prose, _ := withoutTrail(previous)
	prev := parseSections(prose)
	have := parseSections(summary)
	for _, s := range append(slices.Clone(listSections), SecFiles) {
		_, f := splitListFold(prev[s])
		if f.n == 0 {
			continue
		}
		if _, got := splitListFold(have[s]); got.n > 0 {
			continue
		}
		summary = withFoldLine(summary, s, "- "+f.line(), s == SecFiles)
	}
	return summary
}

// withFoldLine is summary with line first in its section sec (last when
// last is set), or in a new section sec at its end.
func withFoldLine(summary, sec, line string, last bool) string {
	heading := "## " + sec + "\n"
	i := strings.Index(summary, heading)
	if i < 0 || (i > 0 && summary[i-1] != '\n') {
		return strings.TrimRight(summary, "\n") + "\n\n" + heading + line
	}
	at := i + len(heading)
	if last {
		if end := strings.Index(summary[at:], "\n## "); end >= 0 {
			at += end + 1
		} else {
			at = len(summary)
		}
		body := strings.TrimRight(summary[:at], "\n")
		return body + "\n" + line + "\n" + strings.TrimLeft(summary[at:], "\n")
	}
	return summary[:at] + line + "\n" + summary[at:]
}
