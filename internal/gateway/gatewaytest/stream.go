package gatewaytest

import "encoding/json"

// Writing an answer as a provider streams it, shared by this fake and
// test/clients' scripted provider: each takes the answer as its JSON body
// and writes the events through emit (the fake's pauses and cut streams,
// or straight to the wire), cutting texts and arguments with cut.

// MessagesEvents writes msg, an Anthropic Messages answer, as its stream:
// message_start (no content, one output token), each content block's
// start, deltas and stop — or, interleaved, every start before the first
// delta, as the API may send them — then message_delta and message_stop.
func MessagesEvents(emit func(name string, data any), msg map[string]any, cut func(string) []string, interleave bool) {
	content, _ := msg["content"].([]map[string]any)
	usage, _ := msg["usage"].(map[string]any)
	start := map[string]any{}
	for k, v := range msg {
		start[k] = v
	}
	first := map[string]any{}
	for k, v := range usage {
		first[k] = v
	}
	first["output_tokens"] = 1
	start["content"], start["stop_reason"], start["usage"] = []any{}, nil, first
	emit("message_start", map[string]any{"type": "message_start", "message": start})
	blockStart := func(i int, block map[string]any) {
		empty := map[string]any{"type": block["type"]}
		switch block["type"] {
		case "text":
			empty["text"] = ""
		case "tool_use":
			empty["id"], empty["name"], empty["input"] = block["id"], block["name"], map[string]any{}
		case "thinking":
			empty["thinking"], empty["signature"] = "", ""
		case "compaction":
			empty["content"] = nil
		}
		emit("content_block_start", map[string]any{"type": "content_block_start", "index": i, "content_block": empty})
	}
	deltas := func(i int, block map[string]any, cut func(string) []string) {
		delta := func(d map[string]any) {
			emit("content_block_delta", map[string]any{"type": "content_block_delta", "index": i, "delta": d})
		}
		switch block["type"] {
		case "compaction":
			// The summary in one delta, as the API streams it.
			delta(map[string]any{"type": "compaction_delta", "content": block["content"]})
		case "thinking":
			delta(map[string]any{"type": "thinking_delta", "thinking": block["thinking"]})
			delta(map[string]any{"type": "signature_delta", "signature": block["signature"]})
		case "text":
			for _, piece := range cut(block["text"].(string)) {
				delta(map[string]any{"type": "text_delta", "text": piece})
			}
		case "tool_use":
			args, _ := json.Marshal(block["input"])
			for _, piece := range cut(string(args)) {
				delta(map[string]any{"type": "input_json_delta", "partial_json": piece})
			}
		}
	}
	stop := func(i int) { emit("content_block_stop", map[string]any{"type": "content_block_stop", "index": i}) }
	if interleave {
		whole := func(s string) []string { return []string{s} }
		for i, b := range content {
			blockStart(i, b)
		}
		for i, b := range content {
			deltas(i, b, whole)
		}
		for i := range content {
			stop(i)
		}
	} else {
		for i, b := range content {
			blockStart(i, b)
			deltas(i, b, cut)
			stop(i)
		}
	}
	emit("message_delta", map[string]any{"type": "message_delta", "delta": map[string]any{"stop_reason": msg["stop_reason"], "stop_sequence": nil},
		"usage": usage})
	emit("message_stop", map[string]any{"type": "message_stop"})
}

// ChatChunks writes resp, a Chat Completions answer, as its stream: for
// each choice a chunk with the role, the content's pieces, each tool
// call's first chunk (id, name) and its arguments' pieces, and the finish
// reason; the usage in a chunk of its own when the request asked for it
// (stream_options.include_usage; then every other chunk has usage null);
// then [DONE].
func ChatChunks(emit func(name string, data any), resp map[string]any, cut func(string) []string, includeUsage bool) {
	chunk := func(index any, delta map[string]any, finish any) {
		c := map[string]any{"id": resp["id"], "object": "chat.completion.chunk", "created": resp["created"], "model": resp["model"],
			"choices": []any{map[string]any{"index": index, "delta": delta, "finish_reason": finish, "logprobs": nil}}}
		if includeUsage {
			c["usage"] = nil
		}
		emit("", c)
	}
	choices, _ := resp["choices"].([]any)
	for _, x := range choices {
		choice := x.(map[string]any)
		msg := choice["message"].(map[string]any)
		ci := choice["index"]
		chunk(ci, map[string]any{"role": "assistant", "content": ""}, nil)
		text, _ := msg["content"].(string)
		for _, piece := range cut(text) {
			if piece != "" {
				chunk(ci, map[string]any{"content": piece}, nil)
			}
		}
		calls, _ := msg["tool_calls"].([]map[string]any)
		for i, c := range calls {
			fn := c["function"].(map[string]any)
			chunk(ci, map[string]any{"tool_calls": []any{map[string]any{"index": i, "id": c["id"], "type": "function",
				"function": map[string]any{"name": fn["name"], "arguments": ""}}}}, nil)
			for _, piece := range cut(fn["arguments"].(string)) {
				chunk(ci, map[string]any{"tool_calls": []any{map[string]any{"index": i, "function": map[string]any{"arguments": piece}}}}, nil)
			}
		}
		chunk(ci, map[string]any{}, choice["finish_reason"])
	}
	if includeUsage {
		emit("", map[string]any{"id": resp["id"], "object": "chat.completion.chunk", "created": resp["created"], "model": resp["model"],
			"choices": []any{}, "usage": resp["usage"]})
	}
	emit("", "[DONE]")
}

