package compaction

// MetaTrailFolded is the metadata key under which a summary keeps the lines
// its trail folded, whole (never sent to a model: only the fold line that
// counts them is in its text). A chained summary gets them back
// (SummaryInput.PreviousFolded) and shows them again where its trail has
// room: a trail squeezed once by a large latest step no longer loses its
// older lines for good (at 8k on the corpus, one squeeze folded 31 lines
// that every later summary only counted).
const MetaTrailFolded = "contextd.trail_folded"

// MaxFoldedBytes bounds what a summary keeps of its folded lines (the
// newest first); older ones stay counted and named by id in its fold line.
const MaxFoldedBytes = 16 << 10

// MeasuredTrail is a summary's trail as Request.Trail measures it: its
// text, the tokens it takes and the lines it folded, whole, one a line
// (for MetaTrailFolded; at most MaxFoldedBytes).
type MeasuredTrail struct {
	Text   string
	Tokens int
	Folded string
	// Folds says the trail folded lines it holds whole (in Folded) into
	// its count: more room would show them (yieldToTrail).
	Folds bool
}

// foldedMeta is the metadata of a summary whose trail folded folded: none
// past MaxFoldedBytes (Request.Trail is the caller's; the bound is kept
// here, TestSummaryFoldedIsBounded).
func foldedMeta(folded string) map[string]string {
	if folded == "" || len(folded) > MaxFoldedBytes {
		return nil
	}
	return map[string]string{MetaTrailFolded: folded}
}
