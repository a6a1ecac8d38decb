package gateway

import (
	"crypto/sha256"
	"encoding/hex"
	"slices"
	"strings"
	"testing"

	"github.com/contextd/contextd/internal/chat"
)

// TestSummaryDigests: the digest the store records for an answer
// (summaryBody) is among those of the message a client starts its
// compacted history with, whatever the summary's own blank lines, when
// it ends the message or one of its last 7 blank lines; at most 8
// digests are looked up.
func TestSummaryDigests(t *testing.T) {
	digest := func(s string) string { d := sha256.Sum256([]byte(s)); return hex.EncodeToString(d[:]) }
	paragraphs := make([]string, 20)
	for i := range paragraphs {
		paragraphs[i] = "<fact>Paragraph " + strings.Repeat("x", i) + " of the state snapshot, long enough to count.</fact>"
	}
	long := strings.Join(paragraphs, "\n\n")
	answer := func(s string) []chat.Message {
		return []chat.Message{{Role: chat.RoleAssistant, Parts: []chat.Part{{Type: chat.PartText, Text: "<analysis>thinking\n\nmore</analysis>\n"}, {Type: chat.PartText, Text: s + "\n"}}}}
	}
	trailer := "Resume the prior task using the summary above."
	for _, tc := range []struct {
		name, body, message string
		found               bool
	}{
		{"the message's end", long, "  " + long + "\n", true},
		{"before a trailer", long, long + "\n\n" + trailer, true},
		{"before a trailer and blank lines after", long, long + "\n\n\n" + trailer + "\n\n- a reminder\n\n- another", true},
		{"before 8 more paragraphs", long, long + strings.Repeat("\n\nmore", 8), false},
		{"not at the message's start", long, "Summary:\n\n" + long + "\n\n" + trailer, false},
	} {
		body := summaryBody(answer(tc.body))
		if body != tc.body {
			t.Fatalf("%s: summaryBody = %q, want %q", tc.name, body, tc.body)
		}
		ds := summaryDigests(tc.message)
		if len(ds) > maxSummaryCuts+1 {
			t.Errorf("%s: %d digests, want at most %d", tc.name, len(ds), maxSummaryCuts+1)
		}
		if got := slices.Contains(ds, digest(body)); got != tc.found {
			t.Errorf("%s: the answer's digest among the message's: %v, want %v", tc.name, got, tc.found)
		}
	}
	if ds := summaryDigests("short\n\nshort"); len(ds) != 0 {
		t.Errorf("a message under %d bytes: %d digests, want none", minSummary, len(ds))
	}
}

// BenchmarkSummaryDigests: the lookup's work on a compacted history's
// first message of 80 KB (a 20,000-token summary, Qwen Code's cap) with
// a blank line every 400 bytes and its trailer.
func BenchmarkSummaryDigests(b *testing.B) {
	var sb strings.Builder
	for sb.Len() < 80_000 {
		sb.WriteString(strings.Repeat("state of the work, ", 20) + "\n\n")
	}
	text := sb.String() + "Resume the prior task using the summary above."
	b.SetBytes(int64(len(text)))
	for b.Loop() {
		if len(summaryDigests(text)) != maxSummaryCuts+1 {
			b.Fatal("digests")
		}
	}
}
