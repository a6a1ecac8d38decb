package summarize

import (
	"strings"
	"testing"

	"github.com/contextd/contextd/internal/compaction"
)

// TestFoldsPastMaxFoldedBytes: a trail that folds a line too long to keep
// beside the summary (over compaction.MaxFoldedBytes) still folds
// (MeasuredTrail.Folds: more room would show it), whether or not lines
// left out as shown again are kept. Before, Folds was read out of the
// rendered lines (some, and not only shown-again ones): such a trail gave
// Folds false, and the planner never gave it the cap's room.
func TestFoldsPastMaxFoldedBytes(t *testing.T) {
	big := trailLine{key: "ran big", tag: "ran", text: strings.Repeat("x", compaction.MaxFoldedBytes), meta: "msg_2"}
	small := trailLine{key: "ran ls", tag: "ran", text: "ls", meta: "msg_4"}
	for _, again := range [][]trailLine{nil, {small}} {
		folded, folds := foldedLines("", []trailLine{big}, again)
		if !folds || strings.Contains(folded, big.text) {
			t.Errorf("again %d: folds %v, folded %d bytes; want it folds, the line not kept", len(again), folds, len(folded))
		}
	}
	if _, folds := foldedLines("", nil, []trailLine{small}); folds {
		t.Errorf("a trail that only left out a line shown again folds")
	}
}
