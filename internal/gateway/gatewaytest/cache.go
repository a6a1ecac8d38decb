package gatewaytest

import (
	"bytes"
	"encoding/json"
	"strings"
)

// Bill is the usage the fake reports for one call, split as the providers
// split it: Uncached + CacheRead + CacheWrite is all the input it counted
// (Anthropic reports the three apart; OpenAI's prompt_tokens/input_tokens
// is their sum, with CacheRead as cached_tokens and no writes).
type Bill struct {
	Uncached, CacheRead, CacheWrite, Output int64
}

// Input is all the input tokens counted.
func (b Bill) Input() int64 { return b.Uncached + b.CacheRead + b.CacheWrite }

// openAIMinCached is the shortest prefix OpenAI's automatic prompt cache
// serves, and cached_tokens comes in steps of openAIStep beyond it.
const openAIMinCached, openAIStep = 1024, 128

// cache splits a request's input as the provider's prompt cache would:
// the prompt it shares from the start with the previous request of the
// same path was cached by that request (1 token per 4 bytes, as the
// count). The prompt is in the order the provider caches it (prompt),
// not the body's key order.
// Anthropic reads them when the request carries cache_control marks and
// writes most of the rest (all but the few tokens after the last mark);
// OpenAI caches automatically from 1,024 tokens on, in 128-token steps,
// and bills no writes. The fake's lock is held.
func (f *Fake) cache(path string, raw []byte, body map[string]any, in, out int64) Bill {
	if f.last == nil {
		f.last = map[string][]byte{}
	}
	p := prompt(path, body)
	prev := f.last[path]
	f.last[path] = p
	n := 0
	for n < len(prev) && n < len(p) && prev[n] == p[n] {
		n++
	}
	shared := min(int64(n/4), in)
	if anthropicPath(path) {
		if !bytes.Contains(raw, []byte(`"cache_control"`)) {
			return Bill{Uncached: in, Output: out}
		}
		rest := in - shared
		uncached := min(rest, rest/16+3)
		return Bill{Uncached: uncached, CacheRead: shared, CacheWrite: rest - uncached, Output: out}
	}
	cached := int64(0)
	if shared >= openAIMinCached {
		cached = shared / openAIStep * openAIStep
	}
	return Bill{Uncached: in - cached, CacheRead: cached, Output: out}
}

func anthropicPath(path string) bool { return strings.HasPrefix(path, "/v1/messages") }

// prompt is a request's prompt in the order the provider caches it:
// Anthropic tools, system, messages; Chat Completions tools, messages;
// Responses tools, instructions, input.
func prompt(path string, body map[string]any) []byte {
	order := []string{"tools", "messages"}
	switch {
	case anthropicPath(path):
		order = []string{"tools", "system", "messages"}
	case strings.HasSuffix(path, "/responses"):
		order = []string{"tools", "instructions", "input"}
	}
	var out []byte
	for _, k := range order {
		b, _ := json.Marshal(body[k])
		out = append(out, b...)
	}
	return out
}
