package gatewaytest

import (
	"encoding/json"
	"fmt"
	"regexp"
	"strings"
)

// ExpandMode makes the fake a model that reads what contextd pruned with
// the contextd_expand tool: when the request offers the tool (and
// tool_choice allows it) and a message names an id to pass it
// (`contextd_expand with id "..."`, as placeholders and summaries say),
// the fake calls it, in the request's wire format, JSON or SSE.
type ExpandMode int

const (
	// ExpandOff: the fake answers from its script.
	ExpandOff ExpandMode = iota
	// ExpandOnce reads the first id named to its end, range after range
	// (following each answer's "More follows: call contextd_expand with
	// {...}"), then answers "read N bytes of ID".
	ExpandOnce
	// ExpandForever calls contextd_expand with the first id named for as
	// long as the request offers the tool, then answers from its script.
	ExpandForever
)

// ExpandToolName is the tool the fake calls.
const ExpandToolName = "contextd_expand"

// expandCallPrefix starts the ids of the fake's contextd_expand calls, so
// it finds their results in the conversation.
const expandCallPrefix = "call_expand_"

var (
	expandMention = regexp.MustCompile(ExpandToolName + ` with id "([^"]{1,128})"`)
	expandMore    = "More follows: call " + ExpandToolName + " with "
)

// ExpandResults are the results of the fake's contextd_expand calls that
// a request carries, in order.
func (r Request) ExpandResults() []string {
	return expandResults(r.Path, r.Body)
}

// expandReply is the fake's answer in an expand mode; false when it
// answers from its script.
func expandReply(mode ExpandMode, path string, body map[string]any) (Reply, bool) {
	if mode == ExpandOff || !offersExpand(body) {
		return Reply{}, false
	}
	conv := body["messages"]
	if path == "/v1/responses" {
		conv = body["input"]
	}
	var ids []string
	walkStrings(conv, func(s string) {
		for _, m := range expandMention.FindAllStringSubmatch(s, -1) {
			ids = append(ids, m[1])
		}
	})
	if len(ids) == 0 {
		return Reply{}, false
	}
	results := expandResults(path, body)
	call := func(args string) (Reply, bool) {
		return Reply{ToolCalls: []ToolCall{{ID: fmt.Sprintf("%s%d", expandCallPrefix, len(results)+1), Name: ExpandToolName, Arguments: args}}}, true
	}
	first, _ := json.Marshal(map[string]string{"id": ids[0]})
	if mode == ExpandForever || len(results) == 0 {
		return call(string(first))
	}
	last := results[len(results)-1]
	note, _, _ := strings.Cut(last, "\n")
	if _, rest, ok := strings.Cut(note, expandMore); ok {
		var next json.RawMessage
		if json.NewDecoder(strings.NewReader(rest)).Decode(&next) == nil {
			return call(string(next))
		}
	}
	n := 0
	for _, r := range results {
		_, text, _ := strings.Cut(r, "\n")
		n += len(text)
	}
	return Reply{Text: fmt.Sprintf("read %d bytes of %s", n, ids[0])}, true
}

// offersExpand reports whether the request has the tool and lets the
// model call it.
func offersExpand(body map[string]any) bool {
	switch tc := body["tool_choice"].(type) {
	case string:
		if tc == "none" {
			return false
		}
	case map[string]any:
		if tc["type"] == "none" {
			return false
		}
	}
	tools, _ := body["tools"].([]any)
	for _, t := range tools {
		m, _ := t.(map[string]any)
		fn, _ := m["function"].(map[string]any)
		if m["name"] == ExpandToolName || fn != nil && fn["name"] == ExpandToolName {
			return true
		}
	}
	return false
}

// expandResults finds the results of the fake's contextd_expand calls in a
// request of any of the three formats.
func expandResults(path string, body map[string]any) []string {
	var out []string
	switch path {
	case "/v1/responses":
		items, _ := body["input"].([]any)
		for _, x := range items {
			it, _ := x.(map[string]any)
			if id, _ := it["call_id"].(string); it["type"] == "function_call_output" && strings.HasPrefix(id, expandCallPrefix) {
				s, _ := it["output"].(string)
				out = append(out, s)
			}
		}
	case "/v1/messages":
		msgs, _ := body["messages"].([]any)
		for _, x := range msgs {
			m, _ := x.(map[string]any)
			blocks, _ := m["content"].([]any)
			for _, b := range blocks {
				block, _ := b.(map[string]any)
				if id, _ := block["tool_use_id"].(string); block["type"] == "tool_result" && strings.HasPrefix(id, expandCallPrefix) {
					var text strings.Builder
					walkStrings(block["content"], func(s string) {
						if s != "text" {
							text.WriteString(s)
						}
					})
					out = append(out, text.String())
				}
			}
		}
	default:
		msgs, _ := body["messages"].([]any)
		for _, x := range msgs {
			m, _ := x.(map[string]any)
			if id, _ := m["tool_call_id"].(string); m["role"] == "tool" && strings.HasPrefix(id, expandCallPrefix) {
				s, _ := m["content"].(string)
				out = append(out, s)
			}
		}
	}
	return out
}

// walkStrings calls fn with every string in v (not object keys).
func walkStrings(v any, fn func(string)) {
	switch x := v.(type) {
	case string:
		fn(x)
	case []any:
		for _, e := range x {
			walkStrings(e, fn)
		}
	case map[string]any:
		for _, e := range x {
			walkStrings(e, fn)
		}
	}
}
