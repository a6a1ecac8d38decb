package gateway

import (
	"testing"

	"github.com/contextd/contextd/internal/chat"
	"github.com/contextd/contextd/internal/engine"
	"github.com/contextd/contextd/internal/tokens"
)

// TestCountEach: one count of a system prompt, tools and groups of
// messages (asideFits' view, left-out replies and tail) gives each its
// own share, which together with the reply's priming are the whole
// request's count, and each group's share is what it counts alone but
// for the priming.
func TestCountEach(t *testing.T) {
	g := newInProcess(t, nil)
	ctx := t.Context()
	text := func(role chat.Role, s string) chat.Message {
		return chat.Message{Role: role, Parts: []chat.Part{{Type: chat.PartText, Text: s}}}
	}
	view := []chat.Message{text(chat.RoleUser, "Fix the failing tests in this repository."), text(chat.RoleAssistant, "Reading calc.py first.")}
	left := []chat.Message{text(chat.RoleAssistant, "The tests pass now; add() subtracted instead of adding.")}
	tail := []chat.Message{text(chat.RoleUser, "Do not call tools. Produce the <state_snapshot> XML.")}
	tools := []chat.Tool{{Name: "read_file", Description: "Reads a file.", Parameters: `{"type":"object"}`}}
	enc := tokens.O200KBase
	own, each, err := g.countEach(ctx, enc, "You are Qwen Code.", tools, view, left, tail)
	if err != nil {
		t.Fatal(err)
	}
	all, err := g.cfg.Engine.CountTokens(ctx, engine.CountInput{Encoding: enc, System: "You are Qwen Code.", Tools: tools,
		Messages: append(append(append([]chat.Message(nil), view...), left...), tail...)})
	if err != nil {
		t.Fatal(err)
	}
	priming := int64(tokens.DefaultFraming.ReplyPriming)
	if got := own + each[0] + each[1] + each[2] + priming; got != all.Total {
		t.Errorf("own %d + groups %v + priming %d = %d, want the whole count %d", own, each, priming, got, all.Total)
	}
	// Each group's share is its count alone but for the priming.
	alone := func(step string, each []int64, groups ...[]chat.Message) {
		t.Helper()
		for i, msgs := range groups {
			n, err := g.countWith(ctx, enc, msgs)
			if err != nil {
				t.Fatal(err)
			}
			if each[i]+priming != n {
				t.Errorf("%s: group %d: %d (+%d priming), alone %d", step, i, each[i], priming, n)
			}
		}
	}
	alone("one count", each, view, left, tail)
	if own == 0 {
		t.Error("the system prompt and tools counted 0")
	}
	// A provider's compaction block in a later group (the tail) hides, in
	// one count, the groups before it, which the request sends whole: each
	// group is then counted alone, the view's share its whole count.
	compacted := text(chat.RoleAssistant, "Summary of the earlier turns.")
	compacted.Metadata = map[string]string{chat.MetaProviderCompaction: "1"}
	tail = append([]chat.Message{compacted}, tail...)
	_, each, err = g.countEach(ctx, enc, "You are Qwen Code.", tools, view, left, tail)
	if err != nil {
		t.Fatal(err)
	}
	alone("a compaction block in the tail", each, view, left, tail)
}
