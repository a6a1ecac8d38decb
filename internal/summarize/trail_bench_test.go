package summarize_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/contextd/contextd/internal/chat"
	"github.com/contextd/contextd/internal/compaction"
	"github.com/contextd/contextd/internal/summarize"
)

// BenchmarkTrailManyFoldedIDs: a chained trail at a large window's budget,
// its previous fold line naming thousands of ids and thousands of new
// lines folding: the fold line is written up to four times, each naming
// only ids an earlier one named.
func BenchmarkTrailManyFoldedIDs(b *testing.B) {
	count := func(s string) int { return len(s) / 4 }
	var ids []string
	for i := range 4500 {
		ids = append(ids, fmt.Sprintf("msg_%d", 100000-i))
	}
	prev := "[x]\n## Trail\n- folded: 9000 other lines, from messages " + strings.Join(ids, ", ") + ". Call ExpandMessage with message id sum_1_1 to read what they came from.\n"
	var msgs []chat.Message
	for i := range 3000 {
		id := fmt.Sprintf("msg_%d", 200000+i)
		msgs = append(msgs, chat.Message{ID: id, Role: chat.RoleAssistant, Parts: []chat.Part{{Type: chat.PartToolCall, ToolCall: &chat.ToolCall{ID: "c" + id, Name: "Bash", Arguments: fmt.Sprintf(`{"command":"ls /repo/some/long/directory/name/number/%d"}`, i)}}}})
	}
	in := compaction.SummaryInput{Round: 2, ID: "sum_2_1", Previous: prev, Messages: msgs}
	for _, budget := range []int{20000, 40000} {
		b.Run(fmt.Sprint(budget), func(b *testing.B) {
			for b.Loop() {
				summarize.Trail(in, budget, count)
			}
		})
	}
}

// BenchmarkHeldPaths: the Files section's 400 paths (maxFiles) tested
// against a trail of 600 KiB, each path once (heldPaths), against
// holdsPath for each.
func BenchmarkHeldPaths(b *testing.B) {
	var t strings.Builder
	for i := 0; t.Len() < 600<<10; i++ {
		fmt.Fprintf(&t, "- ran: cat /repo/pkg/module%d/file.go | grep -n something — msg_%d\n", i, i)
	}
	text := t.String()
	var paths []string
	for i := range 400 {
		paths = append(paths, fmt.Sprintf("pkg/other%d/file.go", i))
	}
	b.Run("heldPaths", func(b *testing.B) {
		for b.Loop() {
			held := summarize.HeldPaths(text)
			for _, p := range paths {
				held(p)
			}
		}
	})
	b.Run("holdsPath", func(b *testing.B) {
		for b.Loop() {
			for _, p := range paths {
				summarize.HoldsPath(text, p)
			}
		}
	})
}
