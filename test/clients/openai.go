package clients

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"

	"github.com/contextd/contextd/internal/gateway/gatewaytest"
)

// receiveOpenAI reads an OpenAI request and checks it with check.
func (p *Provider) receiveOpenAI(r *http.Request, api string, check func(map[string]any) []string) Call {
	raw, _ := io.ReadAll(r.Body)
	c := Call{API: api, Header: r.Header.Clone(), Raw: raw}
	if err := json.Unmarshal(raw, &c.Body); err != nil {
		c.Problems = append(c.Problems, "body is not JSON: "+err.Error())
	}
	c.Model, _ = c.Body["model"].(string)
	c.Problems = append(c.Problems, check(c.Body)...)
	return c
}

// responses serves OpenAI's POST /v1/responses (what Codex CLI uses).
func (p *Provider) responses(w http.ResponseWriter, r *http.Request) {
	c := p.receiveOpenAI(r, "responses", func(body map[string]any) []string { return gatewaytest.CheckResponses(body, p.recall) })
	input, _ := c.Body["input"].([]any)
	var texts []string
	lastCall, latestCall, lastUser := "", "", ""
	for i, x := range input {
		it, _ := x.(map[string]any)
		typ, _ := it["type"].(string)
		switch {
		case (typ == "message" || typ == "") && it["role"] == "user":
			texts = append(texts, contentTexts(it["content"])...)
			if i == len(input)-1 {
				lastUser = strings.Join(contentTexts(it["content"]), "\n")
			}
		case strings.HasSuffix(typ, "_call_output"):
			latestCall, _ = it["call_id"].(string)
			if i == len(input)-1 {
				lastCall = latestCall
			}
		}
	}
	compaction := asksCompaction(lastUser) // checkpoint.go
	if call := p.resumedCall(lastUser); call != "" {
		lastCall = call
	}
	if s, ok := c.Body["input"].(string); ok {
		texts = append(texts, s)
	}
	c.Texts = humanTexts(texts)
	var tools []tool
	toolList, _ := c.Body["tools"].([]any)
	for _, x := range toolList {
		t, _ := x.(map[string]any)
		name, _ := t["name"].(string)
		switch t["type"] {
		case "function":
			tools = append(tools, toolOf(name, t["parameters"], false))
		case "custom":
			tools = append(tools, toolOf(name, nil, true))
		case "local_shell":
			tools = append(tools, tool{name: "local_shell"})
		}
	}
	step := nextStep(lastCall, c.Texts)
	if len(tools) == 0 || compaction {
		step.side = true
	}
	c.Side, c.Compaction = step.side, compaction
	ws := workspaceOf(c.Texts)
	var output []map[string]any
	outText := ""
	reasoning := c.Body["reasoning"] != nil
	addReasoning := func(id, summary string) string {
		rs := "rs_" + id
		output = append(output, map[string]any{"type": "reasoning", "id": rs,
			"summary": []any{map[string]any{"type": "summary_text", "text": summary}}, "encrypted_content": "enc:" + rs})
		return rs
	}
	addText := func(text string) {
		output = append(output, map[string]any{"type": "message", "id": p.nextID("msg_", 0, 0), "role": "assistant", "status": "completed",
			"content": []any{map[string]any{"type": "output_text", "text": text, "annotations": []any{}}}})
	}
	switch {
	case compaction:
		outText = p.summary(latestCall)
		addText(outText)
	case step.side:
		outText = "Checklist"
		addText(outText)
	case step.round > step.total:
		if reasoning {
			addReasoning(p.nextID("", 0, 0), "Every round is done.")
		}
		outText = Final(step.task, step.total)
		addText(outText)
	default:
		tc, err := choose(tools, ws, step.task, step.round)
		if err != nil {
			c.Problems = append(c.Problems, "script: "+err.Error())
			break
		}
		id := p.nextID("call_", step.round, step.total)
		if reasoning {
			rs := addReasoning(id, fmt.Sprintf("Round %d: %s next.", step.round, tc.name))
			p.mu.Lock()
			p.reasoning["fc_"+id] = rs
			p.mu.Unlock()
		}
		for i := range p.callsPerRound() {
			if i > 0 {
				id = p.nextID("call_", step.round, step.total)
			}
			if tc.freeform {
				output = append(output, map[string]any{"type": "custom_tool_call", "id": "ctc_" + id, "call_id": id, "name": tc.name, "input": tc.input, "status": "completed"})
			} else {
				output = append(output, map[string]any{"type": "function_call", "id": "fc_" + id, "call_id": id, "name": tc.name, "arguments": tc.input, "status": "completed"})
			}
			outText += tc.input
		}
		c.Round = step.round
	}
	c, ok := p.record(c, func() Usage { return p.billOpenAI(responsesSegments(c.Body)) }, outText)
	if !ok {
		refuse(w, r, c)
		return
	}
	u := c.Billed
	tools2, choice := c.Body["tools"], c.Body["tool_choice"]
	if tools2 == nil {
		tools2 = []any{}
	}
	if choice == nil {
		choice = "auto"
	}
	resp := map[string]any{"id": p.nextID("resp_", 0, 0), "object": "response", "created_at": 1, "status": "completed", "model": c.Model,
		"output": output, "parallel_tool_calls": false, "tool_choice": choice, "tools": tools2,
		"usage": map[string]any{"input_tokens": u.Input(), "input_tokens_details": map[string]any{"cached_tokens": u.CacheRead},
			"output_tokens": u.Output, "output_tokens_details": map[string]any{"reasoning_tokens": 0}, "total_tokens": u.Input() + u.Output}}
	if stream, _ := c.Body["stream"].(bool); !stream {
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(resp)
		return
	}
	gatewaytest.StartSSE(w)
	gatewaytest.ResponsesEvents(func(name string, data any) { gatewaytest.WriteEvent(w, name, data) }, resp, pieces)
}

