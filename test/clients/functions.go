package clients

import (
	"encoding/json"
	"fmt"
	"sort"
	"strings"
)

// How OpenAI reads a function definition (Chat Completions or Responses): not as the
// JSON the client sent (its keys, braces and quotes are not read) but
// rendered, as OpenAI's published token counting for functions gives it
// (openai-cookbook, "How to count tokens with tiktoken", counting
// function definitions): per function 7 tokens plus "name:description"
// (the description's final period dropped); with properties 3 more; per
// property 3 plus "key:type:description" and the rest of the property as
// compact JSON; an enum 3 per value less 3; and 12 for the whole list.
// The overheads are the segment's frame, and each text is counted by
// itself (sep), so the segment counts what the provider counts.

// functionsEnd is the tokens the list of functions costs once.
const functionsEnd = 12

// functionText is what the model reads of one tool: a function (Chat
// Completions' {"type":"function","function":{...}} or Responses' flat
// {"type":"function","name",...}) by the rule; any other tool (a
// built-in, Codex's namespace of tools) is its JSON.
func functionText(t any) (string, int64) {
	obj, _ := t.(map[string]any)
	if obj["type"] != "function" {
		return canonical(t), 0
	}
	fn, ok := obj["function"].(map[string]any)
	if !ok {
		fn = obj
	}
	if _, ok := fn["name"].(string); !ok {
		return canonical(t), 0
	}
	overhead := 7
	var b strings.Builder
	name, _ := fn["name"].(string)
	desc, _ := fn["description"].(string)
	fmt.Fprintf(&b, "%s:%s"+sep, name, strings.TrimSuffix(desc, "."))
	params, _ := fn["parameters"].(map[string]any)
	props, _ := params["properties"].(map[string]any)
	if len(props) > 0 {
		overhead += 3
		keys := make([]string, 0, len(props))
		for k := range props {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			overhead += 3
			p, ok := props[k].(map[string]any)
			if !ok {
				j, _ := json.Marshal(props[k])
				fmt.Fprintf(&b, "%s:%s"+sep, k, j)
				continue
			}
			if values, ok := p["enum"].([]any); ok {
				overhead += 3*len(values) - 3
				for _, v := range values {
					b.WriteString(scalar(v) + sep)
				}
			}
			pd, _ := p["description"].(string)
			fmt.Fprintf(&b, "%s:%s:%s"+sep, k, scalar(p["type"]), strings.TrimSuffix(pd, "."))
			rest := map[string]any{}
			for pk, pv := range p {
				if pk != "type" && pk != "description" && pk != "enum" {
					rest[pk] = pv
				}
			}
			if len(rest) > 0 {
				j, _ := json.Marshal(rest)
				b.Write(j)
				b.WriteString(sep)
			}
		}
	}
	return b.String(), int64(max(overhead, 0))
}

// scalar is a type or enum value as read: a string as is, a list joined
// with "|", anything else as JSON.
func scalar(v any) string {
	switch x := v.(type) {
	case nil:
		return ""
	case string:
		return x
	case []any:
		s := make([]string, len(x))
		for i, e := range x {
			s[i] = scalar(e)
		}
		return strings.Join(s, "|")
	}
	j, _ := json.Marshal(v)
	return string(j)
}

// toolSegments are a Chat Completions or Responses request's tools:
// matched by their bytes, counted as the model reads them (functionText),
// the list's own tokens on the last.
func toolSegments(body map[string]any) []segment {
	tools, _ := body["tools"].([]any)
	segs := make([]segment, len(tools))
	for i, t := range tools {
		text, frame := functionText(t)
		segs[i] = segment{key: canonical(t), text: text, frame: frame}
	}
	if len(segs) > 0 {
		segs[len(segs)-1].frame += functionsEnd
	}
	return segs
}
