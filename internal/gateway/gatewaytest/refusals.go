package gatewaytest

import (
	"encoding/json"
	"fmt"
	"sort"
	"strings"
)

// What the providers refuse, in their words: the checks of this fake and
// of test/clients' scripted provider, which plays the model for the real
// agent CLIs. A request a check finds a problem in is answered 400 with
// the problems, and recorded with them (Request.Problems), so a test sees
// what the real provider would have refused.

// Recall is what a provider remembers of its own answers, which some
// refusals depend on: by tool call (Anthropic tool_use id, Responses
// function call item id), the signed thinking or the reasoning item it
// sent before it. Nil remembers nothing.
type Recall func(id string) (string, bool)

func recall(r Recall, id string) (string, bool) {
	if r == nil {
		return "", false
	}
	return r(id)
}

// CheckMessages is what Anthropic refuses: no max_tokens, a first message
// that is not the user's, roles that do not alternate, tool_use blocks
// whose results are not all first in the next user message, results of no
// call, empty text blocks, more than four cache_control marks, and — with
// thinking on — an assistant turn in a tool loop that does not start with
// the signed thinking block the provider sent with its tool call.
func CheckMessages(body map[string]any, sent Recall) []string {
	var problems []string
	msgs, _ := body["messages"].([]any)
	if len(msgs) == 0 {
		return []string{"messages: field required"}
	}
	if _, ok := body["max_tokens"].(float64); !ok {
		problems = append(problems, "max_tokens: field required")
	}
	raw, _ := json.Marshal(body)
	if n := strings.Count(string(raw), `"cache_control"`); n > 4 {
		problems = append(problems, fmt.Sprintf("A maximum of 4 blocks with cache_control may be provided. Found %d.", n))
	}
	thinking := false
	if th, ok := body["thinking"].(map[string]any); ok && th["type"] == "enabled" {
		thinking = true
	}
	prevRole := ""
	var open map[string]bool
	for i, x := range msgs {
		m, _ := x.(map[string]any)
		role, _ := m["role"].(string)
		if role != "user" && role != "assistant" {
			problems = append(problems, fmt.Sprintf("messages.%d.role: Input should be 'user' or 'assistant'", i))
		}
		if i == 0 && role != "user" {
			problems = append(problems, "messages.0: the first message must use the user role")
		}
		if role == prevRole {
			problems = append(problems, fmt.Sprintf("messages.%d: roles must alternate between user and assistant (two %s messages)", i, role))
		}
		prevRole = role
		if s, ok := m["content"].(string); ok && s == "" && !(i == len(msgs)-1 && role == "assistant") {
			problems = append(problems, fmt.Sprintf("messages.%d: content must be non-empty", i))
		}
		pending := open
		open = nil
		seenOther := false
		blocks := Blocks(m["content"])
		for j, b := range blocks {
			typ, _ := b["type"].(string)
			switch typ {
			case "text":
				if t, _ := b["text"].(string); strings.TrimSpace(t) == "" {
					problems = append(problems, fmt.Sprintf("messages.%d.content.%d.text: text content blocks must contain non-whitespace text", i, j))
				}
				seenOther = true
			case "tool_use":
				if role != "assistant" {
					problems = append(problems, fmt.Sprintf("messages.%d.content.%d: tool_use in a user message", i, j))
				}
				if open == nil {
					open = map[string]bool{}
				}
				id, _ := b["id"].(string)
				open[id] = true
			case "tool_result":
				id, _ := b["tool_use_id"].(string)
				if !pending[id] {
					problems = append(problems, fmt.Sprintf("messages.%d.content.%d: unexpected tool_use_id found in tool_result blocks: %s. Each tool_result block must have a corresponding tool_use block in the previous message.", i, j, id))
				}
				if seenOther {
					problems = append(problems, fmt.Sprintf("messages.%d.content.%d: tool_result blocks must come first in the user message", i, j))
				}
				delete(pending, id)
			default:
				seenOther = true
			}
		}
		if len(pending) > 0 {
			problems = append(problems, fmt.Sprintf("messages.%d: tool_use ids were found without tool_result blocks immediately after: %v", i, sorted(pending)))
		}
		// With thinking on, the assistant turn of an unfinished tool loop
		// (the last assistant message, answered by tool results) starts
		// with its thinking block, signature intact.
		if thinking && role == "assistant" && i == len(msgs)-2 && len(blocks) > 0 {
			for _, b := range blocks {
				if b["type"] != "tool_use" {
					continue
				}
				id, _ := b["id"].(string)
				sig, signed := recall(sent, id)
				if signed && (blocks[0]["type"] != "thinking" || blocks[0]["signature"] != sig) {
					problems = append(problems, fmt.Sprintf("messages.%d.content.0.type: Expected `thinking` or `redacted_thinking`, but found `%v`. When `thinking` is enabled, a final `assistant` message must start with a thinking block.", i, blocks[0]["type"]))
				}
			}
		}
	}
	if len(open) > 0 {
		problems = append(problems, fmt.Sprintf("messages.%d: tool_use ids were found without tool_result blocks immediately after: %v", len(msgs)-1, sorted(open)))
	}
	return problems
}

