package compaction

// TrailBudget is the tokens the exact artifact trail may take in a summary
// capped at summaryMaxTokens (internal/summarize writes it after the rest):
// as much as the rest, at most 4,000 (a hand-off has no cap of its own).
func TrailBudget(summaryMaxTokens int) int { return min(summaryMaxTokens, 4000) }
