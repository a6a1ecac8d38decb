package gateway

import "github.com/contextd/contextd/internal/engine"

// usage is what the provider billed for one call, in contextd's convention
// (the proto's ReportUsageRequest, docs/api.md): the input is split into
// three disjoint parts that add up to the tokens the provider counted for
// the request, and no part is counted twice.
//
//   - uncached: input neither read from nor written to the prompt cache
//     (Anthropic usage.input_tokens; OpenAI prompt_tokens or input_tokens
//     minus their cached_tokens).
//   - cacheRead: input read from the cache (Anthropic
//     cache_read_input_tokens; OpenAI prompt_tokens_details.cached_tokens
//     or input_tokens_details.cached_tokens).
//   - cacheWrite: input written to the cache (Anthropic
//     cache_creation_input_tokens; OpenAI bills none).
//
// Each door translates its provider's usage block with one of the
// functions below, never by hand.
type usage struct {
	ok                              bool
	uncached, cacheRead, cacheWrite int64
	output                          int64
	// added is the local count of what the request sent after the view
	// (an expand loop's follow-up): it calibrates with it, never anchors.
	added int64
	// estimated: the answer ended before the provider's final usage
	// (cutusage.go); relayed is the text of the answer that came, which
	// the recording counts as output with the session's encoding.
	estimated bool
	relayed   string
}

// anthropicUsage translates Anthropic's usage, whose input_tokens is
// already the uncached part (the cache fields are beside it).
func anthropicUsage(input, cacheRead, cacheWrite, output int64) usage {
	return usage{ok: true, uncached: max(input, 0), cacheRead: max(cacheRead, 0), cacheWrite: max(cacheWrite, 0), output: max(output, 0)}
}

// openAIUsage translates OpenAI's usage (Chat Completions prompt_tokens,
// Responses input_tokens), whose input includes the cached tokens. A
// cached figure above the input (a broken upstream) is capped at it, so
// the parts still add up to what the provider counted.
func openAIUsage(input, cached, output int64) usage {
	input = max(input, 0)
	cached = min(max(cached, 0), input)
	return usage{ok: true, uncached: input - cached, cacheRead: cached, output: max(output, 0)}
}

// input is all the tokens the provider counted for the request.
func (u usage) input() int64 { return u.uncached + u.cacheRead + u.cacheWrite }

// report is usage as ReportUsage takes it, for the view token of the call.
func (u usage) report(viewToken string) engine.ReportInput {
	return engine.ReportInput{InputTokens: u.uncached, CacheReadTokens: u.cacheRead, CacheCreationTokens: u.cacheWrite,
		OutputTokens: u.output, ViewToken: viewToken, AddedLocalTokens: u.added,
		Estimated: u.estimated, RelayedText: u.relayed}
}
