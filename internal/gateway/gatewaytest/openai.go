package gatewaytest

import (
	"net/http"
	"strings"
)

// chat serves POST /v1/chat/completions.
func (f *Fake) chat(w http.ResponseWriter, r *http.Request) {
	body, reply, bill, idx, ok := f.receive(w, r, CheckChat)
	if !ok {
		return
	}
	model, _ := body["model"].(string)
	// prompt_tokens includes the cached tokens.
	usage := map[string]any{"prompt_tokens": bill.Input(), "completion_tokens": bill.Output, "total_tokens": bill.Input() + bill.Output,
		"prompt_tokens_details": map[string]any{"cached_tokens": bill.CacheRead, "audio_tokens": 0}}
	replies := append([]Reply{reply}, reply.More...)
	var choices []any
	for i, rp := range replies {
		msg := map[string]any{"role": "assistant", "content": rp.Text, "refusal": nil, "annotations": []any{}}
		calls := chatCalls(rp.ToolCalls)
		if len(calls) > 0 {
			msg["tool_calls"] = calls
			if rp.Text == "" {
				msg["content"] = nil
			}
		}
		choices = append(choices, map[string]any{"index": i, "message": msg, "finish_reason": finishOf(rp), "logprobs": nil})
	}
	resp := map[string]any{"id": "chatcmpl-fake", "object": "chat.completion", "created": 1, "model": model,
		"choices": choices, "usage": usage}
	if !f.streams(body) {
		writeJSON(w, resp)
		return
	}
	so, _ := body["stream_options"].(map[string]any)
	includeUsage, _ := so["include_usage"].(bool)
	s := f.startSSE(w, idx, bill)
	emit := func(name string, data any) { s.event(name, data) }
	f.mu.Lock()
	endless, ended := f.Endless, f.Ended
	f.mu.Unlock()
	if endless > 0 {
		// A model that never stops talking, to a client that stopped
		// reading: only the client's going away ends it.
		chunk := func(delta map[string]any) map[string]any {
			return map[string]any{"id": "chatcmpl-fake", "object": "chat.completion.chunk", "created": 1, "model": model,
				"choices": []any{map[string]any{"index": 0, "delta": delta, "finish_reason": nil, "logprobs": nil}}}
		}
		s.event("", chunk(map[string]any{"role": "assistant", "content": ""}))
		piece := strings.Repeat("x", endless)
		n := 0
		for r.Context().Err() == nil && s.event("", chunk(map[string]any{"content": piece})) {
			n++
		}
		if ended != nil {
			ended <- n
		}
		return
	}
	ChatChunks(emit, resp, split, includeUsage)
}

func chatCalls(tcs []ToolCall) []map[string]any {
	var calls []map[string]any
	for _, c := range tcs {
		calls = append(calls, map[string]any{"id": c.ID, "type": "function", "function": map[string]any{"name": c.Name, "arguments": c.Arguments}})
	}
	return calls
}

func finishOf(r Reply) string {
	if len(r.ToolCalls) > 0 {
		return "tool_calls"
	}
	return "stop"
}

// responses serves POST /v1/responses.
func (f *Fake) responses(w http.ResponseWriter, r *http.Request) {
	body, reply, bill, idx, ok := f.receive(w, r, func(body map[string]any) []string { return CheckResponses(body, nil) })
	if !ok {
		return
	}
	model, _ := body["model"].(string)
	var output []map[string]any
	if reply.EmptyReasoning {
		output = append(output, map[string]any{"type": "reasoning", "id": "rs_empty", "summary": []any{}, "encrypted_content": "enc:empty"})
	}
	if reply.Thinking != "" {
		output = append(output, map[string]any{"type": "reasoning", "id": "rs_fake", "summary": []any{map[string]any{"type": "summary_text", "text": reply.Thinking}},
			"encrypted_content": "enc:" + reply.Thinking})
	}
	if reply.Text != "" {
		output = append(output, map[string]any{"type": "message", "id": "msg_fake", "role": "assistant", "status": "completed",
			"content": []any{map[string]any{"type": "output_text", "text": reply.Text, "annotations": []any{}}}})
	}
	for _, c := range reply.ToolCalls {
		output = append(output, map[string]any{"type": "function_call", "id": "fc_" + c.ID, "call_id": c.ID, "name": c.Name, "arguments": c.Arguments, "status": "completed"})
	}
	// As OpenAI does, the response echoes the request's tools and
	// tool_choice (every event that carries the response, too).
	tools, choice := body["tools"], body["tool_choice"]
	if tools == nil {
		tools = []any{}
	}
	if choice == nil {
		choice = "auto"
	}
	resp := map[string]any{"id": "resp_fake", "object": "response", "created_at": 1, "status": "completed", "model": model,
		"output": output, "parallel_tool_calls": true, "tool_choice": choice, "tools": tools,
		"usage": map[string]any{"input_tokens": bill.Input(), "input_tokens_details": map[string]any{"cached_tokens": bill.CacheRead},
			"output_tokens": bill.Output, "output_tokens_details": map[string]any{"reasoning_tokens": 0}, "total_tokens": bill.Input() + bill.Output}}
	if !f.streams(body) {
		writeJSON(w, resp)
		return
	}
	s := f.startSSE(w, idx, bill)
	ResponsesEvents(func(name string, data any) { s.event(name, data) }, resp, split)
}
