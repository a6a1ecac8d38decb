package clients

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"

	"github.com/contextd/contextd/internal/gateway/gatewaytest"
)

// messages serves Anthropic's POST /v1/messages.
func (p *Provider) messages(w http.ResponseWriter, r *http.Request) {
	raw, _ := io.ReadAll(r.Body)
	c := Call{API: "messages", Header: r.Header.Clone(), Raw: raw}
	if err := json.Unmarshal(raw, &c.Body); err != nil {
		c.Problems = append(c.Problems, "body is not JSON: "+err.Error())
	}
	if r.Header.Get("anthropic-version") == "" {
		c.Problems = append(c.Problems, "anthropic-version: header is required")
	}
	c.Model, _ = c.Body["model"].(string)
	c.Problems = append(c.Problems, gatewaytest.CheckMessages(c.Body, p.recall)...)
	msgs, _ := c.Body["messages"].([]any)
	var texts []string
	lastCall, latestCall, lastUser := "", "", ""
	for i, x := range msgs {
		m, _ := x.(map[string]any)
		if m["role"] != "user" {
			continue
		}
		for _, b := range gatewaytest.Blocks(m["content"]) {
			switch b["type"] {
			case "text":
				t, _ := b["text"].(string)
				texts = append(texts, t)
				if i == len(msgs)-1 {
					lastUser += t
				}
			case "tool_result":
				latestCall, _ = b["tool_use_id"].(string)
				if i == len(msgs)-1 {
					lastCall = latestCall
				}
			}
		}
	}
	c.Texts = humanTexts(texts)
	// Claude Code's /compact asks for a summary between turns: answered
	// with the checkpoint and the user's requests verbatim (checkpoint.go).
	c.Compaction = asksCompaction(lastUser)
	var tools []tool
	toolList, _ := c.Body["tools"].([]any)
	for _, x := range toolList {
		t, _ := x.(map[string]any)
		name, _ := t["name"].(string)
		tools = append(tools, toolOf(name, t["input_schema"], false))
	}
	step := nextStep(lastCall, c.Texts)
	if len(tools) == 0 {
		step.side = true
	}
	ws := workspaceOf(c.Texts)
	var content []map[string]any
	stop, outText := "end_turn", ""
	thinking := false
	if th, ok := c.Body["thinking"].(map[string]any); ok && th["type"] == "enabled" {
		thinking = true
	}
	c.Side = step.side || c.Compaction
	switch {
	case c.Compaction:
		outText = p.summary(latestCall) + " The user's requests, verbatim:\n" + strings.Join(c.Texts, "\n")
		content = append(content, map[string]any{"type": "text", "text": outText})
	case step.side:
		outText = "Checklist"
		content = append(content, map[string]any{"type": "text", "text": outText})
	case step.round > step.total:
		outText = Final(step.task, step.total)
		content = append(content, map[string]any{"type": "text", "text": outText})
	default:
		tc, err := choose(tools, ws, step.task, step.round)
		if err != nil {
			c.Problems = append(c.Problems, "script: "+err.Error())
			break
		}
		id := p.nextID("toolu_", step.round, step.total)
		var input any
		_ = json.Unmarshal([]byte(tc.input), &input)
		if thinking {
			sig := "sig_" + id
			content = append(content, map[string]any{"type": "thinking", "thinking": fmt.Sprintf("Round %d: %s next.", step.round, tc.name), "signature": sig})
			p.mu.Lock()
			p.reasoning[id] = sig
			p.mu.Unlock()
		}
		text := fmt.Sprintf("Round %d of %d: running %s.", step.round, step.total, tc.name)
		content = append(content, map[string]any{"type": "text", "text": text},
			map[string]any{"type": "tool_use", "id": id, "name": tc.name, "input": input})
		stop, outText = "tool_use", text+tc.input
		for range p.callsPerRound() - 1 {
			content = append(content, map[string]any{"type": "tool_use", "id": p.nextID("toolu_", step.round, step.total), "name": tc.name, "input": input})
			outText += tc.input
		}
		c.Round = step.round
	}
	c, ok := p.record(c, func() Usage { return p.billAnthropic(anthropicSegments(c.Body)) }, outText)
	if !ok {
		refuse(w, r, c)
		return
	}
	u := c.Billed
	usage := map[string]any{"input_tokens": u.Uncached, "cache_creation_input_tokens": u.CacheWrite,
		"cache_read_input_tokens": u.CacheRead, "output_tokens": u.Output}
	if p.caching == "none" {
		delete(usage, "cache_creation_input_tokens")
		delete(usage, "cache_read_input_tokens")
	}
	msg := map[string]any{"id": p.nextID("msg_", 0, 0), "type": "message", "role": "assistant", "model": c.Model,
		"content": content, "stop_reason": stop, "stop_sequence": nil, "usage": usage}
	if stream, _ := c.Body["stream"].(bool); !stream {
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(msg)
		return
	}
	gatewaytest.StartSSE(w)
	gatewaytest.MessagesEvents(func(name string, data any) { gatewaytest.WriteEvent(w, name, data) }, msg, pieces, false)
}

// pieces cuts s into deltas of up to 40 bytes (on rune boundaries).
func pieces(s string) []string {
	var out []string
	for len(s) > 40 {
		n := 40
		for n > 0 && s[n]&0xC0 == 0x80 {
			n--
		}
		out = append(out, s[:n])
		s = s[n:]
	}
	return append(out, s)
}

// anthropicSegments is the request in the order Anthropic caches it:
// tools, system, then each message's blocks; a block with cache_control
// ends a cacheable prefix.
func anthropicSegments(body map[string]any) []segment {
	var segs []segment
	tools, _ := body["tools"].([]any)
	for _, t := range tools {
		segs = append(segs, segment{key: canonical(t), text: canonical(t), mark: hasMark(t)})
	}
	var system []string
	for _, b := range gatewaytest.Blocks(body["system"]) {
		t, _ := b["text"].(string)
		segs = append(segs, segment{key: t, text: t, mark: hasMark(b)})
		system = append(system, t)
	}
	if len(system) > 0 {
		// One system message of its blocks' texts.
		first := len(segs) - len(system)
		segs[first].text = "system" + sep + segs[first].text
		segs[first].frame = framing
	}
	msgs, _ := body["messages"].([]any)
	for _, x := range msgs {
		m, _ := x.(map[string]any)
		role, _ := m["role"].(string)
		blocks := gatewaytest.Blocks(m["content"])
		// A message of tool results alone is read as those results: no
		// message of the role around them.
		if slices.ContainsFunc(blocks, func(b map[string]any) bool { return b["type"] != "tool_result" }) {
			segs = append(segs, segment{key: role + ":", text: role, frame: framing})
		} else {
			segs = append(segs, segment{key: role + ":"})
		}
		for _, b := range blocks {
			s := item(b, hasMark(b))
			s.frame -= framing // the message's, counted once above
			segs = append(segs, s)
		}
	}
	return append(segs, priming)
}
