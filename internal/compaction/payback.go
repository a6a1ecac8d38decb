package compaction

import (
	"math"

	"github.com/contextd/contextd/internal/chat"
)

// FirstChange is the index of the first message of after that is not the
// message at the same index of before: a prompt cache serves the request up
// to it, and everything from it on is written to the cache again.
func FirstChange(before, after []chat.Message) int {
	i := 0
	for i < min(len(before), len(after)) && before[i].ID == after[i].ID {
		i++
	}
	return i
}

// PaybackCalls is how many model calls a plan needs to repay the
// prompt-cache rewrite it causes. With cache reads priced at read and cache
// writes at write (relative to uncached input), the call after the
// compaction writes the tokens from the first change on at write instead of
// reading them at read, an extra (write - read) per token; every call after
// that sends TokensBefore - TokensAfter fewer tokens, which would have been
// cache reads, saving read per token. A plan that saves nothing never pays
// back (+Inf).
func (p *Plan) PaybackCalls(before []chat.Message, read, write float64) float64 {
	saved := p.TokensBefore - p.TokensAfter
	if saved <= 0 || read <= 0 {
		if saved > 0 {
			return 0 // cached input is free: any saving pays at once
		}
		return math.Inf(1)
	}
	rewritten := sumTokens(p.View[FirstChange(before, p.View):])
	return float64(rewritten) * max(write-read, 0) / (float64(saved) * read)
}
