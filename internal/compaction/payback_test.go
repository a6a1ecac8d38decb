package compaction

import (
	"math"
	"testing"

	"github.com/contextd/contextd/internal/chat"
)

func TestPaybackCalls(t *testing.T) {
	msg := func(id string, tokens int64) chat.Message { return chat.Message{ID: id, Tokens: tokens} }
	before := []chat.Message{msg("a", 100), msg("b", 1000), msg("c", 1000), msg("d", 500)}
	for _, tc := range []struct {
		name        string
		after       []chat.Message
		read, write float64
		want        float64
	}{
		// b and c (2000) become a 200-token summary: 1800 saved per call at
		// 0.1 = 180; the rewrite is 700 tokens at 1.15 extra = 805.
		{"anthropic summary", []chat.Message{msg("a", 100), msg("s", 200), msg("d", 500)}, 0.1, 1.25, 805.0 / 180},
		// A late change rewrites little: only d (500 → 50).
		{"late prune", []chat.Message{msg("a", 100), msg("b", 1000), msg("c", 1000), msg("p", 50)}, 0.1, 1.25, 50 * 1.15 / (450 * 0.1)},
		// OpenAI: writes cost like input, reads half.
		{"openai summary", []chat.Message{msg("a", 100), msg("s", 200), msg("d", 500)}, 0.5, 1, 700 * 0.5 / (1800 * 0.5)},
		{"free cache", []chat.Message{msg("a", 100), msg("s", 200), msg("d", 500)}, 0, 1, 0},
		{"no saving", before, 0.1, 1.25, math.Inf(1)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := &Plan{View: tc.after, TokensBefore: 10 + sumTokens(before), TokensAfter: 10 + sumTokens(tc.after)}
			if got := p.PaybackCalls(before, tc.read, tc.write); math.Abs(got-tc.want) > 1e-9 && !(math.IsInf(got, 1) && math.IsInf(tc.want, 1)) {
				t.Errorf("PaybackCalls = %v, want %v", got, tc.want)
			}
		})
	}
}
