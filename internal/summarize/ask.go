package summarize

import (
	"context"
	"fmt"
	"strings"

	"github.com/anthropics/anthropic-sdk-go"
	"github.com/openai/openai-go/v3"
)

// Asker asks a model one question with a system prompt, through the same
// provider client a summarizer uses (the recall benchmark's judge,
// internal/costbench), and returns its answer and what the call was billed.
type Asker interface {
	Ask(ctx context.Context, system, prompt string, maxTokens int) (string, Usage, error)
}

// Ask implements Asker.
func (o *OpenAI) Ask(ctx context.Context, system, prompt string, maxTokens int) (string, Usage, error) {
	text, u, _, err := o.ask(ctx, system, prompt, maxTokens)
	return text, u, err
}

// ask is Ask, and whether the answer stopped at maxTokens (cut).
func (o *OpenAI) ask(ctx context.Context, system, prompt string, maxTokens int) (string, Usage, bool, error) {
	resp, err := o.client.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{
		Model:               o.model,
		Messages:            []openai.ChatCompletionMessageParamUnion{openai.SystemMessage(system), openai.UserMessage(prompt)},
		MaxCompletionTokens: openai.Int(int64(maxTokens)),
	})
	if err != nil {
		return "", Usage{}, false, fmt.Errorf("openai-compatible model (%s): %w", o.model, err)
	}
	cached := resp.Usage.PromptTokensDetails.CachedTokens
	u := Usage{Model: o.model, Input: resp.Usage.PromptTokens - cached, CacheRead: cached, Output: resp.Usage.CompletionTokens}
	if len(resp.Choices) == 0 {
		return "", u, false, fmt.Errorf("openai-compatible model (%s): %w", o.model, ErrEmptyAnswer)
	}
	return strings.TrimSpace(resp.Choices[0].Message.Content), u, resp.Choices[0].FinishReason == "length", nil
}

// Ask implements Asker.
func (a *Anthropic) Ask(ctx context.Context, system, prompt string, maxTokens int) (string, Usage, error) {
	text, u, _, err := a.ask(ctx, system, prompt, maxTokens)
	return text, u, err
}

// ask is Ask, and whether the answer stopped at maxTokens (cut).
func (a *Anthropic) ask(ctx context.Context, system, prompt string, maxTokens int) (string, Usage, bool, error) {
	resp, err := a.client.Messages.New(ctx, anthropic.MessageNewParams{
		Model:     a.model,
		MaxTokens: int64(maxTokens),
		System:    []anthropic.TextBlockParam{{Text: system}},
		Messages:  []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock(prompt))},
	})
	if err != nil {
		return "", Usage{}, false, fmt.Errorf("anthropic model (%s): %w", a.model, err)
	}
	u := Usage{Model: a.model, Input: resp.Usage.InputTokens, CacheRead: resp.Usage.CacheReadInputTokens,
		CacheWrite: resp.Usage.CacheCreationInputTokens, Output: resp.Usage.OutputTokens}
	var parts []string
	for _, block := range resp.Content {
		if block.Type == "text" {
			parts = append(parts, block.Text)
		}
	}
	return strings.TrimSpace(strings.Join(parts, "\n")), u, resp.StopReason == anthropic.StopReasonMaxTokens, nil
}
