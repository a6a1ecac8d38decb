package store_test

import (
	"slices"
	"testing"

	"github.com/contextd/contextd/internal/store"
)

// TestRetained: the kept set is the roots and everything behind a kept
// summary at any depth; a summary nothing keeps keeps nothing; a drop (no
// new id) brings nothing back; cycles end.
func TestRetained(t *testing.T) {
	items := []store.CompactionItem{
		{NewID: "s1", Replaced: []string{"m1", "m2"}},
		{NewID: "s2", Replaced: []string{"s1", "m3"}},
		{NewID: "s3", Replaced: []string{"s2"}},
		{NewID: "x1", Replaced: []string{"m4"}},
		{Replaced: []string{"m5"}},
		{NewID: "a", Replaced: []string{"b"}},
		{NewID: "b", Replaced: []string{"a", "m6"}},
	}
	keep, work := store.Retained([]string{"s3", "m9", "s3", "a"}, items)
	var got []string
	for id := range keep {
		got = append(got, id)
	}
	slices.Sort(got)
	want := []string{"a", "b", "m1", "m2", "m3", "m6", "m9", "s1", "s2", "s3"}
	if !slices.Equal(got, want) {
		t.Errorf("kept %v; want %v", got, want)
	}
	// 7 items + 10 replaced ids indexed, 4 roots, 8 edges followed.
	if work != 29 {
		t.Errorf("work %d; want 29", work)
	}
	doomed, _ := store.Doomed([]string{"s3"}, items, []string{"m1", "m4", "m5", "x1", "s3"})
	if !slices.Equal(doomed, []string{"m4", "m5", "x1"}) {
		t.Errorf("doomed %v", doomed)
	}
}
