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
	body, reply, bill, idx, ok := f.receive(w, r, func(body map[string]any) []string { return CheckMessages(body, nil) })
	if !ok {
		return
	}
	model, _ := body["model"].(string)
	var content []map[string]any
	if reply.Compaction != "" {
		content = append(content, map[string]any{"type": "compaction", "content": reply.Compaction})
	}
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
	s := f.startSSE(w, idx, bill)
	MessagesEvents(func(name string, data any) { s.event(name, data) }, msg, split, reply.Interleave)
}