func contentTexts(content any) []string {
	switch c := content.(type) {
	case string:
		return []string{c}
	case []any:
		var out []string
		for _, x := range c {
			part, _ := x.(map[string]any)
			if t, ok := part["text"].(string); ok {
				out = append(out, t)
			}
		}
		return out
	}
	return nil
}

// responsesSegments is a Responses request in the order OpenAI caches
// it: instructions, tools (toolSegments), then each input item.
func responsesSegments(body map[string]any) []segment {
	var segs []segment
	if s, ok := body["instructions"].(string); ok {
		segs = append(segs, systemSegment(s, s, false))
	}
	segs = append(segs, toolSegments(body)...)
	switch in := body["input"].(type) {
	case string:
		segs = append(segs, segment{key: in, text: in})
	case []any:
		for _, it := range in {
			segs = append(segs, item(it, false))
		}
	}
	return append(segs, priming)
}

// chat serves OpenAI's POST /v1/chat/completions (what Qwen Code uses).
func (p *Provider) chat(w http.ResponseWriter, r *http.Request) {
	c := p.receiveOpenAI(r, "chat", gatewaytest.CheckChat)
	msgs, _ := c.Body["messages"].([]any)
	var texts []string
	lastCall, latestCall, lastUser := "", "", ""
	for i, x := range msgs {
		m, _ := x.(map[string]any)
		switch m["role"] {
		case "user":
			texts = append(texts, contentTexts(m["content"])...)
			if i == len(msgs)-1 {
				lastUser = strings.Join(contentTexts(m["content"]), "\n")
			}
		case "tool":
			latestCall, _ = m["tool_call_id"].(string)
			if i == len(msgs)-1 {
				lastCall = latestCall
			}
		}
	}
	compaction := asksCompaction(lastUser) // checkpoint.go
	c.Texts = humanTexts(texts)
	var tools []tool
	toolList, _ := c.Body["tools"].([]any)
	for _, x := range toolList {
		t, _ := x.(map[string]any)
		fn, _ := t["function"].(map[string]any)
		name, _ := fn["name"].(string)
		tools = append(tools, toolOf(name, fn["parameters"], false))
	}
	step := nextStep(lastCall, c.Texts)
	if len(tools) == 0 || compaction {
		step.side = true
	}
	c.Side, c.Compaction = step.side, compaction
	ws := workspaceOf(c.Texts)
	content, outText, finish := "", "", "stop"
	var calls []map[string]any
	switch {
	case compaction:
		content = stateSnapshot(c.Texts, p.summary(latestCall))
		outText = content
	case step.side:
		content = "Checklist"
		if rf, ok := c.Body["response_format"].(map[string]any); ok && rf["type"] != "text" {
			content = `{"reasoning":"The assistant finished its answer.","next_speaker":"user"}`
		}
		outText = content
	case step.round > step.total:
		content = Final(step.task, step.total)
		outText = content
	default:
		tc, err := choose(tools, ws, step.task, step.round)
		if err != nil {
			c.Problems = append(c.Problems, "script: "+err.Error())
			break
		}
		content = fmt.Sprintf("Round %d of %d: running %s.", step.round, step.total, tc.name)
		outText, finish = content, "tool_calls"
		for range p.callsPerRound() {
			id := p.nextID("call_", step.round, step.total)
			calls = append(calls, map[string]any{"id": id, "type": "function", "function": map[string]any{"name": tc.name, "arguments": tc.input}})
			outText += tc.input
		}
		c.Round = step.round
	}
	c, ok := p.record(c, func() Usage { return p.billOpenAI(chatSegments(c.Body)) }, outText)
	if !ok {
		refuse(w, r, c)
		return
	}
	u := c.Billed
	usage := map[string]any{"prompt_tokens": u.Input(), "completion_tokens": u.Output, "total_tokens": u.Input() + u.Output,
		"prompt_tokens_details": map[string]any{"cached_tokens": u.CacheRead}}
	if p.caching == "none" {
		delete(usage, "prompt_tokens_details")
	}
	id := p.nextID("chatcmpl-", 0, 0)
	msg := map[string]any{"role": "assistant", "content": content, "refusal": nil}
	if len(calls) > 0 {
		msg["tool_calls"] = calls
	}
	resp := map[string]any{"id": id, "object": "chat.completion", "created": 1, "model": c.Model,
		"choices": []any{map[string]any{"index": 0, "message": msg, "finish_reason": finish, "logprobs": nil}}, "usage": usage}
	if stream, _ := c.Body["stream"].(bool); !stream {
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(resp)
		return
	}
	so, _ := c.Body["stream_options"].(map[string]any)
	includeUsage, _ := so["include_usage"].(bool)
	gatewaytest.StartSSE(w)
	gatewaytest.ChatChunks(func(name string, data any) { gatewaytest.WriteEvent(w, name, data) }, resp, pieces, includeUsage)
}

// chatSegments is a Chat Completions request in the order OpenAI caches
// it: tools (toolSegments), then each message.
func chatSegments(body map[string]any) []segment {
	var segs []segment
	segs = append(segs, toolSegments(body)...)
	msgs, _ := body["messages"].([]any)
	for _, m := range msgs {
		segs = append(segs, item(m, false))
	}
	return append(segs, priming)
}
