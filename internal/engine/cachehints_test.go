package engine_test

import (
	"path/filepath"
	"reflect"
	"testing"

	"github.com/contextd/contextd/internal/chat"
	"github.com/contextd/contextd/internal/engine"
	"github.com/contextd/contextd/internal/tokens"
)

// TestCacheHintsReplay replays transcripts through PrepareContext with a
// small window (so compactions happen) and checks every answer's hints
// against the previous answer: the stable prefix is exactly the run of
// leading messages identical (id and content) to the previous answer's, its
// tokens are the fixed part plus those messages, a compaction's first
// change is where the view stopped matching the one before it, and the
// breakpoints are at most 4, in order, inside the request.
func TestCacheHintsReplay(t *testing.T) {
	models, err := tokens.NewRegistry([]tokens.Model{
		{Name: "hints-16k", Provider: "test", ContextWindow: 16_384, MaxOutputTokens: 2_048, Encoding: tokens.CL100KBase},
	})
	if err != nil {
		t.Fatal(err)
	}
	files := corpusFiles(t)
	for _, file := range files[:2] {
		t.Run(filepath.Base(file), func(t *testing.T) {
			e := engine.New(tokens.NewEncodings(), models, openSQLite(t))
			ctx := t.Context()
			system, msgs := loadTranscript(t, file)
			v, err := e.CreateSession(ctx, tenant, engine.NewSession{Model: "hints-16k", System: system})
			if err != nil {
				t.Fatal(err)
			}
			fixed := v.SystemTokens + v.ToolsTokens
			var prev []chat.Message
			calls, compactions, partial := 0, 0, 0
			var pending []chat.Message
			step := func() {
				res, err := e.PrepareContext(ctx, tenant, v.ID, engine.PrepareInput{Messages: pending})
				if err != nil {
					t.Fatal(err)
				}
				pending = nil
				h := res.Cache
				cur := res.Messages
				if h.HasPrevious != (calls > 0) || (calls > 0 && !h.FixedStable) {
					t.Fatalf("call %d: has_previous %v, fixed_stable %v", calls, h.HasPrevious, h.FixedStable)
				}
				same := 0
				for same < min(len(prev), len(cur)) && reflect.DeepEqual(prev[same], cur[same]) {
					same++
				}
				if h.StableMessages != int64(same) {
					t.Fatalf("call %d: stable prefix %d messages, but %d lead the previous answer unchanged", calls, h.StableMessages, same)
				}
				want := fixed
				for _, m := range cur[:same] {
					want += m.Tokens
				}
				if !h.FixedStable {
					want = 0 // nothing cached to compare with
				}
				if h.StableTokens != want {
					t.Fatalf("call %d: stable prefix %d tokens, want %d", calls, h.StableTokens, want)
				}
				if same < len(prev) {
					partial++
				}
				if res.Status.Compacted {
					compactions++
					c := res.Status.LastCompaction
					i := 0
					for i < min(len(c.ViewBefore), len(c.ViewAfter)) && c.ViewBefore[i] == c.ViewAfter[i] {
						i++
					}
					if h.CompactionChangedFrom != int64(i) || cur[i].ID != c.ViewAfter[i] || i > same {
						t.Fatalf("call %d: compaction changed from %d, the record says %d (stable %d)", calls, h.CompactionChangedFrom, i, same)
					}
				} else if h.CompactionChangedFrom != -1 {
					t.Fatalf("call %d: no compaction but changed from %d", calls, h.CompactionChangedFrom)
				}
				if len(h.Breakpoints) == 0 || len(h.Breakpoints) > engine.MaxBreakpoints {
					t.Fatalf("call %d: %d breakpoints", calls, len(h.Breakpoints))
				}
				last := int64(-2)
				for _, b := range h.Breakpoints {
					if b.Index <= last || b.Index >= int64(len(cur)) {
						t.Fatalf("call %d: breakpoints out of order or range: %+v", calls, h.Breakpoints)
					}
					last = b.Index
					tok := fixed
					for _, m := range cur[:b.Index+1] {
						tok += m.Tokens
					}
					if b.PrefixTokens != tok {
						t.Fatalf("call %d: breakpoint %+v, want %d prefix tokens", calls, b, tok)
					}
				}
				if end := h.Breakpoints[len(h.Breakpoints)-1]; end.Kind != engine.BreakpointRequestEnd || end.Index != int64(len(cur)-1) {
					t.Fatalf("call %d: the last breakpoint is not the end of the request: %+v", calls, end)
				}
				prev = cur
				calls++
			}
			for _, m := range msgs {
				if m.Role == chat.RoleAssistant && len(pending) > 0 {
					step()
				}
				pending = append(pending, m)
			}
			step()
			if compactions == 0 || partial == 0 {
				t.Fatalf("%d calls, %d compactions, %d answers that broke the prefix: the replay proves nothing", calls, compactions, partial)
			}
			t.Logf("%d calls, %d compactions, %d answers that broke the prefix", calls, compactions, partial)
		})
	}
}