// CheckResponses is what OpenAI refuses in a Responses request: an output
// for no call, a call with no output, a reasoning item that cannot be
// found (store false and no encrypted content), and a function call the
// provider answered after a reasoning item, sent back without it.
func CheckResponses(body map[string]any, sent Recall) []string {
	var problems []string
	input, ok := body["input"].([]any)
	if !ok {
		if _, isString := body["input"].(string); isString {
			return nil
		}
		return []string{"input: Missing required parameter: 'input'."}
	}
	store := true
	if s, ok := body["store"].(bool); ok {
		store = s
	}
	open := map[string]bool{}
	reasoningIDs := map[string]bool{}
	for i, x := range input {
		it, _ := x.(map[string]any)
		typ, _ := it["type"].(string)
		id, _ := it["call_id"].(string)
		switch {
		case typ == "reasoning":
			rid, _ := it["id"].(string)
			reasoningIDs[rid] = true
			if _, ok := it["summary"].([]any); !ok {
				problems = append(problems, fmt.Sprintf("input[%d].summary: Missing required parameter", i))
			}
			if !store && it["encrypted_content"] == nil {
				problems = append(problems, fmt.Sprintf("Item with id '%s' not found. Items are not persisted when `store` is set to false. Try again with `store` set to true, or remove this item from your input.", rid))
			}
		case strings.HasSuffix(typ, "_call_output"):
			if !open[id] {
				problems = append(problems, fmt.Sprintf("No tool call found for function call output with call_id %s.", id))
			}
			delete(open, id)
		case strings.HasSuffix(typ, "_call"):
			open[id] = true
			if itemID, _ := it["id"].(string); itemID != "" {
				rs, had := recall(sent, itemID)
				if had && !reasoningIDs[rs] {
					problems = append(problems, fmt.Sprintf("Item '%s' of type '%s' was provided without its required 'reasoning' item: '%s'.", itemID, typ, rs))
				}
			}
		default:
			if role, _ := it["role"].(string); role != "" && len(open) > 0 && role != "assistant" {
				problems = append(problems, fmt.Sprintf("No tool output found for function call %s.", strings.Join(sorted(open), ", ")))
				open = map[string]bool{}
			}
		}
	}
	if len(open) > 0 {
		problems = append(problems, fmt.Sprintf("No tool output found for function call %s.", strings.Join(sorted(open), ", ")))
	}
	return problems
}

// CheckChat is what OpenAI refuses in a Chat Completions request: tool
// calls not answered by tool messages right after them, a tool message
// that answers no call, an assistant message with neither content nor
// tool calls.
func CheckChat(body map[string]any) []string {
	var problems []string
	msgs, _ := body["messages"].([]any)
	if len(msgs) == 0 {
		return []string{"messages: empty array"}
	}
	open := map[string]bool{}
	firstNonSystem := ""
	for i, x := range msgs {
		m, _ := x.(map[string]any)
		role, _ := m["role"].(string)
		if firstNonSystem == "" && role != "system" && role != "developer" {
			firstNonSystem = role
		}
		if role != "tool" && len(open) > 0 {
			problems = append(problems, fmt.Sprintf("messages.[%d]: An assistant message with 'tool_calls' must be followed by tool messages responding to each 'tool_call_id'. The following tool_call_ids did not have response messages: %s", i, strings.Join(sorted(open), ", ")))
			open = map[string]bool{}
		}
		switch role {
		case "system", "developer", "user":
		case "assistant":
			calls, _ := m["tool_calls"].([]any)
			for _, c := range calls {
				id, _ := c.(map[string]any)["id"].(string)
				open[id] = true
			}
			if len(calls) == 0 && m["content"] == nil {
				problems = append(problems, fmt.Sprintf("messages.[%d].content: an assistant message needs content or tool_calls", i))
			}
		case "tool":
			id, _ := m["tool_call_id"].(string)
			if !open[id] {
				problems = append(problems, fmt.Sprintf("messages.[%d].role: messages with role 'tool' must be a response to a preceeding message with 'tool_calls'", i))
			}
			delete(open, id)
		default:
			problems = append(problems, fmt.Sprintf("messages.[%d].role: unknown role %q", i, role))
		}
	}
	if firstNonSystem != "user" {
		problems = append(problems, "the first message after the system messages is "+firstNonSystem+", not user")
	}
	if len(open) > 0 {
		problems = append(problems, fmt.Sprintf("An assistant message with 'tool_calls' must be followed by tool messages responding to each 'tool_call_id'. The following tool_call_ids did not have response messages: %s", strings.Join(sorted(open), ", ")))
	}
	return problems
}

func sorted(m map[string]bool) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// Blocks is an Anthropic message content as blocks (a string is one
// text block).
func Blocks(content any) []map[string]any {
	switch c := content.(type) {
	case string:
		return []map[string]any{{"type": "text", "text": c}}
	case []any:
		var out []map[string]any
		for _, b := range c {
			if m, ok := b.(map[string]any); ok {
				out = append(out, m)
			}
		}
		return out
	}
	return nil
}
