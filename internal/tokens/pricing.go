package tokens

import "math"

// Pricing is a model's list price in USD per million tokens.
type Pricing struct {
	// Input is uncached input.
	Input float64 `json:"input"`
	// CachedInput is input read from the provider's prompt cache.
	CachedInput float64 `json:"cached_input"`
	// CacheWrite is input written to the prompt cache (Anthropic's cache
	// creation); the input price where writes cost nothing extra (OpenAI).
	CacheWrite float64 `json:"cache_write"`
	// Output is output.
	Output float64 `json:"output"`
}

func (p Pricing) valid() bool {
	for _, v := range []float64{p.Input, p.CachedInput, p.CacheWrite, p.Output} {
		if v < 0 || math.IsNaN(v) || math.IsInf(v, 0) {
			return false
		}
	}
	return true
}

// Cost is the price in USD of a call's tokens.
func (p Pricing) Cost(input, cacheRead, cacheWrite, output int64) float64 {
	return (float64(input)*p.Input + float64(cacheRead)*p.CachedInput +
		float64(cacheWrite)*p.CacheWrite + float64(output)*p.Output) / 1e6
}

// builtinPrices are list prices (USD per million tokens, standard tier, as
// published by the providers in November 2025; prompts under 200k tokens
// where the price depends on length). OpenAI and Google charge nothing extra
// for cache writes, so CacheWrite equals Input; models without a prompt
// cache have CachedInput equal to Input. Open-weight models have no list
// price (their cost depends on who serves them): set one in the models file.
var builtinPrices = map[string]Pricing{
	"gpt-4o":                {Input: 2.50, CachedInput: 1.25, CacheWrite: 2.50, Output: 10},
	"gpt-4o-mini":           {Input: 0.15, CachedInput: 0.075, CacheWrite: 0.15, Output: 0.60},
	"gpt-4.1":               {Input: 2.00, CachedInput: 0.50, CacheWrite: 2.00, Output: 8},
	"gpt-4.1-mini":          {Input: 0.40, CachedInput: 0.10, CacheWrite: 0.40, Output: 1.60},
	"gpt-4.1-nano":          {Input: 0.10, CachedInput: 0.025, CacheWrite: 0.10, Output: 0.40},
	"gpt-4.5-preview":       {Input: 75, CachedInput: 37.5, CacheWrite: 75, Output: 150},
	"gpt-5":                 {Input: 1.25, CachedInput: 0.125, CacheWrite: 1.25, Output: 10},
	"gpt-5-mini":            {Input: 0.25, CachedInput: 0.025, CacheWrite: 0.25, Output: 2},
	"gpt-5-nano":            {Input: 0.05, CachedInput: 0.005, CacheWrite: 0.05, Output: 0.40},
	"gpt-5-codex":           {Input: 1.25, CachedInput: 0.125, CacheWrite: 1.25, Output: 10},
	"gpt-5.1":               {Input: 1.25, CachedInput: 0.125, CacheWrite: 1.25, Output: 10},
	"gpt-5.1-codex":         {Input: 1.25, CachedInput: 0.125, CacheWrite: 1.25, Output: 10},
	"o1":                    {Input: 15, CachedInput: 7.5, CacheWrite: 15, Output: 60},
	"o3":                    {Input: 2, CachedInput: 0.50, CacheWrite: 2, Output: 8},
	"o3-mini":               {Input: 1.10, CachedInput: 0.55, CacheWrite: 1.10, Output: 4.40},
	"o4-mini":               {Input: 1.10, CachedInput: 0.275, CacheWrite: 1.10, Output: 4.40},
	"gpt-4":                 {Input: 30, CachedInput: 30, CacheWrite: 30, Output: 60},
	"gpt-4-32k":             {Input: 60, CachedInput: 60, CacheWrite: 60, Output: 120},
	"gpt-4-turbo":           {Input: 10, CachedInput: 10, CacheWrite: 10, Output: 30},
	"gpt-3.5-turbo":         {Input: 0.50, CachedInput: 0.50, CacheWrite: 0.50, Output: 1.50},
	"claude-3-5-sonnet":     {Input: 3, CachedInput: 0.30, CacheWrite: 3.75, Output: 15},
	"claude-3-5-haiku":      {Input: 0.80, CachedInput: 0.08, CacheWrite: 1, Output: 4},
	"claude-3-7-sonnet":     {Input: 3, CachedInput: 0.30, CacheWrite: 3.75, Output: 15},
	"claude-sonnet-4":       {Input: 3, CachedInput: 0.30, CacheWrite: 3.75, Output: 15},
	"claude-sonnet-4-5":     {Input: 3, CachedInput: 0.30, CacheWrite: 3.75, Output: 15},
	"claude-opus-4":         {Input: 15, CachedInput: 1.50, CacheWrite: 18.75, Output: 75},
	"claude-opus-4-1":       {Input: 15, CachedInput: 1.50, CacheWrite: 18.75, Output: 75},
	"claude-opus-4-5":       {Input: 5, CachedInput: 0.50, CacheWrite: 6.25, Output: 25},
	"claude-haiku-4-5":      {Input: 1, CachedInput: 0.10, CacheWrite: 1.25, Output: 5},
	"gemini-2.5-pro":        {Input: 1.25, CachedInput: 0.125, CacheWrite: 1.25, Output: 10},
	"gemini-2.5-flash":      {Input: 0.30, CachedInput: 0.03, CacheWrite: 0.30, Output: 2.50},
	"gemini-2.5-flash-lite": {Input: 0.10, CachedInput: 0.01, CacheWrite: 0.10, Output: 0.40},
	"mistral-large":         {Input: 2, CachedInput: 2, CacheWrite: 2, Output: 6},
}

// CacheFactors are the cache read and write prices relative to uncached
// input, as the planner weighs a rewrite of the prompt cache. Without
// prices, Anthropic's published factors (0.1 and 1.25) are assumed.
func (m Model) CacheFactors() (read, write float64) {
	if p := m.Pricing; p != nil && p.Input > 0 {
		return p.CachedInput / p.Input, p.CacheWrite / p.Input
	}
	return 0.1, 1.25
}
