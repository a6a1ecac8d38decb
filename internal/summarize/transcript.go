package summarize

import (
	"fmt"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/contextd/contextd/internal/chat"
	"github.com/contextd/contextd/internal/compaction"
)

// MaxTranscriptChars bounds the messages one summarization request sends
// (bytes of the rendered <messages> block). A prune+summarize plan hands the
// summarizer the originals of pruned tool results, which can be megabytes:
// each message is cut to its share of this bound, and when even the shares
// do not fit, the oldest messages are left out (the newest are what the
// agent continues from).
const MaxTranscriptChars = 400_000

// MaxSectionChars bounds each of the prompt's other sections (the original
// task, the previous summary): a task pasted with a megabyte of logs is cut
// to its head and tail like a long message. With instructions (at most
// 4,000 characters by the API) and the fixed text, a summarization prompt is
// at most MaxTranscriptChars + 2×MaxSectionChars + 5 KB.
const MaxSectionChars = 50_000

// minShare is the least a kept message is cut to: below it a message is
// noise, so older messages are left out instead.
const minShare = 2_000

// trailLeftOut stands in a previous summary sent to the model for the
// trail left out of it (userPrompt).
const trailLeftOut = "(its exact trail of files, commands, tests and errors is left out here: contextd merges it into the new summary itself)"

// userPrompt renders the summarization request: the previous summary
// without its trail (withoutTrail).
func userPrompt(in compaction.SummaryInput) string {
	var b strings.Builder
	fmt.Fprintf(&b, "This is compaction round %d. Stay under %d tokens.\n\n", in.Round, in.MaxTokens)
	fmt.Fprintf(&b, "<original_task>\n%s\n</original_task>\n\n", strings.TrimSuffix(cut(in.OriginalTask, MaxSectionChars), "\n"))
	if in.Previous != "" {
		// Its trail is not the model's to integrate: contextd merges it into
		// the new summary's (PinFacts), and sent, it asked the model to
		// restate in prose what the trail holds exactly.
		prev, trail := withoutTrail(in.Previous)
		if trail {
			prev += "\n" + trailLeftOut
		}
		fmt.Fprintf(&b, "<previous_summary>\n%s\n</previous_summary>\n\n", strings.TrimSuffix(cut(prev, MaxSectionChars), "\n"))
	}
	if in.Instructions != "" {
		fmt.Fprintf(&b, "<instructions>\n%s\n</instructions>\n\n", in.Instructions)
	}
	b.WriteString("<messages>\n")
	b.WriteString(transcript(in, MaxTranscriptChars))
	b.WriteString("</messages>")
	return b.String()
}

// transcript renders in.Messages within limit bytes: the newest messages
// that fit at minShare each (older ones are left out, and a first line says
// how many), each cut to a fair share of the limit (water-filling: short
// messages stay whole, the long ones share the rest equally), head and tail
// kept around a marker saying how much was cut. Work and memory: linear in
// the rendered messages plus n log n for the shares.
func transcript(in compaction.SummaryInput, limit int) string {
	lines := make([]string, len(in.Messages))
	for i := range in.Messages {
		lines[i] = renderMessage(&in.Messages[i])
	}
	// Keep the newest messages whose floors fit, with room for the
	// omission line.
	budget := limit - len(omittedLine(len(lines)))
	first, floor := len(lines), 0
	for first > 0 {
		f := min(len(lines[first-1]), minShare)
		if floor+f > budget {
			break
		}
		floor += f
		first--
	}
	var b strings.Builder
	if first > 0 {
		b.WriteString(omittedLine(first))
	} else {
		budget = limit
	}
	kept := lines[first:]
	share := fairShare(kept, budget)
	for _, l := range kept {
		b.WriteString(cut(l, share))
	}
	return b.String()
}

func omittedLine(n int) string {
	return fmt.Sprintf("(%d older messages omitted)\n", n)
}

// fairShare is the largest cap c such that the lines, each cut to at most
// c bytes, total at most budget.
func fairShare(lines []string, budget int) int {
	lens := make([]int, len(lines))
	for i, l := range lines {
		lens[i] = len(l)
	}
	slices.Sort(lens)
	for i, l := range lens {
		if c := budget / (len(lens) - i); l > c {
			return c
		}
		budget -= l
	}
	return limitless
}

const limitless = int(^uint(0) >> 1)

// cut keeps line whole when it fits in max bytes, else its head and tail
// (on UTF-8 boundaries, newline-terminated) around a marker, within max.
func cut(line string, max int) string {
	if len(line) <= max {
		return line
	}
	marker := fmt.Sprintf(" …(%d characters cut)… ", len(line))
	keep := max - len(marker) - 1
	if keep <= 0 {
		return ""
	}
	h := keep / 2
	for h > 0 && !utf8.RuneStart(line[h]) {
		h--
	}
	t := len(line) - (keep - keep/2)
	for t < len(line) && !utf8.RuneStart(line[t]) {
		t++
	}
	// The cut count has no more digits than len(line), so this fits too.
	marker = fmt.Sprintf(" …(%d characters cut)… ", t-h)
	return line[:h] + marker + strings.TrimSuffix(line[t:], "\n") + "\n"
}

// renderMessage is one message's line in the transcript.
func renderMessage(m *chat.Message) string {
	var b strings.Builder
	fmt.Fprintf(&b, "[%s]", m.Role)
	for _, p := range m.Parts {
		switch p.Type {
		case chat.PartText:
			b.WriteString(" " + p.Text)
		case chat.PartToolCall:
			fmt.Fprintf(&b, " (calls %s %s)", p.ToolCall.Name, p.ToolCall.Arguments)
		case chat.PartToolResult:
			b.WriteString(" " + p.ToolResult.Content)
		case chat.PartImage:
			b.WriteString(" (an image)")
		}
	}
	b.WriteString("\n")
	return b.String()
}