// ResponsesEvents writes resp, an OpenAI Responses answer, as its stream,
// events numbered: response.created and response.in_progress (no output
// yet), then each output item added (empty), its content as deltas (a
// message's text part, a function call's arguments, a custom tool call's
// input, a reasoning item's summary) and done, then response.completed.
func ResponsesEvents(emit func(name string, data any), resp map[string]any, cut func(string) []string) {
	seq := 0
	ev := func(typ string, fields map[string]any) {
		fields["type"], fields["sequence_number"] = typ, seq
		seq++
		emit(typ, fields)
	}
	created := map[string]any{}
	for k, v := range resp {
		created[k] = v
	}
	created["status"], created["output"], created["usage"] = "in_progress", []any{}, nil
	ev("response.created", map[string]any{"response": created})
	ev("response.in_progress", map[string]any{"response": created})
	output, _ := resp["output"].([]map[string]any)
	for i, it := range output {
		added := map[string]any{}
		for k, v := range it {
			added[k] = v
		}
		id := it["id"]
		switch it["type"] {
		case "message":
			added["content"], added["status"] = []any{}, "in_progress"
			ev("response.output_item.added", map[string]any{"output_index": i, "item": added})
			text := it["content"].([]any)[0].(map[string]any)["text"].(string)
			ev("response.content_part.added", map[string]any{"output_index": i, "item_id": id, "content_index": 0,
				"part": map[string]any{"type": "output_text", "text": "", "annotations": []any{}}})
			for _, piece := range cut(text) {
				ev("response.output_text.delta", map[string]any{"output_index": i, "item_id": id, "content_index": 0, "delta": piece, "logprobs": []any{}})
			}
			ev("response.output_text.done", map[string]any{"output_index": i, "item_id": id, "content_index": 0, "text": text, "logprobs": []any{}})
			ev("response.content_part.done", map[string]any{"output_index": i, "item_id": id, "content_index": 0,
				"part": map[string]any{"type": "output_text", "text": text, "annotations": []any{}}})
		case "function_call", "custom_tool_call":
			field, events := "arguments", "response.function_call_arguments"
			if it["type"] == "custom_tool_call" {
				field, events = "input", "response.custom_tool_call_input"
			}
			added[field], added["status"] = "", "in_progress"
			ev("response.output_item.added", map[string]any{"output_index": i, "item": added})
			for _, piece := range cut(it[field].(string)) {
				ev(events+".delta", map[string]any{"output_index": i, "item_id": id, "delta": piece})
			}
			ev(events+".done", map[string]any{"output_index": i, "item_id": id, field: it[field]})
		case "reasoning":
			added["summary"] = []any{}
			ev("response.output_item.added", map[string]any{"output_index": i, "item": added})
			summary, _ := it["summary"].([]any)
			for si, x := range summary {
				text := x.(map[string]any)["text"]
				ev("response.reasoning_summary_part.added", map[string]any{"output_index": i, "item_id": id, "summary_index": si, "part": map[string]any{"type": "summary_text", "text": ""}})
				ev("response.reasoning_summary_text.delta", map[string]any{"output_index": i, "item_id": id, "summary_index": si, "delta": text})
				ev("response.reasoning_summary_text.done", map[string]any{"output_index": i, "item_id": id, "summary_index": si, "text": text})
				ev("response.reasoning_summary_part.done", map[string]any{"output_index": i, "item_id": id, "summary_index": si, "part": map[string]any{"type": "summary_text", "text": text}})
			}
		default:
			ev("response.output_item.added", map[string]any{"output_index": i, "item": it})
		}
		ev("response.output_item.done", map[string]any{"output_index": i, "item": it})
	}
	ev("response.completed", map[string]any{"response": resp})
}
