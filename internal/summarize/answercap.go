package summarize

import (
	"sort"
	"strings"

	"github.com/contextd/contextd/internal/compaction"
)

// askTokens is the max_tokens an LLM summarizer asks its model for: the
// summary's cap, or summary_max_tokens where the cap gave way to the trail
// (in.AskTokens; compaction's trailAndCap and yieldToTrail, down to a
// quarter: 200 of 800). A reasoning model (OpenAI's o-series, gpt-5)
// counts its reasoning in max_completion_tokens, and at 200 it spent them
// all there and answered nothing (the extractive summary then). The model
// is still told to stay under the cap (userPrompt), and its answer is held
// to it (withinCap), so the summary takes no more room than the planner
// left it.
func askTokens(in compaction.SummaryInput) int { return max(in.MaxTokens, in.AskTokens) }

// withinCap is an LLM's answer less its last whole lines while it is over
// the summary's cap (in.MaxTokens, in the session's count): asked for more
// than the cap (askTokens), a model may write more. Lines go whole, so no
// word is cut, and so do the headings left without their lines; an answer
// whose first line alone is over the cap, or of which only headings are
// left, leaves nothing (ErrEmptyAnswer: the extractive summary then).
func withinCap(text string, in compaction.SummaryInput) string {
	if in.AskTokens <= in.MaxTokens {
		return text // asked for no more than the cap: max_tokens held it
	}
	count := countOrEstimate(in)
	return linesWithin(text, func(s string) bool { return count(s) <= in.MaxTokens })
}

// linesWithin is the longest prefix of text's whole lines that fits (text
// itself when it does), less the headings left without their lines; ""
// when none fits or only headings are left.
func linesWithin(text string, fits func(string) bool) string {
	if fits(text) {
		return text
	}
	// The longest prefix of whole lines within the cap, found by bisection
	// over the line ends: O(log lines) counts of at most the answer, which
	// is as long as summary_max_tokens (a tenant's setting) lets it be
	// (one count a line left out was quadratic in it).
	var ends []int // the prefixes: text up to each newline
	for i := range len(text) {
		if text[i] == '\n' {
			ends = append(ends, i)
		}
	}
	prefix := func(k int) bool { return fits(strings.TrimSpace(text[:ends[k]])) }
	k := sort.Search(len(ends), func(k int) bool { return !prefix(k) }) - 1
	for k >= 0 && !prefix(k) { // a count not monotone in the prefix (never seen)
		k--
	}
	if k < 0 {
		return ""
	}
	text = strings.TrimSpace(text[:ends[k]])
	// A heading whose lines went is left out too, and an answer of
	// headings alone is an empty one (a section written as one paragraph
	// over the cap left "## Current state" as the summary).
	for text != "" {
		i := strings.LastIndexByte(text, '\n')
		if !strings.HasPrefix(strings.TrimSpace(text[i+1:]), "#") {
			return text
		}
		text = strings.TrimSpace(text[:max(i, 0)])
	}
	return ""
}
