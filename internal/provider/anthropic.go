// Package provider owns calls to model providers' own token counting: today
// Anthropic's count_tokens endpoint, behind a content-hash cache.
package provider

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"net/http"
	"sync"
	"time"

	"github.com/anthropics/anthropic-sdk-go"
	"github.com/anthropics/anthropic-sdk-go/option"

	"github.com/contextd/contextd/internal/chat"
)

// Config reaches a provider's API. The key is never logged or returned.
type Config struct {
	BaseURL    string
	APIKey     string
	Timeout    time.Duration
	MaxRetries int
	HTTPClient *http.Client
}

// cacheTTL is how long a count is reused for identical content.
const cacheTTL = time.Hour

// maxCacheEntries bounds the cache; when full, expired entries are swept and,
// if none expired, the cache starts over.
const maxCacheEntries = 20_000

// AnthropicCounter counts requests with Anthropic's
// POST /v1/messages/count_tokens. Identical requests within an hour are
// answered from a cache keyed by a hash of their content.
type AnthropicCounter struct {
	client anthropic.Client
	now    func() time.Time
	mu     sync.Mutex
	cache  map[[32]byte]cached
}

type cached struct {
	tokens int64
	at     time.Time
}

// NewAnthropicCounter returns a counter for the endpoint.
func NewAnthropicCounter(c Config) *AnthropicCounter {
	opts := []option.RequestOption{option.WithAPIKey(c.APIKey), option.WithMaxRetries(c.MaxRetries), option.WithRequestTimeout(c.Timeout)}
	if c.BaseURL != "" {
		opts = append(opts, option.WithBaseURL(c.BaseURL))
	}
	if c.HTTPClient != nil {
		opts = append(opts, option.WithHTTPClient(c.HTTPClient))
	}
	return &AnthropicCounter{client: anthropic.NewClient(opts...), now: time.Now, cache: map[[32]byte]cached{}}
}

// ErrNothingToCount is returned for a request without messages (the
// endpoint needs at least one).
var ErrNothingToCount = errors.New("count_tokens needs at least one message")

// Count returns the provider's input tokens for the request, and whether the
// answer came from the cache.
func (a *AnthropicCounter) Count(ctx context.Context, model, system string, tools []chat.Tool, msgs []chat.Message) (int64, bool, error) {
	body, err := anthropicRequest(model, system, tools, msgs)
	if err != nil {
		return 0, false, err
	}
	raw, err := json.Marshal(body)
	if err != nil {
		return 0, false, err
	}
	key := sha256.Sum256(raw)
	now := a.now()
	a.mu.Lock()
	if c, ok := a.cache[key]; ok && now.Sub(c.at) < cacheTTL {
		a.mu.Unlock()
		return c.tokens, true, nil
	}
	a.mu.Unlock()

	var res anthropic.MessageTokensCount
	if err := a.client.Post(ctx, "v1/messages/count_tokens", json.RawMessage(raw), &res); err != nil {
		return 0, false, err
	}
	if res.InputTokens <= 0 {
		return 0, false, errors.New("count_tokens answered no input_tokens")
	}
	a.mu.Lock()
	if len(a.cache) >= maxCacheEntries {
		for k, c := range a.cache {
			if now.Sub(c.at) >= cacheTTL {
				delete(a.cache, k)
			}
		}
		if len(a.cache) >= maxCacheEntries {
			a.cache = map[[32]byte]cached{}
		}
	}
	a.cache[key] = cached{tokens: res.InputTokens, at: now}
	a.mu.Unlock()
	return res.InputTokens, false, nil
}

// anthropicRequest renders our request in the Messages API format: system
// text on its own, tool results as tool_result blocks of user turns, tool
// calls as tool_use blocks, images left out (they are counted locally).
func anthropicRequest(model, system string, tools []chat.Tool, msgs []chat.Message) (map[string]any, error) {
	var messages []map[string]any
	for i := range msgs {
		m := &msgs[i]
		if m.Role == chat.RoleSystem {
			system += "\n\n" + textOf(m)
			continue
		}
		role := "user"
		if m.Role == chat.RoleAssistant {
			role = "assistant"
		}
		var content []map[string]any
		for _, p := range m.Parts {
			switch p.Type {
			case chat.PartText:
				if p.Text != "" {
					content = append(content, map[string]any{"type": "text", "text": p.Text})
				}
			case chat.PartToolCall:
				var input any = map[string]any{}
				if json.Unmarshal([]byte(p.ToolCall.Arguments), &input) != nil {
					input = map[string]any{"arguments": p.ToolCall.Arguments}
				}
				content = append(content, map[string]any{"type": "tool_use", "id": p.ToolCall.ID, "name": p.ToolCall.Name, "input": input})
			case chat.PartToolResult:
				content = append(content, map[string]any{"type": "tool_result", "tool_use_id": p.ToolResult.ToolCallID,
					"content": p.ToolResult.Content, "is_error": p.ToolResult.IsError})
			}
		}
		if len(content) == 0 {
			content = append(content, map[string]any{"type": "text", "text": "(empty)"})
		}
		messages = append(messages, map[string]any{"role": role, "content": content})
	}
	if len(messages) == 0 {
		return nil, ErrNothingToCount
	}
	body := map[string]any{"model": model, "messages": messages}
	if system != "" {
		body["system"] = system
	}
	if len(tools) > 0 {
		var defs []map[string]any
		for _, t := range tools {
			schema := map[string]any{"type": "object"}
			if t.Parameters != "" {
				_ = json.Unmarshal([]byte(t.Parameters), &schema)
			}
			defs = append(defs, map[string]any{"name": t.Name, "description": t.Description, "input_schema": schema})
		}
		body["tools"] = defs
	}
	return body, nil
}

func textOf(m *chat.Message) string {
	out := ""
	for _, p := range m.Parts {
		if p.Type == chat.PartText {
			out += p.Text
		}
	}
	return out
}
