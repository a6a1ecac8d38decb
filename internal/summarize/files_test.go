package summarize

import (
	"fmt"
	"slices"
	"testing"
)

// TestFitPathsCountsWhatItCanKeep: cutting the Files list to its budget
// counts the paths it keeps and the first it cannot, not every path:
// extract fits the list twice (a second time with room for its fold line),
// and each count can be a tokenizer's. Before, each of the 400 paths here
// was counted, where 3 are kept.
func TestFitPathsCountsWhatItCanKeep(t *testing.T) {
	var recent []string
	for i := range 400 {
		recent = append(recent, fmt.Sprintf("src/pkg%03d/file.go", i))
	}
	calls := 0
	count := func(s string) int { calls++; return len(s) / 4 }
	line := len("- src/pkg000/file.go\n") / 4
	kept, left := fitPaths(recent, 3*line, count)
	if !slices.Equal(kept, recent[:3]) || !slices.Equal(left, recent[3:]) {
		t.Fatalf("kept %d, left %d; want the first 3 kept and the 397 others left", len(kept), len(left))
	}
	if calls != 4 {
		t.Errorf("%d counts; want 4 (the 3 kept and the first left out)", calls)
	}
}
