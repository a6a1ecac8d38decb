// Package contextctl is the contextctl command: the context bar and the
// client commands around it. cmd/contextctl only calls Main.
package contextctl

import (
	"fmt"
	"strings"
)

// Breakdown is what the bar draws: where a context window goes.
type Breakdown struct {
	Model         string
	Window        int64
	System        int64
	Tools         int64
	Messages      int64
	Reserved      int64
	Used          int64
	Free          int64
	Over          int64
	PercentUsed   float64 // of the usable window, as the server reports it
	Level         string  // OK, COMPACT, SUMMARIZE, HANDOFF
	Source        string  // estimated, calibrated, anchored, provider
	ExpectedError float64
	Warning       float64 // thresholds, fractions of the usable window
	Critical      float64
	Emergency     float64
}

// ANSI colours of the segments (only on a terminal).
const (
	colSystem   = "\x1b[38;5;245m"
	colTools    = "\x1b[38;5;110m"
	colMessages = "\x1b[38;5;141m"
	colReserved = "\x1b[38;5;180m"
	colFree     = "\x1b[38;5;238m"
	colOver     = "\x1b[38;5;196m"
	colReset    = "\x1b[0m"
)

type segment struct {
	name   string
	tokens int64
	glyph  string
	color  string
}

// narrowWidth is the width below which the bar collapses to one line.
const narrowWidth = 48

// Render draws the bar and its breakdown for a terminal of width columns.
// Cells are shares of the whole context window; the reserved output sits at
// the right end, so a request that eats into it shows as messages crossing
// into the reserve.
func Render(b Breakdown, width int, color bool) string {
	paint := func(c, s string) string {
		if !color || s == "" {
			return s
		}
		return c + s + colReset
	}
	pct := func(n int64) float64 { return 100 * float64(n) / float64(max(b.Window, 1)) }
	if width < narrowWidth {
		cells := max(width-26, 6)
		return fmt.Sprintf("%s %s %s/%s\n", barLine(b, cells, paint), fmtPercent(b.PercentUsed), short(b.Used), short(b.Window))
	}
	var out strings.Builder
	title := fmt.Sprintf("%s · %s-token window", b.Model, comma(b.Window))
	// "% used" is of the usable window (the window minus the reserved
	// output), as the API's percent_used and the dashboard; the share of the
	// whole window, which the rows below add up to, is beside it.
	right := fmt.Sprintf("%s used of %s usable (%.1f%% of the window)", fmtPercent(b.PercentUsed), short(b.Window-b.Reserved), pct(b.Used))
	pad := max(1, width-len([]rune(title))-len(right))
	out.WriteString(title + strings.Repeat(" ", pad) + right + "\n")
	out.WriteString(barLine(b, width-2, paint) + "\n")
	segs := []segment{
		{"System prompt", b.System, "▓", colSystem},
		{"Tool definitions", b.Tools, "▒", colTools},
		{"Messages", b.Messages, "█", colMessages},
		{"Reserved output", b.Reserved, "·", colReserved},
		{"Free", b.Free, "░", colFree},
	}
	fmt.Fprintf(&out, "  %-19s %11s  %s\n", "", "tokens", "of the window")
	for _, s := range segs {
		fmt.Fprintf(&out, "  %s %-17s %11s  %5.1f%%\n", paint(s.color, s.glyph), s.name, comma(s.tokens), pct(s.tokens))
	}
	if b.Over > 0 {
		fmt.Fprintf(&out, "  %s %-17s %11s  does not fit: compact or hand off\n", paint(colOver, "!"), "Over by", comma(b.Over))
	}
	source := b.Source
	if b.ExpectedError > 0 {
		source += fmt.Sprintf(" ±%.0f%%", 100*b.ExpectedError)
	}
	fmt.Fprintf(&out, "Level %s · prune at %.0f%%, summarize at %.0f%%, hand-off at %.0f%% · %s\n",
		b.Level, 100*b.Warning, 100*b.Critical, 100*b.Emergency, source)
	return out.String()
}

// barLine is the bar itself, cells wide plus brackets.
func barLine(b Breakdown, cells int, paint func(c, s string) string) string {
	total := float64(max(b.Window, 1))
	// Allocate cells by largest remainder so the bar always adds up.
	parts := []segment{
		{tokens: b.System, glyph: "▓", color: colSystem},
		{tokens: b.Tools, glyph: "▒", color: colTools},
		{tokens: b.Messages, glyph: "█", color: colMessages},
	}
	used := b.System + b.Tools + b.Messages
	usable := b.Window - b.Reserved
	if used <= usable {
		parts = append(parts, segment{tokens: usable - used, glyph: "░", color: colFree}, segment{tokens: b.Reserved, glyph: "·", color: colReserved})
	} else {
		over := min(used-usable, b.Reserved) // messages eat into the reserve
		parts = append(parts, segment{tokens: b.Reserved - over, glyph: "·", color: colReserved})
		parts[2].color = colOver
	}
	counts := make([]int, len(parts))
	type rem struct {
		i int
		r float64
	}
	var rems []rem
	given := 0
	for i, p := range parts {
		exact := float64(min(p.tokens, b.Window)) / total * float64(cells)
		counts[i] = int(exact)
		// Anything present gets at least a sliver, so small parts stay visible.
		if p.tokens > 0 && counts[i] == 0 {
			counts[i] = 1
		}
		given += counts[i]
		rems = append(rems, rem{i, exact - float64(int(exact))})
	}
	for i := 0; i < len(rems); i++ {
		for j := i + 1; j < len(rems); j++ {
			if rems[j].r > rems[i].r {
				rems[i], rems[j] = rems[j], rems[i]
			}
		}
	}
	for k := 0; given < cells && k < len(rems); k++ {
		counts[rems[k].i]++
		given++
	}
	for given > cells { // slivers overshot: take from the largest part
		big := 0
		for i := range counts {
			if counts[i] > counts[big] {
				big = i
			}
		}
		counts[big]--
		given--
	}
	var s strings.Builder
	s.WriteString("[")
	for i, p := range parts {
		s.WriteString(paint(p.color, strings.Repeat(p.glyph, counts[i])))
	}
	s.WriteString("]")
	return s.String()
}

func fmtPercent(p float64) string {
	if p > 0 && p < 1 {
		return "<1%"
	}
	return fmt.Sprintf("%.0f%%", p)
}

// comma formats 1234567 as 1,234,567.
func comma(n int64) string {
	s := fmt.Sprint(max(n, -n))
	var out []byte
	for i := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			out = append(out, ',')
		}
		out = append(out, s[i])
	}
	if n < 0 {
		return "-" + string(out)
	}
	return string(out)
}

// short formats 128000 as 128k.
func short(n int64) string {
	switch {
	case n >= 1_000_000:
		return fmt.Sprintf("%.1fM", float64(n)/1e6)
	case n >= 10_000:
		return fmt.Sprintf("%dk", (n+500)/1000)
	case n >= 1000:
		return fmt.Sprintf("%.1fk", float64(n)/1000)
	}
	return fmt.Sprint(n)
}
