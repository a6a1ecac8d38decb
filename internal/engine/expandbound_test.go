package engine_test

import (
	"fmt"
	"regexp"
	"strings"
	"testing"

	"github.com/contextd/contextd/internal/chat"
	"github.com/contextd/contextd/internal/compaction"
	"github.com/contextd/contextd/internal/engine"
)

var expandFurtherRe = regexp.MustCompile(`further on than one call looks .* to look further, call contextd_expand with (\{"id":"[^"]+","offset":\d+,"cursor":"\d+:\d+"\})\]$`)

// bigSummary is a session whose summary stands for steps tool results of
// 6 KB (300: about 1.8 MB of text, past what one call passes over, 1 MiB).
func bigSummary(t testing.TB, e *engine.Engine, steps int) (session, summary string) {
	t.Helper()
	ctx := t.Context()
	v, err := e.CreateSession(ctx, tenant, engine.NewSession{Model: "gpt-4o", Policy: exposeExpand()})
	if err != nil {
		t.Fatal(err)
	}
	msgs := []chat.Message{userMsg("task")}
	for i := 0; i < steps; i++ {
		id := fmt.Sprintf("c%d", i)
		msgs = append(msgs, callMsg(id), resultMsg(id, strings.Repeat(fmt.Sprintf("line %d xyz ", i), 500)))
	}
	for i := 0; i < len(msgs); i += 200 {
		if _, err := e.AppendMessages(ctx, tenant, v.ID, engine.AppendInput{Messages: msgs[i:min(i+200, len(msgs))]}); err != nil {
			t.Fatal(err)
		}
	}
	c, err := e.Compact(ctx, tenant, v.ID, engine.CompactInput{Tier: compaction.TierSummarize})
	if err != nil || !c.Compacted {
		t.Fatalf("%+v %v", c, err)
	}
	return v.ID, c.Compaction.Items[0].NewID
}

// A call at a huge offset does not render every original from the first:
// it passes over at most 1 MiB and answers with a cursor to look further
// from; following the cursors reaches the offset. Answers that read on
// carry a cursor, so paging through the text never starts from the first
// original again, and the pages concatenate to the text.
func TestExpandToolHugeOffsetBounded(t *testing.T) {
	backends(t, func(t *testing.T, e *engine.Engine) {
		ctx := t.Context()
		session, sum := bigSummary(t, e, 300)
		whole, calls := readAll(t, e, tenant, session, sum, 16384)
		if len(whole) < 1<<20+1<<19 || calls < 100 {
			t.Fatalf("the summary's text is %d bytes in %d calls", len(whole), calls)
		}
		for _, offset := range []string{"1e15", "9000000000000000"} {
			a, err := e.ExpandToolCall(ctx, tenant, session, `{"id":"`+sum+`","offset":`+offset+`}`, 1)
			if err != nil || !a.IsError || !expandFurtherRe.MatchString(a.Content) || strings.Contains(a.Content, "past the end") {
				t.Fatalf("offset %s: %+v, %v; want a note to look further from a cursor", offset, a, err)
			}
		}
		// An offset beyond 1 MiB, from the first original: one hop, then the range.
		offset := len(whole) - 5000
		args := fmt.Sprintf(`{"id":%q,"offset":%d,"length":100}`, sum, offset)
		hops := 0
		for {
			a, err := e.ExpandToolCall(ctx, tenant, session, args, 1)
			if err != nil {
				t.Fatal(err)
			}
			m := expandFurtherRe.FindStringSubmatch(a.Content)
			if m == nil {
				note, body, _ := strings.Cut(a.Content, "\n")
				if a.IsError || body != whole[offset:offset+100] {
					t.Fatalf("after %d hops: %q, want %q", hops, note, whole[offset:offset+100])
				}
				break
			}
			if hops++; hops > 1 {
				t.Fatalf("hop %d: %s", hops, a.Content)
			}
			args = strings.TrimSuffix(m[1], "}") + `,"length":100}`
		}
		if hops != 1 {
			t.Errorf("%d hops to an offset %d bytes in", hops, offset)
		}
		// Past the end within reach of a cursor: the end is known.
		a, err := e.ExpandToolCall(ctx, tenant, session, strings.TrimSuffix(args, `,"length":100}`)+`,"offset":`+fmt.Sprint(len(whole))+`}`, 1)
		if err != nil || !a.IsError || !strings.Contains(a.Content, fmt.Sprintf("past the end of the text (%d bytes)", len(whole))) {
			t.Errorf("past the end: %+v, %v", a, err)
		}
		// A cursor that is not one an answer gave.
		a, err = e.ExpandToolCall(ctx, tenant, session, `{"id":"`+sum+`","cursor":"x:1"}`, 1)
		if err != nil || !a.IsError || !strings.Contains(a.Content, `"cursor" must be as an answer gave it`) {
			t.Errorf("bad cursor: %+v, %v", a, err)
		}
	})
}

// BenchmarkExpandToolOffset is one contextd_expand call on a summary of
// about 4 MB (700 tool results), at offset 0, at an offset near the end
// as the answer before it said to read on (with its cursor), and at a huge offset (which
// passes over 1 MiB and answers with a cursor).
func BenchmarkExpandToolOffset(b *testing.B) {
	e := benchEngine(b, "sqlite")
	session, sum := bigSummary(b, e, 700)
	ctx := b.Context()
	near := `{"id":"` + sum + `","offset":4000000}`
	for range 8 { // hop to the range, as a model would
		a, err := e.ExpandToolCall(ctx, tenant, session, near, 1)
		if err != nil {
			b.Fatal(err)
		}
		m := expandFurtherRe.FindStringSubmatch(a.Content)
		if m == nil {
			break
		}
		near = m[1]
	}
	a, err := e.ExpandToolCall(ctx, tenant, session, near, 1)
	m := expandNextRe.FindStringSubmatch(a.Content)
	if err != nil || m == nil {
		b.Fatalf("%.300s, %v", a.Content, err)
	}
	for _, c := range []struct{ name, args string }{
		{"offset0", `{"id":"` + sum + `"}`},
		{"read-on-near-end", m[1]},
		{"offset1e15", `{"id":"` + sum + `","offset":1e15}`},
	} {
		b.Run(c.name, func(b *testing.B) {
			for b.Loop() {
				if _, err := e.ExpandToolCall(ctx, tenant, session, c.args, 1); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
