package gatewaytest

import (
	"encoding/json"
	"net/http"
)

// messages serves POST /v1/messages.
func (f *Fake) messages(w http.ResponseWriter, r *http.Request) {
	if r.Header.Get("anthropic-version") == "" {
		w.WriteHeader(http.StatusBadRequest)
		_, _ = w.Write([]byte(`{"type":"error","error":{"type":"invalid_request_error","message":"anthropic-version: header is required"}}`))
		return
	}
	body, reply, bill, ok := f.receive(w, r, func(body map[string]any) []string { return CheckMessages(body, nil) })
	if !ok {
		return
	}
	model, _ := body["model"].(string)
	var content []any
	if reply.Thinking != "" {
		content = append(content, map[string]any{"type": "thinking", "thinking": reply.Thinking, "signature": "sig-" + reply.Thinking})
	}
	if reply.Text != "" {
		content = append(content, map[string]any{"type": "text", "text": reply.Text})
	}
	for _, c := range reply.ToolCalls {
		var input any = map[string]any{}
		_ = json.Unmarshal([]byte(c.Arguments), &input)
		content = append(content, map[string]any{"type": "tool_use", "id": c.ID, "name": c.Name, "input": input})
	}
	stop := "end_turn"
	if len(reply.ToolCalls) > 0 {
		stop = "tool_use"
	}
	usage := map[string]any{"input_tokens": bill.Uncached, "output_tokens": bill.Output, "cache_creation_input_tokens": bill.CacheWrite, "cache_read_input_tokens": bill.CacheRead}
	msg := map[string]any{"id": "msg_fake", "type": "message", "role": "assistant", "model": model, "content": content,
		"stop_reason": stop, "stop_sequence": nil, "usage": usage}
	if !f.streams(body) {
		writeJSON(w, msg)
		return
	}
	s := f.startSSE(w)
	start := map[string]any{}
	for k, v := range msg {
		start[k] = v
	}
	start["content"], start["stop_reason"] = []any{}, nil
	start["usage"] = map[string]any{"input_tokens": bill.Uncached, "output_tokens": 1, "cache_creation_input_tokens": bill.CacheWrite, "cache_read_input_tokens": bill.CacheRead}
	s.event("message_start", map[string]any{"type": "message_start", "message": start})
	if reply.Interleave {
		// Every block starts, then each gets its deltas, then all stop.
		for i, b := range content {
			block := b.(map[string]any)
			empty := map[string]any{"type": block["type"]}
			switch block["type"] {
			case "text":
				empty["text"] = ""
			case "tool_use":
				empty["id"], empty["name"], empty["input"] = block["id"], block["name"], map[string]any{}
			case "thinking":
				empty["thinking"], empty["signature"] = "", ""
			}
			s.event("content_block_start", map[string]any{"type": "content_block_start", "index": i, "content_block": empty})
		}
		for i, b := range content {
			block := b.(map[string]any)
			switch block["type"] {
			case "text":
				s.event("content_block_delta", map[string]any{"type": "content_block_delta", "index": i, "delta": map[string]any{"type": "text_delta", "text": block["text"]}})
			case "tool_use":
				args, _ := json.Marshal(block["input"])
				s.event("content_block_delta", map[string]any{"type": "content_block_delta", "index": i, "delta": map[string]any{"type": "input_json_delta", "partial_json": string(args)}})
			case "thinking":
				s.event("content_block_delta", map[string]any{"type": "content_block_delta", "index": i, "delta": map[string]any{"type": "thinking_delta", "thinking": block["thinking"]}})
				s.event("content_block_delta", map[string]any{"type": "content_block_delta", "index": i, "delta": map[string]any{"type": "signature_delta", "signature": block["signature"]}})
			}
		}
		for i := range content {
			s.event("content_block_stop", map[string]any{"type": "content_block_stop", "index": i})
		}
		content = nil
	}
	for i, b := range content {
		block := b.(map[string]any)
		switch block["type"] {
		case "thinking":
			s.event("content_block_start", map[string]any{"type": "content_block_start", "index": i, "content_block": map[string]any{"type": "thinking", "thinking": "", "signature": ""}})
			s.event("content_block_delta", map[string]any{"type": "content_block_delta", "index": i, "delta": map[string]any{"type": "thinking_delta", "thinking": block["thinking"]}})
			s.event("content_block_delta", map[string]any{"type": "content_block_delta", "index": i, "delta": map[string]any{"type": "signature_delta", "signature": block["signature"]}})
		case "text":
			s.event("content_block_start", map[string]any{"type": "content_block_start", "index": i, "content_block": map[string]any{"type": "text", "text": ""}})
			for _, piece := range split(block["text"].(string)) {
				s.event("content_block_delta", map[string]any{"type": "content_block_delta", "index": i, "delta": map[string]any{"type": "text_delta", "text": piece}})
			}
		case "tool_use":
			s.event("content_block_start", map[string]any{"type": "content_block_start", "index": i, "content_block": map[string]any{"type": "tool_use", "id": block["id"], "name": block["name"], "input": map[string]any{}}})
			args, _ := json.Marshal(block["input"])
			for _, piece := range split(string(args)) {
				s.event("content_block_delta", map[string]any{"type": "content_block_delta", "index": i, "delta": map[string]any{"type": "input_json_delta", "partial_json": piece}})
			}
		}
		s.event("content_block_stop", map[string]any{"type": "content_block_stop", "index": i})
	}
	s.event("message_delta", map[string]any{"type": "message_delta", "delta": map[string]any{"stop_reason": stop, "stop_sequence": nil}, "usage": map[string]any{"output_tokens": bill.Output}})
	s.event("message_stop", map[string]any{"type": "message_stop"})
}
