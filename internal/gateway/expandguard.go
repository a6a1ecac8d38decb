package gateway

import (
	"bytes"
	"encoding/json"
	"net/http"

	"github.com/contextd/contextd/internal/engine"
)

// The expand loop fails closed: contextd_expand is contextd's tool, and
// nothing the client gets names it (not a choice, an output item, an
// echoed tools or tool_choice, an event, an error text or a header). Every
// round is read whole and inspected before a byte of it goes out.

var expandName = []byte(engine.ExpandToolName)

// clientTools are the request's tools and tool_choice as the client sent
// them (nil: absent), for the provider's echo of them.
type clientTools struct {
	tools, choice json.RawMessage
}

func toolsOf(fields map[string]json.RawMessage) clientTools {
	return clientTools{tools: fields["tools"], choice: fields["tool_choice"]}
}

// restore puts the client's fields back into fields.
func (ct clientTools) restore(fields map[string]json.RawMessage) {
	for k, v := range map[string]json.RawMessage{"tools": ct.tools, "tool_choice": ct.choice} {
		if v == nil {
			delete(fields, k)
		} else {
			fields[k] = v
		}
	}
}

// echoed is what a provider echoes for them: an absent tools is [], an
// absent tool_choice "auto".
func (ct clientTools) echoed() (json.RawMessage, json.RawMessage) {
	tools, choice := ct.tools, ct.choice
	if tools == nil || string(tools) == "null" {
		tools = json.RawMessage("[]")
	}
	if choice == nil || string(choice) == "null" {
		choice = json.RawMessage(`"auto"`)
	}
	return tools, choice
}

// sseEvent is one event of a held stream: its bytes as they came, its
// name and data.
type sseEvent struct {
	raw  []byte
	name string
	data []byte
}

// sseEvents splits a held stream (whole events, as relay wrote them) into
// its events; bytes after the last blank line are one more event.
func sseEvents(b []byte) []sseEvent {
	var out []sseEvent
	var cur sseEvent
	start := 0
	for start < len(b) {
		end := bytes.IndexByte(b[start:], '\n')
		if end < 0 {
			end = len(b)
		} else {
			end += start + 1
		}
		line := b[start:end]
		text := bytes.TrimRight(line, "\r\n")
		cur.raw = b[start-len(cur.raw) : end]
		switch {
		case len(text) == 0:
			out = append(out, cur)
			cur = sseEvent{}
		case bytes.HasPrefix(text, []byte("event:")):
			cur.name = string(bytes.TrimSpace(text[len("event:"):]))
		case bytes.HasPrefix(text, []byte("data:")):
			v := text[len("data:"):]
			if len(v) > 0 && v[0] == ' ' {
				v = v[1:]
			}
			if cur.data != nil {
				cur.data = append(cur.data, '\n')
			}
			cur.data = append(cur.data, v...)
		}
		start = end
	}
	if len(cur.raw) > 0 {
		out = append(out, cur)
	}
	return out
}

// seen is what inspecting a round found.
type seen struct {
	first, other bool
	// unread: a part of the round that names the tool could not be read.
	unread bool
}

// inspect looks for contextd_expand calls in a round, JSON or held SSE.
func inspect(d door, rd *round) seen {
	var s seen
	look := func(data []byte) {
		if !bytes.Contains(data, expandName) {
			return
		}
		first, other, ok := d.expandSeen(data)
		s.first, s.other, s.unread = s.first || first, s.other || other, s.unread || !ok
	}
	if !rd.sse {
		look(rd.body)
		return s
	}
	for _, ev := range sseEvents(rd.body) {
		look(ev.data)
	}
	return s
}

// echoed rewrites a final round's echo of the request's tools and
// tool_choice to the client's; false when a part that names the tool
// could not be read (the round is not to be shown).
func echoed(d door, ct clientTools, rd *round) bool {
	tools, choice := ct.echoed()
	fix := func(data []byte) ([]byte, bool) {
		if !bytes.Contains(data, expandName) {
			return data, true
		}
		return d.echo(data, tools, choice)
	}
	if !rd.sse {
		b, ok := fix(rd.body)
		rd.body = b
		return ok
	}
	var out bytes.Buffer
	for _, ev := range sseEvents(rd.body) {
		data, ok := fix(ev.data)
		if !ok {
			return false
		}
		if bytes.Equal(data, ev.data) {
			out.Write(ev.raw)
			continue
		}
		if ev.name != "" {
			out.WriteString("event: " + ev.name + "\n")
		}
		out.WriteString("data: ")
		out.Write(data)
		out.WriteString("\n\n")
	}
	rd.body = out.Bytes()
	return true
}

// withoutToolHeaders drops header values that name the tool.
func withoutToolHeaders(h http.Header) {
	for k, vs := range h {
		kept := vs[:0]
		for _, v := range vs {
			if !bytes.Contains([]byte(v), expandName) {
				kept = append(kept, v)
			}
		}
		if len(kept) == 0 {
			delete(h, k)
		} else {
			h[k] = kept
		}
	}
}
