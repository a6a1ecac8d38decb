package summarize

import (
	"slices"
	"strings"
)

// PinFacts keeps, in an LLM's summary, the fold lines of the lists the
// previous summary carried (listfold.go: `- folded: 12 earlier entries,
// in sum_4_1`; an extractive summary's, or one an earlier LLM summary
// kept so): a model writes its sections anew and leaves such a line out as
// often as not, and then the count and the ids that lead to those entries
// were gone for good, where an extractive summary merges them from summary
// to summary. A model never folds: a fold line in its answer is one it
// copied, left out (unfoldAnswer) and placed again from the previous
// summary (placeFolds, within the summary's cap: pinRoom), or
// one it wrote (read out of a tool's output, or invented), quoted as an
// entry (quotedEntry), as the extractive summary quotes a message's, so
// that no later summary reads its count or ids as a fold
// (TestLLMSummaryFoldLinesAreNotTheModels). The previous summary's line
// goes first in its section (last in Files), as the extractive summary
// places it; a section the answer lacks is added with the line alone
// (TestLLMSummaryCarriesListFolds).

// foldOf is one fold line of a summary's section.
type foldOf struct{ sec, line string }

// previousFolds is the fold lines of the lists the previous summary
// carried (prev: the sections of its prose), in section order, and their
// texts (listFold.line).
func previousFolds(prev map[string][]string) (map[string]bool, []foldOf) {
	copied := map[string]bool{}
	var folds []foldOf
	for _, s := range append(slices.Clone(listSections), SecFiles) {
		if _, f := splitListFold(prev[s]); f.n > 0 {
			copied[f.line()] = true
			folds = append(folds, foldOf{s, "- " + f.line()})
		}
	}
	return copied, folds
}

// placeFolds is summary with each fold line placed (withFoldLine).
func placeFolds(summary string, folds []foldOf) string {
	for _, f := range folds {
		summary = withFoldLine(summary, f.sec, f.line, f.sec == SecFiles)
	}
	return summary
}

// unfoldAnswer is a model's answer less the lines of its sections that
// copy one of the previous summary's fold lines (copied, by their text),
// the others that read as one (foldLike) quoted.
func unfoldAnswer(answer string, copied map[string]bool) string {
	lines := strings.Split(answer, "\n")
	out := lines[:0]
	inSection := false
	for _, line := range lines {
		if strings.HasPrefix(line, "## ") {
			inSection = true
			out = append(out, line)
			continue
		}
		item := strings.TrimPrefix(line, "- ")
		if !inSection || !foldLike(item) {
			out = append(out, line)
			continue
		}
		if _, f := splitListFold([]string{item}); f.n == 0 || !copied[f.line()] {
			out = append(out, "- "+quotedEntry+item)
		}
	}
	return strings.Join(out, "\n")
}

// sectionAt is where summary's section sec starts (its heading, at the
// start of a line), -1 when it has none.
func sectionAt(summary, sec string) int {
	heading := "## " + sec + "\n"
	for at := 0; ; {
		i := strings.Index(summary[at:], heading)
		if i < 0 {
			return -1
		}
		if at+i == 0 || summary[at+i-1] == '\n' {
			return at + i
		}
		at += i + 1
	}
}

// withFoldLine is summary with line first in its section sec (last when
// last is set), or in a new section sec at its end.
func withFoldLine(summary, sec, line string, last bool) string {
	heading := "## " + sec + "\n"
	i := sectionAt(summary, sec)
	if i < 0 {
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
