package engine

import (
	"fmt"
	"strings"

	"github.com/contextd/contextd/internal/chat"
	"github.com/contextd/contextd/internal/compaction"
)

// NothingReason says why a compaction found nothing to do.
type NothingReason int

// Reasons, as the API's NothingToCompact enum.
const (
	// NothingNone: there was something to compact.
	NothingNone NothingReason = iota
	// NothingBelowTarget: usage is at or below the target already.
	NothingBelowTarget
	// NothingAllKept: everything the allowed tiers could touch is kept
	// (pinned, original task, latest user message, protected tool results,
	// the recent tail).
	NothingAllKept
	// NothingEmpty: the active view is empty.
	NothingEmpty
	// NothingSummarizerFailed: the summarizer failed and no other allowed
	// tier had work.
	NothingSummarizerFailed
)

// nothingToDo explains an unchanged plan: the reason and a sentence with
// the figures.
func nothingToDo(view []chat.Message, plan *compaction.Plan, p compaction.Policy, window int64, target float64, tiers []compaction.Tier) (NothingReason, string) {
	usable := window - p.ReservedOutputTokens
	targetTokens := int64(target * float64(usable))
	switch {
	case len(view) == 0:
		return NothingEmpty, "the active view is empty: only the system prompt and tools are sent, and compaction never touches them"
	case plan.TokensBefore <= targetTokens:
		return NothingBelowTarget, fmt.Sprintf("%s used tokens are at or below the target, %.0f %% of the usable window (%s tokens)",
			thousands(plan.TokensBefore), 100*target, thousands(targetTokens))
	case plan.SummaryFailed != nil:
		return NothingSummarizerFailed, "the summarizer failed and no other allowed tier had anything to replace: " + plan.SummaryFailed.Error()
	}
	var pinned, summaries, placeholders int
	for i := range view {
		switch {
		case view[i].Pinned:
			pinned++
		case view[i].Kind == chat.KindSummary:
			summaries++
		case view[i].Kind == chat.KindPlaceholder:
			placeholders++
		}
	}
	var kept []string
	if pinned > 0 {
		kept = append(kept, fmt.Sprintf("%d pinned", pinned))
	}
	kept = append(kept, "the original task and the latest user message")
	if summaries+placeholders > 0 {
		kept = append(kept, fmt.Sprintf("%d summaries or placeholders already compacted", summaries+placeholders))
	}
	kept = append(kept, fmt.Sprintf("the newest %d tool results", p.ProtectRecentToolResults),
		fmt.Sprintf("the recent tail (the last %d messages or %s tokens)", p.KeepRecentMessages, thousands(p.KeepRecentTokens)))
	names := make([]string, len(tiers))
	for i, t := range tiers {
		names[i] = string(t)
	}
	return NothingAllKept, fmt.Sprintf("%s used tokens are over the target (%s) but the %d messages of the view are all kept from %s: %s",
		thousands(plan.TokensBefore), thousands(targetTokens), len(view), strings.Join(names, ", "), strings.Join(kept, ", "))
}

// thousands writes n with comma separators (12,345).
func thousands(n int64) string {
	s := fmt.Sprint(n)
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	var b strings.Builder
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	if neg {
		return "-" + b.String()
	}
	return b.String()
}
