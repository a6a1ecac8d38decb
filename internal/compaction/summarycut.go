package compaction

import "github.com/contextd/contextd/internal/chat"

// cutBefore returns where the kept tail starts for a tail of at most
// budget tokens: snapped forward to a cut that splits neither a tool pair
// nor (preferably) a turn, and always keeping the latest step (the last
// user or assistant message and what follows it), however large. 0: no
// cut.
func (p *planner) cutBefore(budget int64) int {
	n := len(p.view)
	c := n
	var tail int64
	for c > 0 && tail+p.view[c-1].Tokens <= budget {
		c--
		tail += p.view[c].Tokens
	}
	kinds := cutPoints(p.view)
	cut := -1
	for i := c; i <= n; i++ {
		if kinds[i] == 2 {
			cut = i
			break
		}
	}
	if cut < 0 || cut == n {
		for i := c; i <= n; i++ {
			if kinds[i] >= 1 {
				cut = i
				break
			}
		}
	}
	for last := n - 1; last > 0; last-- {
		if kinds[last] >= 1 {
			cut = min(cut, last)
			break
		}
	}
	return max(cut, 0)
}

// keptBefore is what stays verbatim before cut: the protected messages and
// their tool-pair partners.
func (p *planner) keptBefore(cut int) map[string]bool {
	keep := p.protected()
	closePairs(p.view[:cut], keep)
	return keep
}

// head is what a summary of the view before cut stands for: the messages
// it summarizes (the originals of what this plan pruned), the ids it
// replaces, their tokens, the previous summary's text and what its trail
// folded (MetaTrailFolded); and keep, what stays verbatim before cut
// (keptBefore), read once a cut.
type head struct {
	cut              int
	keep             map[string]bool
	summarized       []chat.Message
	replaced         []string
	before           int64
	previous, folded string
}

// headBefore is the head of a summary of the view before cut.
func (p *planner) headBefore(cut int) head {
	h := head{cut: cut, keep: p.keptBefore(cut)}
	for _, m := range p.view[:cut] {
		if h.keep[m.ID] {
			continue
		}
		switch orig, ok := p.pruned[m.ID]; {
		case m.Kind == chat.KindSummary:
			h.previous, h.folded = joinText(&m), m.Metadata[MetaTrailFolded]
		case ok:
			h.summarized = append(h.summarized, orig)
		default:
			h.summarized = append(h.summarized, m)
		}
		h.replaced = append(h.replaced, m.ID)
		h.before += m.Tokens
	}
	return h
}

// keptWith is what the view keeps verbatim with the summary of h: the
// messages kept before its cut and the tail.
func (p *planner) keptWith(h head) []chat.Message {
	var out []chat.Message
	for _, m := range p.view[:h.cut] {
		if h.keep[m.ID] {
			out = append(out, m)
		}
	}
	return append(out, p.view[h.cut:]...)
}

// maxTrailCuts bounds the heads trailCut measures after the first.
const maxTrailCuts = 2

// trailCut returns the cut that leaves room for the trail its own head
// needs, within budget: cut leaves room for the whole budget; a later
// candidate (cutFor the room the last head measured needs) is taken only
// when its head's trail fits the room it was given. A shorter head can need
// more than a longer one, whose trail folded: measured on the longer head
// alone, the view after the summary overshot the target (16k: 6,911 tokens
// for 6,800, TestSummaryStaysWithinTarget). At most 1 + maxTrailCuts
// measures.
func trailCut(cut, budget int, cutFor func(reserve int) int, measure func(cut int) int) int {
	need := measure(cut)
	for range maxTrailCuts {
		reserve := min(need, budget)
		c := cutFor(reserve)
		if c <= 0 || c >= cut {
			return cut
		}
		if need = measure(c); need <= reserve {
			return c
		}
	}
	return cut
}
